"""Spark-native validation of raw Kafka records: ``core.events.parse_event``, as DataFrame code.

``parse_events(raw)`` gives every record the reason ``parse_event`` would give it (the same
strings, checked in the same order, built from the constants of ``core.events``), or NULL when
it is valid, plus the typed event columns. ``valid_events``, ``quarantine`` and ``first_in_log``
split and deduplicate the result (``first_occurrences`` in a streaming plan);
``parse_profiles`` reads the compacted ``profiles`` topic.
Every function is DataFrame -> DataFrame (on static frames, but ``first_occurrences``, which
is for a streaming plan): no session, no I/O, no collect.

How a value is read. The common case first: a text in the compact form of ``_compact_pattern``
(a flat object of the known fields only, strings without escapes or control characters,
integers of at most 18 digits, nulls, JSON whitespace) is read with ``from_json``, whose typed
fields are then exactly Python's, each field's JSON kind being fixed by the pattern; over 99%
of a generated workload's lines, and about 40% less CPU than the exact reading. Every other
text is read exactly (each step is there because Spark's JSON reader differs from Python's):

1. invalid UTF-8 or a NULL value is ``not_json`` (Spark would otherwise decode it leniently);
2. ``try_parse_json`` builds a VARIANT. Jackson refuses some documents Python accepts: a lone
   UTF-16 surrogate escape (``"\\ud800"``), a number longer than 1000 characters, a key longer
   than 50,000 characters. When the first parse fails on such a document, the value is
   re-tokenised (strings, numbers, the rest) and those tokens are replaced by equivalents of the
   same class (U+FFFD; a 20-digit integer of the same sign, or ``0.5``; a short unknown key),
   then parsed again. An integer longer than Python's own limit
   (``sys.get_int_max_str_digits()``) stays unparseable, as in Python;
3. Jackson stops after the first JSON value and ignores the rest (``{"a":1} x``), Python does
   not: a document must be one value, checked cheaply when the text has just the two braces
   of a flat object; else a container is one value when the text without its last non-blank
   character no longer parses (that character closed the value), and a scalar when it is the
   whole text once strings are stripped. No higher-order function, so that whole-stage code
   generation compiles the parse into one stage instead of generating code per task;
4. duplicate keys: Python keeps the last value; Spark does the same only with
   ``spark.sql.variant.allowDuplicateKeys=true`` (``SPARK_CONF``), which these functions
   require of the session (they raise otherwise rather than quarantine such records silently);
5. a field's JSON type comes from ``schema_of_variant``, only ever on a scalar: on a deep
   object or array it recurses and can overflow an executor's stack, which kills the JVM.
   A field is known to be a scalar when the text has no bracket but the object's two braces;
   otherwise containers are ruled out first with shallow casts. An integer is a JSON integer
   within the signed 64-bit range exactly when the variant stores it as ``BIGINT`` (``1.0`` is
   a DECIMAL, ``1e2`` a DOUBLE, a larger integer a DECIMAL or DOUBLE).

Known, unremovable difference: Python's ``json`` gives up on nesting deeper than about
``sys.getrecursionlimit()`` minus the caller's stack depth (so the limit moves with the call
site), Jackson at 1000 levels. A document nested between those two depths is ``not_json`` in
Python and parsed here. Also, the typed value of a string holding a lone surrogate is U+FFFD
here (Python keeps the surrogate, which no UTF-8 sink can store).

An event whose ``event_ts`` overflows a 64-bit integer, or lies outside years 1-9999 (the
range of Python's ``datetime`` and of the ISO timestamps served), is valid for
``parse_event`` but cannot be placed in a window: its ``event_ts`` (on overflow) and
``event_time`` are NULL, and the views skip it.
"""

from __future__ import annotations

import dataclasses
import sys
from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from core.events import (
    ALWAYS_REQUIRED,
    DEVICE_AFTER_SENT,
    EVENT_TYPES,
    INT_FIELDS,
    NEGATIVE_AMOUNT,
    NOT_AN_OBJECT,
    NOT_JSON,
    STRING_FIELDS,
    TYPE_REQUIRED,
    UNKNOWN_TYPE,
    Event,
    missing_field,
    wrong_type,
)
from core.times import MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS

