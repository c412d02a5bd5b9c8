"""Which master dataset partitions the raw gate checks (batch_layer.inputs), from file paths."""

from __future__ import annotations

from batch_layer.inputs import partitions_of

ROOT = "s3a://lk-master/events"


def test_partitions_come_from_the_data_files_hive_paths() -> None:
    files = {
        f"{ROOT}/record_date=2026-11-01/record_hour=9/part-00000-a.snappy.parquet",
        f"{ROOT}/record_date=2026-11-01/record_hour=9/part-00001-b.snappy.parquet",
        f"{ROOT}/record_date=2026-11-01/record_hour=10/part-00000-c.snappy.parquet",
        f"{ROOT}/record_date=2026-11-02/record_hour=0/part-00000-d.snappy.parquet",
    }
    assert partitions_of(files) == {("2026-11-01", 9), ("2026-11-01", 10), ("2026-11-02", 0)}


def test_a_file_outside_any_partition_is_ignored() -> None:
    assert partitions_of({f"{ROOT}/part-00000-x.snappy.parquet"}) == set()
    assert partitions_of(set()) == set()
