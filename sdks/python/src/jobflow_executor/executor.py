"""The executor: handlers by name, and everything docs/executor-protocol.md asks of the side that
runs them, independent of the web framework (see `asgi` for serving it).

For every call it checks the signature, parses the call into a `JobContext`, runs the handler
(an `async def` as a task, a plain function in a worker thread), stops it at `timeoutSeconds`
or on a cancel, remembers the execution by trace id so a repeated call never runs it twice,
answers status and cancel, and reports results (signed) to the scheduler when the caller does
not wait for them.

Stopping: an `async def` handler is cancelled at its next `await`. A plain function cannot be
interrupted in Python: it is told through `ctx.stopped`, `ctx.check_stop()` or `ctx.wait_stop(seconds)`, and the executor
waits up to `stop_wait` seconds (10) for it to return. A handler that does not stop in that time
is reported truthfully as still RUNNING (status, cancel, and a 202 to a waiting call) until it
returns, so the scheduler never runs a retry beside it.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import json
import logging
import time
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Dict, Mapping, Optional, Tuple, Union

from . import logs
from .ledger import KEEP_FINISHED, KEEP_FINISHED_AT_MOST, KEEP_FINISHED_FOR, Entry, Ledger
from .protocol import (JobContext, JobResult, Stopped, as_result, rfc3339, sign, utc_now,
                       verify)

log = logging.getLogger("jobflow_executor")

Answer = Tuple[int, Dict[str, Any]]


Handler = Callable[[JobContext], Any]


@dataclass
class _Registered:
    fn: Handler
    background: bool
    is_async: bool


class JobExecutor:
    def __init__(self, secret: Union[str, bytes, None], *, path_prefix: str = "/internal/job",
                 keep_at_least: int = KEEP_FINISHED, keep_for: float = KEEP_FINISHED_FOR,
                 keep_at_most: int = KEEP_FINISHED_AT_MOST, stop_wait: float = 10.0,
                 max_threads: int = 32, report_attempts: int = 8,
                 log_bound: int = logs.DEFAULT_BOUND):
        """`secret` is the scheduler's `executor.signing_secret`; `None` accepts unsigned
        calls (anyone who reaches the executor can run its handlers: a trusted network only).
        `log_bound`: bytes of log messages each execution keeps and ships (0: none)."""
        self.secret = secret.encode() if isinstance(secret, str) else secret
        self.path_prefix = path_prefix.rstrip("/")
        self.started_at = utc_now()
        self.ledger = Ledger(self.started_at, keep_at_least, keep_for, keep_at_most)
        self.stop_wait = stop_wait
        self.report_attempts = report_attempts
        self._handlers: Dict[str, _Registered] = {}
        self._threads = ThreadPoolExecutor(max_workers=max_threads,
                                           thread_name_prefix="jobflow-handler")
        self._tasks: set = set()
        self.log_bound = log_bound
        self._carried = logs.CarriedMemory()
        if log_bound > 0:
            _capture_logging()

    # --- registration -------------------------------------------------------------------

    def handler(self, name: str, *, background: bool = False):
        """Registers the decorated function as the handler `name`. The call waits for its
        result (up to the job's timeout) unless `background`, which answers 202 at once and
        reports the result when the handler returns."""

        def register(fn: Handler) -> Handler:
            self._handlers[name] = _Registered(fn, background, inspect.iscoroutinefunction(fn))
            return fn

        return register

    def background_handler(self, name: str):
        return self.handler(name, background=True)

    # --- requests -----------------------------------------------------------------------

    async def handle(self, method: str, path: str, headers: Mapping[str, str], body: bytes,
                     caller_gone: Optional[Callable[[], Awaitable[None]]] = None
                     ) -> Optional[Answer]:
        """Answers one request under the path prefix, or None for a path it does not serve.
        `headers` by lower-case name; `caller_gone` returns when the caller hangs up."""
        prefix = self.path_prefix + "/"
        if not path.startswith(prefix):
            return None
        rest = urllib.parse.unquote(path[len(prefix):])
        if method == "GET" and rest.startswith("status/"):
            trace_id = rest[len("status/"):]
            if not self._signed(method, path, headers, trace_id, b""):
                return 401, {"message": "missing or wrong signature"}
            return self._status(trace_id)
        if method == "POST" and rest.startswith("cancel/"):
            trace_id = rest[len("cancel/"):]
            if not self._signed(method, path, headers, trace_id, b""):
                return 401, {"message": "missing or wrong signature"}
            return await self._cancel(trace_id)
        if method == "POST" and "/" not in rest:
            return await self._call(rest, path, headers, body, caller_gone)
        return 404, {"success": False, "message": f"no route {method} {path}"}

    def _signed(self, method, path, headers, trace_id, body) -> bool:
        if self.secret is None:
            return True
        return verify(self.secret, method, path, headers, trace_id, body)

    def _status_json(self, trace_id: str, status: str, message: Optional[str] = None):
        out = {"traceId": trace_id, "status": status, "startedAt": rfc3339(self.started_at),
               "rememberedSince": rfc3339(self.ledger.remembered_since)}
        if message is not None:
            out["message"] = message
        return out

    def _status(self, trace_id: str) -> Answer:
        entry = self.ledger.get(trace_id)
        if entry is None:
            return 404, self._status_json(trace_id, "UNKNOWN")
        if entry.running:
            return 200, self._status_json(trace_id, "RUNNING")
        return 200, self._status_json(trace_id, entry.result.final_status, entry.result.message)

    async def _cancel(self, trace_id: str) -> Answer:
        entry = self.ledger.get(trace_id)
        if entry is None:
            # The cancel overtook its call: remembered, and the call never runs.
            self.ledger.enter(trace_id, Entry(report_url="", started=utc_now()))
            self.ledger.finish(trace_id, JobResult.cancelled(), utc_now())
            return 200, self._status_json(trace_id, "CANCELLED")
        if entry.running:
            self._ask_stop(entry, JobResult.cancelled())
            try:
                await asyncio.wait_for(entry.finished.wait(), self.stop_wait + 1)
            except asyncio.TimeoutError:
                return 200, self._status_json(trace_id, "RUNNING")
        return self._status(trace_id)

    async def _call(self, name, path, headers, body, caller_gone) -> Answer:
        trace_id = headers.get("x-trace-id", "")
        if not self._signed("POST", path, headers, trace_id, body):
            return 401, {"success": False, "message": "missing or wrong signature"}
        try:
            call = JobContext.from_call(json.loads(body))
        except (ValueError, KeyError, TypeError) as e:
            return 400, {"success": False, "message": f"not a JobFlow call: {e}"}
        registered = self._handlers.get(name)
        if registered is None:
            return 404, {"success": False, "message": f"no handler {name}"}
        known = self.ledger.get(call.trace_id)
        if known is not None:
            if not known.running:
                return 200, self._with_log(call.trace_id, known.result)
            # Repeated while the first run goes on: its result goes to the latest caller.
            known.report_url = call.report_url
            known.report_when_done = True
            return 202, {"success": True, "message": "running"}
        entry = Entry(report_url=call.report_url, started=utc_now(),
                      report_when_done=registered.background, stop=call.stop_event)
        self.ledger.enter(call.trace_id, entry)
        if self.log_bound > 0:
            call.log_capture = logs.Capture(self.log_bound)
            url = logs.log_url(call.report_url)
            if url:
                self._spawn(self._ship_log(url, call.trace_id, call.log_capture))
        self._spawn(self._supervise(call, registered, entry))
        if registered.background:
            return 202, {"success": True, "message": "accepted"}
        waits = [asyncio.ensure_future(entry.finished.wait()),
                 asyncio.ensure_future(entry.stuck.wait())]
        if caller_gone is not None:
            waits.append(asyncio.ensure_future(caller_gone()))
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if entry.result is not None:
            return 200, self._with_log(call.trace_id, entry.result)
        # Still running: too slow to stop (the scheduler waits for the report), or the caller
        # hung up (nobody reads the answer; the result is reported).
        entry.report_when_done = True
        return 202, {"success": True, "message": "running"}

    # --- running handlers ---------------------------------------------------------------

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _ask_stop(self, entry: Entry, reason: JobResult) -> None:
        if entry.stop_reason is None:
            entry.stop_reason = reason
        entry.stop.set()
        entry.stop_asked.set()

    async def _supervise(self, ctx: JobContext, registered: _Registered, entry: Entry) -> None:
        loop = asyncio.get_running_loop()
        # The handler's task (or thread) runs with its execution's log as the current one.
        token = logs.current.set(ctx.log_capture)
        try:
            if registered.is_async:
                run = asyncio.ensure_future(registered.fn(ctx))
            else:
                context = contextvars.copy_context()
                run = loop.run_in_executor(
                    self._threads, functools.partial(context.run, registered.fn, ctx))
        finally:
            logs.current.reset(token)
        asked = asyncio.ensure_future(entry.stop_asked.wait())
        timeout = ctx.timeout_seconds or None
        done, _ = await asyncio.wait({run, asked}, timeout=timeout,
                                     return_when=asyncio.FIRST_COMPLETED)
        asked.cancel()
        if run in done and entry.stop_reason is None:
            result = self._outcome(run)
        else:
            # Stopped (a result the handler returned once asked to stop is the stop's doing).
            self._ask_stop(entry, JobResult.timed_out(ctx.timeout_seconds))
            if registered.is_async:
                run.cancel()
            await asyncio.wait({run}, timeout=self.stop_wait)
            if not run.done():
                log.warning("handler %s did not stop within %ss; reported RUNNING until it returns",
                            ctx.handler, self.stop_wait, extra={"trace_id": ctx.trace_id})
                entry.stuck.set()
                await asyncio.wait({run})
            result = entry.stop_reason
        if ctx.log_capture is not None:
            ctx.log_capture.end()
            # The rest of the log goes with the result, and is remembered a while for a
            # repeated call (a scheduler that stopped before storing the answer calls again).
            if logs.log_url(entry.report_url):
                rest = ctx.log_capture.take_rest(logs.carry_room(len(result.encode())))
                if rest is not None:
                    self._carried.keep(ctx.trace_id, rest)
        self.ledger.finish(ctx.trace_id, result, utc_now())
        if entry.report_when_done:
            await self.report(entry.report_url, ctx.trace_id, result)

    @staticmethod
    def _outcome(run: "asyncio.Future") -> JobResult:
        if run.cancelled():
            return JobResult.failure("handler cancelled")
        error = run.exception()
        if error is None:
            return as_result(run.result())
        if isinstance(error, Stopped):
            return JobResult.failure("handler stopped")
        log.error("handler raised", exc_info=error)
        return JobResult.failure(f"handler raised {type(error).__name__}: {error}")

    async def report_missed(self, trace_id: str) -> bool:
        """Reports the remembered result of `trace_id` to its scheduler: for a server that
        could not deliver the answer of a synchronous call (its caller went away)."""
        entry = self.ledger.get(trace_id)
        if entry is None or entry.result is None:
            return False
        return await self.report(entry.report_url, trace_id, entry.result)

    # --- logs ---------------------------------------------------------------------------

    async def _ship_log(self, url: str, trace_id: str, capture: "logs.Capture") -> None:
        """Ships `capture` to `url` until its end has been taken (see `logs`)."""
        loop = asyncio.get_running_loop()
        failures = 0
        ended_at: Optional[float] = None
        spread = False
        # The first batch waits a period (or the end): a handler that ends within it sends its
        # whole log with its result.
        waited = 0.0
        while not capture.ended and waited < logs.SHIP_EVERY:
            await asyncio.sleep(0.05)
            waited += 0.05
        while True:
            if capture.carried:
                return
            if ended_at is None and capture.ended:
                ended_at = time.monotonic()
            lines, end = capture.next_batch()
            if end is not None and end["lines"] == 0:
                return  # nothing was logged: nothing is sent
            if end is not None and not spread:
                # Executions that end together would ship their last batches together, in
                # the scheduler's busiest moment: the last batch waits a share of a second.
                spread = True
                await asyncio.sleep(logs.spread_of(trace_id))
                continue
            if not lines and end is None:
                await asyncio.sleep(logs.SHIP_EVERY if not capture.ended else 0)
                continue
            if not capture.begin_send():
                return
            try:
                status = await loop.run_in_executor(
                    self._threads,
                    functools.partial(self._post_report, url, trace_id, logs.batch_body(lines, end)))
            finally:
                capture.end_send()
            if status == 200:
                failures = 0
                if lines:
                    capture.shipped(lines[-1]["seq"])
                if end is not None:
                    return
                if not capture.ended:
                    await asyncio.sleep(logs.SHIP_EVERY)
            elif status is not None and status < 500:
                log.warning("log of %s refused with %s; dropped", trace_id, status)
                return
            else:
                if ended_at is not None and time.monotonic() - ended_at > logs.GIVE_UP_AFTER:
                    log.warning("log of %s could not be shipped; dropped", trace_id)
                    return
                failures += 1
                await asyncio.sleep(min(0.25 * 2 ** min(failures, 10), logs.RETRY_AT_MOST))

    # --- reports ------------------------------------------------------------------------

    def _with_log(self, trace_id: str, result: JobResult) -> Dict[str, Any]:
        """`result` as sent, with the rest of its execution's log when it carries one."""
        out = result.to_json()
        rest = self._carried.get(trace_id)
        if rest is not None:
            out["logs"] = rest
        return out

    async def report(self, url: str, trace_id: str, result: JobResult) -> bool:
        """POSTs `result` (with the rest of its log) to `url`, signed; retried with backoff on
        no answer or a 5xx, stopped at any other answer. True when the scheduler took it (200)
        or had it settled (409)."""
        if not url:
            return False
        body = json.dumps(self._with_log(trace_id, result)).encode()
        loop = asyncio.get_running_loop()
        for attempt in range(self.report_attempts):
            status = await loop.run_in_executor(
                self._threads, functools.partial(self._post_report, url, trace_id, body))
            if status is not None and status < 500:
                if status not in (200, 409):
                    log.warning("report of %s refused with %s", trace_id, status)
                return status in (200, 409)
            await asyncio.sleep(min(2 ** attempt, 30))
        log.error("report of %s not delivered after %s attempts", trace_id, self.report_attempts)
        return False

    def _post_report(self, url: str, trace_id: str, body: bytes) -> Optional[int]:
        headers = {"Content-Type": "application/json", "X-Trace-Id": trace_id}
        if self.secret is not None:
            ts = str(int(time.time()))
            path = urllib.parse.urlsplit(url).path
            headers["X-JobFlow-Timestamp"] = ts
            headers["X-JobFlow-Signature"] = sign(self.secret, "POST", path, ts, trace_id, body)
        request = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None


_installed = False


def _capture_logging() -> None:
    """Puts one `logs.CaptureHandler` on the root logger (once per process)."""
    global _installed
    if not _installed:
        logging.getLogger().addHandler(logs.CaptureHandler())
        _installed = True