SPARK_CONF: Final[dict[str, str]] = {"spark.sql.variant.allowDuplicateKeys": "true"}
"""Session settings these functions need (add them to the session builder)."""

KAFKA_COLUMNS: Final = ("key", "value", "topic", "partition", "offset", "timestamp")
"""The Kafka source's columns, as ``spark.read.format("kafka")`` gives them."""

EVENT_FIELDS: Final[tuple[str, ...]] = tuple(f.name for f in dataclasses.fields(Event))
"""The typed event fields, in the order of ``core.events.Event``."""
EVENT_COLUMNS: Final[tuple[str, ...]] = (*EVENT_FIELDS, "event_ts", "event_time")
"""Typed event columns of ``parse_events``: the fields, ``event_ts`` (long ms), ``event_time``."""
LOG_POSITION: Final = ("partition", "offset")
QUARANTINE_COLUMNS: Final = ("topic", "partition", "offset", "timestamp", "key", "value", "reason")
PROFILE_COLUMNS: Final = ("user_id", "segment", "updated_ts", "partition", "offset")

assert set(EVENT_FIELDS) == STRING_FIELDS | INT_FIELDS, "every event field has a JSON kind"

MIN_EVENT_TS: Final = MIN_TIMESTAMP_MS
"""The earliest ``event_ts`` that gets an ``event_time``."""
MAX_EVENT_TS: Final = MAX_TIMESTAMP_MS
"""The latest ``event_ts`` that gets an ``event_time``."""

# --- JSON text, token by token (Java regular expressions) ---------------------------------------
# Possessive quantifiers throughout: Java's regex engine recurses on backtracking loops, and a
# long string value must not overflow an executor's stack. The end of a text is ``\z``: ``$``
# also matches before a final line terminator (U+0085, U+2028, ...), which Python refuses as
# extra data after a document.
_JSON_WS = " \t\n\r"
_STRING = r'"[^"\\]*+(?:\\.[^"\\]*+)*+"'
_NUMBER = r"-?+(?:0|[1-9][0-9]*+)(?:\.[0-9]++)?+(?:[eE][+-]?+[0-9]++)?+"
_TOKEN = rf'(?s){_STRING}|{_NUMBER}|[^"0-9-]++|.'
"""Every character of a text in exactly one token: a string, a number, or a run of the rest."""
_STRING_PART = (
    r"(?s)\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"  # a surrogate pair
    r"|\\u[0-9a-fA-F]{4}|\\.|[^\\]++|\\"
)
_LONE_SURROGATE = r"^\\u[dD][89a-fA-F][0-9a-fA-F]{2}\z"
_MAY_NEED_REPAIR = r"\\u[dD][89a-fA-F]|[0-9]{101}"
_LONG_TOKEN = 100  # numbers and keys this long are replaced when the first parse failed
_JACKSON_MAX_NAME = 50_000
_SCALAR_DOCUMENT = rf"^(?:s|{_NUMBER}|true|false|null)\z"


def _check_session(df: DataFrame) -> None:
    conf = df.sparkSession.conf
    for key, value in SPARK_CONF.items():
        if str(conf.get(key)).lower() != value:
            raise RuntimeError(
                f"core.ingestion needs the Spark setting {key}={value} (so that a duplicated "
                "JSON key keeps its last value, as in core.events); set it in the session builder"
            )


