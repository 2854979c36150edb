"""Vaults and credentials: every method of `client.beta.vaults` and `.vaults.credentials`.

Wire facts: managed-agents-wire.md §2.10 (routes, rules), §2B.8 (request shapes), §3.8
(the `vault`, `vault_credential` and `vault_credential_validation` objects). Each test
runs against `agentd dev` and gateway+worker.

Secret fields (`access_token`, `refresh_token`, `client_secret`, `token`, `secret_value`)
are write-only: every value a test writes is registered with `recorder.secret`, so the
session audit proves no recorded response ever carried one, and each test also checks
the parsed responses directly.

`mcp_oauth_validate` is driven against a small MCP server + OAuth token endpoint played
by this module on 127.0.0.1 (see `FakeMcp`).
"""

from __future__ import annotations

import base64
import json
import secrets as _secrets
import threading
import urllib.parse
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator

import anthropic
import pytest
from anthropic.types.beta import BetaManagedAgentsVault
from anthropic.types.beta.vaults import BetaManagedAgentsCredential

from harness import RECORDER, Recorder, assert_error_envelope, collect, error_body, free_port, unique

SECRET_FIELDS = ("access_token", "refresh_token", "client_secret", "token", "secret_value")
UNKNOWN_VAULT = "vlt_pytest_does_not_exist"
UNKNOWN_CREDENTIAL = "vcrd_pytest_does_not_exist"


def new_secret(recorder: Recorder, label: str) -> str:
    return recorder.secret(f"{label}-{_secrets.token_hex(20)}")


def in_an_hour() -> str:
    return (datetime.now(timezone.utc) + timedelta(hours=1)).isoformat().replace("+00:00", "Z")


def an_hour_ago() -> str:
    return (datetime.now(timezone.utc) - timedelta(hours=1)).isoformat().replace("+00:00", "Z")


def keys_of(value: Any) -> set[str]:
    """Every object key anywhere in a JSON value."""
    if isinstance(value, dict):
        out = set(value)
        for item in value.values():
            out |= keys_of(item)
        return out
    if isinstance(value, list):
        out = set()
        for item in value:
            out |= keys_of(item)
        return out
    return set()


def assert_no_secrets(response: Any, written: list[str]) -> None:
    """No secret value, and no write-only secret field, in a parsed response."""
    dumped = response.model_dump(mode="json") if hasattr(response, "model_dump") else response
    text = json.dumps(dumped)
    for value in written:
        assert value not in text, f"a written secret ({value[:10]}…) appears in the response: {text[:600]}"
    leaked = keys_of(dumped) & set(SECRET_FIELDS)
    assert not leaked, f"write-only field(s) {sorted(leaked)} present in the response: {text[:600]}"


def create_vault(client: anthropic.Anthropic, **fields: Any) -> BetaManagedAgentsVault:
    fields.setdefault("display_name", unique("vault"))
    return client.beta.vaults.create(**fields)


def static_bearer(client: anthropic.Anthropic, vault_id: str, token: str, url: str, **fields: Any) -> Any:
    return client.beta.vaults.credentials.create(
        vault_id, auth={"type": "static_bearer", "token": token, "mcp_server_url": url}, **fields
    )


def env_var_auth(value: str, **fields: Any) -> dict[str, Any]:
    auth = {
        "type": "environment_variable",
        "secret_name": "EXAMPLE_API_KEY",
        "secret_value": value,
        "networking": {"type": "limited", "allowed_hosts": ["api.example.com", "*.example.org", "192.0.2.1"]},
    }
    auth.update(fields)
    return auth


# ---------------------------------------------------------------------------------------
# A fake MCP server and OAuth token endpoint


class FakeMcp:
    """`POST /mcp` answers 200 to a known bearer, 403 to a bearer starting with
    `forbidden-`, and 401 otherwise (echoing the Authorization header it got, so an
    unscrubbed capture would leak it); `POST /token` answers a refresh-token grant with a
    new access token when it knows the refresh token (and client secret), and 400
    otherwise (echoing the form, the raw body and the Authorization header it got)."""

    def __init__(self) -> None:
        self.good_tokens: set[str] = set()
        # refresh token -> (client_id, client_secret or None, "post" | "basic" | "none")
        self.refresh_tokens: dict[str, tuple[str, str | None, str]] = {}
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _reply(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                authorization = self.headers.get("authorization", "")
                with fake._lock:
                    fake.requests.append(
                        {"path": self.path, "authorization": authorization, "body": raw, "headers": dict(self.headers)}
                    )
                if self.path == "/mcp":
                    fake._mcp(self, authorization, raw)
                elif self.path == "/token":
                    fake._token(self, authorization, raw)
                else:
                    self._reply(404, {"error": "not_found"})

        self.handler = Handler
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.mcp_url = f"{self.base}/mcp"
        self.token_url = f"{self.base}/token"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _mcp(self, handler: Any, authorization: str, raw: str) -> None:
        token = authorization[len("Bearer ") :] if authorization.startswith("Bearer ") else None
        with self._lock:
            good = token is not None and token in self.good_tokens
        if not good and token is not None and token.startswith("forbidden-"):
            handler._reply(403, {"error": "insufficient_scope", "you_sent": authorization})
            return
        if not good:
            handler._reply(401, {"error": "invalid_token", "you_sent": authorization, "request": raw[:200]})
            return
        request = json.loads(raw or "{}")
        handler._reply(
            200,
            {
                "jsonrpc": "2.0",
                "id": request.get("id", 1),
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "pytest-fake-mcp", "version": "0.0.1"},
                },
            },
        )

    def _token(self, handler: Any, authorization: str, raw: str) -> None:
        form = {k: v[0] for k, v in urllib.parse.parse_qs(raw).items()}
        with self._lock:
            known = self.refresh_tokens.get(form.get("refresh_token", ""))
        accepted = False
        if known is not None and form.get("grant_type") == "refresh_token":
            client_id, client_secret, method = known
            if method == "post":
                accepted = form.get("client_id") == client_id and form.get("client_secret") == client_secret
            elif method == "basic":
                expected = "Basic " + base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
                accepted = authorization == expected
            else:
                accepted = form.get("client_id") == client_id
        if not accepted:
            handler._reply(
                400, {"error": "invalid_grant", "you_sent": form, "raw_body": raw, "authorization": authorization}
            )
            return
        fresh = RECORDER.secret(f"fresh-{_secrets.token_hex(16)}")
        with self._lock:
            # A server that re-probes with the refreshed token must succeed.
            self.good_tokens.add(fresh)
        handler._reply(200, {"access_token": fresh, "token_type": "bearer", "expires_in": 3600})

    def accept(self, token: str) -> None:
        with self._lock:
            self.good_tokens.add(token)

    def accept_refresh(self, refresh_token: str, client_id: str, client_secret: str | None, method: str) -> None:
        with self._lock:
            self.refresh_tokens[refresh_token] = (client_id, client_secret, method)

    def requests_to(self, path: str, mark: int) -> list[dict[str, Any]]:
        with self._lock:
            return [r for r in self.requests[mark:] if r["path"] == path]

    def mark(self) -> int:
        with self._lock:
            return len(self.requests)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture(scope="module")
