"""Remote tool servers for the MCP-toolset and A2A-tool tests, started in the test
process on 127.0.0.1:0:

* ``McpServer`` — a real MCP server (the Python ``mcp`` 2.3 ``MCPServer``, streamable
  HTTP at ``/mcp``) behind a bearer-token guard that records every Authorization header it
  sees. Tools: ``add`` (read-only), ``bump`` (a side-effect counter), ``fail`` (an error
  result). ``/token`` is an OAuth token endpoint answering the refresh-token grant.
* ``EchoA2A`` — the ``a2a-sdk`` 1.3 reference server with an echo agent executor
  (JSON-RPC binding, A2A 1.0), behind the same kind of guard.
"""

from __future__ import annotations

import json
import secrets as _secrets
import threading
import time
import urllib.parse
from typing import Any, Callable

import uvicorn


class Guard:
    """ASGI middleware: requests under ``protected`` need ``Authorization: Bearer <t>``
    for a ``t`` in ``tokens`` (401 otherwise; ``tokens=None`` lets every request in);
    every header seen is recorded."""

    def __init__(self, app: Any, tokens: set[str] | None, protected: Callable[[str], bool]) -> None:
        self.app = app
        self.tokens = tokens
        self.protected = protected
        self.seen: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and self.protected(scope["path"]):
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            authorization = headers.get("authorization", "")
            with self.lock:
                self.seen.append((scope["path"], authorization))
                known = None if self.tokens is None else set(self.tokens)
            if known is not None and not any(authorization == f"Bearer {t}" for t in known):
                body = json.dumps({"error": "invalid_token"}).encode()
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"www-authenticate", b'Bearer error="invalid_token"'),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)

    def authorizations(self) -> list[str]:
        with self.lock:
            return [a for _, a in self.seen]


