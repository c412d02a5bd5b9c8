"""The stream engine's pipeline parts without Spark: the merge thread (order, backpressure, a
failure reaching the stream's thread) and the inbox (what a restart reads back)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest
from pyarrow import fs

from stream_engine.inbox import Inbox, PendingBatch, inbox_root
from stream_engine.merge_thread import MergeThread


def test_items_should_be_worked_on_in_the_order_handed() -> None:
    done: list[int] = []
    merges = MergeThread(done.append, "test-merge")
    for n in range(20):
        merges.hand(n)
    assert merges.finish() is None
    assert done == list(range(20))


def test_hand_should_wait_while_one_item_already_waits() -> None:
    release = threading.Event()

    def work(_: int) -> None:
        release.wait()

    merges = MergeThread(work, "test-merge")
    merges.hand(1)  # taken by the worker, which blocks on it
    time.sleep(0.1)
    merges.hand(2)  # waits in the queue
    handed = threading.Event()

    def hand_third() -> None:
        merges.hand(3)
        handed.set()

    third = threading.Thread(target=hand_third)
    third.start()
    assert not handed.wait(0.3), "a second item must not wait beside the first"
    release.set()
    assert handed.wait(5)
    third.join()
    assert merges.finish() is None


def test_a_failure_should_stop_the_work_and_reach_the_next_hand() -> None:
    done: list[int] = []

    def work(n: int) -> None:
        if n == 2:
            raise ValueError("batch 2 failed")
        done.append(n)

    merges = MergeThread(work, "test-merge")
    merges.hand(1)
    merges.hand(2)
    with pytest.raises(ValueError, match="batch 2 failed"):
        for n in range(3, 100):
            merges.hand(n)
            time.sleep(0.01)
    failure = merges.finish()
    assert isinstance(failure, ValueError)
    assert done == [1], "nothing after the failed item may be worked on"


def test_finish_should_wait_for_the_last_item() -> None:
    done: list[int] = []

    def work(n: int) -> None:
        time.sleep(0.2)
        done.append(n)

    merges = MergeThread(work, "test-merge")
    merges.hand(1)
    merges.hand(2)
    merges.finish()
    assert done == [1, 2]
    assert merges.finish() is None, "a second finish has nothing left to wait for"


def _inbox(tmp_path: Path) -> Inbox:
    return Inbox(fs.LocalFileSystem(), str(tmp_path / "inbox"))


def test_an_inbox_batch_should_read_back_with_its_offsets_and_checkpoint(tmp_path: Path) -> None:
    inbox = _inbox(tmp_path)
    (tmp_path / "inbox").mkdir()
    records = pa.table({"offset": [1, 2, 3], "value": [b"a", None, b"c"]})
    inbox.put(PendingBatch(7, records, {"events/0": 4, "profiles/2": 9}), "query-1")
    inbox.put(PendingBatch(12, records.slice(0, 1), {}), "query-1")
    assert inbox.batch_ids() == [7, 12]
    batch, written_by = inbox.get(7)
    assert written_by == "query-1"
    assert batch.records.equals(records)
    assert batch.end == {"events/0": 4, "profiles/2": 9}
    inbox.remove(7)
    inbox.remove(7)  # already gone: nothing to do
    assert inbox.batch_ids() == [12]


def test_an_empty_inbox_should_list_nothing(tmp_path: Path) -> None:
    assert _inbox(tmp_path).batch_ids() == []


def test_the_inbox_should_live_inside_the_checkpoint_folder() -> None:
    assert inbox_root("s3a://lk-checkpoints/kappa-v2") == "lk-checkpoints/kappa-v2/inbox"
    with pytest.raises(ValueError, match="object store"):
        inbox_root("/tmp/checkpoint")
