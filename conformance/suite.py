"""The executor conformance suite (conformance/README.md): one set of cases, driven over HTTP,
for the sample executor of every SDK.

    python3 conformance/suite.py NAME [NAME ...]     names from conformance/executors.json

Each case starts from the sample as it runs (restarting it where the case needs), sends what a
scheduler would send, signed like docs/executor-protocol.md §5 says, and checks the answers,
the status and cancel endpoints, the signed reports that reach a local receiver, and, through
the `witness` URL the sleeping handlers call when they were not stopped, whether a handler
really stopped. Then the real scheduler (this repository's `jobflow`, standalone on
SQLite) calls the sample: a sharded job fired, a timeout, a cancel. Python's standard library
only.
"""

import hashlib
import hmac
import http.client
import http.server
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.parse
import urllib.request
import uuid
from datetime import datetime, timezone

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SECRET = "conformance-secret"
PREFIX = "/internal/job"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def sign(method, path, timestamp, trace_id, body, secret=SECRET):
    canonical = f"{method}\n{path}\n{timestamp}\n{trace_id}\n".encode() + body
    return "v1=" + hmac.new(secret.encode(), canonical, hashlib.sha256).hexdigest()


def parse_instant(text):
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Receiver:
    """The scheduler's side of reports, and the witness the sleeping handlers call."""

    def __init__(self):
        self.reports = []
        self.witnessed = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                with receiver.lock:
                    if path.startswith("/witness"):
                        receiver.witnessed.append(json.loads(body or b"{}").get("traceId"))
                    else:
                        receiver.reports.append(
                            {"path": path, "body": body,
                             "headers": {k.lower(): v for k, v in self.headers.items()},
                             "at": time.time()})
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def reports_for(self, trace_id):
        with self.lock:
            return [r for r in self.reports if r["path"].endswith(f"/{trace_id}/result")]

    def logs_for(self, trace_id):
        with self.lock:
            return [r for r in self.reports if r["path"].endswith(f"/{trace_id}/logs")]

    def witnessed_for(self, trace_id):
        with self.lock:
            return self.witnessed.count(trace_id)


class Sample:
    """One SDK's sample executor, as conformance/executors.json says to build and run it."""

    def __init__(self, name, spec):
        self.name = name
        self.spec = spec
        self.port = free_port()
        self.process = None
        self.log = open(os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                     f"jobflow-conformance-{name}.log"), "ab")

    @staticmethod
    def expand(text):
        places = {
            "{target}": os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
            "{root}": ROOT,
            "{venv}": os.environ.get("JOBFLOW_SDK_VENV",
                                     os.path.expanduser("~/.cache/jobflow-py-venv")),
        }
        for key, value in places.items():
            text = text.replace(key, value)
        if "{java_classpath}" in text:
            classpath = subprocess.run([os.path.join(ROOT, "scripts/sdk-java.sh"), "classpath"],
                                       check=True, capture_output=True, text=True).stdout.strip()
            text = text.replace("{java_classpath}", classpath)
        return text

    def command(self, key):
        return [self.expand(part) for part in self.spec[key]]

    def build(self):
        if "build" in self.spec:
            subprocess.run(self.command("build"), check=True,
                           cwd=self.expand(self.spec.get("cwd", "{root}")))

    def start(self, extra_env=None):
        env = dict(os.environ, JOBFLOW_CONFORMANCE_PORT=str(self.port),
                   JOBFLOW_SIGNING_SECRET=SECRET)
        env.update({k: self.expand(v) for k, v in self.spec.get("env", {}).items()})
        env.update(extra_env or {})
        self.process = subprocess.Popen(self.command("run"), cwd=ROOT, env=env,
                                        stdout=self.log, stderr=self.log)
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name}: the sample exited with {self.process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name}: the sample did not listen on {self.port}")

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


