"""One worker thread that takes items in the order handed, at most one waiting.

The stream engine's micro-batch function hands each micro-batch here and returns, so that Spark
starts the next one while this thread merges and commits the last (``stream_engine.engine``).
A queue of one bounds what the driver holds (a micro-batch merging, one waiting, one in Spark)
and makes Spark wait when the merge falls behind: backpressure, not a backlog in memory.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

_DONE = object()
_POLL_S = 0.5


class MergeThread(Generic[T]):
    def __init__(self, work: Callable[[T], None], name: str) -> None:
        self._work = work
        self._queue: queue.Queue[object] = queue.Queue(maxsize=1)
        self.failure: BaseException | None = None
        """The first exception `work` raised; the items handed after it are not worked on."""
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def hand(self, item: T) -> None:
        """Queue `item`, waiting while another one waits; raises the worker's failure."""
        while True:
            if self.failure is not None:
                raise self.failure
            try:
                self._queue.put(item, timeout=_POLL_S)
                return
            except queue.Full:
                continue

    def finish(self) -> BaseException | None:
        """Wait until every item handed is done (or the worker failed); the failure, if any."""
        if self._thread.is_alive():
            self._queue.put(_DONE)
            self._thread.join()
        return self.failure

    def _run(self) -> None:
        while (item := self._queue.get()) is not _DONE:
            if self.failure is not None:
                continue  # drained, not worked on: the stream stops at its failure
            try:
                self._work(item)  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the stream's thread, which raises it
                self.failure = exc
