"""Change data capture without services: the connector's configuration, a namespace's own
names, and how `lk profiles` checks a file before it writes anything."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from core.cdc.connector import TRANSFORM, connector_config
from core.cdc.table import ProfileTableError, check, read_changes
from core.events import ProfileChange
from core.settings import Settings
from infra.stack.artifacts import SMT_DIR
from infra.stack.connect import KafkaConnect


def test_the_connector_captures_one_table_through_pgoutput_into_the_profiles_topic() -> None:
    settings = Settings()
    config = connector_config(settings)
    assert config["connector.class"] == "io.debezium.connector.postgresql.PostgresConnector"
    assert config["plugin.name"] == "pgoutput"
    assert config["table.include.list"] == "public.profiles"
    assert config["database.dbname"] == settings.app_db != settings.postgres_db
    assert config["database.user"] == settings.cdc_postgres_user
    assert config["slot.name"] == settings.cdc_slot
    assert config["publication.name"] == settings.cdc_publication
    assert config["publication.autocreate.mode"] == "disabled"
    assert config["transforms.profile.type"] == TRANSFORM
    assert config["transforms.profile.topic"] == settings.profiles_topic
    # The transform writes the one tombstone; the key is the user id as a string.
    assert config["tombstones.on.delete"] == "false"
    assert config["key.converter"].endswith("StringConverter")
    assert config["value.converter.schemas.enable"] == "false"
    assert int(config["heartbeat.interval.ms"]) == settings.cdc_heartbeat_ms
    assert all(isinstance(value, str) for value in config.values())


def test_the_transform_named_in_the_config_is_the_one_the_project_builds() -> None:
    source = next(SMT_DIR.rglob("ProfileChange.java")).read_text()
    package = re.search(r"^package ([\w.]+);", source, re.MULTILINE)
    assert package is not None and f"{package[1]}.ProfileChange" == TRANSFORM
    services = (
        SMT_DIR / "META-INF" / "services" / "org.apache.kafka.connect.transforms.Transformation"
    )
    assert services.read_text().strip() == TRANSFORM


def test_keys_given_over_the_project_config_win_and_come_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chart's connect.connector.config reaches `lk cdc register` as JSON."""
    monkeypatch.setenv("LK_CDC_CONNECTOR_CONFIG", '{"heartbeat.interval.ms": "10000"}')
    config = connector_config(Settings())
    assert config["heartbeat.interval.ms"] == "10000"
    assert config["plugin.name"] == "pgoutput"  # the rest is the project's


def test_a_namespace_captures_its_own_table_into_its_own_topic() -> None:
    base = Settings()
    own = base.namespaced("cmp-1a2b")
    config = connector_config(own)
    assert own.cdc_connector != base.cdc_connector
    assert config["transforms.profile.topic"] == own.profiles_topic != base.profiles_topic
    assert config["database.dbname"] == own.app_db != base.app_db
    # Postgres names: lower-case letters, digits and underscores (a slot allows no other).
    for name in (own.cdc_slot, own.cdc_publication, own.app_db):
        assert re.fullmatch(r"[a-z0-9_]+", name), name
    assert own.connect_group == base.connect_group  # one worker serves every namespace


def test_the_worker_keeps_its_state_in_kafka_and_commits_offsets_as_configured() -> None:
    settings = Settings(connect_offset_flush_ms=700, connect_exactly_once=True)
    worker = KafkaConnect(settings).worker_properties()
    for kind, topic in (("config", "configs"), ("offset", "offsets"), ("status", "status")):
        assert worker[f"{kind}.storage.topic"] == f"{settings.connect_group}-{topic}"
    assert worker["offset.flush.interval.ms"] == "700"
    assert worker["exactly.once.source.support"] == "enabled"
    assert worker["listeners"] == f"http://{settings.host}:{settings.connect_port}"


def test_a_file_is_read_in_order_and_a_bad_line_is_named(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(
        '{"user_id": "a", "segment": "s", "updated_ts": 1}\n\n'
        '{"user_id": "a", "tombstone": true, "updated_ts": 2}\n'
    )
    changes, where = read_changes(good)
    assert changes == [ProfileChange("a", "s", 1), ProfileChange("a", None, 2)]
    assert where == [f"{good}:1", f"{good}:3"]

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"user_id": "a", "segment": "s", "updated_ts": 1}\nnot json\n')
    with pytest.raises(ProfileTableError, match=re.escape(f"{bad}:2: ")):
        read_changes(bad)
    with pytest.raises(ProfileTableError, match="cannot read"):
        read_changes(tmp_path / "missing.jsonl")


def test_a_delete_needs_a_profile_at_that_point_of_the_file() -> None:
    recreated = [
        ProfileChange("a", None, 5),
        ProfileChange("a", "s", 6),
        ProfileChange("a", None, 7),
    ]
    check(recreated, {"a"}, ["1", "2", "3"])
    with pytest.raises(ProfileTableError, match="2: no profile of user 'a' to delete"):
        check([ProfileChange("a", None, 5), ProfileChange("a", None, 6)], {"a"}, ["1", "2"])
    with pytest.raises(ProfileTableError, match="1: updated_ts must be >= 0"):
        check([ProfileChange("b", "s", -1)], set(), ["1"])


def test_a_connector_override_reaches_a_child_process_as_json(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`lk compare` starts its streams with `Settings.as_env()`: the override must come back
    as the same mapping (not Python's repr, which the child cannot read), and so must every
    other setting."""
    settings = Settings(cdc_connector_config={"poll.interval.ms": "100"})
    env = settings.as_env()
    assert json.loads(env["LK_CDC_CONNECTOR_CONFIG"]) == {"poll.interval.ms": "100"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings() == settings