class Executor:
    """A scheduler's requests to one sample."""

    def __init__(self, sample, receiver):
        self.sample = sample
        self.receiver = receiver

    def request(self, method, path, trace_id, body=b"", headers=None, signed=True,
                timestamp=None, secret=SECRET, timeout=30):
        ts = str(int(time.time()) if timestamp is None else timestamp)
        all_headers = {"X-Trace-Id": trace_id, "Content-Type": "application/json"}
        if signed:
            all_headers["X-JobFlow-Timestamp"] = ts
            all_headers["X-JobFlow-Signature"] = sign(method, path, ts, trace_id, body, secret)
        all_headers.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.sample.port, timeout=timeout)
        try:
            conn.request(method, path, body=body if method == "POST" else None,
                         headers=all_headers)
            resp = conn.getresponse()
            data = resp.read()
            try:
                parsed = json.loads(data) if data else None
            except ValueError:
                parsed = data.decode(errors="replace")
            return resp.status, parsed
        finally:
            conn.close()

    def call_body(self, handler, trace_id=None, job_name="conformance-job", params=None,
                  timeout_seconds=30, shard=(0, 0, 1), strategy="MOD_HASH", retry=0,
                  extra=None):
        trace_id = trace_id or uuid.uuid4().hex
        fire = "2026-01-01T02:00:00Z"
        start, end, count = shard
        body = {
            "traceId": trace_id,
            "executionId": f"{job_name}:20260101020000:{start}-{end}",
            "jobName": job_name,
            "handler": handler,
            "triggerType": "CRON",
            "fireTime": fire,
            "shardStart": start,
            "shardEnd": end,
            "shardCount": count,
            "shardStrategy": strategy,
            "retryCount": retry,
            "timeoutSeconds": timeout_seconds,
            "jobParams": params,
            "reportUrl": self.receiver.url(f"/api/v1/jobs/executions/{trace_id}/result"),
        }
        body.update(extra or {})
        return body

    def call(self, body, **kw):
        raw = json.dumps(body).encode()
        start, end, count = body["shardStart"], body["shardEnd"], body["shardCount"]
        headers = {
            "X-Execution-Id": urllib.parse.quote(body["executionId"], safe=":-_.~"),
            "X-Job-Name": urllib.parse.quote(body["jobName"], safe="-_.~"),
            "X-Fire-Time": body["fireTime"],
            "X-Shard-Start": str(start),
            "X-Shard-End": str(end),
            "X-Shard-Count": str(count),
            "X-Shard-Strategy": body["shardStrategy"],
            "X-Retry-Count": str(body["retryCount"]),
            "traceparent": f"00-{body['traceId']}-00f067aa0ba902b7-01",
        }
        headers.update(kw.pop("headers", {}))
        return self.request("POST", f"{PREFIX}/{body['handler']}", body["traceId"], raw,
                            headers=headers, **kw)

    def status(self, trace_id, **kw):
        return self.request("GET", f"{PREFIX}/status/{trace_id}", trace_id, **kw)

    def cancel(self, trace_id, **kw):
        return self.request("POST", f"{PREFIX}/cancel/{trace_id}", trace_id, **kw)


def eventually(what, check, seconds=10):
    deadline = time.time() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.time() > deadline:
            raise AssertionError(f"not within {seconds} s: {what}")
        time.sleep(0.05)


