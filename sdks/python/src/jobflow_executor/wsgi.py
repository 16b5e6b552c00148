"""Serving a `JobExecutor` over WSGI (gunicorn, uWSGI, mod_wsgi, wsgiref; Flask, Django).

    app = JobFlowWSGI(executor)              # the executor alone
    app = JobFlowWSGI(executor, app=flask)   # in front of another WSGI app: paths outside the
                                             # executor's prefix go to it

WSGI is synchronous: the executor runs on its own event loop in a background thread, and
each request thread waits for its answer. Handlers are the same as under ASGI (`async def` on
that loop, plain functions in worker threads).

A caller that hung up is seen when its answer cannot be written: the body is handed to the
server as an iterable whose end the server reaches only after writing it; a server that gives
up first closes it early, and the result is then reported to the scheduler.
"""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.parse
from typing import Any, Callable, Dict, Iterable, Iterator, Optional

from .executor import JobExecutor

_STATUS = {200: "200 OK", 202: "202 Accepted", 400: "400 Bad Request", 401: "401 Unauthorized",
           404: "404 Not Found", 500: "500 Internal Server Error"}


class JobFlowWSGI:
    def __init__(self, executor: JobExecutor, app: Optional[Callable] = None):
        self.executor = executor
        self.app = app
        self._loop = asyncio.new_event_loop()
        thread = threading.Thread(target=self._loop.run_forever, name="jobflow-executor",
                                  daemon=True)
        thread.start()

    def __call__(self, environ: Dict[str, Any], start_response: Callable) -> Iterable[bytes]:
        path = _raw_path(environ)
        if not path.startswith(self.executor.path_prefix + "/"):
            if self.app is not None:
                return self.app(environ, start_response)
            return _respond(start_response, 404, {"message": "not found"})
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length > 0 else b""
        headers = {k[5:].replace("_", "-").lower(): v for k, v in environ.items()
                   if k.startswith("HTTP_")}
        answer = asyncio.run_coroutine_threadsafe(
            self.executor.handle(environ["REQUEST_METHOD"], path, headers, body),
            self._loop).result()
        if answer is None:
            return _respond(start_response, 404, {"message": "not found"})
        status, payload = answer
        trace_id = headers.get("x-trace-id") if status == 200 else None

        def missed() -> None:
            if trace_id:
                asyncio.run_coroutine_threadsafe(self.executor.report_missed(trace_id), self._loop)

        return _respond(start_response, status, payload, missed)


def _raw_path(environ: Dict[str, Any]) -> str:
    """The request path as sent (what is signed): REQUEST_URI/RAW_URI when the server gives
    it, else SCRIPT_NAME and PATH_INFO quoted again."""
    raw = environ.get("REQUEST_URI") or environ.get("RAW_URI")
    if raw:
        return urllib.parse.urlsplit(raw).path
    path = environ.get("SCRIPT_NAME", "") + environ.get("PATH_INFO", "")
    return urllib.parse.quote(path.encode("latin-1").decode("utf-8", "replace"), safe="/:@!$&'()*+,;=-._~")


def _respond(start_response: Callable, status: int, payload: Dict[str, Any],
             missed: Optional[Callable[[], None]] = None) -> Iterable[bytes]:
    data = json.dumps(payload).encode()
    start_response(_STATUS.get(status, f"{status} Status"),
                   [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return _Body(data, missed)


class _Body:
    """One chunk; `missed` runs when the server closes it before asking past that chunk (it
    could not write it)."""

    def __init__(self, data: bytes, missed: Optional[Callable[[], None]]):
        self.data = data
        self.missed = missed
        self.state = 0  # 0: not handed out, 1: handed out, 2: the server asked for more

    def __iter__(self) -> Iterator[bytes]:
        return self

    def __next__(self) -> bytes:
        if self.state == 0:
            self.state = 1
            return self.data
        self.state = 2
        raise StopIteration

    def close(self) -> None:
        if self.state != 2 and self.missed is not None:
            self.missed()
