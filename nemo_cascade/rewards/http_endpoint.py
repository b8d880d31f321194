"""The transport of every served-model client: JSON over HTTP to a vLLM OpenAI-compatible server,
with a timeout per request, bounded retries with exponential backoff on connection errors,
timeouts, 5xx, 408 and 429, and ``file:`` URLs of servers that restart elsewhere
(rewards/endpoints.py). A 4xx answer and a malformed body fail at once; every failure is one
:class:`RewardServerError` line naming the URL. Stdlib only: the rewards package imports on a bare
machine."""
from __future__ import annotations

import http.client
import json
import logging
import socket
import time
import urllib.error
import urllib.request
from typing import Any, Callable

from ..errors import CascadeError
from ..runtime import heartbeat
from ..runtime.server_token import bearer
from .endpoints import (DIRECT_OPENER, RESTART_WAIT_S, EndpointError, UrlFile, check_http_url,
                        env_token, healthy, is_file_url, refusal)

log = logging.getLogger(__name__)

_RETRY_STATUS = frozenset({408, 429, 500, 502, 503, 504})
_MAX_ERROR_CHARS = 300


class RewardServerError(CascadeError, RuntimeError):
    """The reward/judge server is unreachable after retries, refused a request, or answered
    garbage."""


def one_line(text: str, limit: int = _MAX_ERROR_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit] + "…"


