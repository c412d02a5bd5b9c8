"""What the Helm chart deploys for each mode: objects by kind, and CPU and memory requested.

    weights = measure(CHART_DIR)    # one `ChartWeight` per mode: lambda, kappa, both

The chart is rendered as `helm template` renders it, offline, by the Go Helm SDK inside the
helm-python-sdk wheel (the dev group's; the chart tests render the same way,
tests/charts/chart_utils.py), with the chart's default values and only `architecture` set.

- **Objects**: every rendered object but Helm's test hooks (`helm.sh/hook: test`), which
  exist only while `helm test` runs.
- **Requests**: per pod, what the scheduler reserves: the sum of its containers' requests, or
  its largest init container's when that is larger (init containers run one at a time, before
  the others; one with `restartPolicy: Always` is a sidecar and adds to the sum). A workload
  counts its pod `replicas` times (1 when unset), a Job or a CronJob's job `parallelism` times:
  what it asks for while it runs.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Final

from comparison.errors import ComparisonError
from comparison.figures import ChartWeight

CHART_DIR: Final = Path(__file__).resolve().parents[1] / "charts" / "lambda-kappa"
MODES: Final = ("lambda", "kappa", "both")
RELEASE: Final = "lk"
NAMESPACE: Final = "lambda-kappa"

Manifest = dict[str, Any]

_SUFFIXES: Final[dict[str, Decimal]] = {
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
}
# Kubernetes' quantity grammar: a signed decimal number, then a binary or decimal suffix or a
# decimal exponent ("1E" is exa, "1E3" a thousand).
_QUANTITY: Final = re.compile(
    r"(?P<number>[+-]?(?:\d+\.?\d*|\.\d+))"
    r"(?:(?P<exponent>[eE][+-]?\d+)|(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)"
)
_SCALED: Final = {"Deployment", "StatefulSet", "ReplicaSet"}


def parse_quantity(value: str | int | float) -> Decimal:
    """A Kubernetes quantity (`100m`, `1`, `0.5`, `512Mi`, `1Gi`, `1G`, `1e3`) as a number."""
    text = str(value).strip()
    match = _QUANTITY.fullmatch(text)
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    try:
        number = Decimal(match["number"])
    except InvalidOperation as exc:  # the pattern admits only decimals; kept for safety
        raise ValueError(f"not a Kubernetes quantity: {value!r}") from exc
    if match["exponent"]:
        return number.scaleb(int(match["exponent"][1:]))
    return number * _SUFFIXES[match["suffix"] or ""]


def cpu_millicores(value: str | int | float) -> int:
    """`100m` → 100, `1` → 1000, `0.25` → 250 (rounded up, as Kubernetes does)."""
    return math.ceil(parse_quantity(value) * 1000)


def memory_bytes(value: str | int | float) -> int:
    """`512Mi` → 536870912, `1G` → 1000000000 (rounded up to a whole byte)."""
    return math.ceil(parse_quantity(value))


def render(chart_dir: Path, mode: str) -> list[Manifest]:
    """The chart's objects for `mode` with its default values, in template order; without the
    comparison's own CronJob and MinIO user, which measure the architectures rather than serve."""
    try:
        import helm_python as helm  # deferred: helm-python-sdk, a dev dependency (Go Helm SDK)
    except ImportError as exc:
        raise ComparisonError(
            "the chart's weight needs helm-python-sdk (the dev group: `uv sync`)"
        ) from exc
    import yaml  # deferred: only the chart is YAML

    manifests = helm.Chart.load(chart_dir).render(
        values={"architecture": mode, "comparison": {"enabled": False}},
        name=RELEASE,
        namespace=NAMESPACE,
        is_install=True,
    )
    return [
        doc
        for path in sorted(manifests)
        if path.endswith((".yaml", ".yml"))
        for doc in yaml.safe_load_all(manifests[path])
        if doc
    ]


def _is_test_hook(obj: Manifest) -> bool:
    hooks = (obj.get("metadata", {}).get("annotations") or {}).get("helm.sh/hook", "")
    return "test" in {h.strip() for h in str(hooks).split(",")}


def _pods(obj: Manifest) -> Iterator[tuple[Manifest, int]]:
    """(pod spec, how many of it run) of a workload; nothing for other kinds."""
    kind, spec = obj["kind"], obj.get("spec") or {}
    if kind == "Pod":
        yield spec, 1
    elif kind in _SCALED:
        yield spec["template"]["spec"], int(spec.get("replicas", 1))
    elif kind == "Job":
        yield spec["template"]["spec"], int(spec.get("parallelism", 1))
    elif kind == "CronJob":
        job = spec["jobTemplate"]["spec"]
        yield job["template"]["spec"], int(job.get("parallelism", 1))


def _requests(container: Manifest) -> tuple[int, int]:
    asked = (container.get("resources") or {}).get("requests") or {}
    cpu, memory = asked.get("cpu"), asked.get("memory")
    return (
        0 if cpu is None else cpu_millicores(cpu),
        0 if memory is None else memory_bytes(memory),
    )


def pod_requests(pod: Manifest) -> tuple[int, int]:
    """(millicores, bytes) the scheduler reserves for one pod of this spec."""
    inits = pod.get("initContainers") or []
    sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
    running = [*pod.get("containers", []), *sidecars]
    cpu = sum(_requests(c)[0] for c in running)
    memory = sum(_requests(c)[1] for c in running)
    for init in (c for c in inits if c.get("restartPolicy") != "Always"):
        init_cpu, init_memory = _requests(init)
        cpu, memory = max(cpu, init_cpu), max(memory, init_memory)
    return cpu, memory


def weigh(mode: str, objects: list[Manifest]) -> ChartWeight:
    """The weight of one rendered mode."""
    deployed = [o for o in objects if not _is_test_hook(o)]
    cpu = memory = 0
    for obj in deployed:
        for pod, count in _pods(obj):
            pod_cpu, pod_memory = pod_requests(pod)
            cpu += count * pod_cpu
            memory += count * pod_memory
    return ChartWeight(
        mode=mode,
        objects=len(deployed),
        by_kind=dict(sorted(Counter(o["kind"] for o in deployed).items())),
        cpu_requests_millicores=cpu,
        memory_requests_bytes=memory,
    )


def measure(chart_dir: Path = CHART_DIR) -> list[ChartWeight]:
    """The chart's weight in each mode, with default values: lambda, kappa, both."""
    return [weigh(mode, render(chart_dir, mode)) for mode in MODES]
