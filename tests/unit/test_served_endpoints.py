"""Served models named by a URL file (``file:PATH``, rewards/endpoints.py): the client re-reads the
file when a request fails and waits, boundedly, for a restarted server; the start-of-run probe fails
fast on a closed port or a file that never appears. Real HTTP servers on 127.0.0.1, no vLLM."""
from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from nemo_cascade.rewards.endpoints import EndpointError, UrlFile, probe
from nemo_cascade.rewards.http_endpoint import HttpEndpoint, RewardServerError

RM = "a reward model"


class HealthyServer:
    """Answers GET /health with 200 and POST /echo with ``{"server": name}``."""

    def __init__(self, name: str, health: int = 200):
        outer = self
        self.name, self.health = name, health

        class Handler(BaseHTTPRequestHandler):
            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):  # noqa: N802
                self._send(outer.health if self.path == "/health" else 404, b"")

            def do_POST(self):  # noqa: N802
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                self._send(200, json.dumps({"server": outer.name}).encode())

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


def _later(seconds: float, fn) -> threading.Thread:
    t = threading.Thread(target=lambda: (time.sleep(seconds), fn()), daemon=True)
    t.start()
    return t


def test_a_file_url_follows_the_server_to_its_new_host(tmp_path):
    url_file = tmp_path / "servers" / "rm.url"
    url_file.parent.mkdir()
    first = HealthyServer("first")
    url_file.write_text(first.url + "\n")
    endpoint = HttpEndpoint(f"file:{url_file}", retries=1, backoff=0.01,
                            restart_wait=10.0, poll=0.05)
    assert endpoint.post("/echo", {}) == {"server": "first"} and endpoint.base_url == first.url
    first.close()
    url_file.unlink()  # the job was requeued: the server is away ...
    with HealthyServer("second") as second:
        _later(0.3, lambda: url_file.write_text(second.url + "\n"))  # ... and comes back elsewhere
        t0 = time.monotonic()
        assert endpoint.post("/echo", {}) == {"server": "second"}
        assert endpoint.base_url == second.url and time.monotonic() - t0 < 5.0


def test_a_file_url_waits_for_the_file_at_first_use(tmp_path):
    url_file = tmp_path / "rm.url"
    with HealthyServer("late") as server:
        _later(0.2, lambda: url_file.write_text(server.url))
        # file:// spelling too
        endpoint = HttpEndpoint(f"file://{url_file}", restart_wait=10.0, poll=0.05)
        assert str(endpoint.base_url) == f"file:{url_file}"
        assert endpoint.post("/echo", {}) == {"server": "late"}


def test_a_server_that_does_not_come_back_fails_in_one_line_after_the_bounded_wait(tmp_path):
    url_file = tmp_path / "rm.url"
    url_file.write_text(closed_port_url())
    endpoint = HttpEndpoint(f"file:{url_file}", expect=RM, retries=1, backoff=0.01,
                            restart_wait=0.5, poll=0.05)
    t0 = time.monotonic()
    with pytest.raises(RewardServerError) as err:
        endpoint.post("/classify", {})
    message = str(err.value)
    assert time.monotonic() - t0 < 5.0 and "\n" not in message
    assert f"file:{url_file}" in message and "waiting 0.5 s" in message and RM in message
    missing = HttpEndpoint(f"file:{tmp_path / 'never.url'}", expect=RM, restart_wait=0.2, poll=0.05)
    with pytest.raises(RewardServerError, match=r"never\.url: no such file after waiting 0\.2 s"):
        missing.post("/classify", {})


def test_a_url_file_with_garbage_is_refused(tmp_path):
    (tmp_path / "rm.url").write_text("node7:8000")
    with pytest.raises(ValueError, match="expected http://HOST:PORT"):
        UrlFile(f"file:{tmp_path / 'rm.url'}", RM).read()
    with pytest.raises(ValueError, match="expected file:PATH"):
        HttpEndpoint("file:")


def test_probe_fails_fast_on_a_closed_port_and_names_the_url():
    url = closed_port_url()
    t0 = time.monotonic()
    with pytest.raises(EndpointError) as err:
        probe(url, RM, wait=0.5, poll=0.1)
    assert time.monotonic() - t0 < 5.0
    assert (str(err.value).startswith(url) and "after 0.5 s" in str(err.value)
            and "\n" not in str(err.value))


def test_probe_of_a_placeholder_host_fails_in_one_line():
    with pytest.raises(EndpointError, match="no answer at /health") as err:
        probe("http://RM_HOST.invalid:8000", RM, wait=0.0)
    assert "\n" not in str(err.value)


def test_probe_accepts_a_healthy_server_and_waits_for_a_url_file(tmp_path):
    with HealthyServer("rm") as server:
        assert probe(server.url + "/v1", RM, wait=1.0) == server.url
        url_file = tmp_path / "rm.url"
        _later(0.2, lambda: url_file.write_text(server.url))
        assert probe(f"file:{url_file}", RM, file_wait=5.0, poll=0.05) == server.url
    with HealthyServer("sick", health=503) as sick:
        with pytest.raises(EndpointError, match="HTTP 503"):
            probe(sick.url, RM, wait=0.2, poll=0.05)


def test_probe_names_a_url_file_that_never_appears(tmp_path):
    with pytest.raises(EndpointError) as err:
        probe(f"file:{tmp_path / 'rm.url'}", RM, file_wait=0.2, poll=0.05)
    assert f"file:{tmp_path / 'rm.url'}: no such file after waiting 0.2 s" in str(err.value)