def _repaired(text: Column) -> Column:
    """``text`` with the tokens Jackson refuses (and Python accepts) replaced by equivalents."""
    tokens = F.regexp_extract_all(text, F.lit(_TOKEN), 0)
    max_digits = sys.get_int_max_str_digits()

    def fix_string(token: Column) -> Column:
        parts = F.regexp_extract_all(token, F.lit(_STRING_PART), 0)
        fixed = F.transform(
            parts, lambda p: F.when(p.rlike(_LONE_SURROGATE), "\\ufffd").otherwise(p)
        )
        return F.array_join(fixed, "")

    def fix_number(token: Column) -> Column:
        negative = token.startswith("-")
        digits = F.length(token) - negative.cast("int")
        too_long_for_python = F.lit(False) if max_digits == 0 else digits > max_digits
        return (
            F.when(token.rlike("[.eE]"), F.lit("0.5"))
            .when(too_long_for_python, token)  # Python refuses it too: keep it unparseable
            .otherwise(F.concat(F.when(negative, "-").otherwise(""), F.lit("9" * 20)))
        )

    def fix(token: Column, i: Column) -> Column:
        after = F.get(tokens, i + 1)
        is_key = token.startswith('"') & after.rlike(rf"^[{_JSON_WS}]*+:")
        return (
            F.when(is_key & (F.length(token) > _LONG_TOKEN), F.lit('"\\u0000long key"'))
            .when(token.startswith('"'), fix_string(token))
            .when(token.rlike("^-?[0-9]") & (F.length(token) > _LONG_TOKEN), fix_number(token))
            .otherwise(token)
        )

    return F.array_join(F.transform(tokens, fix), "")


def _is_one_document(text: Column, flat_object: Column) -> Column:
    """Whether a text Jackson parsed holds nothing but whitespace after its first JSON value."""
    # A flat object's braces are the only brackets in the text, so the last one closes it.
    flat_and_closed = flat_object & (text.endswith("}") | text.rlike(rf"\}}[{_JSON_WS}]*+\z"))
    # A container: Jackson reads the first value and ignores the rest, so the text without its
    # last non-blank character still parses exactly when that character came after the value.
    # (Without the container's closing bracket, the value itself is cut short and fails.)
    container = text.rlike(rf"^[{_JSON_WS}]*+[\[{{]")
    cut = F.regexp_replace(text, rf"[^{_JSON_WS}][{_JSON_WS}]*+\z", "")
    # A scalar must be the whole text, once strings are "s" and whitespace is gone.
    stripped = F.regexp_replace(
        F.regexp_replace(text, rf"(?s){_STRING}", "s"), rf"[{_JSON_WS}]++", ""
    )
    exact = F.when(container, F.try_parse_json(cut).isNull()).otherwise(
        stripped.rlike(_SCALAR_DOCUMENT)
    )
    return F.when(flat_and_closed, True).otherwise(exact)


def _sql_type(name: str, string_fields: frozenset[str]) -> str:
    """A field's SQL type: ``string``, or ``bigint`` for an integer field. Upper-cased, it is
    the kind ``schema_of_variant`` gives a value of that type."""
    return "string" if name in string_fields else "bigint"


def _compact_pattern(fields: tuple[str, ...], string_fields: frozenset[str]) -> str:
    """A Java regular expression for the common case, where the exact reading below is not
    needed: a flat object of known fields only, each a string with no escape and no control
    character, an integer of at most 18 digits (so a long) or null, with JSON whitespace.
    Jackson (``from_json``) and Python read such a text alike, a repeated key included (both
    keep its last value)."""
    ws = f"[{_JSON_WS}]*+"
    texts = "|".join(sorted(f for f in fields if f in string_fields))
    integers = "|".join(sorted(f for f in fields if f not in string_fields))
    kinds = []
    if texts:
        kinds.append(rf'"(?:{texts})"{ws}:{ws}(?:"[^"\\\x00-\x1f]*+"|null)')
    if integers:
        kinds.append(rf'"(?:{integers})"{ws}:{ws}(?:-?+(?:0|[1-9][0-9]{{0,17}}+)|null)')
    member = "(?:" + "|".join(kinds) + ")"
    return rf"^{ws}\{{{ws}(?:{member}(?:{ws},{ws}{member})*+)?+{ws}\}}{ws}\z"


