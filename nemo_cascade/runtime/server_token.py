"""A served model answers only the run that started it: a token per server, checked on every
route (docs/launch.md, "The server answers only its run").

Each server start makes a fresh random token. The server gets it in its environment
(:data:`TOKEN_ENV`; a process's environment is readable by its owner only, its command line by
everyone), its clients in the URL file (rewards/endpoints.py), and they send
``Authorization: Bearer TOKEN``. vLLM's own ``--api-key`` guards only the ``/v1``, ``/v2``,
``/inference`` and ``/cohere`` routes (vLLM 0.32), which leaves a reward model's ``/classify`` and
``/tokenize`` open; so the server loads :class:`RequireToken` instead (``vllm serve --middleware``).
Stdlib only: it is imported inside the vLLM server process.
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets

TOKEN_ENV = "NEMO_CASCADE_SERVER_TOKEN"
"""The served model's token: in the server's environment, and where a client reads the token
for a server named by a plain ``http://`` URL (one the user started: docs/launch.md)."""
MIDDLEWARE = f"{__name__}.RequireToken"
"""What ``vllm serve --middleware`` loads."""
OPEN_PATHS = frozenset({"/health"})


def new_token() -> str:
    """A fresh token: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def bearer(token: str) -> dict[str, str]:
    """The request header that carries ``token`` (none for an empty one)."""
    return {"Authorization": f"Bearer {token}"} if token else {}


class RequireToken:
    """ASGI middleware: a request to any route but :data:`OPEN_PATHS` without the token of
    :data:`TOKEN_ENV` (``Authorization: Bearer``) is answered 401 (a websocket is closed) before the
    application sees it."""

    def __init__(self, app):
        token = os.environ.get(TOKEN_ENV, "")
        if not token:  # a server meant to be guarded must not start open
            raise RuntimeError(f"{MIDDLEWARE}: {TOKEN_ENV} is not set; the server would answer "
                               f"anyone")
        self.app = app
        self._digest = hashlib.sha256(token.encode()).digest()

    def allowed(self, headers) -> bool:
        """Whether ``headers`` (ASGI: lowercase byte names and values) carry the token."""
        value = dict(headers).get(b"authorization", b"").decode("latin-1")
        scheme, _, given = value.partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(
            hashlib.sha256(given.strip().encode()).digest(), self._digest)

    async def __call__(self, scope, receive, send):
        if scope["type"] not in ("http", "websocket"):  # lifespan events
            return await self.app(scope, receive, send)
        path = scope["path"].removeprefix(scope.get("root_path", ""))
        if path in OPEN_PATHS or self.allowed(scope.get("headers", ())):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            return await send({"type": "websocket.close", "code": 1008})
        body = json.dumps({"error": {"message": "missing or wrong token (Authorization: Bearer)",
                                     "code": 401}}).encode()
        await send({"type": "http.response.start", "status": 401,
                    "headers": [(b"content-type", b"application/json"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["TOKEN_ENV", "MIDDLEWARE", "OPEN_PATHS", "new_token", "bearer", "RequireToken"]
