"""Per-execution logs: what an async or a plain handler logs (through `logging` or
`ctx.log`) reaches the scheduler's log endpoint in order, signed, with the end; the bound
drops and says so; other code's records and a handler that logs nothing send nothing."""

import asyncio
import http.server
import json
import logging
import threading
import time

from jobflow_executor import JobContext, JobExecutor, sign
from jobflow_executor.logs import Capture

from test_executor import SECRET, call, request


class Scheduler:
    """The scheduler's side of log batches: every POST with its path, headers and body."""

    def __init__(self):
        self.batches = []
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.batches.append(
                    (self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def report_url(self, trace_id):
        port = self.server.server_address[1]
        return f"http://127.0.0.1:{port}/api/v1/jobs/executions/{trace_id}/result"

    def logs(self, trace_id):
        return [(json.loads(body), headers) for path, headers, body in self.batches
                if path.endswith(f"/{trace_id}/logs")]


async def run_and_wait_for_the_end(executor, scheduler, body):
    answer = await request(executor, body, path=f"/internal/job/{body['handler']}")
    deadline = time.monotonic() + 10
    while not any("end" in b for b, _ in scheduler.logs(body["traceId"])):
        assert time.monotonic() < deadline, scheduler.batches
        await asyncio.sleep(0.05)
    return answer


def lines_of(scheduler, trace_id):
    return [(line["seq"], line["level"], line["message"])
            for batch, _ in scheduler.logs(trace_id) for line in batch.get("lines", [])]


def test_what_handlers_log_goes_with_the_answer_in_order_with_the_end():
    logging.getLogger("orders").setLevel(logging.INFO)
    scheduler = Scheduler()
    executor = JobExecutor(SECRET)

    @executor.handler("async")
    async def in_a_task(ctx: JobContext):
        logging.getLogger("orders").info("loading %d orders", 300)
        await asyncio.sleep(0)
        ctx.log("order 17 skipped", "WARN")
        logging.getLogger("orders").debug("not let through by the logging configuration")
        return "done"

    @executor.handler("plain")
    def in_a_thread(ctx: JobContext):
        logging.getLogger("orders").error("order 42 failed")
        ctx.log("batch 1", "DEBUG")
        return "done"

    answers = {}

    async def go():
        logging.getLogger("orders").info("outside any handler")
        for trace, handler in (("a1", "async"), ("p1", "plain")):
            body = call(trace, handler, reportUrl=scheduler.report_url(trace))
            answers[trace] = await request(executor, body, path=f"/internal/job/{handler}")
        await asyncio.sleep(1.5)

    asyncio.run(go())

    def carried(trace):
        status, answer = answers[trace]
        assert status == 200 and answer["success"] is True, answer
        logs = answer["logs"]
        return [(line["seq"], line["level"], line["message"]) for line in logs["lines"]], \
            logs["end"]

    assert carried("a1") == ([(1, "INFO", "loading 300 orders"), (2, "WARN", "order 17 skipped")],
                             {"lines": 2, "droppedBytes": 0})
    assert carried("p1") == ([(1, "ERROR", "order 42 failed"), (2, "DEBUG", "batch 1")],
                             {"lines": 2, "droppedBytes": 0})
    assert scheduler.logs("a1") == [] and scheduler.logs("p1") == [], "no request of its own"


def test_a_background_handlers_log_goes_with_its_signed_report():
    scheduler = Scheduler()
    executor = JobExecutor(SECRET)

    @executor.background_handler("work")
    async def later(ctx: JobContext):
        ctx.log("indexed 1200 documents")
        return "done"

    async def go():
        answer = await request(executor, call("b1", reportUrl=scheduler.report_url("b1")))
        assert answer[0] == 202, answer
        deadline = time.monotonic() + 10
        while not any(path.endswith("/b1/result") for path, _, _ in scheduler.batches):
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)

    asyncio.run(go())
    path, headers, body = next(b for b in scheduler.batches if b[0].endswith("/b1/result"))
    report = json.loads(body)
    assert [line["message"] for line in report["logs"]["lines"]] == ["indexed 1200 documents"]
    assert report["logs"]["end"] == {"lines": 1, "droppedBytes": 0}
    assert headers["x-jobflow-signature"] == sign(
        SECRET.encode(), "POST", path, headers["x-jobflow-timestamp"], "b1", body)
    assert scheduler.logs("b1") == []


def test_a_rest_past_the_carry_bound_is_shipped_on_its_own_signed_with_the_end():
    scheduler = Scheduler()
    executor = JobExecutor(SECRET)

    @executor.handler("work")
    async def verbose(ctx: JobContext):
        for i in range(3):
            ctx.log(str(i) * 16384)
        return "done"

    async def go():
        body = call("v1", reportUrl=scheduler.report_url("v1"))
        answer = await run_and_wait_for_the_end(executor, scheduler, body)
        assert answer[0] == 200 and "logs" not in answer[1], answer[1].keys()

    asyncio.run(go())
    assert [seq for seq, _, _ in lines_of(scheduler, "v1")] == [1, 2, 3]
    last, headers = scheduler.logs("v1")[-1]
    assert last["end"] == {"lines": 3, "droppedBytes": 0}
    path = "/api/v1/jobs/executions/v1/logs"
    assert headers["x-jobflow-signature"] == sign(
        SECRET.encode(), "POST", path, headers["x-jobflow-timestamp"], "v1",
        json.dumps(last).encode())


def test_a_repeated_call_after_the_end_carries_the_log_again():
    scheduler = Scheduler()
    executor = JobExecutor(SECRET)

    @executor.handler("work")
    async def once(ctx: JobContext):
        ctx.log("ran once")
        return "done"

    async def go():
        body = call("r1", reportUrl=scheduler.report_url("r1"))
        first = await request(executor, body)
        again = await request(executor, body)
        return first, again

    first, again = asyncio.run(go())
    assert first == again and first[1]["logs"]["lines"][0]["message"] == "ran once"


def test_a_long_result_leaves_its_log_to_the_shipper():
    scheduler = Scheduler()
    executor = JobExecutor(SECRET)

    @executor.handler("work")
    async def wordy(ctx: JobContext):
        ctx.log("the summary follows")
        return "x" * (60 * 1024)

    async def go():
        body = call("w1", reportUrl=scheduler.report_url("w1"))
        return await run_and_wait_for_the_end(executor, scheduler, body)

    status, answer = asyncio.run(go())
    assert status == 200 and "logs" not in answer
    assert lines_of(scheduler, "w1") == [(1, "INFO", "the summary follows")]


def test_the_rest_stays_with_the_shipper_while_a_batch_is_on_its_way():
    capture = Capture()
    capture.push("INFO", "loading")
    assert capture.begin_send()
    capture.end()
    assert capture.take_rest() is None, "a batch is on its way"
    capture.end_send()
    assert [line["seq"] for line in capture.take_rest()["lines"]] == [1]
    assert not capture.begin_send(), "the shipper stops once the rest is taken"


def test_the_rest_is_taken_once_and_carried_memory_forgets_the_oldest():
    from jobflow_executor.logs import CarriedMemory
    capture = Capture()
    capture.push("INFO", "one")
    capture.shipped(1)
    capture.push("INFO", "two")
    assert capture.take_rest() is None, "not ended yet"
    capture.end()
    rest = capture.take_rest()
    assert [line["seq"] for line in rest["lines"]] == [2] and rest["end"]["lines"] == 2
    assert capture.take_rest() is None and capture.carried
    memory = CarriedMemory(budget=300)
    for trace in ("a", "b", "c"):
        memory.keep(trace, {"lines": [{"message": "x" * 100}]})
    assert memory.get("a") is None and memory.get("c") is not None


def test_a_handler_that_logs_nothing_sends_nothing():
    scheduler = Scheduler()
    executor = JobExecutor(SECRET)

    @executor.handler("work")
    async def quiet(ctx):
        return "done"

    async def go():
        await request(executor, call("q1", reportUrl=scheduler.report_url("q1")))
        await asyncio.sleep(1.5)

    asyncio.run(go())
    assert scheduler.logs("q1") == []


def test_past_its_bound_an_execution_counts_what_it_dropped_and_says_so_last():
    capture = Capture(bound=10)
    for message in ("12345", "123456", "12345"):
        capture.push("INFO", message)
    capture.end()
    capture.push("INFO", "after the end")
    lines, end = capture.next_batch()
    assert [line["message"] for line in lines] == [
        "12345", "12345", "6 bytes of log dropped: past this execution's bound of 10 bytes"]
    assert end == {"lines": 3, "droppedBytes": 6}


def test_a_batch_stays_under_the_schedulers_body_limit_whatever_its_lines():
    # The whole 1 MiB bound logged at once, in long lines that JSON escapes six-fold.
    capture = Capture()
    for _ in range(64):
        capture.push("INFO", "\x01" * 16384)
    capture.end()
    shipped = 0
    while shipped < 64:
        lines, end = capture.next_batch()
        body = json.dumps({"lines": lines, "end": end}).encode()
        assert len(body) < 1024 * 1024
        shipped += len(lines)
        capture.shipped(lines[-1]["seq"])
    assert shipped == 64


def test_the_last_batch_waits_a_share_of_a_second_set_by_the_trace_id():
    # The same vector in every SDK: the spread is the FNV-1a hash of the trace id.
    from jobflow_executor.logs import spread_of
    assert spread_of("4bf92f3577b34da6a3ce929d0e0e4736") == 0.618
    assert spread_of("a") == 0.996