def _with_document(
    df: DataFrame, value: str, fields: tuple[str, ...], string_fields: frozenset[str]
) -> DataFrame:
    """``df`` plus ``_compact`` (the named fields typed, read with ``from_json``, when the text
    is in the common form of ``_compact_pattern``; NULL otherwise), ``_json`` (the value is one
    JSON document), ``_object`` (an object), and for the other texts, read exactly: ``_fields``
    (a struct of the named fields as VARIANTs, NULL unless the document is an object) and
    ``_flat`` (an object with no bracket inside: every field is a scalar). Temporary columns
    start with ``_`` and are dropped by the caller."""
    text = F.col("_text")
    struct_type = "struct<" + ", ".join(f"`{name}`: variant" for name in fields) + ">"
    compact_type = ", ".join(f"`{name}` {_sql_type(name, string_fields)}" for name in fields)
    compact = F.col("_compact").isNotNull()
    return (
        df.withColumn(
            "_text",
            F.when(
                F.col(value).isNotNull() & F.is_valid_utf8(F.col(value).cast("string")),
                F.col(value).cast("string"),
            ),
        )
        .withColumn(
            "_compact",
            F.when(
                text.rlike(_compact_pattern(fields, string_fields)),
                F.from_json(text, compact_type),
            ),
        )
        # The exact reading, only for what the compact form did not cover.
        .withColumn("_text", F.when(~compact, text))
        .withColumn("_doc0", F.try_parse_json(text))
        .withColumn(
            "_repair",
            F.col("_doc0").isNull()
            & text.isNotNull()
            & (text.rlike(_MAY_NEED_REPAIR) | (F.length(text) > _JACKSON_MAX_NAME)),
        )
        .withColumn("_text", F.when(F.col("_repair"), _repaired(text)).otherwise(text))
        .withColumn(
            "_doc",
            F.when(F.col("_repair"), F.try_parse_json(text)).otherwise(F.col("_doc0")),
        )
        .withColumn("_fields", F.try_variant_get(F.col("_doc"), "$", struct_type))
        .withColumn("_flat", F.col("_fields").isNotNull() & (_bracket_count(text) == 2))
        .withColumn(
            "_json",
            compact | (F.col("_doc").isNotNull() & _is_one_document(text, F.col("_flat"))),
        )
        .withColumn("_object", compact | F.col("_fields").isNotNull())
        .drop("_doc0", "_repair", "_text", "_doc")
    )


def _bracket_count(text: Column) -> Column:
    return F.length(text) - F.length(F.translate(text, "[]{}", ""))


def _kind(field: Column) -> Column:
    """The JSON kind of a VARIANT field: ABSENT, VOID (null), OBJECT, ARRAY or a scalar type
    (STRING, BIGINT, BOOLEAN, DECIMAL(p,s), DOUBLE). ``schema_of_variant`` only on scalars:
    known to be one in a flat object, else once shallow casts have ruled out containers."""
    return (
        F.when(field.isNull(), F.lit("ABSENT"))
        .when(F.col("_flat"), F.schema_of_variant(field))
        .when(F.try_variant_get(field, "$", "map<string,variant>").isNotNull(), F.lit("OBJECT"))
        .when(F.try_variant_get(field, "$", "array<variant>").isNotNull(), F.lit("ARRAY"))
        .otherwise(F.schema_of_variant(field))
    )


def _with_field_values(
    df: DataFrame, fields: tuple[str, ...], string_fields: frozenset[str]
) -> DataFrame:
    """For each field: ``_k_<f>`` its kind, ``_v_<f>`` its value when of the field's kind (a
    string, or a long for an integer field), and ``_p_<f>`` the reason it is not a valid
    required field (NULL when it is). Fields not in ``string_fields`` are integer fields.
    A compact text's fields are of their field's kind or null by its pattern."""
    compact = F.col("_compact").isNotNull()

    def expected(name: str) -> str:
        return _sql_type(name, string_fields).upper()

    kinds = []
    for name in fields:
        known = F.when(F.col("_compact")[name].isNull(), F.lit("ABSENT"))
        kinds.append(
            F.when(compact, known.otherwise(F.lit(expected(name))))
            .otherwise(_kind(F.col("_fields")[name]))
            .alias(f"_k_{name}")
        )
    df = df.select("*", *kinds)
    values = []
    for name in fields:
        kind, var = F.col(f"_k_{name}"), F.col("_fields")[name]
        values.append(
            F.when(compact, F.col("_compact")[name])
            .when(
                kind == expected(name), F.try_variant_get(var, "$", _sql_type(name, string_fields))
            )
            .alias(f"_v_{name}")
        )
    df = df.select("*", *values)
    problems = []
    for name in fields:
        kind, var = F.col(f"_k_{name}"), F.col("_fields")[name]
        if name in string_fields:
            text = F.col(f"_v_{name}")
        else:
            text = F.try_variant_get(var, "$", "string")
        # Never cast a container to a string (that recurses): only under kind == STRING.
        empty = F.when(kind == "STRING", text == "").otherwise(False)
        missing = kind.isin("ABSENT", "VOID") | empty
        problems.append(
            F.when(missing, F.lit(missing_field(name)))
            .when(kind != expected(name), F.lit(wrong_type(name)))
            .alias(f"_p_{name}")
        )
    return df.select("*", *problems)


