"""The wire format of docs/executor-protocol.md: signatures (§5), the call (§1), results (§2),
status and cancel answers (§4). No I/O here."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, Mapping, Optional

#: A signature's timestamp may be this far from the executor's clock.
MAX_SKEW_SECONDS = 300

#: Final statuses of an execution, as results and status answers name them.
FINAL_STATUSES = ("SUCCESS", "FAILED", "TIMEOUT", "CANCELLED")


def canonical(method: str, path: str, timestamp: str, trace_id: str, body: bytes) -> bytes:
    """What is signed: method, path without query, timestamp, trace id, the exact body."""
    return f"{method}\n{path}\n{timestamp}\n{trace_id}\n".encode() + body


def sign(secret: bytes, method: str, path: str, timestamp: str, trace_id: str,
         body: bytes) -> str:
    """The `X-JobFlow-Signature` value: `v1=` and the hex HMAC-SHA256 of the canonical string."""
    mac = hmac.new(secret, canonical(method, path, timestamp, trace_id, body), hashlib.sha256)
    return "v1=" + mac.hexdigest()


def verify(secret: bytes, method: str, path: str, headers: Mapping[str, str], trace_id: str,
           body: bytes, now: Optional[float] = None) -> bool:
    """Whether a request is signed with `secret`, within the allowed skew, compared in
    constant time. `headers` are looked up by lower-case name."""
    timestamp = headers.get("x-jobflow-timestamp")
    signature = headers.get("x-jobflow-signature")
    if not timestamp or not signature:
        return False
    try:
        ts = int(timestamp)
    except ValueError:
        return False
    now = time.time() if now is None else now
    if abs(now - ts) > MAX_SKEW_SECONDS:
        return False
    expected = sign(secret, method, path, timestamp, trace_id, body)
    return hmac.compare_digest(expected.encode(), signature.encode())


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def rfc3339(t: datetime) -> str:
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _parse_instant(text: str) -> datetime:
    # Python 3.9's fromisoformat knows no `Z`.
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class DataRange:
    start: int
    end: int


class Stopped(Exception):
    """Raised by `JobContext.check_stop()` once the execution is to stop."""


@dataclass
class JobContext:
    """Everything a handler knows about the execution it runs, and its stop signal."""

    trace_id: str
    execution_id: str
    job_name: str
    handler: str
    #: CRON, MANUAL, RETRY, COMPENSATION or CHILD.
    trigger_type: str
    fire_time: datetime
    shard_start: int
    shard_end: int
    shard_count: int
    #: MOD_HASH, RANGE or CUSTOM.
    shard_strategy: str
    retry_count: int
    timeout_seconds: int
    job_params: Any
    report_url: str
    #: RANGE jobs: the slice of the data range this execution owns.
    data_range: Optional[DataRange] = None
    #: CUSTOM jobs: the item parameter of each shard of this execution.
    shard_items: Dict[int, str] = field(default_factory=dict)
    #: Set when the execution timed out or was cancelled.
    stop_event: threading.Event = field(default_factory=threading.Event, compare=False,
                                        repr=False)
    #: This execution's log (see `jobflow_executor.logs`); set by the executor.
    log_capture: Any = field(default=None, compare=False, repr=False)

    @classmethod
    def from_call(cls, body: Mapping[str, Any]) -> "JobContext":
        """Parses a call's JSON body; raises ValueError (or KeyError) when it is not one."""
        data_range = body.get("dataRange")
        items = body.get("shardItems") or {}
        return cls(
            trace_id=str(body["traceId"]),
            execution_id=str(body["executionId"]),
            job_name=str(body["jobName"]),
            handler=str(body["handler"]),
            trigger_type=str(body.get("triggerType", "CRON")),
            fire_time=_parse_instant(str(body["fireTime"])),
            shard_start=int(body["shardStart"]),
            shard_end=int(body["shardEnd"]),
            shard_count=int(body["shardCount"]),
            shard_strategy=str(body.get("shardStrategy", "MOD_HASH")),
            retry_count=int(body.get("retryCount", 0)),
            timeout_seconds=int(body.get("timeoutSeconds", 0)),
            job_params=body.get("jobParams"),
            report_url=str(body.get("reportUrl", "")),
            data_range=DataRange(int(data_range["start"]), int(data_range["end"]))
            if data_range else None,
            shard_items={int(k): str(v) for k, v in items.items()},
        )

    @property
    def shards(self) -> range:
        """The shard indexes of this execution."""
        return range(self.shard_start, self.shard_end + 1)

    @property
    def stopped(self) -> bool:
        """True once the execution timed out or was cancelled. An `async def` handler is
        cancelled at its next `await` anyway; a plain function should return soon after."""
        return self.stop_event.is_set()

    def check_stop(self) -> None:
        """Raises `Stopped` once the execution is to stop."""
        if self.stopped:
            raise Stopped()

    def wait_stop(self, seconds: float) -> bool:
        """Sleeps up to `seconds`, waking early when the execution is to stop; True if so."""
        return self.stop_event.wait(seconds)

    def log(self, message: str, level: str = "INFO") -> None:
        """Adds a line to this execution's log, shipped to the scheduler (`level`: TRACE,
        DEBUG, INFO, WARN or ERROR). Records of the `logging` module emitted by the handler
        are captured too."""
        if self.log_capture is not None:
            self.log_capture.push(level, message)

    def owns_id(self, record_id: int) -> bool:
        """MOD_HASH: whether a record belongs to this execution (`id % shardCount` in range)."""
        return self.shard_start <= record_id % max(self.shard_count, 1) <= self.shard_end


@dataclass(frozen=True)
class JobResult:
    """A result as §2 defines it."""

    success: bool
    message: Optional[str] = None
    status: Optional[str] = None

    @classmethod
    def ok(cls, message: Optional[str] = None) -> "JobResult":
        return cls(True, message)

    @classmethod
    def failure(cls, message: str) -> "JobResult":
        return cls(False, message)

    @classmethod
    def timed_out(cls, seconds: int) -> "JobResult":
        return cls(False, f"aborted after {seconds}s (timeoutSeconds)", "TIMEOUT")

    @classmethod
    def cancelled(cls) -> "JobResult":
        return cls(False, "cancelled by the scheduler", "CANCELLED")

    @property
    def final_status(self) -> str:
        if self.status in FINAL_STATUSES:
            return self.status
        return "SUCCESS" if self.success else "FAILED"

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"success": self.success}
        if self.status is not None:
            out["status"] = self.status
        if self.message is not None:
            out["message"] = self.message
        return out

    def encode(self) -> bytes:
        return json.dumps(self.to_json()).encode()


def as_result(value: Any) -> JobResult:
    """What a handler returned, as a JobResult: a JobResult as it is, `None` as success, a
    string as a success with that message, `(False, message)` as a failure."""
    if isinstance(value, JobResult):
        return value
    if value is None:
        return JobResult.ok()
    if isinstance(value, str):
        return JobResult.ok(value)
    if isinstance(value, tuple) and len(value) == 2 and isinstance(value[0], bool):
        return JobResult(value[0], None if value[1] is None else str(value[1]))
    return JobResult.ok(json.dumps(value, default=str))