class Served:
    """An ASGI app served by uvicorn in a daemon thread on 127.0.0.1:0. With ``tls`` and
    ``client_ca`` (a CA file), every connection must present a client certificate that CA
    issued; ``peers`` records each accepted one's subject (``commonName=…``)."""

    def __init__(
        self, app: Any, lifespan: str = "on", tls: tuple[str, str] | None = None, client_ca: str | None = None
    ) -> None:
        certfile, keyfile = tls or (None, None)
        self.peers: list[str] = []
        mutual: dict[str, Any] = {}
        if client_ca:
            import ssl

            from uvicorn.protocols.http.h11_impl import H11Protocol

            peers = self.peers

            class PeerRecording(H11Protocol):
                # asyncio calls it once the TLS handshake, client certificate included, is done.
                def connection_made(self, transport: Any) -> None:  # type: ignore[override]
                    certificate = transport.get_extra_info("peercert") or {}
                    peers.append(", ".join(f"{k}={v}" for rdn in certificate.get("subject", ()) for k, v in rdn))
                    super().connection_made(transport)

            mutual = {"ssl_cert_reqs": ssl.CERT_REQUIRED, "ssl_ca_certs": client_ca, "http": PeerRecording}
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan=lifespan,
            ssl_certfile=certfile,
            ssl_keyfile=keyfile,
            **mutual,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the test server did not start")
            time.sleep(0.02)
        self.port = self.server.servers[0].sockets[0].getsockname()[1]
        self.base = f"{'https' if tls else 'http'}://127.0.0.1:{self.port}"

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class McpServer:
    """See the module docstring. ``calls`` records (tool, arguments) per call made."""

    def __init__(
        self,
        tokens: set[str] | None = None,
        name: str = "pytest-calc",
        prefix: str = "",
        tls: tuple[str, str] | None = None,
        public_host: str | None = None,
        client_ca: str | None = None,
    ) -> None:
        """``tls``: (certificate file, key file) to serve HTTPS; ``public_host``: the host
        clients name (behind a tunnel), which turns off the SDK's localhost-only Host check;
        ``client_ca``: with ``tls``, require a client certificate it issued (``Served``)."""
        from mcp.server.mcpserver import MCPServer
        from mcp.types import ToolAnnotations
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse
        from starlette.routing import Mount, Route

        self.tokens: set[str] | None = None if tokens is None else set(tokens)
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.counter = 0
        # refresh token -> (client_id, client_secret)
        self.refresh_tokens: dict[str, tuple[str, str]] = {}
        self.token_requests: list[dict[str, str]] = []
        self.issued: list[str] = []
        self.bump_delay = 0.0
        self.add_delay = 0.0
        server = MCPServer(name)
        outer = self

        @server.tool(name=f"{prefix}add", description="Add two integers.", annotations=ToolAnnotations(readOnlyHint=True))
        def add(a: int, b: int) -> str:
            outer.calls.append((f"{prefix}add", {"a": a, "b": b}))
            if outer.add_delay:
                time.sleep(outer.add_delay)
            return str(a + b)

        @server.tool(name=f"{prefix}bump", description="Increase the side-effect counter and return it.")
        def bump() -> str:
            outer.calls.append((f"{prefix}bump", {}))
            if outer.bump_delay:
                time.sleep(outer.bump_delay)
            outer.counter += 1
            return f"counter={outer.counter}"

        @server.tool(name=f"{prefix}fail", description="Always fails.")
        def fail() -> str:
            outer.calls.append((f"{prefix}fail", {}))
            from mcp.server.mcpserver.exceptions import ToolError

            raise ToolError("the fail tool failed on purpose")

        async def token(request: Request) -> JSONResponse:
            form = {k: v[0] for k, v in urllib.parse.parse_qs((await request.body()).decode()).items()}
            self.token_requests.append(form)
            known = self.refresh_tokens.get(form.get("refresh_token", ""))
            if not known or form.get("grant_type") != "refresh_token" or form.get("client_id") != known[0]:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            if known[1] and form.get("client_secret") != known[1]:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            fresh = f"fresh-{_secrets.token_hex(16)}"
            self.issued.append(fresh)
            if self.tokens is not None:
                self.tokens.add(fresh)
            return JSONResponse({"access_token": fresh, "token_type": "bearer", "expires_in": 3600})

        mcp_app = server.streamable_http_app(streamable_http_path="/mcp", host=public_host or "127.0.0.1")
        app = Starlette(
            routes=[Route("/token", token, methods=["POST"]), Mount("/", app=mcp_app)],
            lifespan=lambda _app: mcp_app.router.lifespan_context(mcp_app),
        )
        self.guard = Guard(app, self.tokens, lambda path: path.startswith("/mcp"))
        self.served = Served(self.guard, tls=tls, client_ca=client_ca)
        self.url = f"{self.served.base}/mcp"
        self.token_url = f"{self.served.base}/token"

    def authorizations(self) -> list[str]:
        return self.guard.authorizations()

    def close(self) -> None:
        self.served.close()


class EchoA2A:
    """The a2a-sdk reference server with an agent that answers ``echo: <text>``;
    ``messages`` records (contextId, text) per message received."""

    def __init__(self, tokens: set[str] | None = None) -> None:
        self.tokens: set[str] = set(tokens or ())
        self.messages: list[tuple[str, str]] = []
        self._app_holder: dict[str, Any] = {}
        # The card must name the served URL, known only once bound: a late-binding app.
        outer = self

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            await outer._app_holder["app"](scope, receive, send)

        self.guard = Guard(app, self.tokens, lambda path: not path.startswith("/.well-known"))
        self.served = Served(self.guard, lifespan="off")
        self.url = self.served.base
        self._app_holder["app"] = self._build(self.url)

    def _build(self, base: str) -> Any:
        from a2a_echo import build_echo_app

        return build_echo_app(base, self.messages)

    def authorizations(self) -> list[str]:
        return self.guard.authorizations()

    def close(self) -> None:
        self.served.close()
