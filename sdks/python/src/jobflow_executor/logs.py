"""What a handler logs, captured per execution and shipped to the scheduler
(docs/executor-protocol.md, "Shipping logs").

Capture: while a handler runs, the records the standard `logging` module lets through (the
service's logging configuration decides the levels) that are emitted in the handler's own
context (its task, or its worker thread) are copied into its execution's log, and so is
`ctx.log(message, level)`. Each execution keeps at most its bound (1 MiB by default) of
messages; what comes beyond is counted, and a last line says how much was dropped.

Ship: what was logged goes to the scheduler every second while the handler runs (the first
batch a second after the start), in order,
each line numbered so a batch sent again after a lost answer is stored once. When the handler
has finished, the rest goes with the result (`Capture.take_rest`): in the answer to the call
or in the result report, which the executor sends anyway, so a handler that logs a few lines
costs no request of its own. Only a rest past `CARRY_BYTES` is shipped on its own, with the
log's end. A failed batch is sent again with a growing wait, for up to ten minutes after the
end. A handler that logged nothing sends nothing. Logging only appends to a buffer under a
short lock: a handler never waits for its log.
"""

from __future__ import annotations

import contextvars
import json
import logging
import threading
from collections import OrderedDict
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

DEFAULT_BOUND = 1024 * 1024
SHIP_EVERY = 1.0
RETRY_AT_MOST = 30.0
GIVE_UP_AFTER = 600.0
_BATCH_LINES = 500
# Bytes of serialised lines per batch: the scheduler takes bodies of at most 1 MiB, and one
# line (16,384 characters, escaped) always fits.
_BATCH_BYTES = 512 * 1024
_LINE_CHARS = 16 * 1024
#: The most serialised lines a result carries.
CARRY_BYTES = 32 * 1024
#: The most a result and the lines it carries take together: the scheduler reads 64 KiB of an
#: answer, and a cut answer is not a result.
ANSWER_BYTES = 48 * 1024


def carry_room(result_bytes: int) -> int:
    """How many bytes of lines a result of `result_bytes` (serialised) may carry."""
    return max(0, min(CARRY_BYTES, ANSWER_BYTES - result_bytes))
#: Bytes of carried logs remembered for repeated calls (see `CarriedMemory`).
CARRIED_MEMORY = 8 * 1024 * 1024

_LEVELS = [(logging.ERROR, "ERROR"), (logging.WARNING, "WARN"), (logging.INFO, "INFO"),
           (logging.DEBUG, "DEBUG")]

#: The log of the execution whose handler runs in this context.
current: contextvars.ContextVar[Optional["Capture"]] = contextvars.ContextVar(
    "jobflow_execution_log", default=None)


