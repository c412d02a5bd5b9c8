"""Render the chart with real Helm (the Go Helm SDK inside the helm-python-sdk wheel), offline.

Rendering is cached per value set: every test module asks for the same few renders, and each
costs tens of milliseconds.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import helm_python as helm
import kubernetes_validate
import kubernetes_validate.utils
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART_DIR = ROOT / "charts" / "lambda-kappa"
CI_DIR = CHART_DIR / "ci"
KIND_VALUES = ROOT / "infra" / "kind" / "values.yaml"
RELEASE = "lk"  # `make install`'s default: a Service `lk-kafka` would inject LK_KAFKA_PORT=tcp://…
NAMESPACE = "lambda-kappa"
KUBE_VERSIONS = ("1.31", "1.33")  # the oldest the chart supports; kind's node (infra/kind)
MINIO_USERS = (
    "airflow",
    "airflow-logs",
    "archiver",
    "init",
    "kappa-stream",
    "spark-history",
    "speed-layer",
)
"""The MinIO users the chart makes in every architecture (the comparison's besides, in `both`)."""

Manifest = dict[str, Any]

# Value sets the tests render: the chart's ci/ examples, the kind values, and defaults.
VALUE_SETS: dict[str, tuple[Path, ...]] = {
    "defaults": (),
    "lambda": (CI_DIR / "lambda-values.yaml",),
    "kappa": (CI_DIR / "kappa-values.yaml",),
    "both": (CI_DIR / "both-values.yaml",),
    "spark-kubernetes": (CI_DIR / "spark-kubernetes-values.yaml",),
    "pod-backend": (CI_DIR / "pod-backend-values.yaml",),
    "existing-secret": (CI_DIR / "existing-secret-values.yaml",),
    "custom-resources": (CI_DIR / "custom-resources-values.yaml",),
    "scheduling": (CI_DIR / "scheduling-values.yaml",),
    "kind-both": (KIND_VALUES, CI_DIR / "both-values.yaml"),
}


# kubernetes-validate reads and parses its JSON schemas (megabytes of definitions) on every
# call; the files never change within a run, so parse each once. Validation itself is unchanged.
kubernetes_validate.utils.schema_contents = cache(kubernetes_validate.utils.schema_contents)


def validate(obj: Manifest, kube_version: str) -> None:
    """Raise if `obj` is not a valid object of `kube_version` (strict: no unknown field)."""
    kubernetes_validate.validate(obj, kube_version, strict=True)


def deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Helm's rule for several -f files: maps merge key by key, anything else is replaced."""
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def load_values(*files: Path, **overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for path in files:
        values = deep_merge(values, yaml.safe_load(path.read_text()) or {})
    return deep_merge(values, overrides)


@cache
def _chart() -> helm.Chart:
    return helm.Chart.load(CHART_DIR)


@dataclass(frozen=True)
class Rendered:
    """One render: the objects in template order, NOTES.txt, and the values Helm used (the
    chart's defaults coalesced with the given ones)."""

    objects: tuple[Manifest, ...]
    notes: str
    values: dict[str, Any] = field(hash=False, compare=False)

    def of_kind(self, *kinds: str) -> list[Manifest]:
        return [o for o in self.objects if o["kind"] in kinds]

    def named(self, kind: str, name: str) -> Manifest:
        matches = [o for o in self.of_kind(kind) if o["metadata"]["name"] == name]
        assert len(matches) == 1, f"expected one {kind} {name}, found {len(matches)}"
        return matches[0]

    def components(self, *kinds: str) -> set[str]:
        return {
            o["metadata"]["labels"]["app.kubernetes.io/component"]
            for o in self.of_kind(*kinds)
            if "labels" in o["metadata"]
        }

    def by_component(self, kind: str, component: str) -> list[Manifest]:
        return [
            o
            for o in self.of_kind(kind)
            if o["metadata"].get("labels", {}).get("app.kubernetes.io/component") == component
        ]


def _render(
    values_json: str, *, name: str = RELEASE, namespace: str = NAMESPACE, upgrade: bool = False
) -> Rendered:
    values = json.loads(values_json)
    if upgrade:  # as `helm upgrade` renders revision 2 when `lookup` cannot see the cluster
        manifests = _chart().render(
            values=values, name=name, namespace=namespace, revision=2, is_upgrade=True
        )
    else:
        manifests = _chart().render(values=values, name=name, namespace=namespace, is_install=True)
    objects: list[Manifest] = []
    notes = ""
    for path in sorted(manifests):
        text = manifests[path]
        if path.endswith("NOTES.txt"):
            notes = text
            continue
        objects.extend(doc for doc in yaml.safe_load_all(text) if doc)
    return Rendered(objects=tuple(objects), notes=notes, values=_chart().merge_values(values))


@cache
def _render_cached(values_json: str) -> Rendered:
    return _render(values_json)


def render(values: dict[str, Any] | None = None) -> Rendered:
    """Render with these values (cached: equal values give the same render)."""
    return _render_cached(json.dumps(values or {}, sort_keys=True))


def render_fresh(values: dict[str, Any] | None = None) -> Rendered:
    """Render again, bypassing the cache (generated secrets differ between renders)."""
    return _render(json.dumps(values or {}, sort_keys=True))


def render_release(
    values: dict[str, Any] | None = None,
    *,
    name: str = RELEASE,
    namespace: str = NAMESPACE,
    upgrade: bool = False,
) -> Rendered:
    """Render offline as another release, or as an upgrade (`helm template --is-upgrade`, a
    `--dry-run`, a GitOps render: `lookup` sees nothing), bypassing the cache."""
    return _render(
        json.dumps(values or {}, sort_keys=True), name=name, namespace=namespace, upgrade=upgrade
    )


def render_set(name: str) -> Rendered:
    return render(load_values(*VALUE_SETS[name]))


def _pod_template(obj: Manifest) -> Manifest:
    """The pod template of a workload; a CronJob's is its job template's."""
    spec = obj["spec"]["jobTemplate"]["spec"] if obj["kind"] == "CronJob" else obj["spec"]
    template: Manifest = spec["template"]
    return template


def pod_spec(obj: Manifest) -> Manifest:
    """The pod spec of a workload or of a bare Pod."""
    if obj["kind"] == "Pod":
        return dict(obj["spec"])
    spec: Manifest = _pod_template(obj)["spec"]
    return spec


def pod_metadata(obj: Manifest) -> Manifest:
    if obj["kind"] == "Pod":
        return dict(obj["metadata"])
    meta: Manifest = _pod_template(obj)["metadata"]
    return meta


WORKLOAD_KINDS = ("Deployment", "StatefulSet", "Job", "CronJob", "Pod")


def containers(obj: Manifest, *, init: bool = True) -> Iterator[Manifest]:
    spec = pod_spec(obj)
    yield from spec["containers"]
    if init:
        yield from spec.get("initContainers", [])


def env_of(container: Manifest) -> dict[str, Manifest]:
    return {e["name"]: e for e in container.get("env", [])}