class Conformance(unittest.TestCase):
    """The cases; `sample` and `receiver` are set per SDK by `run`."""

    sample = None
    receiver = None

    def setUp(self):
        if self.sample.process is None or self.sample.process.poll() is not None:
            self.sample.start()
        self.x = Executor(self.sample, self.receiver)

    def in_background(self, fn):
        result = {}

        def run():
            try:
                result["value"] = fn()
            except Exception as e:  # the case reads it
                result["error"] = e

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread, result

    def assert_report_signed(self, report):
        ts = report["headers"].get("x-jobflow-timestamp")
        sig = report["headers"].get("x-jobflow-signature")
        trace_id = report["headers"].get("x-trace-id")
        self.assertIsNotNone(ts, "a report carries X-JobFlow-Timestamp")
        self.assertEqual(sig, sign("POST", report["path"], ts, trace_id, report["body"]),
                         "a report is signed over the path of reportUrl")
        self.assertLessEqual(abs(time.time() - int(ts)), 300)

    # --- signatures -------------------------------------------------------------------------

    def test_signature_refusal(self):
        body = self.x.call_body("echo")
        trace_id = body["traceId"]
        cases = {
            "unsigned": dict(signed=False),
            "wrong secret": dict(secret="not-the-secret"),
            # Ten seconds past the 300 s bound: the executor reads its clock a moment later,
            # maybe in the next second, which would bring +301 back to 300 (accepted).
            "stale timestamp": dict(timestamp=int(time.time()) - 310),
            "future timestamp": dict(timestamp=int(time.time()) + 310),
        }
        for what, kw in cases.items():
            status, _ = self.x.call(body, **kw)
            self.assertEqual(status, 401, f"a call with {what} is refused")
        raw = json.dumps(body).encode()
        ts = str(int(time.time()))
        status, _ = self.x.request(
            "POST", f"{PREFIX}/echo", trace_id, raw,
            headers={"X-JobFlow-Timestamp": ts,
                     "X-JobFlow-Signature": sign("POST", f"{PREFIX}/fail", ts, trace_id, raw)},
            signed=False)
        self.assertEqual(status, 401, "a signature for another path is refused")
        for what, fn in (("status", self.x.status), ("cancel", self.x.cancel)):
            self.assertEqual(fn(trace_id, signed=False)[0], 401, f"an unsigned {what} is refused")
            self.assertEqual(fn(trace_id, secret="nope")[0], 401, f"a wrong {what} is refused")
        # None of them ran the handler: the first signed call is its first run.
        status, result = self.x.call(body)
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(result["message"])["runs"], 1)

    # --- the call ---------------------------------------------------------------------------

    def test_shard_headers_and_parameters_reach_the_handler(self):
        cases = [
            dict(job_name="order-sync", shard=(0, 33, 100), strategy="MOD_HASH", retry=0,
                 params={"batch": 500, "tags": ["a", "b"]}),
            dict(job_name="订单对账", shard=(2, 3, 4), strategy="RANGE", retry=2, params=None,
                 extra={"dataRange": {"start": 51, "end": 100}, "triggerType": "RETRY"}),
            dict(job_name="by-city", shard=(1, 2, 3), strategy="CUSTOM", retry=0,
                 params="plain text",
                 extra={"shardItems": {"1": "Shanghai", "2": "Guangzhou"},
                        "triggerType": "MANUAL"}),
        ]
        for case in cases:
            body = self.x.call_body("echo", **case)
            status, result = self.x.call(body)
            self.assertEqual(status, 200, result)
            self.assertIs(result["success"], True, result)
            seen = json.loads(result["message"])
            for key in ("traceId", "executionId", "jobName", "handler", "triggerType",
                        "shardStart", "shardEnd", "shardCount", "shardStrategy", "retryCount",
                        "timeoutSeconds", "jobParams"):
                self.assertEqual(seen[key], body[key], f"{key} of {case}")
            self.assertEqual(parse_instant(seen["fireTime"]), parse_instant(body["fireTime"]))
            if "dataRange" in body:
                self.assertEqual(seen["dataRange"], body["dataRange"])
            if "shardItems" in body:
                self.assertEqual({str(k): v for k, v in seen["shardItems"].items()},
                                 body["shardItems"])
            self.assertEqual(seen["runs"], 1)

    def test_results_and_failures_map_to_job_results(self):
        status, result = self.x.call(self.x.call_body("fail"))
        self.assertEqual(status, 200)
        self.assertIs(result["success"], False)
        self.assertIn("failed on purpose", result["message"])
        status, result = self.x.call(self.x.call_body("throw"))
        self.assertEqual(status, 200, "a handler that throws is answered as a failure")
        self.assertIs(result["success"], False)
        self.assertIn("thrown on purpose", result["message"])
        status, result = self.x.call(self.x.call_body("no-such-handler"))
        self.assertEqual(status, 404)

    # --- timeouts and cancel ----------------------------------------------------------------

    def test_timeout_stops_the_handler(self):
        body = self.x.call_body("sleep", timeout_seconds=1,
                                params={"millis": 4000, "witness": self.receiver.url("/witness")})
        began = time.time()
        status, result = self.x.call(body)
        took = time.time() - began
        self.assertEqual(status, 200)
        self.assertEqual((result["success"], result.get("status")), (False, "TIMEOUT"), result)
        self.assertLess(took, 3.5, "answered at the timeout, not when the handler would end")
        self.assertEqual(self.x.status(body["traceId"])[1]["status"], "TIMEOUT")
        time.sleep(4.5 - (time.time() - began))
        self.assertEqual(self.receiver.witnessed_for(body["traceId"]), 0,
                         "the handler went on after its timeout")

    def test_cancel_stops_the_handler(self):
        body = self.x.call_body("sleep",
                                params={"millis": 5000, "witness": self.receiver.url("/witness")})
        thread, answer = self.in_background(lambda: self.x.call(body))
        eventually("the call running", lambda: (self.x.status(body["traceId"])[1] or {}).get(
            "status") == "RUNNING")
        status, result = self.x.cancel(body["traceId"])
        self.assertEqual((status, result["status"]), (200, "CANCELLED"), result)
        thread.join(10)
        self.assertEqual(answer.get("value", (None, {}))[0], 200, answer)
        self.assertEqual((answer["value"][1]["success"], answer["value"][1].get("status")),
                         (False, "CANCELLED"))
        self.assertEqual(self.x.status(body["traceId"])[1]["status"], "CANCELLED")
        time.sleep(5.5)
        self.assertEqual(self.receiver.witnessed_for(body["traceId"]), 0,
                         "the handler went on after its cancel")

    def test_a_cancel_that_overtakes_its_call(self):
        body = self.x.call_body("sleep",
                                params={"millis": 200, "witness": self.receiver.url("/witness")})
        status, result = self.x.cancel(body["traceId"])
        self.assertEqual((status, result["status"]), (200, "CANCELLED"), result)
        status, result = self.x.call(body)
        self.assertEqual(status, 200)
        self.assertEqual((result["success"], result.get("status")), (False, "CANCELLED"))
        time.sleep(0.6)
        self.assertEqual(self.receiver.witnessed_for(body["traceId"]), 0,
                         "the handler of a cancelled call ran")

    def test_cancel_of_a_finished_execution_answers_its_status(self):
        body = self.x.call_body("echo")
        self.assertEqual(self.x.call(body)[0], 200)
        status, result = self.x.cancel(body["traceId"])
        self.assertEqual((status, result["status"]), (200, "SUCCESS"))

    # --- status -----------------------------------------------------------------------------

    def test_status_is_truthful(self):
        unknown = uuid.uuid4().hex
        status, answer = self.x.status(unknown)
        self.assertEqual((status, answer["status"], answer["traceId"]), (404, "UNKNOWN", unknown))
        started = parse_instant(answer["startedAt"])
        self.assertLess(started, datetime.now(timezone.utc))
        if "rememberedSince" in answer:
            self.assertLessEqual(parse_instant(answer["rememberedSince"]),
                                 datetime.now(timezone.utc))
        body = self.x.call_body("sleep", params={"millis": 1500})
        thread, answer = self.in_background(lambda: self.x.call(body))
        running = eventually("RUNNING", lambda: (lambda a: a if a.get("status") == "RUNNING"
                                                 else None)(self.x.status(body["traceId"])[1] or {}))
        self.assertEqual(parse_instant(running["startedAt"]), started,
                         "startedAt is the process start, the same on every answer")
        thread.join(10)
        status, done = self.x.status(body["traceId"])
        self.assertEqual((status, done["status"], done.get("message")), (200, "SUCCESS", "slept"))
        status, failed = self.x.status(self.x.call_body("fail")["traceId"])
        self.assertEqual(status, 404, "an execution never called is unknown")

    # --- repeated calls ---------------------------------------------------------------------

    def test_a_repeated_call_is_answered_from_memory(self):
        body = self.x.call_body("echo", params={"n": 1})
        first = self.x.call(body)
        second = self.x.call(body)
        self.assertEqual(first, second)
        self.assertEqual(json.loads(second[1]["message"])["runs"], 1,
                         "the handler ran once for two calls")
        # Repeated while the first run goes on: 202, then the result reported to the
        # reportUrl of the latest call.
        body = self.x.call_body("sleep", params={"millis": 1500})
        thread, _ = self.in_background(lambda: self.x.call(body))
        eventually("RUNNING", lambda: (self.x.status(body["traceId"])[1] or {}).get(
            "status") == "RUNNING")
        again = dict(body, reportUrl=self.receiver.url(
            f"/failover/api/v1/jobs/executions/{body['traceId']}/result"))
        status, _ = self.x.call(again)
        self.assertEqual(status, 202)
        reports = eventually("the report of the repeated call",
                             lambda: [r for r in self.receiver.reports_for(body["traceId"])
                                      if r["path"].startswith("/failover/")])
        self.assertEqual(json.loads(reports[0]["body"])["success"], True)
        self.assert_report_signed(reports[0])
        thread.join(10)

    # --- background handlers and reports ----------------------------------------------------

    def test_a_background_report_is_signed(self):
        body = self.x.call_body("background", params={"millis": 300})
        began = time.time()
        status, _ = self.x.call(body)
        self.assertEqual(status, 202)
        self.assertLess(time.time() - began, 0.3 + 0.25, "answered before the handler ends")
        reports = eventually("the report", lambda: self.receiver.reports_for(body["traceId"]))
        self.assertEqual(len(reports), 1)
        result = json.loads(reports[0]["body"])
        self.assertEqual((result["success"], result.get("message")),
                         (True, "done in background"))
        self.assertEqual(reports[0]["headers"].get("x-trace-id"), body["traceId"])
        self.assert_report_signed(reports[0])
        time.sleep(0.5)
        self.assertEqual(len(self.receiver.reports_for(body["traceId"])), 1, "reported once")

    def test_a_handlers_log_goes_with_its_answer_in_order_with_its_end(self):
        body = self.x.call_body("log")
        status, answer = self.x.call(body)
        self.assertEqual((status, answer["message"]), (200, "logged"))
        logs = answer["logs"]
        lines = [(l["seq"], l["level"], l["message"]) for l in logs["lines"]]
        self.assertEqual(lines, [(1, "INFO", "one"), (2, "WARN", "two"), (3, "ERROR", "three")])
        self.assertEqual(logs["end"], {"lines": 3, "droppedBytes": 0})
        # A handler that logs nothing carries and ships nothing; the rest went with the
        # answer, so no batch goes on its own.
        quiet = self.x.call_body("echo")
        status, answer = self.x.call(quiet)
        self.assertEqual((status, "logs" in answer), (200, False))
        time.sleep(1.5)
        self.assertEqual(self.receiver.logs_for(body["traceId"]), [])
        self.assertEqual(self.receiver.logs_for(quiet["traceId"]), [])

    def test_a_call_whose_caller_went_away_is_reported(self):
        body = self.x.call_body("sleep", params={"millis": 1000})
        try:
            self.x.call(body, timeout=0.3)
        except (socket.timeout, TimeoutError):
            pass
        reports = eventually("the report", lambda: self.receiver.reports_for(body["traceId"]))
        self.assertEqual(json.loads(reports[0]["body"])["message"], "slept")
        self.assert_report_signed(reports[0])

    # --- restarts ---------------------------------------------------------------------------

    def test_a_restarted_executor_says_it_restarted(self):
        body = self.x.call_body("sleep", params={"millis": 10000})
        sent = datetime.now(timezone.utc)
        thread, _ = self.in_background(lambda: self.x.call(body))
        eventually("RUNNING", lambda: (self.x.status(body["traceId"])[1] or {}).get(
            "status") == "RUNNING")
        self.sample.kill()
        thread.join(10)
        self.sample.start()
        status, answer = self.x.status(body["traceId"])
        self.assertEqual((status, answer["status"]), (404, "UNKNOWN"))
        self.assertGreater(parse_instant(answer["startedAt"]), sent,
                           "startedAt after the call: the executor restarted since")


