"""Registration in a real Nacos server (rnacos, found through $RNACOS_BIN as the other suites
find it): the instance appears with its metadata, stays healthy on its beats, comes back after
Nacos forgets it, and leaves on close; with authentication on, a wrong password is refused."""

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from jobflow_executor.nacos import NacosError, NacosRegistration


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Rnacos:
    """rnacos on fresh ports. rnacos 0.8.8 sometimes panics in its raft store on a first start:
    naming keeps working, but every login then answers "Mailbox has closed" (more often when a
    login comes before the store is wired up, so readiness is probed without one). A start that
    does not take its admin login is redone afresh, on new ports and a new data directory, as
    the other suites do."""

    def __init__(self, auth=None):
        binary = os.environ.get("RNACOS_BIN")
        if not binary:
            if os.environ.get("CI"):
                pytest.fail("RNACOS_BIN is not set (scripts/conformance.sh sets it)")
            pytest.skip("RNACOS_BIN is not set: the Nacos registration tests need rnacos")
        self.auth = auth
        for start in range(1, 4):
            self._launch(binary)
            last = self._ready()
            if last is None:
                return
            self.log.seek(0)
            log = self.log.read()[-2000:]
            self.stop()
            if start == 3:
                raise AssertionError(f"rnacos did not answer: {last}\n{log}")

    def _launch(self, binary):
        while True:
            self.port = free_port()
            if self.port + 1000 < 65536:
                break
        self.dir = tempfile.TemporaryDirectory()
        env = dict(os.environ, RNACOS_HTTP_PORT=str(self.port),
                   RNACOS_GRPC_PORT=str(self.port + 1000),
                   RNACOS_HTTP_CONSOLE_PORT=str(free_port()),
                   RNACOS_DATA_DIR=os.path.join(self.dir.name, "data"), RUST_LOG="warn")
        if self.auth:
            env.update(RNACOS_ENABLE_OPEN_API_AUTH="true",
                       RNACOS_INIT_ADMIN_USERNAME=self.auth[0],
                       RNACOS_INIT_ADMIN_PASSWORD=self.auth[1])
        self.log = open(os.path.join(self.dir.name, "rnacos.log"), "w+")
        self.process = subprocess.Popen([binary], env=env, cwd=self.dir.name,
                                        stdout=self.log, stderr=subprocess.STDOUT)

    def _ready(self):
        """None once rnacos answers without a login, then takes its admin login (20 s in
        all); else what it last said."""
        deadline = time.monotonic() + 20
        last = self._last_error(self._answers)
        while last is not None and time.monotonic() < deadline:
            time.sleep(0.1)
            last = self._last_error(self._answers)
        if last is not None or not self.auth:
            return last
        # The admin user is created through raft shortly after start.
        time.sleep(0.5)
        while True:
            last = self._last_error(lambda: self.hosts("nobody"))
            if last is None or "Mailbox" in last or time.monotonic() > deadline:
                return last
            time.sleep(0.1)

    @staticmethod
    def _last_error(probe):
        """None when `probe` succeeds, else what it failed with."""
        try:
            probe()
            return None
        except (OSError, ValueError, KeyError) as e:
            said = str(e)
            if isinstance(e, urllib.error.HTTPError):
                said += " " + e.read().decode(errors="replace")
            return said

    def _answers(self):
        """Up without a login: the HTTP port answers (with authentication on, any answer, a
        403) and the gRPC port accepts."""
        url = f"http://{self.addr}/nacos/v1/ns/service/list?pageNo=1&pageSize=10"
        try:
            urllib.request.urlopen(url, timeout=3).close()
        except urllib.error.HTTPError:
            if not self.auth:
                raise
        socket.create_connection(("127.0.0.1", self.port + 1000), timeout=3).close()

    @property
    def addr(self) -> str:
        return f"127.0.0.1:{self.port}"

    def hosts(self, service: str):
        params = {"serviceName": service}
        if self.auth:
            login = urllib.request.urlopen(urllib.request.Request(
                f"http://{self.addr}/nacos/v1/auth/login", method="POST",
                data=urllib.parse.urlencode({"username": self.auth[0],
                                             "password": self.auth[1]}).encode()), timeout=3)
            said = login.read()
            try:
                params["accessToken"] = json.loads(said)["accessToken"]
            except (ValueError, KeyError):
                raise ValueError(f"login answered {said[:200]!r}") from None
        url = f"http://{self.addr}/nacos/v1/ns/instance/list?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=3) as answer:
            return json.loads(answer.read())["hosts"]

    def stop(self):
        self.process.kill()
        self.process.wait()
        self.log.close()
        self.dir.cleanup()


