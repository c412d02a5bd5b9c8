"""The data-quality suites, built in code: one name per suite, and its expectations.

Suite names are also the ``kind`` callers pass to ``quality.validate``:

- ``raw_events``: valid parsed events (``core.ingestion.valid_events``) on Spark;
- ``master_partition``: the valid events of master dataset records (what the next batch adds,
  or whole ``record_date``/``record_hour`` partitions), parsed with the shared parsing, with
  their Kafka timestamp and partition, on Spark;
- ``batch_views.<view>`` and ``realtime_views.<view>``: one view's rows (one version or one
  stream), on pandas;
- ``reconciliation``: the table of ``quality.reconciliation.reconcile``, on pandas.

Checks that span columns (event time against arrival, partition against event time, window
alignment) run on derived ``dq_*`` columns added by ``quality.prepare``: one cheap
projection that every expectation then reads like a plain column. On Spark this matters: GX
folds single-column checks into one aggregation job, but runs a separate job for every
column-pair or SQL check. Their ``description`` is what Data Docs and the one-line failure
reasons show.

Great Expectations takes 5-10 s to import, so it is imported inside the functions only.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any, Final, Literal

from core.catalog import VIEW_NAMES, VIEWS
from core.events import EVENT_TYPES, TYPE_REQUIRED
from core.times import MINUTE_MS

if TYPE_CHECKING:
    import great_expectations as gx

Engine = Literal["spark", "pandas"]

RAW_EVENTS: Final = "raw_events"
MASTER_PARTITION: Final = "master_partition"
RECONCILIATION: Final = "reconciliation"
BATCH_VIEWS: Final = "batch_views"
REALTIME_VIEWS: Final = "realtime_views"

SUITE_NAMES: Final[tuple[str, ...]] = (
    RAW_EVENTS,
    MASTER_PARTITION,
    *(f"{BATCH_VIEWS}.{view}" for view in VIEW_NAMES),
    *(f"{REALTIME_VIEWS}.{view}" for view in VIEW_NAMES),
    RECONCILIATION,
)

# How far event time may sit from arrival. received_ts - event_ts is the send delay measured on
# the device clock (sent_ts - device_ts), never negative for a valid event; the workload's
# offline buffering reaches 90 minutes, so a week is far outside any sane delivery.
MAX_ARRIVAL_LAG_MS: Final = 7 * 24 * 60 * MINUTE_MS
MAX_ARRIVAL_LEAD_MS: Final = 5 * MINUTE_MS
CTR_TOLERANCE: Final = 1e-9

# Derived columns (quality.prepare adds them; the names are shared with it).
DQ_MISSING_FIELD: Final = "dq_missing_type_field"
DQ_SEND_DELAY: Final = "dq_send_delay_ms"
DQ_EVENT_TS_DRIFT: Final = "dq_event_ts_drift_ms"
DQ_ARRIVAL_LAG: Final = "dq_arrival_lag_ms"
DQ_PARTITION_MISMATCH: Final = "dq_partition_mismatch"
DQ_WINDOW_OFFSET: Final = "dq_window_offset_ms"
DQ_WINDOW_LENGTH: Final = "dq_window_length_ms"
DQ_CTR_ERROR: Final = "dq_ctr_error"
DQ_CONVERSION_RATE_ERROR: Final = "dq_conversion_rate_error"
DQ_UNEXPLAINED: Final = "dq_unexplained_window"

# Spark column types of the parsed events (core.ingestion.EVENT_COLUMNS + log position).
_STRING: Final = ["StringType"]
_LONG: Final = ["LongType"]
EVENT_COLUMN_TYPES: Final[dict[str, list[str]]] = {
    "event_id": _STRING,
    "type": _STRING,
    "user_id": _STRING,
    "device_ts": _LONG,
    "sent_ts": _LONG,
    "received_ts": _LONG,
    "page": _STRING,
    "query": _STRING,
    "search_id": _STRING,
    "amount_cents": _LONG,
    "event_ts": _LONG,
    "event_time": ["TimestampType"],
    "partition": ["IntegerType"],
    "offset": _LONG,
}
PARTITION_COLUMN_TYPES: Final[dict[str, list[str]]] = {
    "record_date": _STRING,
    "record_hour": ["IntegerType"],
}
"""The master dataset's partition columns: the UTC date and hour of the Kafka timestamp."""
ALWAYS_NOT_NULL: Final = (
    "event_id",
    "type",
    "user_id",
    "device_ts",
    "sent_ts",
    "received_ts",
    "event_ts",
)


