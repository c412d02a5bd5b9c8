"""The store's tables of a pattern view's matches (``core.store.schema``), read back from their
DDL as Postgres SQL (sqlglot, no store): the integration tests create them in Postgres."""

from __future__ import annotations

import pytest
import sqlglot
from sqlglot import exp

from core.catalog import MATCH_COLUMNS, MATCH_ORDER, MATCH_TIME_FIELDS, MATCH_VIEWS
from core.store.schema import batch_matches_table, ddl, realtime_matches_table


def _statement(kind: type[exp.Expression], table: str) -> exp.Expression:
    """The one DDL statement of `kind` (a table's or an index's) on `table`."""
    found = []
    for text in ddl():
        if not text.lstrip().startswith("create"):
            continue  # a `do` block or an `alter`: no table of matches
        parsed = sqlglot.parse_one(text, dialect="postgres")
        target = parsed.this
        if isinstance(parsed, exp.Create) and parsed.kind == kind.__name__.upper():
            name = target.this.name if isinstance(target, exp.Schema) else None
            if kind is exp.Index:
                name = parsed.find(exp.Table).name  # type: ignore[union-attr]
            if name == table:
                found.append(parsed)
    assert len(found) == 1, f"{len(found)} {kind.__name__} statements on {table}"
    return found[0]


@pytest.mark.parametrize("view", MATCH_VIEWS)
@pytest.mark.parametrize(
    ("table_of", "tag", "tag_type"),
    [(batch_matches_table, "version", "INT"), (realtime_matches_table, "stream", "TEXT")],
)
def test_matches_are_tagged_like_the_views_and_keyed_by_their_search(
    view: str, table_of: object, tag: str, tag_type: str
) -> None:
    table = table_of(view)  # type: ignore[operator]
    assert table in {f"batch_{view}_matches", f"rt_{view}_matches"}
    create = _statement(exp.Table, table)
    schema = create.this
    columns = [c for c in schema.expressions if isinstance(c, exp.ColumnDef)]
    assert [c.name for c in columns] == [tag, *MATCH_COLUMNS]
    types = {c.name: c.args["kind"].sql(dialect="postgres") for c in columns}
    assert types[tag] == tag_type
    for name in MATCH_COLUMNS:
        assert types[name] == ("TIMESTAMPTZ" if name in MATCH_TIME_FIELDS else "TEXT"), name
    assert all(c.find(exp.NotNullColumnConstraint) for c in columns)
    [key] = [c for c in schema.expressions if isinstance(c, exp.PrimaryKey)]
    # One match per search, which has one query and window: keyed in reading order.
    assert [e.name for e in key.expressions] == [tag, *MATCH_ORDER]


@pytest.mark.parametrize("view", MATCH_VIEWS)
def test_matches_have_an_index_in_reading_order(view: str) -> None:
    for table, tag in (
        (batch_matches_table(view), "version"),
        (realtime_matches_table(view), "stream"),
    ):
        index = _statement(exp.Index, table)
        text = index.sql(dialect="postgres")
        order = ", ".join(c if c in MATCH_TIME_FIELDS else f'{c} COLLATE "C"' for c in MATCH_ORDER)
        assert text.endswith(f"ON {table}({tag}, {order})"), text