def fake_mcp() -> Iterator[FakeMcp]:
    fake = FakeMcp()
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture
def vault(client: anthropic.Anthropic) -> BetaManagedAgentsVault:
    return create_vault(client)


# ---------------------------------------------------------------------------------------
# vaults


def test_vault_crud(client: anthropic.Anthropic) -> None:
    name = unique("crud")
    raw = client.beta.vaults.with_raw_response.create(display_name=name, metadata={"a": "1", "b": "2"})
    created = raw.parse()
    body = raw.json()
    assert isinstance(body, dict)
    assert not ({"id", "type", "display_name", "metadata", "created_at", "updated_at"} - set(body)), body
    assert created.type == "vault"
    assert created.id.startswith("vlt_"), created.id
    assert created.display_name == name
    assert created.metadata == {"a": "1", "b": "2"}
    assert created.archived_at is None
    assert created.updated_at >= created.created_at

    fetched = client.beta.vaults.retrieve(created.id)
    assert fetched.model_dump() == created.model_dump()

    renamed = client.beta.vaults.update(created.id, display_name=name + "-renamed")
    assert renamed.display_name == name + "-renamed"
    assert renamed.metadata == {"a": "1", "b": "2"}  # omitted: preserved
    assert renamed.created_at == created.created_at
    assert renamed.updated_at >= created.updated_at

    patched = client.beta.vaults.update(created.id, metadata={"a": None, "c": "3"})
    assert patched.metadata == {"b": "2", "c": "3"}
    assert patched.display_name == name + "-renamed"
    assert client.beta.vaults.retrieve(created.id).model_dump() == patched.model_dump()

    archived = client.beta.vaults.archive(created.id)
    assert archived.id == created.id
    assert archived.archived_at is not None
    assert archived.archived_at >= created.created_at
    assert client.beta.vaults.retrieve(created.id).archived_at == archived.archived_at

    deleted = client.beta.vaults.delete(created.id)
    assert deleted.id == created.id
    assert deleted.type == "vault_deleted"
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.beta.vaults.retrieve(created.id)
    assert_error_envelope(caught.value.response, 404, "not_found_error")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.delete(created.id)


