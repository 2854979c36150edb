"""MCP tunnels (docs/api/tunnels.md) with the official SDK (`client.beta.tunnels`), in
both modes: the resource and its rules, and the data path.

The data path: an MCP server on loopback serving HTTPS with a certificate from a test
CA, reachable by the worker only through `agentd tunnel` (the connector, a process of
its own that dials the gateway). In production mode the worker's egress guard forbids
private addresses (`AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE=false`), so the call can only go
through the tunnel. Rotating the token cuts the connector; archiving cuts everything.

Terminating mode (`agentd tunnel --tls-cert`): the connector serves the worker's TLS for
the tunnel host and opens its own to an upstream that requires a client certificate
(mutual TLS), or plain HTTP to an `http://` upstream.
"""

from __future__ import annotations

import datetime
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, call, say
from harness import AGENTD_BIN, RECORDER, Deployment, Process, base_env, collect, unique
from remote_servers import McpServer

TUNNELS_BETA = "mcp-tunnels-2026-06-22"
TURN_TIMEOUT = 45.0


# ---------------------------------------------------------------------------------------
# Certificates (a test CA and the server and client certificates it issues)


def make_ca(name: str = "agentd test CA") -> tuple[Any, Any, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True
        )
        .sign(key, hashes.SHA256())
    )
    pem = certificate.public_bytes(serialization.Encoding.PEM).decode()
    return key, certificate, pem


