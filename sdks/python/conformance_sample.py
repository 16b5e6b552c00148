"""The Python SDK's sample for the conformance suite (conformance/README.md): the handlers every
SDK's sample serves, on 127.0.0.1:$JOBFLOW_CONFORMANCE_PORT, accepting only calls signed with
$JOBFLOW_SIGNING_SECRET. Served over ASGI (uvicorn), or over WSGI (the standard library's
wsgiref, one thread per request) with the argument `wsgi`. `sleep` is a plain function (stopped through its context) and
`background` a coroutine, so both ways of stopping a handler are exercised."""

import asyncio
import json
import os
import sys
import urllib.request
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server
from collections import Counter

import uvicorn

from jobflow_executor import (JobContext, JobExecutor, JobFlowASGI, JobFlowWSGI, JobResult,
                              NacosRegistration)

executor = JobExecutor(os.environ["JOBFLOW_SIGNING_SECRET"])
runs = Counter()


def witness(ctx: JobContext) -> None:
    url = (ctx.job_params or {}).get("witness")
    if url:
        request = urllib.request.Request(url, data=json.dumps({"traceId": ctx.trace_id}).encode(),
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=5).close()


@executor.handler("echo")
async def echo(ctx: JobContext):
    runs[ctx.trace_id] += 1
    return json.dumps({
        "traceId": ctx.trace_id, "executionId": ctx.execution_id, "jobName": ctx.job_name,
        "handler": ctx.handler, "triggerType": ctx.trigger_type,
        "fireTime": ctx.fire_time.isoformat().replace("+00:00", "Z"),
        "shardStart": ctx.shard_start, "shardEnd": ctx.shard_end,
        "shardCount": ctx.shard_count, "shardStrategy": ctx.shard_strategy,
        "retryCount": ctx.retry_count, "timeoutSeconds": ctx.timeout_seconds,
        "jobParams": ctx.job_params,
        "dataRange": {"start": ctx.data_range.start, "end": ctx.data_range.end}
        if ctx.data_range else None,
        "shardItems": ctx.shard_items, "runs": runs[ctx.trace_id],
    })


@executor.handler("sleep")
def sleep(ctx: JobContext):
    if ctx.wait_stop((ctx.job_params or {}).get("millis", 0) / 1000):
        return JobResult.failure("stopped")
    witness(ctx)
    return "slept"


@executor.handler("log")
def log_three(ctx: JobContext):
    ctx.log("one")
    ctx.log("two", "WARN")
    ctx.log("three", "ERROR")
    return "logged"


@executor.handler("fail")
def fail(ctx: JobContext):
    return JobResult.failure("failed on purpose")


@executor.handler("throw")
def throw(ctx: JobContext):
    raise RuntimeError("thrown on purpose")


@executor.background_handler("background")
async def background(ctx: JobContext):
    await asyncio.sleep((ctx.job_params or {}).get("millis", 0) / 1000)
    await asyncio.get_running_loop().run_in_executor(None, witness, ctx)
    return "done in background"


class ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def register(port: int):
    """With $JOBFLOW_NACOS_ADDR set, registers as $JOBFLOW_NACOS_SERVICE (credentials from
    $JOBFLOW_NACOS_USERNAME and _PASSWORD) for as long as the sample serves."""
    if "JOBFLOW_NACOS_ADDR" not in os.environ:
        return None
    return NacosRegistration(os.environ["JOBFLOW_NACOS_ADDR"], os.environ["JOBFLOW_NACOS_SERVICE"],
                             ip="127.0.0.1", port=port,
                             username=os.environ.get("JOBFLOW_NACOS_USERNAME"),
                             password=os.environ.get("JOBFLOW_NACOS_PASSWORD")).start()


if __name__ == "__main__":
    port = int(os.environ["JOBFLOW_CONFORMANCE_PORT"])
    registration = register(port)
    if sys.argv[1:] == ["wsgi"]:
        make_server("127.0.0.1", port, JobFlowWSGI(executor), server_class=ThreadingWSGIServer,
                    handler_class=QuietHandler).serve_forever()
    else:
        uvicorn.run(JobFlowASGI(executor), host="127.0.0.1", port=port, log_level="warning")