def engine(kind: str) -> Engine:
    """Where a suite runs: Spark for event data (millions of rows), pandas for views."""
    check_kind(kind)
    return "spark" if kind in (RAW_EVENTS, MASTER_PARTITION) else "pandas"


def check_kind(kind: str) -> None:
    if kind not in SUITE_NAMES:
        raise ValueError(f"unknown quality suite {kind!r}; known: {', '.join(SUITE_NAMES)}")


def view_of(kind: str) -> str | None:
    """The view a view suite checks (``batch_views.sessions`` -> ``sessions``), else None."""
    family, _, view = kind.partition(".")
    return view if family in (BATCH_VIEWS, REALTIME_VIEWS) else None


FINGERPRINT: Final = "lk_fingerprint"
"""Suite meta key: a hash of the expectations, to tell whether the stored suite is current."""


def fingerprint(suite: gx.ExpectationSuite) -> str:
    """A stable hash of a suite's expectations (type, arguments, description, notes)."""
    configs = [e.configuration.to_json_dict() for e in suite.expectations]
    for config in configs:
        config.pop("id", None)
    text = json.dumps(configs, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def build_suite(kind: str, *, notes: list[str] | None = None) -> gx.ExpectationSuite:
    """The suite named ``kind``. ``notes`` (markdown) go on the reconciliation's main check, so
    the run's explained disagreements show in its Data Docs page."""
    import great_expectations as gx

    check_kind(kind)
    view = view_of(kind)
    if kind == RAW_EVENTS:
        expectations = _event_expectations()
    elif kind == MASTER_PARTITION:
        expectations = _event_expectations() + _partition_expectations()
    elif kind == RECONCILIATION:
        expectations = _reconciliation_expectations(notes)
    else:
        assert view is not None
        expectations = _view_expectations(view)
    return gx.ExpectationSuite(name=kind, expectations=expectations)


# --- events -------------------------------------------------------------------------------------


def _event_expectations() -> list[Any]:
    import great_expectations.expectations as gxe

    required = ", ".join(
        f"{t}: {'/'.join(fields)}" for t, fields in TYPE_REQUIRED.items() if fields
    )
    lag_days = MAX_ARRIVAL_LAG_MS // (24 * 60 * MINUTE_MS)
    lead_min = MAX_ARRIVAL_LEAD_MS // MINUTE_MS
    return [
        *(gxe.ExpectColumnToExist(column=c) for c in EVENT_COLUMN_TYPES),
        *(
            gxe.ExpectColumnValuesToBeInTypeList(column=c, type_list=types)
            for c, types in EVENT_COLUMN_TYPES.items()
        ),
        *(gxe.ExpectColumnValuesToNotBeNull(column=c) for c in ALWAYS_NOT_NULL),
        gxe.ExpectColumnValuesToBeInSet(column="type", value_set=list(EVENT_TYPES)),
        gxe.ExpectColumnValuesToBeBetween(
            column="amount_cents", min_value=0, description="amount_cents is never negative"
        ),
        gxe.ExpectColumnValuesToBeBetween(
            column=DQ_SEND_DELAY,
            min_value=0,
            description="device_ts <= sent_ts (an event is sent after it happened)",
        ),
        gxe.ExpectColumnValuesToBeNull(
            column=DQ_MISSING_FIELD,
            description=f"every event carries the fields its type requires ({required})",
        ),
        gxe.ExpectColumnValuesToBeBetween(
            column=DQ_EVENT_TS_DRIFT,
            min_value=0,
            max_value=0,
            description="event_ts = device_ts + (received_ts - sent_ts) exactly",
        ),
        gxe.ExpectColumnValuesToBeBetween(
            column=DQ_ARRIVAL_LAG,
            min_value=-MAX_ARRIVAL_LEAD_MS,
            max_value=MAX_ARRIVAL_LAG_MS,
            description=(
                f"event_ts is at most {lag_days} days before received_ts "
                f"and at most {lead_min} minutes after it"
            ),
        ),
    ]


def _partition_expectations() -> list[Any]:
    import great_expectations.expectations as gxe

    return [
        gxe.ExpectTableRowCountToBeBetween(
            min_value=1, description="the records checked hold at least one valid event"
        ),
        *(gxe.ExpectColumnToExist(column=c) for c in PARTITION_COLUMN_TYPES),
        *(
            gxe.ExpectColumnValuesToBeInTypeList(column=c, type_list=types)
            for c, types in PARTITION_COLUMN_TYPES.items()
        ),
        gxe.ExpectColumnValuesToBeNull(
            column=DQ_PARTITION_MISMATCH,
            description=(
                "record_date/record_hour are the UTC date and hour of the Kafka timestamp"
            ),
        ),
        gxe.ExpectCompoundColumnsToBeUnique(
            column_list=["partition", "offset"],
            description="each Kafka record (partition, offset) is archived once",
        ),
    ]


# --- views --------------------------------------------------------------------------------------

_MIN_VALUE: Final[dict[str, dict[str, int]]] = {
    "sessions": {"events": 1},
    "segment_totals": {"users": 1},  # a user counts once they have an event
}
"""Smallest valid value of a view's value field (0 unless listed)."""
_NON_EMPTY_KEYS: Final = ("segment",)
"""Keys that are never an empty string: a profile's segment is a non-empty string
(``core.events``), ``unknown`` when there is none."""


def _unique(columns: list[str]) -> Any:
    """One row per key: GX has a single-column and a compound form."""
    import great_expectations.expectations as gxe

    description = f"one row per {', '.join(columns)}"
    if len(columns) == 1:
        return gxe.ExpectColumnValuesToBeUnique(column=columns[0], description=description)
    return gxe.ExpectCompoundColumnsToBeUnique(column_list=columns, description=description)


def _at_least(column: str, minimum: int) -> Any:
    import great_expectations.expectations as gxe

    said = "never negative" if minimum == 0 else f"at least {minimum}"
    return gxe.ExpectColumnValuesToBeBetween(
        column=column, min_value=minimum, description=f"{column} is {said}"
    )


def _minutes(ms: int) -> str:
    return f"{ms // MINUTE_MS}-minute"


def _view_expectations(view: str) -> list[Any]:
    """Every view: columns, no nulls, values in range, one row per key (and window). A
    window's start is on its boundary (a hopping window's: on its hop) and its end one window
    length later; a session ends at or after its start; the current state (no time fields)
    has no time to check."""
    import great_expectations.expectations as gxe

    spec = VIEWS[view]
    minimum = _MIN_VALUE.get(view, {})
    expectations: list[Any] = [
        *(gxe.ExpectColumnToExist(column=c) for c in spec.columns),
        *(gxe.ExpectColumnValuesToNotBeNull(column=c) for c in spec.columns),
        *(
            gxe.ExpectColumnValueLengthsToBeBetween(
                column=k, min_value=1, description=f"{k} is never empty"
            )
            for k in spec.keys
            if k in _NON_EMPTY_KEYS
        ),
        *(_at_least(v, minimum.get(v, 0)) for v in spec.values),
        _unique([*spec.keys, *spec.time_fields[:1]]),
    ]
    if spec.window_ms is not None:
        start, end = spec.time_fields
        boundary = spec.hop_ms or spec.window_ms  # windows start on every hop
        minutes = spec.window_ms // MINUTE_MS
        expectations += [
            gxe.ExpectColumnValuesToBeBetween(
                column=DQ_WINDOW_OFFSET,
                min_value=0,
                max_value=0,
                description=f"{start} is on a {_minutes(boundary)} boundary (UTC)",
            ),
            gxe.ExpectColumnValuesToBeBetween(
                column=DQ_WINDOW_LENGTH,
                min_value=spec.window_ms,
                max_value=spec.window_ms,
                description=f"{end} = {start} + {minutes} min",
            ),
        ]
    elif spec.time_fields:  # sessions
        start, end = spec.time_fields
        expectations.append(
            gxe.ExpectColumnPairValuesAToBeGreaterThanB(
                column_A=end,
                column_B=start,
                or_equal=True,
                description=f"{end} >= {start}",
            )
        )
    if view == "search_ctr":
        expectations += [
            _in_unit("ctr"),
            _at_most("clicks", "searches"),
            _ratio("ctr", "clicks", "searches", DQ_CTR_ERROR),
        ]
    if view == "search_conversions":  # a pattern's steps: each a subset of the one before
        expectations += [
            _in_unit("conversion_rate"),
            _at_most("clicked", "searches"),
            _at_most("converted", "clicked"),
            _ratio("conversion_rate", "converted", "searches", DQ_CONVERSION_RATE_ERROR),
        ]
    return expectations


def _in_unit(rate: str) -> Any:
    import great_expectations.expectations as gxe

    return gxe.ExpectColumnValuesToBeBetween(
        column=rate, min_value=0, max_value=1, description=f"{rate} is in [0, 1]"
    )


def _at_most(part: str, whole: str) -> Any:
    import great_expectations.expectations as gxe

    return gxe.ExpectColumnPairValuesAToBeGreaterThanB(
        column_A=whole, column_B=part, or_equal=True, description=f"{part} <= {whole}"
    )


def _ratio(rate: str, part: str, whole: str, error: str) -> Any:
    """`rate` = `part` / `whole`: the prepared `error` column (its distance to the ratio)
    within the tolerance."""
    import great_expectations.expectations as gxe

    return gxe.ExpectColumnValuesToBeBetween(
        column=error, min_value=0, max_value=CTR_TOLERANCE, description=f"{rate} = {part} / {whole}"
    )


# --- reconciliation -----------------------------------------------------------------------------

# The reconciliation table (quality.reconciliation) and the causes it may give a window.
LATE_DATA: Final = "late data dropped by the stream path"
COMPACTION: Final = "profile history lost to compaction"
LATE_AND_COMPACTION: Final = f"{LATE_DATA}; {COMPACTION}"
UNEXPLAINED: Final = "unexplained"
CAUSES: Final = (LATE_DATA, COMPACTION, LATE_AND_COMPACTION, UNEXPLAINED)
COLUMNS: Final = (
    "view",
    "key",
    "window_start",
    "window_end",
    "lambda",
    "kappa",
    "oracle",
    "lambda_cause",
    "kappa_cause",
    "cause",
    "window",
)
"""``window`` is a one-line description of the row, shown in Data Docs and failure reasons."""


def _reconciliation_expectations(notes: list[str] | None) -> list[Any]:
    import great_expectations.expectations as gxe

    return [
        gxe.ExpectTableColumnsToMatchSet(column_set=list(COLUMNS), exact_match=False),
        gxe.ExpectColumnValuesToBeInSet(column="cause", value_set=list(CAUSES)),
        gxe.ExpectColumnValuesToBeNull(
            column=DQ_UNEXPLAINED,
            description=(
                "every closed window where Lambda, Kappa and the oracle disagree has a known "
                "cause (listed below: the windows left unexplained)"
            ),
            notes=notes or None,
        ),
    ]
