"""The stores' data volumes and disruption budgets: a claim per pod from the StatefulSet's
template by default, or a claim the user made (`<store>.persistence.existingClaim`), mounted
the same way; a PodDisruptionBudget only when `<store>.pdb.create` asks for one."""

from __future__ import annotations

import pytest

from tests.charts.chart_utils import containers, pod_spec, render

STORES = ("kafka", "minio", "postgres")


def _statefulset(store: str, **persistence: str) -> dict:
    values = {"architecture": "both", store: {"persistence": persistence}} if persistence else {}
    (obj,) = render(values or {"architecture": "both"}).by_component("StatefulSet", store)
    return obj


def _mounts_data(obj: dict) -> bool:
    return any(m["name"] == "data" for c in containers(obj) for m in c.get("volumeMounts", []))


@pytest.mark.parametrize("store", STORES)
def test_by_default_each_pod_gets_a_claim_of_its_own(store: str) -> None:
    obj = _statefulset(store)
    (template,) = obj["spec"]["volumeClaimTemplates"]
    assert template["metadata"]["name"] == "data"
    assert template["spec"]["resources"]["requests"]["storage"]
    assert "data" not in {v["name"] for v in pod_spec(obj)["volumes"]}
    assert _mounts_data(obj)


@pytest.mark.parametrize("store", STORES)
def test_an_existing_claim_replaces_the_template(store: str) -> None:
    obj = _statefulset(store, existingClaim=f"my-{store}-data", storageClass="fast")
    assert "volumeClaimTemplates" not in obj["spec"]
    volumes = {v["name"]: v for v in pod_spec(obj)["volumes"]}
    assert volumes["data"] == {
        "name": "data",
        "persistentVolumeClaim": {"claimName": f"my-{store}-data"},
    }
    assert _mounts_data(obj)


@pytest.mark.parametrize("store", STORES)
def test_a_disruption_budget_only_when_asked(store: str) -> None:
    assert render({"architecture": "both"}).of_kind("PodDisruptionBudget") == []
    rendered = render({"architecture": "both", store: {"pdb": {"create": True}}})
    (pdb,) = rendered.of_kind("PodDisruptionBudget")
    (obj,) = rendered.by_component("StatefulSet", store)
    assert pdb["spec"]["maxUnavailable"] == 1
    assert "minAvailable" not in pdb["spec"]
    labels = obj["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert obj["spec"]["selector"]["matchLabels"] == pdb["spec"]["selector"]["matchLabels"]
    kept = render({"architecture": "both", store: {"pdb": {"create": True, "minAvailable": 1}}})
    (pdb,) = kept.of_kind("PodDisruptionBudget")
    assert pdb["spec"] == {**pdb["spec"], "minAvailable": 1}
    assert "maxUnavailable" not in pdb["spec"]


def test_a_store_outside_the_release_has_no_budget() -> None:
    values = {"enabled": False, "externalHost": "kafka.example", "pdb": {"create": True}}
    assert render({"architecture": "both", "kafka": values}).of_kind("PodDisruptionBudget") == []


@pytest.mark.parametrize("store", STORES)
def test_kind_s_and_minikube_s_default_storage_class_is_named_as_given(store: str) -> None:
    """Both clusters' default StorageClass is `standard`: the claims leave it to the cluster,
    and name it when given."""
    (template,) = _statefulset(store)["spec"]["volumeClaimTemplates"]
    assert "storageClassName" not in template["spec"]
    (template,) = _statefulset(store, storageClass="standard")["spec"]["volumeClaimTemplates"]
    assert template["spec"]["storageClassName"] == "standard"
