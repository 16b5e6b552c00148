"""The Python SDK without a server: signatures against the protocol's test vector, the call
parsed, the memory of executions, and handlers that stop or do not."""

import asyncio
import json
import threading
import time
from datetime import datetime, timedelta, timezone

from jobflow_executor import JobContext, JobExecutor, JobResult, sign, verify
from jobflow_executor.ledger import Entry, Ledger

SECRET = "s3cret"


def test_the_signature_of_the_protocol_example():
    body = b'{"traceId":"4bf92f3577b34da6a3ce929d0e0e4736","jobName":"order-sync"}'
    expected = "v1=a2d5a056476b16333e35d275ad4d8d0d8476492edb2e89cebf24a7ba34ca13f2"
    assert sign(SECRET.encode(), "POST", "/internal/job/syncOrders", "1700000000",
                "4bf92f3577b34da6a3ce929d0e0e4736", body) == expected
    headers = {"x-jobflow-timestamp": "1700000000", "x-jobflow-signature": expected}
    args = (SECRET.encode(), "POST", "/internal/job/syncOrders", headers,
            "4bf92f3577b34da6a3ce929d0e0e4736", body)
    assert verify(*args, now=1700000000 + 300)
    assert not verify(*args, now=1700000000 + 301), "stale by more than 300 s"
    assert not verify(SECRET.encode(), "POST", "/internal/job/other", headers,
                      "4bf92f3577b34da6a3ce929d0e0e4736", body, now=1700000000)
    assert not verify(b"other", *args[1:], now=1700000000)
    assert not verify(SECRET.encode(), "POST", "/internal/job/syncOrders", {},
                      "4bf92f3577b34da6a3ce929d0e0e4736", body, now=1700000000)


def call(trace_id="t1", handler="work", **extra):
    body = {"traceId": trace_id, "executionId": f"job:20260101020000:2-3", "jobName": "job",
            "handler": handler, "triggerType": "CRON", "fireTime": "2026-01-01T02:00:00Z",
            "shardStart": 2, "shardEnd": 3, "shardCount": 4, "shardStrategy": "RANGE",
            "retryCount": 1, "timeoutSeconds": 30, "jobParams": {"batch": 5},
            "dataRange": {"start": 51, "end": 100}, "reportUrl": ""}
    body.update(extra)
    return body


def test_the_call_parsed_into_the_context():
    ctx = JobContext.from_call(call(shardItems={"2": "Shanghai", "3": "Guangzhou"}))
    assert (ctx.shard_start, ctx.shard_end, ctx.shard_count) == (2, 3, 4)
    assert list(ctx.shards) == [2, 3]
    assert [i for i in range(8) if ctx.owns_id(i)] == [2, 3, 6, 7]
    assert ctx.fire_time == datetime(2026, 1, 1, 2, tzinfo=timezone.utc)
    assert (ctx.data_range.start, ctx.data_range.end) == (51, 100)
    assert ctx.shard_items == {2: "Shanghai", 3: "Guangzhou"}
    assert ctx.job_params == {"batch": 5} and ctx.retry_count == 1


def test_finished_executions_are_forgotten_by_age_and_count_never_running_ones():
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ledger = Ledger(t0, keep_at_least=2, keep_for=60, keep_at_most=4)

    async def fill():
        ledger.enter("running", Entry(report_url="", started=t0))
        for i in range(3):
            ledger.enter(f"f{i}", Entry(report_url="", started=t0))
            ledger.finish(f"f{i}", JobResult.ok(), t0 + timedelta(seconds=i))
        # Three finished, all young: kept although more than keep_at_least.
        assert set(ledger.entries) == {"running", "f0", "f1", "f2"}
        # Old enough and over the count: the oldest-finished go, down to keep_at_least.
        ledger.forget_old(t0 + timedelta(seconds=120))
        assert set(ledger.entries) == {"running", "f1", "f2"}
        assert ledger.remembered_since == t0
        for i in range(3, 7):
            ledger.enter(f"f{i}", Entry(report_url="", started=t0))
            ledger.finish(f"f{i}", JobResult.ok(), t0 + timedelta(seconds=200 + i))
        # keep_at_most bounds the finished ones whatever their age; running ones stay.
        assert len(ledger.finished) == 4 and "running" in ledger.entries
        assert ledger.remembered_since == t0 + timedelta(seconds=2)

    asyncio.run(fill())