def issue_certificate(ca_key: Any, ca: Any, name: str, directory: Path, usage: str = "server") -> tuple[str, str]:
    """A certificate the CA issues: a server's for host `name` (serverAuth), or a
    client's named `name` (clientAuth): (cert file, key file)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
    )
    if usage == "server":
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
    purpose = ExtendedKeyUsageOID.SERVER_AUTH if usage == "server" else ExtendedKeyUsageOID.CLIENT_AUTH
    certificate = builder.add_extension(x509.ExtendedKeyUsage([purpose]), critical=False).sign(ca_key, hashes.SHA256())
    stem = f"{usage}-{name}".replace(" ", "-")
    cert_file, key_file = directory / f"{stem}.pem", directory / f"{stem}.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return str(cert_file), str(key_file)


def tunnel_agent(client: anthropic.Anthropic, host: str) -> Any:
    """An agent whose MCP server `office` is at `https://{host}/mcp`, its tools always allowed."""
    return client.beta.agents.create(
        name=unique("tunnel-agent"),
        model="claude-sonnet-4-6",
        mcp_servers=[{"type": "url", "name": "office", "url": f"https://{host}/mcp"}],
        tools=[{"type": "mcp_toolset", "mcp_server_name": "office",
                "default_config": {"permission_policy": {"type": "always_allow"}}}],
    )


# ---------------------------------------------------------------------------------------
# The resource


def test_tunnels_and_certificates_with_the_official_sdk(turns: Deployment) -> None:
    client = turns.client()
    first = client.beta.tunnels.create(display_name=unique("tunnel"))
    second = client.beta.tunnels.create()
    assert first.type == "tunnel" and first.id.startswith("tnl_") and first.archived_at is None
    assert first.domain != second.domain and first.domain.endswith(".tunnels.agentd.invalid"), first.domain
    assert second.display_name is None
    assert client.beta.tunnels.retrieve(first.id) == first
    listed = [t.id for t in collect(client.beta.tunnels.list(limit=1000))]
    assert listed.index(second.id) < listed.index(first.id), "newest first"

    token = client.beta.tunnels.reveal_token(first.id)
    RECORDER.secret(token.tunnel_token)
    assert token.type == "tunnel_token" and token.tunnel_token.startswith("sk-agentd-tun-")
    assert client.beta.tunnels.reveal_token(first.id) == token, "revealing does not change it"
    rotated = client.beta.tunnels.rotate_token(first.id, reason="laptop lost")
    RECORDER.secret(rotated.tunnel_token)
    assert rotated.id != token.id and rotated.tunnel_token != token.tunnel_token
    assert client.beta.tunnels.reveal_token(first.id) == rotated

    # Certificates: one PEM certificate, no key, ≤ 8 KB, at most two active.
    _, _, pem_a = make_ca("CA a")
    _, _, pem_b = make_ca("CA b")
    _, _, pem_c = make_ca("CA c")
    a = client.beta.tunnels.certificates.create(first.id, ca_certificate_pem=pem_a)
    assert a.type == "tunnel_certificate" and a.id.startswith("tcrt_") and a.tunnel_id == first.id
    assert len(a.fingerprint) == 64 and a.expires_at is not None and a.archived_at is None
    b = client.beta.tunnels.certificates.create(first.id, ca_certificate_pem=pem_b)
    for bad, why in (
        (pem_a + pem_b, "exactly one certificate"),
        (pem_a + "-----BEGIN PRIVATE KEY-----\nMIIB\n-----END PRIVATE KEY-----\n", "private key"),
        ("x" * 9000, "at most 8192 bytes"),
        ("not a pem", "exactly one certificate"),
    ):
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.beta.tunnels.certificates.create(first.id, ca_certificate_pem=bad)
        assert why in refused.value.message, refused.value.message
    with pytest.raises(anthropic.ConflictError):
        client.beta.tunnels.certificates.create(first.id, ca_certificate_pem=pem_c)
    assert client.beta.tunnels.certificates.retrieve(b.id, tunnel_id=first.id) == b
    archived_a = client.beta.tunnels.certificates.archive(a.id, tunnel_id=first.id)
    assert archived_a.archived_at is not None
    c = client.beta.tunnels.certificates.create(first.id, ca_certificate_pem=pem_c)
    active = [x.id for x in collect(client.beta.tunnels.certificates.list(first.id))]
    assert active == [c.id, b.id], "newest first, archived left out"
    every = [x.id for x in collect(client.beta.tunnels.certificates.list(first.id, include_archived=True))]
    assert every == [c.id, b.id, a.id]

    # Archive: final, idempotent; certificates archived, the token gone.
    archived = client.beta.tunnels.archive(first.id)
    assert archived.archived_at is not None and archived.domain == first.domain
    assert client.beta.tunnels.archive(first.id).archived_at == archived.archived_at
    assert all(x.archived_at is not None for x in collect(client.beta.tunnels.certificates.list(first.id, include_archived=True)))
    with pytest.raises(anthropic.ConflictError):
        client.beta.tunnels.reveal_token(first.id)
    with pytest.raises(anthropic.ConflictError):
        client.beta.tunnels.rotate_token(first.id)
    with pytest.raises(anthropic.ConflictError):
        client.beta.tunnels.certificates.create(first.id, ca_certificate_pem=pem_a)
    assert first.id not in [t.id for t in collect(client.beta.tunnels.list())]
    assert first.id in [t.id for t in collect(client.beta.tunnels.list(include_archived=True, limit=1000))]

    # Another workspace sees none of it; the selector is required.
    other = turns.client(turns.create_key(unique("ws-tunnels")))
    with pytest.raises(anthropic.NotFoundError):
        other.beta.tunnels.retrieve(second.id)
    raw = turns.http().get(
        f"/v1/tunnels/{second.id}", headers={"authorization": f"Bearer {turns.bootstrap_key}"}
    )
    assert raw.status_code == 400 and TUNNELS_BETA in raw.text, raw.text


# ---------------------------------------------------------------------------------------
# The data path


def start_connector(deployment: Deployment, token: str, upstream: str, *flags: str) -> Process:
    env = base_env(AGENTD_TUNNEL_TOKEN=token)
    env["RUST_LOG"] = "info"
    process = Process(
        "agentd tunnel", [AGENTD_BIN, "tunnel", "--gateway", deployment.url, "--upstream", upstream, *flags], env
    )
    deployment.processes.append(process)
    deadline = time.monotonic() + 20
    while not any("tunnel connected" in line for line in list(process.stderr_seen)):
        if not process.alive() or time.monotonic() > deadline:
            pytest.fail(f"the connector did not connect\n{process.output_tail()}")
        time.sleep(0.05)
    return process


def mcp_turn(client: anthropic.Anthropic, fake: FakeAnthropic, agent_id: str, environment_id: str, a: int) -> list[Any]:
    key = unique("tunnelled")
    fake.script(key, call("add", {"a": a, "b": 1}), say("done"))
    session = client.beta.sessions.create(agent=agent_id, environment_id=environment_id)
    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": f"add {key}"}]}]
    )
    deadline = time.monotonic() + TURN_TIMEOUT
    while True:
        events = collect(client.beta.sessions.events.list(session.id, limit=1000))
        if any(e.type == "session.status_idle" for e in events):
            return events
        if time.monotonic() > deadline:
            pytest.fail(f"no idle within {TURN_TIMEOUT} s: {[e.type for e in events]}")
        time.sleep(0.1)


def added(events: list[Any]) -> str | None:
    results = [e for e in events if e.type == "agent.mcp_tool_result"]
    return "".join(b.text for b in (results[0].content or []) if b.type == "text") if results else None


def connection_error(events: list[Any]) -> str:
    errors = [e for e in events if e.type == "session.error" and e.error.type == "mcp_connection_failed_error"]
    assert errors, [e.type for e in events]
    return errors[0].error.message


@pytest.fixture
def guarded(turns: Deployment, launch: Callable[..., Deployment], provider_env: dict[str, str]) -> Deployment:
    """`agentd dev`, or gateway + worker whose egress guard forbids private addresses."""
    if turns.mode == "dev":
        return turns
    return launch("prod", extra_env={**provider_env, "AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE": "false"})


def test_a_private_mcp_server_is_reached_through_the_tunnel_only(
    guarded: Deployment, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    client = guarded.client()
    tunnel = client.beta.tunnels.create(display_name="office")
    host = f"mcp.{tunnel.domain}"
    ca_key, ca, ca_pem = make_ca()
    server = McpServer(tls=issue_certificate(ca_key, ca, host, tmp_path), public_host=host)
    connectors: list[Process] = []
    try:
        agent = tunnel_agent(client, host)
        environment_id = client.beta.environments.create(name=unique("tunnel-env"), config={"type": "cloud"}).id
        upstream = f"127.0.0.1:{server.served.port}"
        token = RECORDER.secret(client.beta.tunnels.reveal_token(tunnel.id).tunnel_token)
        connectors.append(start_connector(guarded, token, upstream))

        # No active CA certificate: the tunnel carries nothing.
        refused = mcp_turn(client, fake_anthropic, agent.id, environment_id, 1)
        assert "no active CA certificate" in connection_error(refused) and server.calls == []
        certificate = client.beta.tunnels.certificates.create(tunnel.id, ca_certificate_pem=ca_pem)

        # Through the tunnel, TLS verified against the tunnel's CA.
        assert added(mcp_turn(client, fake_anthropic, agent.id, environment_id, 41)) == "42"
        assert server.calls == [("add", {"a": 41, "b": 1})]
        # Only agentd's workers use the proxy: no credential, or a forged one, is 407.
        assert "407" in proxied_status(guarded, f"https://{host}/mcp")
        forged = f"{int(time.time()) + 60}.{'ab' * 32}"
        assert "407" in proxied_status(guarded, f"https://{host}/mcp", forged)
        assert len(server.calls) == 1

        # A certificate of another CA is not trusted.
        client.beta.tunnels.certificates.archive(certificate.id, tunnel_id=tunnel.id)
        _, _, other_pem = make_ca("another CA")
        client.beta.tunnels.certificates.create(tunnel.id, ca_certificate_pem=other_pem)
        untrusted = mcp_turn(client, fake_anthropic, agent.id, environment_id, 2)
        assert added(untrusted) is None and len(server.calls) == 1, connection_error(untrusted)
        client.beta.tunnels.certificates.create(tunnel.id, ca_certificate_pem=ca_pem)

        # Rotation cuts the connector: it exits, refused; the new token works.
        rotated = RECORDER.secret(client.beta.tunnels.rotate_token(tunnel.id).tunnel_token)
        connectors[0].proc.wait(timeout=20)
        assert connectors[0].proc.returncode != 0, connectors[0].output_tail()
        assert "refused the tunnel token" in connectors[0].output_tail()
        cut = mcp_turn(client, fake_anthropic, agent.id, environment_id, 3)
        assert added(cut) is None and len(server.calls) == 1
        stale = Process("agentd tunnel (old token)", [AGENTD_BIN, "tunnel", "--gateway", guarded.url, "--upstream", upstream],
                        base_env(AGENTD_TUNNEL_TOKEN=token))
        assert stale.proc.wait(timeout=20) != 0, "the old token no longer connects"
        connectors.append(start_connector(guarded, rotated, upstream))
        assert added(mcp_turn(client, fake_anthropic, agent.id, environment_id, 9)) == "10"

        # Archiving cuts everything: the connector exits, nothing reaches the server.
        client.beta.tunnels.archive(tunnel.id)
        connectors[1].proc.wait(timeout=20)
        assert connectors[1].proc.returncode != 0, connectors[1].output_tail()
        gone = mcp_turn(client, fake_anthropic, agent.id, environment_id, 5)
        assert "archived" in connection_error(gone) and len(server.calls) == 2
    finally:
        for connector in connectors:
            connector.stop(timeout=5)
        server.close()


def test_a_terminating_connector_presents_a_client_certificate_to_the_upstream(
    turns: Deployment, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    """Terminating mode (`--tls-cert`): the connector serves the worker's TLS with a
    certificate for the tunnel host that the tunnel's CA issued, and opens its own
    connection to the upstream. An upstream that requires a client certificate (mutual
    TLS) gets the connector's `--upstream-client-cert`; without one nothing reaches it.
    An `http://` upstream is spoken to in plain HTTP."""
    client = turns.client()
    tunnel_ca_key, tunnel_ca, tunnel_ca_pem = make_ca("tunnel CA")
    upstream_ca_key, upstream_ca, upstream_ca_pem = make_ca("upstream CA")
    client_ca_key, client_ca, client_ca_pem = make_ca("upstream client CA")
    upstream_ca_file, client_ca_file = tmp_path / "upstream-ca.pem", tmp_path / "client-ca.pem"
    upstream_ca_file.write_text(upstream_ca_pem)
    client_ca_file.write_text(client_ca_pem)
    # The upstream's own certificate is for a name that is not its address: verified as
    # --upstream-server-name.
    upstream_tls = issue_certificate(upstream_ca_key, upstream_ca, "mcp.internal", tmp_path)
    client_cert, client_key = issue_certificate(client_ca_key, client_ca, "agentd tunnel client", tmp_path, "client")
    environment_id = client.beta.environments.create(name=unique("tunnel-env"), config={"type": "cloud"}).id
    servers: list[McpServer] = []
    connectors: list[Process] = []

    def tunnel_to(upstream_tls: tuple[str, str] | None) -> tuple[McpServer, str, str, list[str]]:
        """A tunnel trusting the tunnel CA, an agent using it, and an upstream MCP server
        (requiring a client certificate when it serves TLS): (server, agent id, token,
        the connector's --tls-cert/--tls-key for the tunnel host)."""
        tunnel = client.beta.tunnels.create()
        host = f"mcp.{tunnel.domain}"
        client.beta.tunnels.certificates.create(tunnel.id, ca_certificate_pem=tunnel_ca_pem)
        server = McpServer(tls=upstream_tls, public_host=host, client_ca=str(client_ca_file) if upstream_tls else None)
        servers.append(server)
        agent = tunnel_agent(client, host)
        token = RECORDER.secret(client.beta.tunnels.reveal_token(tunnel.id).tunnel_token)
        tls_cert, tls_key = issue_certificate(tunnel_ca_key, tunnel_ca, host, tmp_path)
        return server, agent.id, token, ["--tls-cert", tls_cert, "--tls-key", tls_key]

    try:
        mutual, mutual_agent, token, terminate = tunnel_to(upstream_tls)
        verify = ["--upstream-ca", str(upstream_ca_file), "--upstream-server-name", "mcp.internal"]
        present = ["--upstream-client-cert", client_cert, "--upstream-client-key", client_key]
        upstream = f"https://127.0.0.1:{mutual.served.port}"
        connectors.append(start_connector(turns, token, upstream, *terminate, *verify, *present))
        assert added(mcp_turn(client, fake_anthropic, mutual_agent, environment_id, 20)) == "21"
        assert mutual.calls == [("add", {"a": 20, "b": 1})]
        assert mutual.served.peers and set(mutual.served.peers) == {"commonName=agentd tunnel client"}

        # No client certificate: the upstream ends the handshake, nothing reaches it, and
        # the agent sees the connection fail.
        refusing, refusing_agent, token, terminate = tunnel_to(upstream_tls)
        upstream = f"https://127.0.0.1:{refusing.served.port}"
        connectors.append(start_connector(turns, token, upstream, *terminate, *verify))
        refused = mcp_turn(client, fake_anthropic, refusing_agent, environment_id, 30)
        assert added(refused) is None, [e.type for e in refused]
        # session.error mcp_connection_failed_error: the MCP initialize request went unanswered.
        assert "error sending request" in connection_error(refused), connection_error(refused)
        assert refusing.calls == [] and refusing.served.peers == []
        assert "asked for a client certificate and the connector has none" in connectors[1].output_tail()

        # A plain-HTTP upstream behind a terminating connector.
        plain, plain_agent, token, terminate = tunnel_to(None)
        connectors.append(start_connector(turns, token, f"http://127.0.0.1:{plain.served.port}", *terminate))
        assert added(mcp_turn(client, fake_anthropic, plain_agent, environment_id, 40)) == "41"
        assert plain.calls == [("add", {"a": 40, "b": 1})]
        assert mutual.calls == [("add", {"a": 20, "b": 1})] and refusing.calls == []
    finally:
        for connector in connectors:
            connector.stop(timeout=5)
        for server in servers:
            server.close()


def proxied_status(deployment: Deployment, url: str, credential: str | None = None) -> str:
    """What a gateway answers a `CONNECT` for `url` (the error httpx raises names it)."""
    headers = {"proxy-authorization": f"Bearer {credential}"} if credential else None
    proxy = httpx.Proxy(deployment.url, headers=headers)
    with httpx.Client(proxy=proxy, verify=False, timeout=10) as proxied:
        with pytest.raises(httpx.ProxyError) as refused:
            proxied.get(url)
    return str(refused.value)


def test_the_proxy_refuses_what_is_not_an_agentd_worker(turns: Deployment) -> None:
    """`CONNECT` to a gateway reaches only tunnel hosts whose connector it holds."""
    tunnel = turns.client().beta.tunnels.create()
    assert "502" in proxied_status(turns, f"https://mcp.{tunnel.domain}/mcp"), "no connector here"
    assert "403" in proxied_status(turns, "https://127.0.0.1:9/"), "not a tunnel host: no open proxy"


def test_connection_attempts_draw_from_the_keyless_bucket(
    turns: Deployment, launch: Callable[..., Deployment]
) -> None:
    """`GET /tunnel/connect` is metered per client address before any token is read: a
    stream of forged tokens gets 429, not a store read each."""
    deployment = launch(turns.mode, read_limit=3)
    forged = f"sk-agentd-tun-tnl_{'0' * 26}.{'61' * 4}.{'ab' * 32}"
    headers = {"authorization": f"Bearer {forged}", "connection": "upgrade", "upgrade": "agentd-tunnel"}
    statuses = [
        httpx.get(f"{deployment.url}/tunnel/connect", headers=headers, timeout=10).status_code for _ in range(5)
    ]
    assert statuses[0] == 401 and statuses[-1] == 429, statuses