def _with_barrier(df: DataFrame, *columns: Column) -> DataFrame:
    """``df`` plus ``columns`` (aliased), computed in a generator.

    A filter on a column is normally pushed below the projection that computes it, by
    substituting its expression: a filter on ``reason`` would inline (and evaluate several
    times over, per reference) every field's classification. Spark does not push a filter on a
    generator's output below the generator, so there the columns are computed once per row.
    """
    return df.select("*", F.inline(F.array(F.struct(*columns))))


def _reason() -> Column:
    """The first failing check, in ``parse_event``'s order; NULL for a valid event."""
    event_type = F.col("_v_type")
    reason = F.when(~F.col("_json"), F.lit(NOT_JSON)).when(~F.col("_object"), F.lit(NOT_AN_OBJECT))
    for name in ALWAYS_REQUIRED:
        reason = reason.when(F.col(f"_p_{name}").isNotNull(), F.col(f"_p_{name}"))
    reason = reason.when(~event_type.isin(*EVENT_TYPES), F.lit(UNKNOWN_TYPE))
    for type_name in EVENT_TYPES:
        for name in TYPE_REQUIRED[type_name]:
            problem = F.col(f"_p_{name}")
            reason = reason.when((event_type == type_name) & problem.isNotNull(), problem)
    return reason.when(
        (event_type == "order") & (F.col("_v_amount_cents") < 0), F.lit(NEGATIVE_AMOUNT)
    ).when(F.col("_v_device_ts") > F.col("_v_sent_ts"), F.lit(DEVICE_AFTER_SENT))


def _needed_by(name: str) -> Column:
    """Whether the event's type carries field ``name`` (the others are NULL, as in ``Event``)."""
    if name in ALWAYS_REQUIRED:
        return F.lit(True)
    return F.col("_v_type").isin(*(t for t in EVENT_TYPES if name in TYPE_REQUIRED[t]))


def parse_events(raw: DataFrame) -> DataFrame:
    """Validate raw ``events`` records: the input columns, ``reason`` (NULL when valid) and the
    typed event columns (``EVENT_COLUMNS``; all NULL for an invalid record)."""
    _check_session(raw)
    fields = EVENT_FIELDS
    df = _with_document(raw, "value", fields, STRING_FIELDS)
    df = _with_field_values(df, fields, STRING_FIELDS)
    df = _with_barrier(df, _reason().alias("reason"))
    valid = F.col("reason").isNull()
    typed = []
    for name in fields:
        typed.append(F.when(valid & _needed_by(name), F.col(f"_v_{name}")).alias(name))
    df = df.select(*raw.columns, "reason", *typed)
    # Exact in decimal, as in Python; NULL when the result does not fit a long.
    exact = "decimal(21,0)"
    event_ts = (
        F.col("device_ts").cast(exact)
        + (F.col("received_ts").cast(exact) - F.col("sent_ts").cast(exact))
    ).try_cast("long")
    df = df.withColumn("event_ts", event_ts)
    in_range = F.col("event_ts").between(MIN_EVENT_TS, MAX_EVENT_TS)
    return df.withColumn("event_time", F.when(in_range, F.timestamp_millis(F.col("event_ts"))))


def valid_events(parsed: DataFrame) -> DataFrame:
    """The valid records of ``parse_events``: the event columns and their log position."""
    return parsed.where(F.col("reason").isNull()).select(*EVENT_COLUMNS, *LOG_POSITION)


