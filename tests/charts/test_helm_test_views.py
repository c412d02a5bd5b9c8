"""`helm test` asks the serving API for every view: its list, written out in the template
(the test pod cannot import the catalogue), is the catalogue's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from core.catalog import VIEW_NAMES

TEMPLATE = Path(__file__).parents[2] / "charts/lambda-kappa/templates/tests/test-serving.yaml"


def test_the_helm_test_asks_for_every_catalogued_view_in_order() -> None:
    found = re.search(r"VIEWS = (\([^)]*\))", TEMPLATE.read_text())
    assert found, "the helm test's VIEWS tuple"
    assert ast.literal_eval(found[1]) == VIEW_NAMES
