"""The console in a real browser: one `jobflow` binary on a free port with a temporary SQLite
database and three tokens (admin, operator, viewer), the demo executor as the executor service
`demo`, and Debian's chromium driven headless by Playwright.

Run by scripts/console-test.sh, which builds the binaries and sets JOBFLOW_BIN_DIR.
"""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import sync_playwright

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN_DIR = pathlib.Path(os.environ.get("JOBFLOW_BIN_DIR", ROOT / "target" / "debug"))
CHROMIUM = os.environ.get("JOBFLOW_CHROMIUM", "/usr/bin/chromium")
FAILURE_DIR = ROOT / "target" / "console-test"
DOCS_SCREENSHOTS = os.environ.get("JOBFLOW_CONSOLE_DOCS") == "1"

ADMIN = "console-admin-" + os.urandom(8).hex()
OPERATOR = "console-operator-" + os.urandom(8).hex()
VIEWER = "console-viewer-" + os.urandom(8).hex()
SECRET = "console-signing-" + os.urandom(8).hex()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(what, check, timeout=20.0):
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class Server:
    """The running jobflow instance, and a small REST client to arrange data."""

    def __init__(self, base, executor):
        self.base = base
        self.executor = executor

    def call(self, method, path, body=None, token=ADMIN):
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                text = resp.read().decode()
                return resp.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as e:
            text = e.read().decode()
            return e.code, (json.loads(text) if text else None)

    def create_job(self, name, handler="succeed", namespace=None, **extra):
        body = {"name": name, "serviceName": "demo", "handler": handler, "cron": "0 0 3 * * ?"}
        body.update(extra)
        path = "/api/v1/jobs" + (f"?namespace={namespace}" if namespace else "")
        status, job = self.call("POST", path, body)
        assert status == 201, job
        return job

    def trigger(self, name):
        status, created = self.call("POST", f"/api/v1/jobs/{name}/trigger")
        assert status == 200, created
        return created

    def execution(self, trace_id):
        status, e = self.call("GET", f"/api/v1/jobs/executions/{trace_id}")
        assert status == 200, e
        return e


@pytest.fixture(scope="session")
def server():
    work = pathlib.Path(tempfile.mkdtemp(prefix="jobflow-console-"))
    executor_port = free_port()
    port = free_port()
    env = dict(os.environ)
    env.update({
        "DEMO_BIND": f"127.0.0.1:{executor_port}",
        "JOBFLOW_SIGNING_SECRET": SECRET,
        "RUST_LOG": "warn",
    })
    logs = []
    executor_log = open(work / "executor.log", "w")
    logs.append(executor_log)
    executor = subprocess.Popen([BIN_DIR / "jobflow-demo-executor"], env=env,
                                stdout=executor_log, stderr=subprocess.STDOUT)
    (work / "console.toml").write_text(f"""
[[auth.tokens]]
name = "ada"
role = "admin"
token_env = "CONSOLE_ADMIN_TOKEN"
[[auth.tokens]]
name = "otto"
role = "operator"
token_env = "CONSOLE_OPERATOR_TOKEN"
[[auth.tokens]]
name = "vera"
role = "viewer"
token_env = "CONSOLE_VIEWER_TOKEN"
[log]
execution_link = "https://logs.example/explore?trace={{traceId}}"
[executors.static]
demo = ["127.0.0.1:{executor_port}"]
[[calendars]]
name = "cn-holidays"
timezone = "Asia/Shanghai"
exclude = ["2099-10-01/2099-10-07"]
""")
    env.update({
        "CONSOLE_ADMIN_TOKEN": ADMIN,
        "CONSOLE_OPERATOR_TOKEN": OPERATOR,
        "CONSOLE_VIEWER_TOKEN": VIEWER,
        "JOBFLOW__DATABASE__URL": f"sqlite://{work}/jobflow.db",
        "JOBFLOW__SERVER__HOST": "127.0.0.1",
        "JOBFLOW__SERVER__PORT": str(port),
        "JOBFLOW__EXECUTOR__SIGNING_SECRET": SECRET,
        "JOBFLOW__LOG__LEVEL": "warn",
    })
    jobflow_log = open(work / "jobflow.log", "w")
    logs.append(jobflow_log)
    jobflow = subprocess.Popen([BIN_DIR / "jobflow", "--config", work / "console.toml"], env=env,
                               cwd=work, stdout=jobflow_log, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        def ready():
            assert jobflow.poll() is None, (work / "jobflow.log").read_text()
            with urllib.request.urlopen(base + "/health/ready", timeout=2) as r:
                return r.status == 200
        wait_until("jobflow to be ready", ready)
        wait_until("the demo executor to listen",
                   lambda: socket.create_connection(("127.0.0.1", executor_port), timeout=1).close() or True)
        yield Server(base, f"127.0.0.1:{executor_port}")
    finally:
        for proc in (jobflow, executor):
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
        for f in logs:
            f.close()
        FAILURE_DIR.mkdir(parents=True, exist_ok=True)
        for name in ("jobflow.log", "executor.log"):
            shutil.copy(work / name, FAILURE_DIR / name)
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as p:
        b = p.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=["--no-sandbox", "--headless", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
        )
        yield b
        b.close()


@pytest.fixture
def page(browser, request):
    context = browser.new_context(locale="en-US", viewport={"width": 1280, "height": 860})
    context.set_default_timeout(10_000)
    pg = context.new_page()
    errors = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    yield pg
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        FAILURE_DIR.mkdir(parents=True, exist_ok=True)
        pg.screenshot(path=str(FAILURE_DIR / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert not errors, f"uncaught errors in the page: {errors}"


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


def screenshot(pg, name):
    """Screenshots of the main pages: into docs/ when refreshing the README's pictures."""
    if DOCS_SCREENSHOTS:
        pg.screenshot(path=str(ROOT / "docs" / f"console-{name}.png"))
