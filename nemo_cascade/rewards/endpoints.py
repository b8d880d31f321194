"""Where a served model is reached: an ``http://HOST:PORT`` URL, or ``file:PATH`` naming a file that
holds one.

A reward model or judge that serves for days outlives every stage job, and is itself requeued at its
job's time limit — onto whichever node Slurm gives it next (slurm/serve_model.sh, the nemo-run serve
tasks). So a config that stored its URL would point at a dead host after the first requeue. Instead
the server publishes its URL in a file (written atomically when it is healthy, removed when it
stops), and a stage names the file: ``reward.reward_model_url=file:/runs/served/servers/rm.url``.
The client reads the file when it first needs the URL and again whenever a request fails, and while
the file is missing (the server is restarting) it waits, boundedly, for it to come back
(:class:`UrlFile`). The file's second line is the server's token (runtime/server_token.py); the file
is readable by its owner only (:func:`write_url_file`).

:func:`probe` is the start-of-run check (preflight.check_endpoints): the URL, or the file and the
URL in it, must answer ``/health`` within a short bounded wait, so a placeholder or dead URL fails
before hours of base evaluation, not after. Stdlib only: the rewards package imports on a bare
machine.
"""
from __future__ import annotations

import os
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Callable

from ..runtime.files import write_text_atomically
from ..runtime.server_token import TOKEN_ENV, bearer

FILE_SCHEME = "file:"
RESTART_WAIT_S = 1800.0
"""How long a client waits for a ``file:`` server to come back after a failure: a requeue (Slurm's
requeue delay, ~2 min) plus loading a 72B model onto a fresh node (minutes)."""
DIRECT_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""In-cluster and loopback traffic: an http_proxy set for the outside world must not carry it."""


class EndpointError(RuntimeError):
    """No server could be reached in the bounded wait; the message is one line naming the URL or
    file."""


def is_file_url(spec: str) -> bool:
    return str(spec).strip().startswith(FILE_SCHEME)


def check_http_url(url: str, expect: str) -> str:
    """``url`` without trailing slashes and ``/v1`` (routes carry their own); ValueError (one line)
    unless it is ``http(s)://HOST[:PORT]``."""
    url = str(url).strip().rstrip("/")
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"server URL {url!r}: expected http://HOST:PORT (or file:PATH of a file "
                         f"holding it), the root of {expect}")
    return url[:-3] if url.endswith("/v1") else url


def write_url_file(path: str | Path, url: str, token: str) -> Path:
    """Publish a server: its URL on the first line, its token on the second, in a file only its
    owner can read (mode 0600 from the moment it exists), written atomically."""
    write_text_atomically(path, f"{url}\n{token}\n", mode=0o600)
    return Path(path)


def env_token() -> str:
    """The token for a server named by a plain ``http://`` URL: ``$NEMO_CASCADE_SERVER_TOKEN``, or
    none."""
    return os.environ.get(TOKEN_ENV, "").strip()


class UrlFile:
    """The URL a server published in ``path`` (``file:PATH``, see the module docstring); ``token``
    is the one read with it."""

    def __init__(self, spec: str, expect: str, *, poll: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep,
                 clock: Callable[[], float] = time.monotonic):
        text = str(spec).strip()[len(FILE_SCHEME):]
        if text.startswith("//"):  # file:///abs/path, the RFC 8089 spelling
            text = text[2:]
        if not text:
            raise ValueError(f"server URL {spec!r}: expected file:PATH of a file holding "
                             "http://HOST:PORT")
        self.path, self.expect, self.poll = Path(text), expect, poll
        self.token = ""
        self._sleep, self._clock = sleep, clock

    def __str__(self) -> str:
        return f"{FILE_SCHEME}{self.path}"

    def read(self) -> str | None:
        """The URL in the file now (and its token into ``token``), or None while there is no file
        (the server is not up)."""
        try:
            lines = self.path.read_text().split()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise EndpointError(f"{self}: cannot read it ({e.strerror or e})") from None
        if not lines:
            return None
        self.token = lines[1] if len(lines) > 1 else ""
        return check_http_url(lines[0], self.expect)

    def wait(self, timeout: float) -> str:
        """The URL, waiting up to ``timeout`` seconds for the file to appear (checked at least
        once)."""
        deadline = self._clock() + timeout
        while True:
            url = self.read()
            if url:
                return url
            if self._clock() >= deadline:
                raise EndpointError(f"{self}: no such file after waiting {timeout:g} s; expected "
                                    f"the URL file of a running server ({self.expect}, e.g. "
                                    "slurm/serve_model.sh)")
            self._sleep(min(self.poll, max(deadline - self._clock(), 0.0)))


