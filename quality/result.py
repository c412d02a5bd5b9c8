"""What a validation returns, in plain types: callers never touch Great Expectations objects."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

_EXAMPLES = 3
"""Unexpected values quoted in a failure reason."""


@dataclass(frozen=True, slots=True)
class QualityResult:
    """One suite's validation of one frame."""

    suite: str
    layer: str
    run_name: str
    success: bool
    rows: int | None
    """Rows validated."""
    evaluated: int
    """Expectations evaluated."""
    failed: int
    """Expectations that failed (or raised)."""
    failures: tuple[str, ...] = field(default=())
    """One line per failed expectation: what was expected, how many rows broke it, examples."""
    seconds: float = 0.0
    """Wall time of the validation, setup included."""

    def summary(self) -> str:
        """One line: ``raw_events@lambda-batch: FAILED 2/31 expectations on 1000 rows``."""
        status = "passed" if self.success else "FAILED"
        rows = "" if self.rows is None else f" on {self.rows} rows"
        return (
            f"{self.suite}@{self.layer}: {status} "
            f"{self.failed}/{self.evaluated} expectations failed{rows} ({self.seconds:.1f} s)"
        )


class QualityGateError(RuntimeError):
    """Suites failed at a gate: what fed them must not be published.

    The message is one line: the first failed suite with its reasons, then the others' names.
    """

    def __init__(self, result: QualityResult, *more: QualityResult) -> None:
        self.result = result
        self.results = (result, *more)
        reasons = "; ".join(result.failures)
        others = f" (also failed: {', '.join(r.suite for r in more)})" if more else ""
        super().__init__(f"quality gate {result.suite}@{result.layer} failed: {reasons}{others}")


def plain(value: Any) -> Any:
    """A value as it reads in a reason: numpy scalars as Python ones, timestamps as ISO."""
    if isinstance(value, tuple | list):
        return type(value)(plain(v) for v in value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if type(value).__module__ == "numpy":
        if str(getattr(value, "dtype", "")).startswith("datetime64"):
            return str(value).split(".")[0] + "Z"  # naive UTC, to the second
        return value.item() if hasattr(value, "item") else value
    return value


def _what(config: Any) -> str:
    """The expectation in words: its description, else its type and arguments."""
    if getattr(config, "description", None):
        return str(config.description)
    kwargs = {k: v for k, v in (config.kwargs or {}).items() if k not in ("batch_id",)}
    args = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
    return f"{config.type}({args})"


def failure_reason(evr: Any) -> str:
    """One line for a failed ``ExpectationValidationResult``."""
    what = _what(evr.expectation_config)
    info = evr.exception_info or {}
    if info.get("raised_exception"):
        message = str(info.get("exception_message") or "").strip().splitlines()
        return f"{what}: could not be evaluated ({message[0] if message else 'error'})"
    result = evr.result or {}
    if "unexpected_count" in result and result.get("unexpected_count") is not None:
        examples = [plain(v) for v in (result.get("partial_unexpected_list") or [])[:_EXAMPLES]]
        shown = f", e.g. {examples}" if examples else ""
        return (
            f"{what}: {result['unexpected_count']} of {result.get('element_count')} rows "
            f"unexpected{shown}"
        )
    if "observed_value" in result:
        return f"{what}: observed {result['observed_value']!r}"
    return f"{what}: failed"


def summarize(
    gx_result: Any, *, suite: str, layer: str, run_name: str, rows: int | None, seconds: float
) -> QualityResult:
    """A ``QualityResult`` from an ``ExpectationSuiteValidationResult``."""
    failures = tuple(failure_reason(r) for r in gx_result.results if not r.success)
    return QualityResult(
        suite=suite,
        layer=layer,
        run_name=run_name,
        success=bool(gx_result.success),
        rows=rows,
        evaluated=len(gx_result.results),
        failed=len(failures),
        failures=failures,
        seconds=seconds,
    )