@pytest.mark.parametrize("display_name", ["", "x" * 256], ids=["empty", "256-chars"])
def test_vault_display_name_length(client: anthropic.Anthropic, display_name: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.vaults.create(display_name=display_name)
    body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert "display_name" in body["error"]["message"], body
    assert create_vault(client, display_name="y" * 255).display_name == "y" * 255


def test_vault_and_credential_metadata_limits(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    """"Maximum 16 pairs, keys up to 64 chars, values up to 512 chars." (§2B.8)"""
    at_limit = {f"k{i:02d}".ljust(64, "x"): "v" * 512 for i in range(16)}
    assert create_vault(client, metadata=at_limit).metadata == at_limit
    token = new_secret(recorder, "meta")
    credential = static_bearer(client, vault.id, token, "https://mcp.example.com/mcp", metadata=at_limit)
    assert credential.metadata == at_limit

    too_much = [
        {f"k{i}": "v" for i in range(17)},
        {"k" * 65: "v"},
        {"k": "v" * 513},
    ]
    for metadata in too_much:
        with pytest.raises(anthropic.BadRequestError):
            create_vault(client, metadata=metadata)
        with pytest.raises(anthropic.BadRequestError):
            static_bearer(client, vault.id, token, "https://mcp.example.com/mcp", metadata=metadata)
    # A patch that would grow the stored bag past 16 keys is rejected too.
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.update(credential.id, vault_id=vault.id, metadata={"one-more": "x"})
    assert client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id).metadata == at_limit
    with pytest.raises(anthropic.BadRequestError):
        static_bearer(client, vault.id, token, "https://mcp.example.com/mcp", display_name="d" * 256)


def test_vault_list_paginates_and_include_archived(workspace_client: Any) -> None:
    client = workspace_client()
    kept = [create_vault(client).id for _ in range(3)]
    archived = create_vault(client).id
    client.beta.vaults.archive(archived)

    first = client.beta.vaults.list(limit=1)
    assert len(first.data) == 1 and first.next_page
    pages = list(first.iter_pages())
    assert [len(p.data) for p in pages] == [1, 1, 1]
    assert not pages[-1].next_page

    listed = [v.id for v in collect(client.beta.vaults.list(limit=1))]
    assert len(listed) == len(set(listed)), listed
    assert set(listed) == set(kept)

    everything = {v.id: v for v in collect(client.beta.vaults.list(include_archived=True, limit=2))}
    assert set(everything) == {*kept, archived}
    assert everything[archived].archived_at is not None


def test_vault_of_another_workspace_is_not_found(
    client: anthropic.Anthropic, workspace_client: Callable[[], anthropic.Anthropic], recorder: Recorder
) -> None:
    ours = create_vault(client, metadata={"owner": "default"})
    credential = static_bearer(client, ours.id, new_secret(recorder, "xws"), "https://mcp.example.com/mcp")
    other = workspace_client()

    with pytest.raises(anthropic.NotFoundError) as caught:
        other.beta.vaults.retrieve(ours.id)
    assert_error_envelope(caught.value.response, 404, "not_found_error")
    with pytest.raises(anthropic.NotFoundError):
        other.beta.vaults.update(ours.id, display_name="hijacked")
    with pytest.raises(anthropic.NotFoundError):
        other.beta.vaults.archive(ours.id)
    with pytest.raises(anthropic.NotFoundError):
        other.beta.vaults.delete(ours.id)
    with pytest.raises(anthropic.NotFoundError):
        other.beta.vaults.credentials.retrieve(credential.id, vault_id=ours.id)
    with pytest.raises(anthropic.NotFoundError):
        collect(other.beta.vaults.credentials.list(ours.id))
    with pytest.raises(anthropic.NotFoundError):
        static_bearer(other, ours.id, new_secret(recorder, "xws"), "https://mcp.example.com/mcp")
    with pytest.raises(anthropic.NotFoundError):
        other.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=ours.id)
    assert collect(other.beta.vaults.list(include_archived=True)) == []

    assert client.beta.vaults.retrieve(ours.id).model_dump() == ours.model_dump()
    assert client.beta.vaults.credentials.retrieve(credential.id, vault_id=ours.id).id == credential.id


def test_vault_delete_removes_its_credentials(client: anthropic.Anthropic, recorder: Recorder) -> None:
    doomed = create_vault(client)
    survivor_vault = create_vault(client)
    tokens = [new_secret(recorder, "del") for _ in range(3)]
    credentials = [static_bearer(client, doomed.id, t, "https://mcp.example.com/mcp") for t in tokens]
    archived = client.beta.vaults.credentials.archive(credentials[0].id, vault_id=doomed.id)
    assert archived.archived_at is not None
    survivor = static_bearer(client, survivor_vault.id, new_secret(recorder, "keep"), "https://mcp.example.com/mcp")

    assert client.beta.vaults.delete(doomed.id).type == "vault_deleted"
    for credential in credentials:  # archived ones too
        with pytest.raises(anthropic.NotFoundError):
            client.beta.vaults.credentials.retrieve(credential.id, vault_id=doomed.id)
    with pytest.raises(anthropic.NotFoundError):
        collect(client.beta.vaults.credentials.list(doomed.id, include_archived=True))

    assert client.beta.vaults.credentials.retrieve(survivor.id, vault_id=survivor_vault.id).id == survivor.id


def test_unknown_vault_is_not_found(client: anthropic.Anthropic, recorder: Recorder) -> None:
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.retrieve(UNKNOWN_VAULT)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.update(UNKNOWN_VAULT, display_name="x")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.archive(UNKNOWN_VAULT)
    with pytest.raises(anthropic.NotFoundError):
        static_bearer(client, UNKNOWN_VAULT, new_secret(recorder, "nov"), "https://mcp.example.com/mcp")


# ---------------------------------------------------------------------------------------
# credentials: the three auth types


def test_create_mcp_oauth_with_refresh(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    access, refresh, client_secret = (new_secret(recorder, k) for k in ("access", "refresh", "csecret"))
    expires_at = in_an_hour()
    raw = client.beta.vaults.credentials.with_raw_response.create(
        vault.id,
        display_name="Linear",
        metadata={"team": "qa"},
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": "https://mcp.example.com/mcp",
            "access_token": access,
            "expires_at": expires_at,
            "refresh": {
                "client_id": "client-123",
                "refresh_token": refresh,
                "token_endpoint": "https://auth.example.com/oauth/token",
                "token_endpoint_auth": {"type": "client_secret_post", "client_secret": client_secret},
                "scope": "read write",
                "resource": "https://mcp.example.com/",
            },
        },
    )
    credential = raw.parse()
    assert_no_secrets(raw.json(), [access, refresh, client_secret])
    assert raw.http_response.text and all(s not in raw.http_response.text for s in (access, refresh, client_secret))

    for current in (credential, client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id)):
        assert_no_secrets(current, [access, refresh, client_secret])
        assert current.type == "vault_credential"
        assert current.id.startswith("vcrd_"), current.id
        assert current.vault_id == vault.id
        assert current.display_name == "Linear"
        assert current.metadata == {"team": "qa"}
        assert current.archived_at is None
        auth = current.auth
        assert auth.type == "mcp_oauth"
        assert auth.mcp_server_url == "https://mcp.example.com/mcp"
        assert auth.expires_at is not None
        want = datetime.fromisoformat(expires_at.replace("Z", "+00:00"))
        assert abs((auth.expires_at - want).total_seconds()) < 1, (auth.expires_at, want)
        assert auth.refresh is not None
        assert auth.refresh.client_id == "client-123"
        assert auth.refresh.token_endpoint == "https://auth.example.com/oauth/token"
        assert auth.refresh.token_endpoint_auth.type == "client_secret_post"
        assert auth.refresh.scope == "read write"
        assert auth.refresh.resource == "https://mcp.example.com/"


