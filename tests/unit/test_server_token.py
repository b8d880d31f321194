"""A served model answers only its run (server_token.py): the middleware vLLM loads refuses a
request without the token on every route but /health, the URL file that carries the token is its
owner's alone, and a client whose token is refused says so in one line (or finds the restarted
server's new token in the file). Real HTTP servers on 127.0.0.1; the real vLLM server's refusals are
in tests/integration/test_remote_rewards.py."""
from __future__ import annotations

import asyncio
import json
import os
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nemo_cascade.rewards.endpoints import EndpointError, probe, write_url_file
from nemo_cascade.rewards.http_endpoint import HttpEndpoint, RewardServerError
from nemo_cascade.runtime.server_token import TOKEN_ENV, RequireToken, bearer, new_token

RM = "a reward model"


def _call(path: str, headers=(), kind: str = "http") -> tuple[list, list]:
    """One request through the middleware (token from the environment): (the paths the
    application saw, the messages sent back)."""
    seen, sent = [], []

    async def app(scope, receive, send):
        seen.append(scope["path"])

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}

    scope = {"type": kind, "path": path, "root_path": "", "headers": list(headers)}
    asyncio.run(RequireToken(app)(scope, receive, send))
    return seen, sent


def _auth(token: str) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {token}".encode())]


def test_every_route_but_health_needs_the_token(monkeypatch):
    token = new_token()
    monkeypatch.setenv(TOKEN_ENV, token)
    for path in ("/classify", "/tokenize", "/pooling", "/v1/models", "/v1/completions", "/metrics",
                 "/invocations"):
        # none, a wrong one, the right one without its scheme
        for headers in ((), _auth("wrong"), [(b"authorization", token.encode())]):
            seen, sent = _call(path, headers)
            assert seen == [] and sent[0]["status"] == 401, (path, headers)
            assert json.loads(sent[1]["body"])["error"]["code"] == 401
        seen, sent = _call(path, _auth(token))
        assert seen == [path] and sent == []
    assert _call("/health")[0] == ["/health"]  # the readiness probe stays open
    seen, sent = _call("/v1/realtime", kind="websocket")
    assert seen == [] and sent == [{"type": "websocket.close", "code": 1008}]


def test_a_server_without_a_token_refuses_to_start(monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)
    with pytest.raises(RuntimeError, match=f"{TOKEN_ENV} is not set"):
        RequireToken(app=None)


def test_the_url_file_is_its_owners_alone(tmp_path):
    path = write_url_file(tmp_path / "servers" / "rm.url", "http://node7:31234", "s3cret")
    assert path.read_text() == "http://node7:31234\ns3cret\n"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    if os.geteuid() != 0:
        return  # another user to try it with needs root; the mode above is what stops one
    pid = os.fork()
    if pid == 0:  # the child becomes nobody and tries to read the file
        try:
            os.setgid(65534)
            os.setuid(65534)
            path.read_text()
            os._exit(1)
        except PermissionError:
            os._exit(0)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "another user could read the URL file"


class GuardedServer:
    """A server that answers every route but /health only with its ``token``: /v1/models and
    POST /echo."""

    def __init__(self, token: str):
        outer = self
        self.token = token

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: dict) -> None:
                raw = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _allowed(self) -> bool:
                return self.headers.get("Authorization") == bearer(outer.token)["Authorization"]

            def do_GET(self):  # noqa: N802
                if self.path == "/health":
                    return self._send(200, {})
                if not self._allowed():
                    return self._send(401, {"error": "no"})
                self._send(200, {"data": [{"id": "m"}]})

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if not self._allowed():
                    return self._send(401, {"error": "no"})
                self._send(200, {"ok": True})

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def test_a_client_sends_the_token_of_its_url_file_and_rereads_it_after_a_restart(tmp_path):
    url_file = tmp_path / "rm.url"
    with GuardedServer("first") as server:
        write_url_file(url_file, server.url, "first")
        endpoint = HttpEndpoint(f"file:{url_file}", expect=RM, retries=0)
        assert endpoint.post("/echo", {}) == {"ok": True}
        # restarted at the same address with a new token, which its file now holds
        server.token = "second"
        write_url_file(url_file, server.url, "second")
        assert endpoint.post("/echo", {}) == {"ok": True}
        server.token = "third"  # ... but this time the file still holds the old one
        with pytest.raises(RewardServerError) as err:
            endpoint.post("/echo", {})
    line = str(err.value)
    assert "\n" not in line and "HTTP 401" in line and f"the token in {url_file}" in line
    assert "second" not in line  # the token itself is never printed


def test_a_client_of_a_plain_url_says_which_token_was_refused(monkeypatch):
    with GuardedServer("right") as server:
        monkeypatch.setenv(TOKEN_ENV, "right")
        assert HttpEndpoint(server.url, expect=RM).post("/echo", {}) == {"ok": True}
        with pytest.raises(RewardServerError, match="refused the token the client was given; set "):
            HttpEndpoint(server.url, expect=RM, token="wrong").post("/echo", {})
        monkeypatch.delenv(TOKEN_ENV)
        unset = rf"refused no token \(\${TOKEN_ENV} is not set\)"
        with pytest.raises(RewardServerError, match=unset):
            HttpEndpoint(server.url, expect=RM).post("/echo", {})


def test_the_start_of_run_probe_names_a_refused_token(tmp_path, monkeypatch):
    url_file = tmp_path / "judge.url"
    with GuardedServer("right") as server:
        write_url_file(url_file, server.url, "right")
        assert probe(f"file:{url_file}", RM, wait=1.0) == server.url
        write_url_file(url_file, server.url, "stale")
        stale = rf"\(from file:{url_file}\): HTTP 401: the server refused"
        with pytest.raises(EndpointError, match=stale):
            probe(f"file:{url_file}", RM, wait=1.0)
        monkeypatch.setenv(TOKEN_ENV, "wrong")
        with pytest.raises(EndpointError, match=rf"refused the token in \${TOKEN_ENV}"):
            probe(server.url, RM, wait=1.0)