class Scheduler:
    """The real scheduler (the `jobflow` binary of this repository), standalone on SQLite, with
    the sample as the static executor of the service `conformance`."""

    def __init__(self, sample, work_dir, nacos=None):
        self.port = free_port()
        self.dir = work_dir
        config = os.path.join(work_dir, "jobflow.toml")
        if nacos is None:
            discovery = f"""[executors.static]
conformance = ["127.0.0.1:{sample.port}"]
"""
        else:
            discovery = f"""[discovery]
mode = "nacos"
advertise_ip = "127.0.0.1"
[nacos]
server_addr = "{nacos.addr}"
username = "{NACOS_USER}"
password = "{NACOS_PASSWORD}"
"""
        with open(config, "w") as f:
            f.write(f"""
[server]
host = "127.0.0.1"
port = {self.port}
[database]
url = "sqlite://{work_dir}/jobflow.db"
[auth]
enabled = false
[executor]
signing_secret = "{SECRET}"
{discovery}""")
        binary = Sample.expand("{target}/debug/jobflow")
        self.log = open(os.path.join(work_dir, "jobflow.log"), "ab")
        self.process = subprocess.Popen([binary, "--config", config], cwd=work_dir,
                                        stdout=self.log, stderr=self.log)
        eventually("the scheduler ready", lambda: self.get("/health/ready")[0] == 200, 60)

    def request(self, method, path, body=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            resp = conn.getresponse()
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
        except OSError:
            return 0, None
        finally:
            conn.close()

    def get(self, path):
        return self.request("GET", path)

    def create(self, name, handler, service="conformance", **fields):
        job = {"name": name, "serviceName": service, "handler": handler,
               "cron": "0 0 0 1 1 ? 2099", "maxRetry": 0, **fields}
        status, answer = self.request("POST", "/api/v1/jobs", job)
        assert status == 201, (status, answer)

    def executions(self, name):
        return self.get(f"/api/v1/jobs/{urllib.parse.quote(name)}/executions?size=50")[1][
            "content"]

    def settled(self, name, count):
        def final():
            rows = self.executions(name)
            done = [r for r in rows if r["status"] not in ("PENDING", "RUNNING")]
            return rows if len(rows) == count and len(done) == count else None
        return eventually(f"{count} final executions of {name}", final, 30)

    def stop(self):
        self.process.kill()
        self.process.wait()


class UnderTheScheduler(unittest.TestCase):
    """The sample called by the real scheduler: a sharded job fired, a timeout, a cancel."""

    sample = None
    receiver = None
    scheduler = None

    def setUp(self):
        if self.sample.process is None or self.sample.process.poll() is not None:
            self.sample.start()

    def test_a_sharded_job_fired(self):
        self.scheduler.create("sharded", "echo", shardCount=4, jobParams={"batch": 7})
        status, fired = self.scheduler.request("POST", "/api/v1/jobs/sharded/trigger")
        self.assertEqual(status, 200, fired)
        rows = self.scheduler.settled("sharded", len(fired))
        self.assertTrue(all(r["status"] == "SUCCESS" for r in rows), rows)
        seen = [json.loads(r["resultMessage"]) for r in rows]
        covered = sorted(i for s in seen for i in range(s["shardStart"], s["shardEnd"] + 1))
        self.assertEqual(covered, [0, 1, 2, 3], "the ranges cover every shard once")
        for s, r in zip(seen, rows):
            self.assertEqual((s["traceId"], s["shardCount"], s["jobParams"], s["runs"]),
                             (r["traceId"], 4, {"batch": 7}, 1))

    def test_a_timeout(self):
        self.scheduler.create("timeout", "sleep", timeoutSeconds=1, jobParams={
            "millis": 4000, "witness": self.receiver.url("/witness")})
        status, fired = self.scheduler.request("POST", "/api/v1/jobs/timeout/trigger")
        self.assertEqual(status, 200, fired)
        [row] = self.scheduler.settled("timeout", 1)
        self.assertEqual(row["status"], "TIMEOUT", row)
        time.sleep(4.5)
        self.assertEqual(self.receiver.witnessed_for(row["traceId"]), 0,
                         "the handler went on after its timeout")

    def test_a_cancel(self):
        self.scheduler.create("cancel", "sleep", timeoutSeconds=60, jobParams={
            "millis": 6000, "witness": self.receiver.url("/witness")})
        status, fired = self.scheduler.request("POST", "/api/v1/jobs/cancel/trigger")
        self.assertEqual(status, 200, fired)
        trace_id = fired[0]["traceId"]
        eventually("the execution running", lambda: self.scheduler.executions("cancel")[0][
            "status"] == "RUNNING", 20)
        status, answer = self.scheduler.request(
            "POST", f"/api/v1/jobs/executions/{trace_id}/cancel")
        self.assertEqual(status, 200, answer)
        [row] = self.scheduler.settled("cancel", 1)
        self.assertEqual(row["status"], "CANCELLED", row)
        time.sleep(6.5)
        self.assertEqual(self.receiver.witnessed_for(trace_id), 0,
                         "the handler went on after its cancel")


NACOS_USER, NACOS_PASSWORD = "jobflow", "conformance-pass"


class Rnacos:
    """A Nacos server (rnacos, from $RNACOS_BIN as the other suites find it), authentication
    on."""

    def __init__(self, work_dir):
        # rnacos 0.8 now and then panics in its Raft state machine as it starts (an actor
        # handles a request before its managers are set) and answers "Mailbox has closed"
        # ever after: such a start is thrown away and rnacos started afresh, up to 3 times.
        self.log = open(os.path.join(work_dir, "rnacos.log"), "ab")
        for attempt in range(1, 4):
            self.start(os.path.join(work_dir, f"nacos-{attempt}"))
            try:
                eventually("rnacos answering", lambda: self.try_hosts("nobody") is not None, 60)
                return
            except AssertionError:
                self.stop()
                if attempt == 3:
                    raise

    def start(self, data_dir):
        port = free_port()
        while port + 1000 > 65535:
            port = free_port()
        self.addr = f"127.0.0.1:{port}"
        env = dict(os.environ, RNACOS_HTTP_PORT=str(port), RNACOS_GRPC_PORT=str(port + 1000),
                   RNACOS_HTTP_CONSOLE_PORT=str(free_port()),
                   RNACOS_DATA_DIR=data_dir, RUST_LOG="warn",
                   RNACOS_ENABLE_OPEN_API_AUTH="true", RNACOS_INIT_ADMIN_USERNAME=NACOS_USER,
                   RNACOS_INIT_ADMIN_PASSWORD=NACOS_PASSWORD)
        self.process = subprocess.Popen([os.environ["RNACOS_BIN"]], cwd=os.path.dirname(data_dir),
                                        env=env, stdout=self.log, stderr=self.log)

    def try_hosts(self, service):
        try:
            login = urllib.request.urlopen(urllib.request.Request(
                f"http://{self.addr}/nacos/v1/auth/login", method="POST",
                data=urllib.parse.urlencode({"username": NACOS_USER,
                                             "password": NACOS_PASSWORD}).encode()), timeout=3)
            token = json.loads(login.read())["accessToken"]
            query = urllib.parse.urlencode({"serviceName": service, "accessToken": token})
            with urllib.request.urlopen(
                    f"http://{self.addr}/nacos/v1/ns/instance/list?{query}", timeout=3) as answer:
                return json.loads(answer.read())["hosts"]
        except (OSError, ValueError, KeyError):
            return None

    def stop(self):
        self.process.kill()
        self.process.wait()


class InNacos(unittest.TestCase):
    """The sample registered in Nacos through its SDK (authentication on), found there by a
    scheduler in Nacos mode and called."""

    sample = None
    nacos = None
    work = None

    def test_registered_in_nacos_and_called_through_it(self):
        service = f"conformance-{self.sample.name}"
        self.sample.kill()
        self.sample.start(extra_env={"JOBFLOW_NACOS_ADDR": self.nacos.addr,
                                     "JOBFLOW_NACOS_SERVICE": service,
                                     "JOBFLOW_NACOS_USERNAME": NACOS_USER,
                                     "JOBFLOW_NACOS_PASSWORD": NACOS_PASSWORD})
        hosts = eventually(f"{service} registered", lambda: self.nacos.try_hosts(service), 20)
        self.assertEqual([(h["ip"], h["port"], h["healthy"], h["ephemeral"]) for h in hosts],
                         [("127.0.0.1", self.sample.port, True, True)])
        scheduler = Scheduler(self.sample, self.work, nacos=self.nacos)
        try:
            scheduler.create("found-in-nacos", "echo", service=service, shardCount=2)
            def fired():
                status, answer = scheduler.request("POST", "/api/v1/jobs/found-in-nacos/trigger")
                return answer if status == 200 else None
            # The scheduler's subscription to the service may take a moment to fill.
            rows = eventually("a trigger the scheduler could place", fired, 30)
            settled = scheduler.settled("found-in-nacos", len(rows))
            self.assertEqual([(r["status"], r["executorInstance"]) for r in settled],
                             [("SUCCESS", f"127.0.0.1:{self.sample.port}")] * len(rows))
        finally:
            scheduler.stop()
            self.sample.kill()


def run(names):
    specs = json.load(open(os.path.join(HERE, "executors.json")))
    unknown = [n for n in names if n not in specs]
    if unknown:
        sys.exit(f"unknown executors {unknown}; known: {sorted(specs)}")
    if not os.environ.get("RNACOS_BIN"):
        sys.exit("RNACOS_BIN is not set: the registration case needs rnacos (scripts/lib.sh "
                 "ensure_rnacos finds or installs it)")
    receiver = Receiver()
    nacos_dir = tempfile.mkdtemp(prefix="conformance-nacos-")
    InNacos.nacos = Rnacos(nacos_dir)
    print("== building the scheduler", flush=True)
    subprocess.run(["cargo", "build", "--locked", "--quiet", "--bin", "jobflow"], cwd=ROOT,
                   check=True)
    failed = []
    for name in names or sorted(specs):
        sample = Sample(name, specs[name])
        print(f"== {name}: building the sample", flush=True)
        sample.build()
        Conformance.sample, Conformance.receiver = sample, receiver
        UnderTheScheduler.sample, UnderTheScheduler.receiver = sample, receiver
        InNacos.sample = sample
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(Conformance)
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(UnderTheScheduler))
        suite.addTests(unittest.defaultTestLoader.loadTestsFromTestCase(InNacos))
        print(f"== {name}: {suite.countTestCases()} cases", flush=True)
        scheduler = None
        with tempfile.TemporaryDirectory() as work:
            nacos_dir = os.path.join(work, "in-nacos")
            os.makedirs(nacos_dir)
            InNacos.work = nacos_dir
            try:
                sample.start()
                scheduler = UnderTheScheduler.scheduler = Scheduler(sample, work)
                outcome = unittest.TextTestRunner(verbosity=2, stream=sys.stdout).run(suite)
            finally:
                if scheduler is not None:
                    scheduler.stop()
                sample.kill()
        if not outcome.wasSuccessful():
            failed.append(name)
    InNacos.nacos.stop()
    if failed:
        sys.exit(f"conformance failed for: {', '.join(failed)}")


if __name__ == "__main__":
    run(sys.argv[1:])