def test_create_static_bearer(client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder) -> None:
    token = new_secret(recorder, "bearer")
    credential = static_bearer(client, vault.id, token, "https://mcp.example.com/mcp")
    for current in (credential, client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id)):
        assert_no_secrets(current, [token])
        assert current.auth.type == "static_bearer"
        assert current.auth.mcp_server_url == "https://mcp.example.com/mcp"
        assert current.display_name is None
        assert current.metadata == {}


def test_create_environment_variable(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    value = new_secret(recorder, "envval")
    credential = client.beta.vaults.credentials.create(
        vault.id,
        display_name="example api",
        auth=env_var_auth(value, injection_location={"header": True, "body": False}),
    )
    for current in (credential, client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id)):
        assert_no_secrets(current, [value])
        auth = current.auth
        assert auth.type == "environment_variable"
        assert auth.secret_name == "EXAMPLE_API_KEY"
        assert auth.networking.type == "limited"
        assert auth.networking.allowed_hosts == ["api.example.com", "*.example.org", "192.0.2.1"]
        assert (auth.injection_location.header, auth.injection_location.body) == (True, False)

    unrestricted = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "environment_variable",
            "secret_name": "OTHER_TOKEN",
            "secret_value": new_secret(recorder, "envval"),
            "networking": {"type": "unrestricted"},
        },
    )
    assert unrestricted.auth.networking.type == "unrestricted"
    assert isinstance(unrestricted.auth.injection_location.body, bool)
    assert isinstance(unrestricted.auth.injection_location.header, bool)
    assert unrestricted.auth.injection_location.body or unrestricted.auth.injection_location.header


@pytest.mark.parametrize(
    "host",
    ["https://api.example.com/v1", "api.example.com/v1", "api.example.com:443", "::1", "*"],
    ids=["url-with-path", "path", "port", "ipv6", "bare-star"],
)
def test_invalid_allowed_host_is_rejected(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, host: str
) -> None:
    auth = env_var_auth(new_secret(recorder, "envval"))
    auth["networking"] = {"type": "limited", "allowed_hosts": ["api.example.com", host]}
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.vaults.credentials.create(vault.id, auth=auth)
    body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert "allowed_hosts" in body["error"]["message"], body
    assert collect(client.beta.vaults.credentials.list(vault.id, include_archived=True)) == []


def test_too_many_allowed_hosts_is_rejected(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    auth = env_var_auth(new_secret(recorder, "envval"))
    auth["networking"] = {"type": "limited", "allowed_hosts": [f"h{i}.example.com" for i in range(17)]}
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.create(vault.id, auth=auth)
    auth["networking"]["allowed_hosts"] = auth["networking"]["allowed_hosts"][:16]
    assert len(client.beta.vaults.credentials.create(vault.id, auth=auth).auth.networking.allowed_hosts) == 16


def test_expires_at_in_the_past_is_rejected(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    access = new_secret(recorder, "access")
    auth = {
        "type": "mcp_oauth",
        "mcp_server_url": "https://mcp.example.com/mcp",
        "access_token": access,
        "expires_at": an_hour_ago(),
    }
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.vaults.credentials.create(vault.id, auth=auth)
    body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert "expires_at" in body["error"]["message"], body
    assert access not in caught.value.response.text

    auth["expires_at"] = in_an_hour()
    credential = client.beta.vaults.credentials.create(vault.id, auth=auth)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.update(
            credential.id, vault_id=vault.id, auth={"type": "mcp_oauth", "expires_at": an_hour_ago()}
        )
    assert client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id).auth.expires_at is not None


def test_credential_in_archived_vault_cannot_be_created(client: anthropic.Anthropic, recorder: Recorder) -> None:
    archived = create_vault(client)
    client.beta.vaults.archive(archived.id)
    with pytest.raises(anthropic.BadRequestError) as caught:
        static_bearer(client, archived.id, new_secret(recorder, "arch"), "https://mcp.example.com/mcp")
    assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert collect(client.beta.vaults.credentials.list(archived.id, include_archived=True)) == []


def test_create_validation(client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder) -> None:
    token = new_secret(recorder, "val")
    bad_auths = [
        {"type": "static_bearer", "token": token},  # no mcp_server_url
        {"type": "static_bearer", "mcp_server_url": "https://mcp.example.com/mcp"},  # no token
        {"type": "static_bearer", "token": token, "mcp_server_url": "ftp://mcp.example.com"},
        {"type": "carrier_pigeon", "token": token},
        env_var_auth(token, secret_name="1-not-a-var"),
    ]
    for auth in bad_auths:
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.beta.vaults.credentials.create(vault.id, auth=auth)  # type: ignore[arg-type]
        assert_error_envelope(caught.value.response, 400, "invalid_request_error")
        assert token not in caught.value.response.text, "an error message echoed a secret"
    assert collect(client.beta.vaults.credentials.list(vault.id, include_archived=True)) == []


# ---------------------------------------------------------------------------------------
# credentials: update


def test_update_cannot_change_the_type(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    token = new_secret(recorder, "type")
    credential = static_bearer(client, vault.id, token, "https://mcp.example.com/mcp")
    other = new_secret(recorder, "type")
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.vaults.credentials.update(
            credential.id, vault_id=vault.id, auth=env_var_auth(other)  # type: ignore[arg-type]
        )
    assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert other not in caught.value.response.text
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.update(
            credential.id, vault_id=vault.id, auth={"type": "mcp_oauth", "access_token": other}
        )
    after = client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id)
    assert after.auth.type == "static_bearer"
    assert after.model_dump() == credential.model_dump()


def test_update_static_bearer_token_takes_effect(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    old, new = new_secret(recorder, "old"), new_secret(recorder, "new")
    fake_mcp.accept(new)
    credential = static_bearer(client, vault.id, old, fake_mcp.mcp_url, metadata={"a": "1", "b": "2"})
    assert client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id).status == "invalid"

    updated = client.beta.vaults.credentials.update(
        credential.id,
        vault_id=vault.id,
        auth={"type": "static_bearer", "token": new},
        display_name="rotated",
        metadata={"a": None, "c": "3"},
    )
    assert_no_secrets(updated, [old, new])
    assert updated.auth.type == "static_bearer"
    assert updated.auth.mcp_server_url == fake_mcp.mcp_url
    assert updated.display_name == "rotated"
    assert updated.metadata == {"b": "2", "c": "3"}
    assert updated.created_at == credential.created_at
    assert updated.updated_at >= credential.updated_at

    # The rotated token is the one the server now sends.
    mark = fake_mcp.mark()
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert result.status == "valid", result
    assert [r["authorization"] for r in fake_mcp.requests_to("/mcp", mark)] == [f"Bearer {new}"]

    # Metadata-only and display-name-only updates keep the secret.
    again = client.beta.vaults.credentials.update(credential.id, vault_id=vault.id, metadata={"d": "4"})
    assert again.metadata == {"b": "2", "c": "3", "d": "4"}
    assert again.display_name == "rotated"
    assert client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id).status == "valid"
    fetched = client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id)
    assert_no_secrets(fetched, [old, new])
    assert fetched.model_dump() == again.model_dump()


