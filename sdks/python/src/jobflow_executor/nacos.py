"""Registering an executor in Nacos, so schedulers that discover executors there find it
(docs/executors/python.md, "Registering in Nacos").

The instance is ephemeral: Nacos keeps it while beats arrive (every 5 s, or what the server
asks for) and drops it about 30 s after they stop, so a process that dies leaves no stale
address behind; `close()` removes it at once. Spoken over Nacos' HTTP open API (v1), which
Nacos 1 and 2 and rnacos serve, and Nacos 3.2 and later through its legacy adapter; with
authentication on, a login gives the access token, renewed before it expires.

    registration = NacosRegistration("nacos:8848", "order-service", ip="10.0.0.7", port=8000)
    registration.start()            # raises NacosError when Nacos refuses or cannot be reached
    ...
    registration.close()            # on shutdown

A beat that fails is logged and tried again at the next interval; an instance Nacos no longer
knows (a Nacos restart) is registered again. Nothing here blocks a handler.
"""

import json
import logging
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Dict, List, Optional

__all__ = ["NacosError", "NacosRegistration"]

_log = logging.getLogger("jobflow_executor.nacos")

DEFAULT_PATH_PREFIX = "/internal/job"
PATH_PREFIX_METADATA = "jobflow.path-prefix"


class NacosError(Exception):
    """Nacos refused a request or could not be reached at any of its addresses."""


def _base_urls(server_addr: str) -> List[str]:
    urls = []
    for part in server_addr.split(","):
        part = part.strip().rstrip("/")
        if not part:
            continue
        if "://" not in part:
            part = "http://" + part
        urls.append(part)
    if not urls:
        raise ValueError("server_addr names no Nacos server")
    return urls


class NacosRegistration:
    """This executor as an ephemeral instance of `service_name` in Nacos."""

    def __init__(self, server_addr: str, service_name: str, ip: str, port: int, *,
                 namespace: str = "public", group: str = "DEFAULT_GROUP",
                 path_prefix: Optional[str] = None, username: Optional[str] = None,
                 password: Optional[str] = None, timeout: float = 3.0) -> None:
        self._urls = _base_urls(server_addr)
        self.service_name = service_name
        self.ip = ip
        self.port = int(port)
        # `public` is Nacos' default namespace, whose id is empty.
        self.namespace_id = "" if namespace == "public" else namespace
        self.group = group
        self.metadata: Dict[str, str] = {}
        if path_prefix and path_prefix != DEFAULT_PATH_PREFIX:
            self.metadata[PATH_PREFIX_METADATA] = path_prefix
        self._username = username
        self._password = password
        self._timeout = timeout
        self._token: Optional[str] = None
        self._token_renew_at = 0.0
        self._interval = 5.0
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # --- the lifecycle --------------------------------------------------------------------

    def start(self) -> "NacosRegistration":
        """Registers the instance and starts beating; raises `NacosError` when Nacos refuses."""
        self._register()
        self._thread = threading.Thread(target=self._beat_loop, name="jobflow-nacos-beat",
                                        daemon=True)
        self._thread.start()
        _log.info("registered in Nacos as %s %s:%d", self.service_name, self.ip, self.port)
        return self

    def close(self) -> None:
        """Stops beating and removes the instance (best effort: Nacos drops it anyway once
        the beats stop)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._timeout + 1)
        try:
            self._request("DELETE", "/nacos/v1/ns/instance", self._instance_params())
        except NacosError as e:
            _log.warning("could not deregister from Nacos (it drops the instance without "
                         "beats): %s", e)

    def __enter__(self) -> "NacosRegistration":
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.close()

    # --- the requests ---------------------------------------------------------------------

    def _instance_params(self) -> Dict[str, str]:
        params = {"serviceName": self.service_name, "groupName": self.group,
                  "ip": self.ip, "port": str(self.port), "ephemeral": "true"}
        if self.namespace_id:
            params["namespaceId"] = self.namespace_id
        return params

    def _register(self) -> None:
        params = dict(self._instance_params(), weight="1.0", enabled="true", healthy="true",
                      metadata=json.dumps(self.metadata))
        self._request("POST", "/nacos/v1/ns/instance", params)

    def _beat(self) -> None:
        beat = {"serviceName": f"{self.group}@@{self.service_name}", "ip": self.ip,
                "port": self.port, "cluster": "DEFAULT", "weight": 1.0,
                "metadata": self.metadata, "scheduled": True}
        answer = self._request("PUT", "/nacos/v1/ns/instance/beat",
                               dict(self._instance_params(), beat=json.dumps(beat)))
        try:
            body = json.loads(answer)
        except ValueError:
            return
        if body.get("code") == 20404:
            # Nacos forgot the instance (it restarted, or beats stopped long enough).
            _log.info("Nacos no longer knew this instance; registering again")
            self._register()
        interval = body.get("clientBeatInterval")
        if isinstance(interval, (int, float)) and interval > 0:
            self._interval = interval / 1000

    def _beat_loop(self) -> None:
        while not self._stop.wait(self._interval):
            try:
                self._beat()
            except NacosError as e:
                _log.warning("Nacos beat failed; trying again in %.0f s: %s", self._interval, e)

    def _access_token(self, base: str) -> Optional[str]:
        if self._username is None:
            return None
        if self._token is None or time.monotonic() >= self._token_renew_at:
            data = urllib.parse.urlencode({"username": self._username,
                                           "password": self._password or ""}).encode()
            request = urllib.request.Request(base + "/nacos/v1/auth/login", data=data,
                                             method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self._timeout) as answer:
                    body = json.loads(answer.read())
            except urllib.error.HTTPError as e:
                raise NacosError(f"Nacos login refused ({e.code}): check the username and "
                                 "password") from None
            except (OSError, ValueError) as e:
                raise NacosError(f"Nacos login failed at {base}: {e}") from None
            self._token = body.get("accessToken")
            ttl = body.get("tokenTtl") or 18000
            self._token_renew_at = time.monotonic() + ttl * 0.8
        return self._token

    def _request(self, method: str, path: str, params: Dict[str, str]) -> str:
        """Asks each address in turn; the first answer counts."""
        failures = []
        for base in self._urls:
            query = dict(params)
            try:
                token = self._access_token(base)
            except NacosError as e:
                failures.append(str(e))
                continue
            if token:
                query["accessToken"] = token
            url = f"{base}{path}?{urllib.parse.urlencode(query)}"
            request = urllib.request.Request(url, method=method)
            try:
                with urllib.request.urlopen(request, timeout=self._timeout) as answer:
                    return answer.read().decode("utf-8", "replace")
            except urllib.error.HTTPError as e:
                detail = e.read().decode("utf-8", "replace")[:200]
                if e.code == 403:
                    self._token = None
                raise NacosError(f"{method} {path} refused by {base} ({e.code}): {detail}") \
                    from None
            except OSError as e:
                failures.append(f"{base}: {e}")
        raise NacosError(f"no Nacos server answered {method} {path}: {'; '.join(failures)}")
