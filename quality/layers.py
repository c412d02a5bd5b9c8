"""Where validated data comes from: the ``layer`` of a validation, one per Data Docs section.

Data Docs lists a validation's layer as its asset name, and the landing page groups each
suite's last result by layer, so a reader sees each layer's health at a glance.
"""

from __future__ import annotations

from typing import Final

from core.settings import Architecture

LAMBDA_BATCH: Final = "lambda-batch"
"""The batch layer's gates: the master dataset's new partitions and a batch version's views."""
LAMBDA_SERVING: Final = "lambda-serving"
"""The merged Lambda views as the serving API answers them (batch before the cutoff, speed
layer from it)."""
KAPPA_SERVING: Final = "kappa-serving"
"""The Kappa views of the version readers see."""
KAPPA_REPROCESS: Final = "kappa-reprocess"
"""A reprocessed Kappa version, checked before readers switch to it."""
COMPARISON: Final = "comparison"
"""Lambda vs Kappa vs the oracle (the ``reconciliation`` suite)."""

SERVING: Final[dict[str, str]] = {
    Architecture.LAMBDA: LAMBDA_SERVING,
    Architecture.KAPPA: KAPPA_SERVING,
}
"""The serving layer of each architecture."""