def request(executor, body, path="/internal/job/work"):
    raw = json.dumps(body).encode()
    ts = str(int(time.time()))
    headers = {"x-trace-id": body["traceId"], "x-jobflow-timestamp": ts,
               "x-jobflow-signature": sign(SECRET.encode(), "POST", path, ts, body["traceId"],
                                           raw)}
    return executor.handle("POST", path, headers, raw)


def signed(executor, method, path, trace_id):
    ts = str(int(time.time()))
    headers = {"x-trace-id": trace_id, "x-jobflow-timestamp": ts,
               "x-jobflow-signature": sign(SECRET.encode(), method, path, ts, trace_id, b"")}
    return executor.handle(method, path, headers, b"")


def test_a_repeated_call_runs_the_handler_once():
    executor = JobExecutor(SECRET)
    runs = []

    @executor.handler("work")
    def work(ctx):
        runs.append(ctx.trace_id)
        return f"run {len(runs)}"

    async def go():
        first = await request(executor, call())
        second = await request(executor, call())
        return first, second

    first, second = asyncio.run(go())
    assert first == second == (200, {"success": True, "message": "run 1"})
    assert runs == ["t1"]


def test_a_plain_function_that_ignores_its_stop_is_reported_running_until_it_returns():
    executor = JobExecutor(SECRET, stop_wait=0.3)
    release = threading.Event()

    @executor.handler("work")
    def stubborn(ctx):
        release.wait(10)
        return "finished anyway"

    async def go():
        answer = await request(executor, call(timeoutSeconds=1))
        status = await signed(executor, "GET", "/internal/job/status/t1", "t1")
        cancel = await signed(executor, "POST", "/internal/job/cancel/t1", "t1")
        release.set()
        for _ in range(100):
            if not executor.ledger.get("t1").running:
                break
            await asyncio.sleep(0.05)
        after = await signed(executor, "GET", "/internal/job/status/t1", "t1")
        return answer, status, cancel, after

    executor.stop_wait = 0.3
    answer, status, cancel, after = asyncio.run(go())
    # Past its timeout and not stopped: the call gets 202 (the result will be reported),
    # status and cancel say RUNNING, never TIMEOUT while it runs.
    assert answer[0] == 202
    assert status[1]["status"] == "RUNNING"
    assert cancel[1]["status"] == "RUNNING"
    assert after[1]["status"] == "TIMEOUT"


def test_an_async_handler_is_cancelled_at_its_timeout():
    executor = JobExecutor(SECRET)
    finished = []

    @executor.handler("work")
    async def slow(ctx):
        await asyncio.sleep(5)
        finished.append(ctx.trace_id)

    began = time.monotonic()
    answer = asyncio.run(request(executor, call(timeoutSeconds=1)))
    assert answer == (200, JobResult.timed_out(1).to_json())
    assert time.monotonic() - began < 3
    assert finished == []


def test_unsigned_and_unknown_requests_are_refused():
    executor = JobExecutor(SECRET)

    @executor.handler("work")
    def work(ctx):
        return None

    raw = json.dumps(call()).encode()
    assert asyncio.run(executor.handle("POST", "/internal/job/work", {"x-trace-id": "t1"},
                                       raw))[0] == 401
    assert asyncio.run(request(executor, call(), path="/internal/job/none"))[0] == 404
    assert asyncio.run(executor.handle("GET", "/elsewhere", {}, b"")) is None