class HttpEndpoint:
    """POSTs JSON to ``base_url + path`` with a per-request ``timeout`` (seconds) and up to
    ``retries`` retries after the first attempt, sleeping ``backoff · 2^i`` (capped at
    ``max_backoff``) before retry i. ``expect`` says what should answer there; it ends the error
    line of an unreachable server or a missing route (404/405), the two signs of a wrong URL or the
    wrong kind of server.

    ``base_url`` may be ``file:PATH``, a file holding the URL of a long-lived server that may
    restart on another host (rewards/endpoints.py): it is read on first use, and when the retries of
    a request run out the client waits up to ``restart_wait`` seconds for the file to name a server
    that answers ``/health`` (the same one back, or a new one), then sends the request again.

    Every request carries the server's token (server_token.py): the one in the URL file, else
    ``token``, else ``$NEMO_CASCADE_SERVER_TOKEN``. A ``file:`` client whose token is refused
    (HTTP 401) reads the file again (a restart writes a new one); a token still refused is one
    :class:`RewardServerError` line."""

    def __init__(self, base_url: str, *,
                 expect: str = "a vLLM OpenAI-compatible server (vllm serve)",
                 timeout: float = 120.0, retries: int = 3, backoff: float = 0.5,
                 max_backoff: float = 8.0,
                 sleep: Callable[[float], None] = time.sleep, restart_wait: float = RESTART_WAIT_S,
                 poll: float = 5.0, token: str = ""):
        self.expect = expect
        self._source = (UrlFile(base_url, expect, poll=poll, sleep=sleep)
                        if is_file_url(base_url) else None)
        self._url = None if self._source else check_http_url(base_url, expect)
        self._token = token or env_token()
        if timeout <= 0 or retries < 0 or backoff < 0 or restart_wait < 0:
            raise ValueError(f"{base_url}: need timeout > 0, retries >= 0, backoff >= 0, "
                             f"restart_wait >= 0; got {timeout}, {retries}, {backoff}, "
                             f"{restart_wait}")
        self.timeout, self.retries = timeout, retries
        self.backoff, self.max_backoff = backoff, max_backoff
        self.restart_wait, self.poll = restart_wait, poll
        self._sleep = sleep

    @property
    def base_url(self) -> str:
        """The server root requests go to (a ``file:`` endpoint: the URL last read from it, else the
        file)."""
        return self._url or str(self._source)

    def post(self, path: str, payload: dict) -> Any:
        """The decoded JSON answer; :class:`RewardServerError` when it cannot be had."""
        body = json.dumps(payload).encode()
        if self._url is None:
            self._url = self._wait_for_file()
        ok, answer = self._attempts(path, body)
        if ok or self._source is None:
            return self._answer_or_raise(ok, answer, path)
        first, deadline = answer, time.monotonic() + self.restart_wait
        # a file: server may be restarting, here or on another host
        while time.monotonic() < deadline:
            heartbeat.advance()  # a bounded wait, not a stall (runtime/heartbeat.py)
            url = self._source.read()
            if url and not healthy(url, timeout=min(self.timeout, 10.0)):
                if url != self._url:
                    log.warning("%s: the server moved from %s to %s", self._source, self._url, url)
                self._url = url
                ok, answer = self._attempts(path, body)
                if ok:
                    return answer
            self._sleep(self.poll)
        raise RewardServerError(f"{self.base_url + path} (from {self._source}): unreachable "
                                f"({first}), and no healthy server in the file after waiting "
                                f"{self.restart_wait:g} s; expected {self.expect}")

    @property
    def token(self) -> str:
        return self._source.token if self._source else self._token

    def _wait_for_file(self) -> str:
        try:
            return self._source.wait(self.restart_wait)
        except (EndpointError, ValueError) as e:
            raise RewardServerError(str(e)) from None

    def _reread_after_refusal(self, url: str) -> None:
        """After a 401: take the server (and token) the URL file now names, when it names another
        than the one refused; else the refusal, in one line."""
        if self._source is not None:
            token = self._source.token
            fresh = self._source.read()
            if fresh and (fresh, self._source.token) != (self._url, token):
                self._url = fresh
                return
        raise RewardServerError(refusal(url, self._source, self.token)) from None

    def _answer_or_raise(self, ok: bool, answer: Any, path: str) -> Any:
        if ok:
            return answer
        attempts = f"{self.retries + 1} attempt{'s' if self.retries else ''}"
        raise RewardServerError(f"{self.base_url + path}: unreachable after {attempts} ({answer}); "
                                f"expected {self.expect}")

    def _attempts(self, path: str, body: bytes) -> tuple[bool, Any]:
        """``(True, decoded answer)``, or ``(False, the last transient failure)`` once the retries
        ran out; what no retry can fix (4xx, a body that is not JSON) raises at once."""
        last = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep(min(self.backoff * 2 ** (attempt - 1), self.max_backoff))
            url = self.base_url + path
            headers = {"Content-Type": "application/json", **bearer(self.token)}
            req = urllib.request.Request(url, data=body, headers=headers)
            try:
                with DIRECT_OPENER.open(req, timeout=self.timeout) as resp:
                    raw = resp.read()
            except urllib.error.HTTPError as e:
                detail = _error_message(e.read())
                if e.code == 401:
                    self._reread_after_refusal(self.base_url)
                    last = "HTTP 401: the server was restarted with a new token"
                    continue
                if e.code in (404, 405):
                    raise RewardServerError(f"{url}: HTTP {e.code} ({detail}); expected "
                                            f"{self.expect}") from None
                if e.code not in _RETRY_STATUS:
                    raise RewardServerError(f"{url}: HTTP {e.code}: {detail}") from None
                last = f"HTTP {e.code}: {detail}"
            except (socket.timeout, TimeoutError):
                last = f"timed out after {self.timeout:g} s"
            except (urllib.error.URLError, http.client.HTTPException, OSError) as e:
                last = one_line(getattr(e, "reason", None) or e or type(e).__name__)
            else:
                try:
                    return True, json.loads(raw)
                except ValueError:
                    raise RewardServerError(f"{url}: answer is not JSON: "
                                            f"{one_line(repr(raw[:200]))}") from None
        return False, last


def _error_message(raw: bytes) -> str:
    """The human part of an error body: vLLM's ``{"error": {"message"}}``, FastAPI's ``{"detail"}``,
    or the text itself, on one line."""
    text = raw.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        return one_line(text) or "empty body"
    if isinstance(body, dict):
        err = body.get("error")
        message = err.get("message") if isinstance(err, dict) else err
        message = message or body.get("detail") or body.get("message")
        if message:
            return one_line(message)
    return one_line(text)


__all__ = ["RewardServerError", "HttpEndpoint", "one_line"]
