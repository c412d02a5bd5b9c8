"""Data quality with Great Expectations 1.x: suites, gates, reconciliation, Data Docs.

- ``suites``: the suites, built in code (``SUITE_NAMES``);
- ``prepare``: the derived columns the suites check;
- ``validation``: ``validate`` (run a suite, store the result) and ``gate`` (raise on failure);
- ``reconciliation``: Lambda vs Kappa vs the oracle, with causes;
- ``docs``: ``build_docs`` and ``publish_docs``;
- ``context``: where the GX project lives, and its lock.

Importing this package does not import Great Expectations (5-10 s); the first validation does.
"""

from quality.docs import build_docs, publish_docs
from quality.reconciliation import combine, reconcile
from quality.result import QualityGateError, QualityResult
from quality.suites import SUITE_NAMES
from quality.validation import gate, validate

__all__ = [
    "SUITE_NAMES",
    "QualityGateError",
    "QualityResult",
    "build_docs",
    "combine",
    "gate",
    "publish_docs",
    "reconcile",
    "validate",
]
