"""The executions an executor knows, by trace id: what answers repeated calls, status and
cancel.

Running executions are never forgotten. A finished one is forgotten only once it finished more
than `keep_for` seconds ago *and* more than `keep_at_least` finished ones are held, so how long
a result is remembered does not shrink when executions come faster; `keep_at_most` bounds the
memory whatever their age. What was forgotten is said: `remembered_since` is the instant from
which every finished execution is still remembered."""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Dict, Optional

from .protocol import JobResult

KEEP_FINISHED = 10_000
KEEP_FINISHED_FOR = 600.0
KEEP_FINISHED_AT_MOST = 1_000_000


@dataclass
class Entry:
    """One execution. `result` is set once it is finished."""

    report_url: str
    started: datetime
    #: Report the result when it is known: background handlers, a call repeated while the
    #: first still runs, a caller that went away, a handler too slow to stop.
    report_when_done: bool = False
    result: Optional[JobResult] = None
    #: Why it is being stopped (TIMEOUT or CANCELLED), once a stop was asked.
    stop_reason: Optional[JobResult] = None
    #: Set when a stop is asked; handlers read it through their context.
    stop: threading.Event = field(default_factory=threading.Event)
    stop_asked: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set when the execution is finished.
    finished: asyncio.Event = field(default_factory=asyncio.Event)
    #: Set when a stop was asked and the handler did not stop within the wait: it still runs.
    stuck: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def running(self) -> bool:
        return self.result is None


class Ledger:
    def __init__(self, started_at: datetime, keep_at_least: int = KEEP_FINISHED,
                 keep_for: float = KEEP_FINISHED_FOR, keep_at_most: int = KEEP_FINISHED_AT_MOST):
        self.entries: Dict[str, Entry] = {}
        #: Finished trace ids and when they finished, oldest-finished first.
        self.finished: "OrderedDict[str, datetime]" = OrderedDict()
        self.keep_at_least = keep_at_least
        self.keep_for = timedelta(seconds=keep_for)
        self.keep_at_most = keep_at_most
        self.remembered_since = started_at

    def get(self, trace_id: str) -> Optional[Entry]:
        return self.entries.get(trace_id)

    def enter(self, trace_id: str, entry: Entry) -> None:
        self.entries[trace_id] = entry

    def finish(self, trace_id: str, result: JobResult, now: datetime) -> Entry:
        entry = self.entries[trace_id]
        entry.result = result
        entry.finished.set()
        self.finished[trace_id] = now
        self.forget_old(now)
        return entry

    def forget_old(self, now: datetime) -> None:
        while self.finished:
            trace_id, at = next(iter(self.finished.items()))
            over_count = len(self.finished) > self.keep_at_least
            too_many = len(self.finished) > self.keep_at_most
            if not (too_many or (over_count and now - at > self.keep_for)):
                return
            self.finished.popitem(last=False)
            del self.entries[trace_id]
            self.remembered_since = max(self.remembered_since, at)