def quarantine(parsed: DataFrame) -> DataFrame:
    """The invalid records of ``parse_events``, kept whole with where they were and why."""
    return parsed.where(F.col("reason").isNotNull()).select(*QUARANTINE_COLUMNS)


def first_in_log(events: DataFrame) -> DataFrame:
    """One row per ``event_id``: the first in log order, the smallest (partition, offset).

    Duplicates share their ``user_id``, hence their partition, so this is the first occurrence.
    """
    others = [c for c in events.columns if c != "event_id"]
    first = F.min(
        F.struct(
            F.col("partition").alias("_p"),
            F.col("offset").alias("_o"),
            F.struct(*others).alias("_row"),
        )
    )
    return (
        events.groupBy("event_id")
        .agg(first.alias("_first"))
        .select("event_id", "_first._row.*")
        .select(*events.columns)
    )


STREAM_DEDUP_KEY: Final = "_dedup_key"


def first_occurrences(parsed: DataFrame, events_topic: str) -> DataFrame:
    """``first_in_log`` for a streaming plan: one row per valid event id over the whole log,
    with Spark's ``dropDuplicates`` (the ids live in the query's state store, looked up per
    event); every other record passes, keyed by its log position. (``parsed``: the output of
    ``parse_events`` on both topics.)

    The row kept is the first in the log: a retry shares its original's Kafka partition, the
    source reads a partition in offset order, and the shuffle before the deduplication keeps
    the order of the rows that one source task wrote.
    """
    is_event = (F.col("topic") == events_topic) & F.col("reason").isNull()
    position = F.concat_ws(":", "topic", "partition", "offset")
    key = F.when(is_event, F.concat(F.lit("e:"), F.col("event_id"))).otherwise(position)
    return parsed.withColumn(STREAM_DEDUP_KEY, key).dropDuplicates([STREAM_DEDUP_KEY])


# --- profiles ---------------------------------------------------------------------------------

_PROFILE_FIELDS: Final = ("segment", "updated_ts")
_PROFILE_STRINGS: Final = frozenset({"segment"})


def _checked_profiles(raw: DataFrame) -> DataFrame:
    """``raw`` plus the parsed profile columns and ``_ok`` (see ``parse_profiles``)."""
    _check_session(raw)
    key_text = F.col("key").cast("string")
    df = _with_document(raw, "value", _PROFILE_FIELDS, _PROFILE_STRINGS)
    df = _with_field_values(df, _PROFILE_FIELDS, _PROFILE_STRINGS)
    tombstone = F.col("value").isNull()
    version_ok = (
        F.col("_json")
        & F.col("_object")
        & (F.col("_k_segment") == "STRING")
        & (F.col("_v_segment") != "")
        & (F.col("_k_updated_ts") == "BIGINT")
    )
    key_ok = F.col("key").isNotNull() & F.is_valid_utf8(key_text) & (key_text != "")
    return _with_barrier(df, (key_ok & (tombstone | version_ok)).alias("_ok")).select(
        *raw.columns,
        "_ok",
        key_text.alias("user_id"),
        F.when(~tombstone, F.col("_v_segment")).alias("segment"),
        F.when(tombstone, F.unix_millis(F.col("timestamp")))
        .otherwise(F.col("_v_updated_ts"))
        .alias("updated_ts"),
    )


def parse_profiles(raw: DataFrame) -> DataFrame:
    """Profile versions of raw ``profiles`` records: ``PROFILE_COLUMNS``.

    The user is the key. A NULL value is a tombstone (``segment`` NULL) taking effect at the
    record timestamp; otherwise the value is ``{"segment": str, "updated_ts": int, ...}``.
    (partition, offset) order versions on an ``updated_ts`` tie: the later in the log wins.
    A record ``core.events.profile_from_record`` refuses is left out (see ``rejected_profiles``).
    """
    checked = _checked_profiles(raw)
    return checked.where(F.col("_ok")).select(*PROFILE_COLUMNS)


def rejected_profiles(raw: DataFrame) -> DataFrame:
    """The raw ``profiles`` records ``parse_profiles`` leaves out, to be counted."""
    checked = _checked_profiles(raw)
    return checked.where(~F.col("_ok")).select(*raw.columns)