def test_update_environment_variable(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    old, new = new_secret(recorder, "envold"), new_secret(recorder, "envnew")
    credential = client.beta.vaults.credentials.create(
        vault.id, auth=env_var_auth(old, injection_location={"header": True, "body": True})
    )
    updated = client.beta.vaults.credentials.update(
        credential.id,
        vault_id=vault.id,
        auth={"type": "environment_variable", "secret_value": new, "injection_location": {"body": False}},
    )
    assert_no_secrets(updated, [old, new])
    auth = updated.auth
    assert auth.secret_name == "EXAMPLE_API_KEY"
    # "A location you leave out keeps its current setting."
    assert (auth.injection_location.header, auth.injection_location.body) == (True, False)
    assert auth.networking.model_dump() == credential.auth.networking.model_dump()

    # "After the change, at least one location must be enabled."
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.update(
            credential.id,
            vault_id=vault.id,
            auth={"type": "environment_variable", "injection_location": {"header": False}},
        )

    # networking "replaces the stored one as a whole"
    rehosted = client.beta.vaults.credentials.update(
        credential.id,
        vault_id=vault.id,
        auth={"type": "environment_variable", "networking": {"type": "limited", "allowed_hosts": ["x.example.net"]}},
    )
    assert rehosted.auth.networking.type == "limited"
    assert rehosted.auth.networking.allowed_hosts == ["x.example.net"]
    assert (rehosted.auth.injection_location.header, rehosted.auth.injection_location.body) == (True, False)

    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.vaults.credentials.update(
            credential.id,
            vault_id=vault.id,
            auth={
                "type": "environment_variable",
                "networking": {"type": "limited", "allowed_hosts": ["https://x.example.net/path"]},
            },
        )
    assert "allowed_hosts" in error_body(caught.value)["error"]["message"]
    after = client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id)
    assert after.auth.networking.allowed_hosts == ["x.example.net"]
    assert_no_secrets(after, [old, new])


def test_update_mcp_oauth_secrets(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    written = [new_secret(recorder, k) for k in ("access", "refresh", "csecret")]
    client_id = unique("client")
    credential = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": fake_mcp.mcp_url,
            "access_token": written[0],
            "refresh": {
                "client_id": client_id,
                "refresh_token": written[1],
                "token_endpoint": fake_mcp.token_url,
                "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": written[2]},
                "scope": "read",
            },
        },
    )
    rotated = [new_secret(recorder, k) for k in ("access2", "refresh2", "csecret2")]
    written += rotated
    # Only the rotated refresh token + client secret are accepted by the token endpoint.
    fake_mcp.accept_refresh(rotated[1], client_id, rotated[2], "basic")
    updated = client.beta.vaults.credentials.update(
        credential.id,
        vault_id=vault.id,
        auth={
            "type": "mcp_oauth",
            "access_token": rotated[0],
            "expires_at": in_an_hour(),
            "refresh": {
                "refresh_token": rotated[1],
                "scope": "read write",
                # "It keeps its current `token_endpoint_auth` type, even if the `type` sent
                # with this secret is the other one."
                "token_endpoint_auth": {"type": "client_secret_post", "client_secret": rotated[2]},
            },
        },
    )
    assert_no_secrets(updated, written)
    assert updated.auth.type == "mcp_oauth"
    assert updated.auth.mcp_server_url == fake_mcp.mcp_url
    assert updated.auth.expires_at is not None
    assert updated.auth.refresh is not None
    assert updated.auth.refresh.client_id == client_id
    assert updated.auth.refresh.scope == "read write"
    assert updated.auth.refresh.token_endpoint_auth.type == "client_secret_basic"
    assert_no_secrets(client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id), written)

    # The rotated secrets are the ones in use: the (unknown) access token gets a 401 and
    # the refresh with the new refresh token and client secret, sent as Basic, succeeds.
    mark = fake_mcp.mark()
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_no_secrets(result, written)
    assert [r["authorization"] for r in fake_mcp.requests_to("/mcp", mark)][:1] == [f"Bearer {rotated[0]}"]
    assert result.refresh is not None and result.refresh.status == "succeeded", result
    exchange = fake_mcp.requests_to("/token", mark)[0]
    assert exchange["authorization"].startswith("Basic ")
    assert {k: v[0] for k, v in urllib.parse.parse_qs(exchange["body"]).items()}.get("scope") == "read write"

    # An empty scope clears it.
    unscoped = client.beta.vaults.credentials.update(
        credential.id, vault_id=vault.id, auth={"type": "mcp_oauth", "refresh": {"scope": ""}}
    )
    assert unscoped.auth.refresh is not None and unscoped.auth.refresh.scope in (None, "")


