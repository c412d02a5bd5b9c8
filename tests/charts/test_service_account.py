"""`serviceAccount`: the identity of the pods that call no Kubernetes API. None by default (the
namespace's `default`), the release's own with `create`, or the user's by `name`; the Spark
drivers and the scheduler keep the ServiceAccounts their Roles bind, and no token is mounted
where none was."""

from __future__ import annotations

from typing import Any

from tests.charts.chart_utils import WORKLOAD_KINDS, Rendered, pod_spec, render

OWN_ROLES = {"spark-stream", "spark-batch", "airflow-pod-launcher"}
"""Where the chart's own ServiceAccounts (and their Roles) come in: the stream drivers and the
batch's on Kubernetes, the scheduler that starts step pods."""


def _render(**service_account: Any) -> Rendered:
    values: dict[str, Any] = {
        "architecture": "both",
        "airflow": {"sparkBackend": "kubernetes"},
        "spark": {"master": "k8s://https://kubernetes.default.svc"},
    }
    if service_account:
        values["serviceAccount"] = service_account
    return render(values)


def _accounts(rendered: Rendered) -> dict[str, str | None]:
    """Each pod's ServiceAccount name, by its object's name."""
    return {
        o["metadata"]["name"]: pod_spec(o).get("serviceAccountName")
        for o in rendered.objects
        if o["kind"] in WORKLOAD_KINDS
    }


def _with_a_role(name: str | None) -> bool:
    return name is not None and any(name.endswith(role) for role in OWN_ROLES)


def test_by_default_no_account_is_named_but_the_roles_own() -> None:
    rendered = _render()
    assert rendered.by_component("ServiceAccount", "serviceaccount") == []
    named = {pod: sa for pod, sa in _accounts(rendered).items() if sa is not None}
    assert named and all(_with_a_role(sa) for sa in named.values()), named


def test_create_makes_the_release_s_own_and_every_other_pod_runs_as_it() -> None:
    rendered = _render(create=True, name="", annotations={"example.com/identity": "lk"})
    (account,) = rendered.by_component("ServiceAccount", "serviceaccount")
    assert account["metadata"]["name"] == "lk"
    assert account["metadata"]["annotations"] == {"example.com/identity": "lk"}
    assert account["automountServiceAccountToken"] is False
    accounts = _accounts(rendered)
    others = {pod: sa for pod, sa in accounts.items() if not _with_a_role(sa)}
    assert others and set(others.values()) == {"lk"}, others
    for obj in rendered.objects:
        if obj["kind"] in WORKLOAD_KINDS and pod_spec(obj).get("serviceAccountName") == "lk":
            assert pod_spec(obj)["automountServiceAccountToken"] is False


def test_a_name_of_yours_is_used_and_none_is_created() -> None:
    rendered = _render(create=False, name="team-sa", annotations={})
    assert rendered.by_component("ServiceAccount", "serviceaccount") == []
    others = {pod: sa for pod, sa in _accounts(rendered).items() if not _with_a_role(sa)}
    assert set(others.values()) == {"team-sa"}, others