@pytest.fixture
def nacos():
    server = Rnacos()
    yield server
    server.stop()


def wait_for(what, check, seconds=10.0):
    deadline = time.monotonic() + seconds
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def test_the_instance_is_listed_with_its_prefix_and_leaves_on_close(nacos):
    registration = NacosRegistration(nacos.addr, "orders", ip="127.0.0.1", port=18123,
                                     path_prefix="/jobs").start()
    hosts = nacos.hosts("orders")
    assert [(h["ip"], h["port"], h["healthy"], h["ephemeral"], h["metadata"]) for h in hosts] \
        == [("127.0.0.1", 18123, True, True, {"jobflow.path-prefix": "/jobs"})]
    registration.close()
    wait_for("the instance to leave", lambda: nacos.hosts("orders") == [])


def test_the_default_prefix_is_not_announced(nacos):
    with NacosRegistration(nacos.addr, "plain", ip="127.0.0.1", port=18124,
                           path_prefix="/internal/job"):
        assert [h["metadata"] for h in nacos.hosts("plain")] == [{}]


def test_beats_keep_it_and_a_forgotten_instance_registers_again(nacos):
    with NacosRegistration(nacos.addr, "kept", ip="127.0.0.1", port=18125):
        # Nacos forgets the instance (as after its own restart): the next beat registers it
        # again.
        urllib.request.urlopen(urllib.request.Request(
            f"http://{nacos.addr}/nacos/v1/ns/instance?serviceName=kept&ip=127.0.0.1"
            "&port=18125&ephemeral=true", method="DELETE"), timeout=3).close()
        assert nacos.hosts("kept") == []
        # The next beat (rnacos asks for one every 5 s) finds it forgotten.
        hosts = wait_for("registered again", lambda: nacos.hosts("kept"))
        assert [(h["port"], h["healthy"]) for h in hosts] == [(18125, True)]


def test_a_second_address_is_asked_when_the_first_does_not_answer(nacos):
    dead = f"127.0.0.1:{free_port()}"
    with NacosRegistration(f"{dead},{nacos.addr}", "failover", ip="127.0.0.1", port=18126):
        assert [h["port"] for h in nacos.hosts("failover")] == [18126]


def test_with_authentication_a_login_gives_the_token_and_a_wrong_password_is_refused():
    server = Rnacos(auth=("jobflow", "s3cret-pass"))
    try:
        with pytest.raises(NacosError, match="login refused"):
            NacosRegistration(server.addr, "secured", ip="127.0.0.1", port=18127,
                              username="jobflow", password="wrong").start()
        assert server.hosts("secured") == []
        with NacosRegistration(server.addr, "secured", ip="127.0.0.1", port=18127,
                               username="jobflow", password="s3cret-pass"):
            assert [h["port"] for h in server.hosts("secured")] == [18127]
    finally:
        server.stop()


def test_an_unreachable_nacos_fails_the_start_naming_it():
    dead = f"127.0.0.1:{free_port()}"
    with pytest.raises(NacosError, match=dead):
        NacosRegistration(dead, "nowhere", ip="127.0.0.1", port=18128, timeout=1).start()