def healthy(url: str, timeout: float = 5.0) -> str:
    """'' when ``url/health`` answers 200, else why not (one line)."""
    try:
        with DIRECT_OPENER.open(url + "/health", timeout=timeout) as resp:
            return "" if resp.status == 200 else f"/health answered HTTP {resp.status}"
    except urllib.error.HTTPError as e:
        return f"/health answered HTTP {e.code}"
    except (urllib.error.URLError, OSError, ValueError) as e:
        return ("no answer at /health "
                f"({' '.join(str(getattr(e, 'reason', None) or e).split())[:200]})")


def token_refused(url: str, token: str, timeout: float = 5.0) -> bool:
    """Whether the server at ``url`` refuses ``token`` (HTTP 401 or 403 at ``/v1/models``, a
    guarded route every vLLM server has). Any other answer, or none, is not a refusal: other
    checks name those."""
    request = urllib.request.Request(url + "/v1/models", headers=bearer(token))
    try:
        with DIRECT_OPENER.open(request, timeout=timeout):
            return False
    except urllib.error.HTTPError as e:
        return e.code in (401, 403)
    except (urllib.error.URLError, OSError, ValueError):
        return False


def refusal(url: str, source: "UrlFile | None", token: str = "") -> str:
    """The one line for a server that refused a client's ``token``: where it came from and what to
    do."""
    if source:
        given = (f"the token in {source.path}" if source.token
                 else f"no token ({source.path} has none)")
        return (f"{url} (from {source}): HTTP 401: the server refused {given}; the file names "
                f"another server than the one answering at that address")
    if not token:
        given = f"no token (${TOKEN_ENV} is not set)"
    elif token == env_token():
        given = f"the token in ${TOKEN_ENV}"
    else:
        given = "the token the client was given"
    return (f"{url}: HTTP 401: the server refused {given}; set ${TOKEN_ENV} to the token the "
            f"server was started with")


def probe(spec: str, expect: str, *, wait: float = 60.0, file_wait: float = 600.0,
          poll: float = 2.0,
          sleep: Callable[[float], None] = time.sleep,
          clock: Callable[[], float] = time.monotonic) -> str:
    """The URL ``spec`` stands for, once its server answers ``/health``: a ``file:`` spec's file is
    waited for up to ``file_wait`` seconds, then the server up to ``wait`` seconds (re-reading the
    file meanwhile: it may restart elsewhere). :class:`EndpointError` (one line naming what was
    tried) when the waits run out or the server refuses the client's token; ValueError for a
    malformed URL."""
    source = (UrlFile(spec, expect, poll=poll, sleep=sleep, clock=clock) if is_file_url(spec)
              else None)
    url = source.wait(file_wait) if source else check_http_url(spec, expect)
    deadline = clock() + wait
    while True:
        why = healthy(url, timeout=min(5.0, max(wait, 0.1)))
        if not why and token_refused(url, source.token if source else env_token()):
            raise EndpointError(refusal(url, source, env_token()))
        if not why:
            return url
        if clock() >= deadline:
            via = f" (from {source})" if source else ""
            raise EndpointError(f"{url}{via}: {why} after {wait:g} s; expected {expect}")
        sleep(min(poll, max(deadline - clock(), 0.0)))
        if source:
            url = source.read() or url


__all__ = ["EndpointError", "UrlFile", "is_file_url", "check_http_url", "healthy", "probe",
           "RESTART_WAIT_S",
           "DIRECT_OPENER", "write_url_file", "env_token", "token_refused", "refusal"]
