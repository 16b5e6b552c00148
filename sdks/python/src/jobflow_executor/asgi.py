"""Serving a `JobExecutor` over ASGI (uvicorn, hypercorn; mounted in FastAPI or Starlette).

    app = JobFlowASGI(executor)              # the executor alone
    app = JobFlowASGI(executor, app=other)   # in front of another ASGI app: paths outside the
                                             # executor's prefix go to it

A call's caller hanging up is seen through ASGI's `http.disconnect`: the execution goes on and
its result is reported to the scheduler.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Callable, Dict, Optional

from .executor import JobExecutor

Scope = Dict[str, Any]
Receive = Callable[[], Awaitable[Dict[str, Any]]]
Send = Callable[[Dict[str, Any]], Awaitable[None]]


class JobFlowASGI:
    def __init__(self, executor: JobExecutor, app: Optional[Callable] = None):
        self.executor = executor
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith(self.executor.path_prefix + "/"):
            await self._serve(scope, receive, send)
        elif self.app is not None:
            await self.app(scope, receive, send)
        elif scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        else:
            await _answer(send, 404, {"message": "not found"})

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        chunks = []
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunks.append(message.get("body", b""))
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}

        async def caller_gone() -> None:
            while (await receive())["type"] != "http.disconnect":
                pass

        answer = await self.executor.handle(scope["method"], scope.get("raw_path", b"").decode(
            "latin-1").split("?")[0] or scope["path"], headers, b"".join(chunks), caller_gone)
        if answer is None:
            answer = (404, {"message": "not found"})
        await _answer(send, *answer)


async def _answer(send: Send, status: int, body: Dict[str, Any]) -> None:
    data = json.dumps(body).encode()
    try:
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})
    except (OSError, asyncio.CancelledError):
        # The caller went away; a result it missed is reported (JobExecutor._call).
        pass
