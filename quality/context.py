"""The Great Expectations project: a file-mode context under the stack's data folder.

``<stack_path>/dq/gx/`` holds the suites, the validation definitions, every validation result
and the local Data Docs site. It lives with the stack's other data, so ``lk stack reset``
wipes it and git never sees it.

Airflow runs tasks in parallel processes that share this folder, and GX rewrites its YAML
config and JSON stores without any locking: every use of the project holds an exclusive file
lock (``project_lock``). Registration is idempotent (get, else add), so a rerun or a retry
finds what an earlier run made, and it happens once per process (``validation_definition``).
"""

from __future__ import annotations

import fcntl
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import quality.suites as suites
from core.settings import Settings

if TYPE_CHECKING:
    import great_expectations as gx
    from great_expectations.data_context import FileDataContext

SPARK_SOURCE = "spark"
PANDAS_SOURCE = "pandas"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def dq_root(settings: Settings) -> Path:
    """The GX project root (its ``gx/`` folder is inside)."""
    return settings.stack_path / "dq"


def site_dir(settings: Settings) -> Path:
    """The local Data Docs site built by ``build_docs``."""
    return dq_root(settings) / "gx" / "uncommitted" / "data_docs" / "local_site"


def validations_dir(settings: Settings) -> Path:
    """The validation results store (JSON, one file per run)."""
    return dq_root(settings) / "gx" / "uncommitted" / "validations"


def check_name(what: str, name: str) -> str:
    """Layer and run names become file and URL path segments: keep them to safe characters."""
    if not _NAME.fullmatch(name):
        raise ValueError(f"{what} must match {_NAME.pattern}, got {name!r}")
    return name


def safe_run_name(run_name: str) -> str:
    """``scheduled__2026-11-01T10:00:00+00:00`` -> ``scheduled__2026-11-01T10-00-00-00-00``."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", run_name).strip("-.") or "run"


@contextmanager
def locked_context(settings: Settings) -> Iterator[FileDataContext]:
    """The project's context, freshly read, under an exclusive lock for the block."""
    with project_lock(settings):
        yield _open(dq_root(settings))


@contextmanager
def project_lock(settings: Settings) -> Iterator[None]:
    """An exclusive lock on the project folder (other processes wait for it)."""
    root = dq_root(settings)
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _open(root: Path) -> FileDataContext:
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="file", project_root_dir=root)
    bars = context.variables.progress_bars  # a config object when new, a dict once read back
    enabled = (
        bars.get("globally", True) if isinstance(bars, dict) else getattr(bars, "globally", True)
    )
    if bars is None or enabled:
        # tqdm bars per metric batch would flood Airflow's and Spark's logs.
        context.variables.progress_bars = ProgressBarsConfig(globally=False)
        context.variables.save()
    return context


def _datasource(context: FileDataContext, engine: suites.Engine) -> Any:
    name = SPARK_SOURCE if engine == "spark" else PANDAS_SOURCE
    try:
        return context.data_sources.get(name)
    except KeyError:
        if engine == "spark":
            # persist=False: GX would cache every batch and never unpersist it; the caller
            # (quality.validation) caches the frame for exactly the validation instead.
            return context.data_sources.add_spark(name, persist=False)
        return context.data_sources.add_pandas(name)


def _suite(context: FileDataContext, kind: str, notes: list[str] | None) -> tuple[Any, bool]:
    """The stored suite ``kind``, rewritten only when the code's version differs (GX compares
    suites expectation by expectation, quadratically: about a second for the event suites).
    Returns the suite and whether it was written."""
    from great_expectations.exceptions import DataContextError

    suite = suites.build_suite(kind, notes=notes)
    fingerprint = suites.fingerprint(suite)
    try:
        stored = context.suites.get(kind)
        if stored.meta.get(suites.FINGERPRINT) == fingerprint:
            return stored, False
    except DataContextError:
        pass
    suite.meta[suites.FINGERPRINT] = fingerprint
    return context.suites.add_or_update(suite), True


def _register(
    context: FileDataContext, kind: str, layer: str, notes: list[str] | None
) -> gx.ValidationDefinition:
    """Suite ``kind`` on a dataframe asset named after ``layer`` (get, else add).

    The asset name is what Data Docs lists as "Asset Name", so the site reads per layer.
    """
    import great_expectations as gx
    from great_expectations.exceptions import DataContextError

    datasource = _datasource(context, suites.engine(kind))
    try:
        asset = datasource.get_asset(layer)
    except LookupError:
        asset = datasource.add_dataframe_asset(layer)
    try:
        batch = asset.get_batch_definition(kind)
    except KeyError:
        batch = asset.add_batch_definition_whole_dataframe(kind)
    suite, written = _suite(context, kind, notes)
    name = f"{layer}.{kind}"
    if not written:
        try:
            return context.validation_definitions.get(name)
        except DataContextError:
            pass
    return context.validation_definitions.add_or_update(
        gx.ValidationDefinition(name=name, data=batch, suite=suite)
    )


@dataclass
class _Project:
    """What this process registered in one project: reused while the project exists."""

    context: FileDataContext
    definitions: dict[tuple[str, str], gx.ValidationDefinition] = field(default_factory=dict)


_PROJECTS: dict[Path, _Project] = {}


def validation_definition(
    settings: Settings, kind: str, layer: str, *, notes: list[str] | None = None
) -> gx.ValidationDefinition:
    """The validation of suite ``kind`` for ``layer``; call it under ``project_lock``.

    Registered once per process: later calls reuse it without touching the config files (GX
    would otherwise rewrite them from this process's view, losing another process's additions).
    A new registration reads the project afresh first. The reconciliation suite carries the
    run's notes, so it is rewritten on every call.
    """
    root = dq_root(settings)
    project = _PROJECTS.get(root)
    key = (kind, layer)
    config = root / "gx" / "great_expectations.yml"
    if project and key in project.definitions and notes is None and config.exists():
        return project.definitions[key]
    context = _open(root)
    definition = _register(context, kind, layer, notes)
    kept = project.definitions if project and config.exists() else {}
    _PROJECTS[root] = _Project(context, {**kept, key: definition})
    return definition


def add_all_suites(context: FileDataContext) -> None:
    """Every suite, so Data Docs lists them even before their first validation."""
    for kind in suites.SUITE_NAMES:
        _suite(context, kind, None)