def test_immutable_auth_fields_stay(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    """`mcp_server_url`, `secret_name` and `refresh.client_id` can't be changed."""
    bearer = static_bearer(client, vault.id, new_secret(recorder, "imm"), "https://mcp.example.com/mcp")
    env = client.beta.vaults.credentials.create(vault.id, auth=env_var_auth(new_secret(recorder, "imm")))
    oauth = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": "https://mcp.example.com/mcp",
            "access_token": new_secret(recorder, "imm"),
            "refresh": {
                "client_id": "fixed-client",
                "refresh_token": new_secret(recorder, "imm"),
                "token_endpoint": "https://auth.example.com/token",
                "token_endpoint_auth": {"type": "none"},
            },
        },
    )
    attempts = [
        (bearer, {"type": "static_bearer", "mcp_server_url": "https://evil.example.com/mcp"}),
        (env, {"type": "environment_variable", "secret_name": "RENAMED"}),
        (oauth, {"type": "mcp_oauth", "mcp_server_url": "https://evil.example.com/mcp"}),
        (oauth, {"type": "mcp_oauth", "refresh": {"client_id": "other-client"}}),
    ]
    for credential, auth in attempts:
        try:
            client.beta.vaults.credentials.update(credential.id, vault_id=vault.id, auth=auth)  # type: ignore[arg-type]
        except anthropic.BadRequestError as err:
            assert_error_envelope(err.response, 400, "invalid_request_error")
        after = client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id)
        assert after.auth.model_dump() == credential.auth.model_dump(), (auth, after.auth)