def level_name(level: int) -> str:
    for threshold, name in _LEVELS:
        if level >= threshold:
            return name
    return "TRACE"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class Capture:
    """One execution's log: appended to by the handler, drained by its shipper."""

    def __init__(self, bound: int = DEFAULT_BOUND) -> None:
        self.bound = bound
        self._lock = threading.Lock()
        self._pending: List[Dict[str, Any]] = []
        self._seq = 0
        self._kept = 0
        self.dropped = 0
        self.ended = False
        #: The rest went with the result: the shipper stops.
        self.carried = False
        #: A batch is on its way: the rest is not taken meanwhile, since two batches stored at
        #: once could both hold a line.
        self.sending = False

    def push(self, level: str, message: str) -> None:
        message = message[:_LINE_CHARS]
        size = len(message.encode("utf-8"))
        with self._lock:
            if self.ended:
                return
            if self._kept + size > self.bound:
                self.dropped += size
                return
            self._kept += size
            self._seq += 1
            self._pending.append({"seq": self._seq, "at": _now(), "level": level,
                                  "message": message})

    def end(self) -> None:
        with self._lock:
            if self.dropped:
                self._seq += 1
                self._pending.append({
                    "seq": self._seq, "at": _now(), "level": "WARN",
                    "message": f"{self.dropped} bytes of log dropped: past this execution's "
                               f"bound of {self.bound} bytes"})
            self.ended = True

    def next_batch(self) -> Tuple[List[Dict[str, Any]], Optional[Dict[str, int]]]:
        """The next batch to send (kept until `shipped`), and the end when it goes with it."""
        with self._lock:
            lines: List[Dict[str, Any]] = []
            size = 0
            for line in self._pending[:_BATCH_LINES]:
                size += len(json.dumps(line))
                if size > _BATCH_BYTES and lines:
                    break
                lines.append(line)
            end = None
            if self.ended and len(lines) == len(self._pending):
                end = {"lines": self._seq, "droppedBytes": self.dropped}
            return list(lines), end

    def take_rest(self, most: int = CARRY_BYTES) -> Optional[Dict[str, Any]]:
        """The rest of an ended log, to go with the result as its `logs`: every line not yet
        taken by the scheduler, and the end. None when it is more than `most` bytes serialised
        or while a batch is on its way (the shipper sends it then), or when nothing was logged
        (nothing is sent). Once taken, the shipper stops: batches never overlap in flight."""
        with self._lock:
            if not self.ended or self.carried or self.sending:
                return None
            if self._seq == 0:
                self.carried = True
                return None
            if len(self._pending) > _BATCH_LINES:
                return None
            rest = {"lines": list(self._pending),
                    "end": {"lines": self._seq, "droppedBytes": self.dropped}}
            if len(json.dumps(rest["lines"])) > most:
                return None
            self.carried = True
            self._pending = []
            return rest

    def begin_send(self) -> bool:
        """The shipper is about to send a batch: False when the rest went with the result
        meanwhile (nothing is sent then)."""
        with self._lock:
            self.sending = not self.carried
            return self.sending

    def end_send(self) -> None:
        with self._lock:
            self.sending = False

    def shipped(self, through: int) -> None:
        with self._lock:
            self._pending = [line for line in self._pending if line["seq"] > through]


class CaptureHandler(logging.Handler):
    """A `logging` handler copying records emitted inside a handler into its execution's
    log. `JobExecutor` puts one on the root logger."""

    def emit(self, record: logging.LogRecord) -> None:
        capture = current.get()
        if capture is None or record.name.startswith("jobflow_executor"):
            return
        try:
            message = record.getMessage()
            if record.exc_info:
                message = message + "\n" + logging.Formatter().formatException(record.exc_info)
        except Exception:  # a record that cannot be formatted is not the handler's fault
            return
        capture.push(level_name(record.levelno), message)


def log_url(report_url: str) -> Optional[str]:
    """Where an execution's log goes: beside its `reportUrl` (`…/result` → `…/logs`)."""
    if report_url.endswith("/result"):
        return report_url[: -len("/result")] + "/logs"
    return None


def spread_of(trace_id: str) -> float:
    """Seconds the last batch of `trace_id` waits after its execution's end: spread over
    `SHIP_EVERY` by a hash of the trace id (FNV-1a, as every JobFlow SDK does)."""
    h = 0xcbf29ce484222325
    for b in trace_id.encode():
        h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return SHIP_EVERY * (h % 1000) / 1000


def batch_body(lines: List[Dict[str, Any]], end: Optional[Dict[str, int]]) -> bytes:
    body: Dict[str, Any] = {"lines": lines}
    if end is not None:
        body["end"] = end
    return json.dumps(body).encode()


class CarriedMemory:
    """The logs carried lately, by trace id, within `budget` bytes, oldest forgotten first: a
    scheduler that took an answer and stopped before storing it calls again, and the repeated
    call's answer carries the log again."""

    def __init__(self, budget: int = CARRIED_MEMORY) -> None:
        self.budget = budget
        self._lock = threading.Lock()
        self._logs: "OrderedDict[str, Tuple[Dict[str, Any], int]]" = OrderedDict()
        self._bytes = 0

    def keep(self, trace_id: str, rest: Dict[str, Any]) -> None:
        size = len(json.dumps(rest))
        with self._lock:
            if trace_id in self._logs:
                return
            self._logs[trace_id] = (rest, size)
            self._bytes += size
            while self._bytes > self.budget and self._logs:
                _, (_, gone) = self._logs.popitem(last=False)
                self._bytes -= gone

    def get(self, trace_id: str) -> Optional[Dict[str, Any]]:
        with self._lock:
            kept = self._logs.get(trace_id)
            return kept[0] if kept else None