def test_archived_credential_cannot_be_updated(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    credential = static_bearer(client, vault.id, new_secret(recorder, "arch"), "https://mcp.example.com/mcp")
    archived = client.beta.vaults.credentials.archive(credential.id, vault_id=vault.id)
    assert archived.archived_at is not None
    with pytest.raises(anthropic.BadRequestError):
        client.beta.vaults.credentials.update(credential.id, vault_id=vault.id, display_name="thawed")


# ---------------------------------------------------------------------------------------
# credentials: list, archive, delete, scoping


def test_credential_list_archive_delete(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    tokens = [new_secret(recorder, "list") for _ in range(3)]
    made = [static_bearer(client, vault.id, t, "https://mcp.example.com/mcp") for t in tokens]
    value = new_secret(recorder, "listenv")
    made.append(client.beta.vaults.credentials.create(vault.id, auth=env_var_auth(value)))
    ids = [c.id for c in made]

    first = client.beta.vaults.credentials.list(vault.id, limit=1)
    assert len(first.data) == 1 and first.next_page
    pages = list(first.iter_pages())
    assert [len(p.data) for p in pages] == [1, 1, 1, 1]
    listed = [c.id for c in collect(client.beta.vaults.credentials.list(vault.id, limit=1))]
    assert len(listed) == len(set(listed)) and set(listed) == set(ids)
    for item in collect(client.beta.vaults.credentials.list(vault.id)):
        assert_no_secrets(item, [*tokens, value])
        assert item.vault_id == vault.id

    archived = client.beta.vaults.credentials.archive(ids[0], vault_id=vault.id)
    assert archived.id == ids[0]
    assert archived.archived_at is not None
    assert_no_secrets(archived, tokens)
    assert {c.id for c in collect(client.beta.vaults.credentials.list(vault.id))} == set(ids[1:])
    everything = {c.id: c for c in collect(client.beta.vaults.credentials.list(vault.id, include_archived=True))}
    assert set(everything) == set(ids)
    assert everything[ids[0]].archived_at is not None

    deleted = client.beta.vaults.credentials.delete(ids[1], vault_id=vault.id)
    assert deleted.id == ids[1]
    assert deleted.type == "vault_credential_deleted"
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.beta.vaults.credentials.retrieve(ids[1], vault_id=vault.id)
    assert_error_envelope(caught.value.response, 404, "not_found_error")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.delete(ids[1], vault_id=vault.id)
    assert ids[1] not in {c.id for c in collect(client.beta.vaults.credentials.list(vault.id, include_archived=True))}


def test_credential_is_scoped_to_its_vault(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    credential = static_bearer(client, vault.id, new_secret(recorder, "scope"), "https://mcp.example.com/mcp")
    elsewhere = create_vault(client)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.retrieve(credential.id, vault_id=elsewhere.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.update(credential.id, vault_id=elsewhere.id, display_name="moved")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.archive(credential.id, vault_id=elsewhere.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.delete(credential.id, vault_id=elsewhere.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=elsewhere.id)
    assert collect(client.beta.vaults.credentials.list(elsewhere.id, include_archived=True)) == []
    with pytest.raises(anthropic.NotFoundError):
        client.beta.vaults.credentials.retrieve(UNKNOWN_CREDENTIAL, vault_id=vault.id)

    intact = client.beta.vaults.credentials.retrieve(credential.id, vault_id=vault.id)
    assert intact.model_dump() == credential.model_dump()


# ---------------------------------------------------------------------------------------
# mcp_oauth_validate


def assert_validation(result: Any, credential: BetaManagedAgentsCredential, written: list[str]) -> None:
    assert result.type == "vault_credential_validation"
    assert result.credential_id == credential.id
    assert result.vault_id == credential.vault_id
    assert result.validated_at.tzinfo is not None
    assert_no_secrets(result, written)


def test_validate_good_static_bearer(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    token = new_secret(recorder, "good")
    fake_mcp.accept(token)
    credential = static_bearer(client, vault.id, token, fake_mcp.mcp_url)

    mark = fake_mcp.mark()
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_validation(result, credential, [token])
    assert result.status == "valid", result
    assert result.has_refresh_token is False
    assert result.mcp_probe is None
    assert result.refresh is None

    probes = fake_mcp.requests_to("/mcp", mark)
    assert len(probes) >= 1
    assert probes[0]["authorization"] == f"Bearer {token}"
    assert json.loads(probes[0]["body"]).get("method") == "initialize"


def test_validate_bad_static_bearer_is_invalid_and_scrubbed(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    token = new_secret(recorder, "bad")  # the fake server does not know it
    credential = static_bearer(client, vault.id, token, fake_mcp.mcp_url)

    mark = fake_mcp.mark()
    raw = client.beta.vaults.credentials.with_raw_response.mcp_oauth_validate(credential.id, vault_id=vault.id)
    result = raw.parse()
    assert token not in raw.http_response.text
    assert_validation(result, credential, [token])
    assert result.status == "invalid", result
    assert result.has_refresh_token is False
    assert result.mcp_probe is not None
    assert result.mcp_probe.method == "initialize"
    response = result.mcp_probe.http_response
    assert response is not None
    assert response.status_code == 401
    assert "json" in response.content_type
    assert isinstance(response.body_truncated, bool)
    # The fake server echoed "Bearer <token>"; the capture must keep the body but not the token.
    assert fake_mcp.requests_to("/mcp", mark)[0]["authorization"] == f"Bearer {token}"
    assert "invalid_token" in response.body
    assert token not in response.body
    assert result.refresh is not None
    assert result.refresh.status == "no_refresh_token"


@pytest.mark.parametrize("method", ["client_secret_post", "client_secret_basic"])
def test_validate_refreshes_on_401(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp, method: str
) -> None:
    stale, refresh, client_secret = (new_secret(recorder, k) for k in ("stale", "refresh", "csecret"))
    client_id = unique("client")
    fake_mcp.accept_refresh(refresh, client_id, client_secret, "post" if method == "client_secret_post" else "basic")
    credential = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": fake_mcp.mcp_url,
            "access_token": stale,
            "refresh": {
                "client_id": client_id,
                "refresh_token": refresh,
                "token_endpoint": fake_mcp.token_url,
                "token_endpoint_auth": {"type": method, "client_secret": client_secret},
            },
        },
    )
    written = [stale, refresh, client_secret]
    assert_no_secrets(credential, written)

    mark = fake_mcp.mark()
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_validation(result, credential, written)
    assert result.has_refresh_token is True
    assert result.refresh is not None
    assert result.refresh.status == "succeeded", result
    assert result.refresh.http_response is None  # "Populated only when `status` is `failed`."
    assert result.status == "valid", result
    if result.mcp_probe is not None and result.mcp_probe.http_response is not None:
        assert stale not in result.mcp_probe.http_response.body

    exchanges = fake_mcp.requests_to("/token", mark)
    assert len(exchanges) == 1, exchanges
    form = {k: v[0] for k, v in urllib.parse.parse_qs(exchanges[0]["body"]).items()}
    assert form.get("grant_type") == "refresh_token"
    assert form.get("refresh_token") == refresh
    if method == "client_secret_post":
        assert form.get("client_id") == client_id
        assert form.get("client_secret") == client_secret
        assert not exchanges[0]["authorization"].startswith("Basic ")
    else:
        assert "client_secret" not in form, "client_secret_basic must not put the secret in the body"
        assert exchanges[0]["authorization"].startswith("Basic ")

    # The refresh was real: its token was written back (a rotating server has consumed
    # the old refresh token), so the next validation probes with it and refreshes nothing.
    mark = fake_mcp.mark()
    again = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert again.status == "valid" and again.refresh is None, again
    assert fake_mcp.requests_to("/token", mark) == []
    probes = fake_mcp.requests_to("/mcp", mark)
    assert probes and probes[0]["authorization"] != f"Bearer {stale}"


def test_validate_failed_refresh_is_invalid_and_scrubbed(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    stale, refresh, client_secret = (new_secret(recorder, k) for k in ("stale", "norefresh", "csecret"))
    credential = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": fake_mcp.mcp_url,
            "access_token": stale,
            "refresh": {
                "client_id": "client-unknown",
                "refresh_token": refresh,  # the token endpoint does not know it: 400
                "token_endpoint": fake_mcp.token_url,
                "token_endpoint_auth": {"type": "client_secret_post", "client_secret": client_secret},
            },
        },
    )
    written = [stale, refresh, client_secret]
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_validation(result, credential, written)
    assert result.status == "invalid", result
    assert result.has_refresh_token is True
    assert result.mcp_probe is not None and result.mcp_probe.method == "initialize"
    assert result.mcp_probe.http_response is not None
    assert result.mcp_probe.http_response.status_code == 401
    assert stale not in result.mcp_probe.http_response.body
    assert result.refresh is not None
    assert result.refresh.status == "failed"
    captured = result.refresh.http_response
    assert captured is not None
    assert captured.status_code == 400
    # The fake endpoint echoed the whole form, refresh token and client secret included.
    assert "invalid_grant" in captured.body
    for value in written:
        assert value not in captured.body


def test_validate_good_mcp_oauth_token(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    access, refresh = new_secret(recorder, "oauthgood"), new_secret(recorder, "refresh")
    fake_mcp.accept(access)
    credential = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": fake_mcp.mcp_url,
            "access_token": access,
            "expires_at": in_an_hour(),
            "refresh": {
                "client_id": "c",
                "refresh_token": refresh,
                "token_endpoint": fake_mcp.token_url,
                "token_endpoint_auth": {"type": "none"},
            },
        },
    )
    mark = fake_mcp.mark()
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_validation(result, credential, [access, refresh])
    assert result.status == "valid"
    assert result.has_refresh_token is True
    assert result.mcp_probe is None
    assert result.refresh is None  # "Null when no refresh was attempted."
    assert fake_mcp.requests_to("/token", mark) == []


def test_validate_unreachable_server_is_unknown(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder
) -> None:
    token = new_secret(recorder, "unreach")
    closed = free_port()  # nothing listens there
    credential = static_bearer(client, vault.id, token, f"http://127.0.0.1:{closed}/mcp")
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_validation(result, credential, [token])
    assert result.status == "unknown", result
    assert result.has_refresh_token is False
    if result.mcp_probe is not None:
        assert result.mcp_probe.http_response is None  # "didn't return one for the failing step"


def test_validate_non_401_rejection_does_not_refresh(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    access = recorder.secret(f"forbidden-{_secrets.token_hex(20)}")  # the fake server answers 403
    refresh = new_secret(recorder, "refresh")
    fake_mcp.accept_refresh(refresh, "c", None, "none")
    credential = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": fake_mcp.mcp_url,
            "access_token": access,
            "refresh": {
                "client_id": "c",
                "refresh_token": refresh,
                "token_endpoint": fake_mcp.token_url,
                "token_endpoint_auth": {"type": "none"},
            },
        },
    )
    mark = fake_mcp.mark()
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_validation(result, credential, [access, refresh])
    assert result.status == "invalid"
    assert result.mcp_probe is not None and result.mcp_probe.http_response is not None
    assert result.mcp_probe.http_response.status_code == 403
    assert access not in result.mcp_probe.http_response.body
    assert result.refresh is None  # "attempted on a 401" only
    assert fake_mcp.requests_to("/token", mark) == []


def test_validate_unreachable_token_endpoint_is_connect_error(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    stale, refresh = new_secret(recorder, "stale"), new_secret(recorder, "refresh")
    credential = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": fake_mcp.mcp_url,
            "access_token": stale,
            "refresh": {
                "client_id": "c",
                "refresh_token": refresh,
                "token_endpoint": f"http://127.0.0.1:{free_port()}/token",
                "token_endpoint_auth": {"type": "none"},
            },
        },
    )
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_validation(result, credential, [stale, refresh])
    assert result.status == "invalid", result
    assert result.refresh is not None
    assert result.refresh.status == "connect_error"
    assert result.refresh.http_response is None


def test_validate_failed_refresh_scrubs_encoded_secrets(
    client: anthropic.Anthropic, vault: BetaManagedAgentsVault, recorder: Recorder, fake_mcp: FakeMcp
) -> None:
    """A token endpoint that echoes what it received (form body as sent, Authorization
    header) must not get the secrets into the captured body in any encoding: the form
    carries the refresh token percent-encoded, Basic auth carries the client secret in
    base64."""
    refresh = recorder.secret(f"rt/{_secrets.token_hex(12)}+{_secrets.token_hex(12)}=")
    client_secret = new_secret(recorder, "csecret")
    client_id = unique("client")
    stale = new_secret(recorder, "stale")
    credential = client.beta.vaults.credentials.create(
        vault.id,
        auth={
            "type": "mcp_oauth",
            "mcp_server_url": fake_mcp.mcp_url,
            "access_token": stale,
            "refresh": {
                "client_id": client_id,
                "refresh_token": refresh,  # unknown to the token endpoint: 400
                "token_endpoint": fake_mcp.token_url,
                "token_endpoint_auth": {"type": "client_secret_basic", "client_secret": client_secret},
            },
        },
    )
    mark = fake_mcp.mark()
    result = client.beta.vaults.credentials.mcp_oauth_validate(credential.id, vault_id=vault.id)
    assert_validation(result, credential, [stale, refresh, client_secret])
    assert result.refresh is not None and result.refresh.status == "failed"
    captured = result.refresh.http_response
    assert captured is not None and captured.status_code == 400

    exchange = fake_mcp.requests_to("/token", mark)[0]
    basic = base64.b64encode(f"{client_id}:{client_secret}".encode()).decode()
    assert exchange["authorization"] == f"Basic {basic}"
    encoded_refresh = urllib.parse.quote_plus(refresh)
    assert encoded_refresh in exchange["body"], "the fake endpoint got the form-encoded refresh token"
    assert "invalid_grant" in captured.body
    for value in (refresh, client_secret):
        assert value not in captured.body
    leaks = []
    if basic in captured.body:
        leaks.append("the client secret leaks base64-encoded (the echoed Basic credentials)")
    if encoded_refresh in captured.body:
        leaks.append("the refresh token leaks percent-encoded (the echoed form body)")
    assert not leaks, f"{leaks}: {captured.body}"
