"""Admission: request ids, authentication, keys, beta selectors, workspace scope, rate limits.

Wire facts: managed-agents-wire.md §1.2–1.4, §1.6–1.7; semantics of limits and scope:
prior-art.md §4.4–4.5; the contract is issue 3, "Admission pipeline".
"""

from __future__ import annotations

import json
import secrets
import time
from pathlib import Path
from typing import Any, Callable

import anthropic
import httpx
import pytest

from harness import (
    BETA,
    GENEROUS_CREATE,
    GENEROUS_READ,
    Deployment,
    PrivateRedis,
    assert_error_envelope,
    assert_ratelimit_headers,
    collect,
    list_all,
    pick_model,
    unique,
)

FORBIDDEN = (403, 404)


def agent_body(model_id: str) -> dict[str, Any]:
    return {"name": unique("adm"), "model": model_id}


# ---------------------------------------------------------------------------------------
# authentication and keys


def test_bad_key_is_authentication_error(agentd: Deployment, recorder: Any) -> None:
    bad = recorder.secret(f"sk-agentd-test-{secrets.token_hex(24)}")  # must not be echoed either
    client = agentd.client(bad)
    with pytest.raises(anthropic.AuthenticationError) as caught:
        client.beta.agents.list()
    err = caught.value
    assert err.status_code == 401
    assert err.type == "authentication_error"
    assert_error_envelope(err.response, 401, "authentication_error")

    # Families without a beta selector authenticate the same way.
    with pytest.raises(anthropic.AuthenticationError):
        client.models.list()


def test_missing_key_is_rejected(http: httpx.Client) -> None:
    response = http.get("/v1/agents", headers={"anthropic-beta": BETA})
    assert_error_envelope(response, 401, "authentication_error")
    response = http.get("/v1/agents", headers={"anthropic-beta": BETA, "authorization": "Basic dXNlcjpwYXNz"})
    assert_error_envelope(response, 401, "authentication_error")


def test_x_api_key_header_is_accepted(agentd: Deployment, http: httpx.Client) -> None:
    response = http.get("/v1/agents", headers={"x-api-key": agentd.bootstrap_key, "anthropic-beta": BETA})
    assert response.status_code == 200, response.text
    assert isinstance(response.json()["data"], list)


def test_keys_cli_create_list_revoke(agentd: Deployment, recorder: Any) -> None:
    before = {entry["id"] for entry in agentd.list_keys()}
    workspace = unique("keys")
    key = agentd.create_key(workspace)

    listing = agentd.cli("keys", "list", "--json").stdout
    for secret in recorder.secrets:
        assert secret not in listing, "`agentd keys list` must never print a secret key"
    entries = json.loads(listing)
    assert any(e["workspace"] == "default" for e in entries), "the bootstrap key belongs to workspace default"
    new = [e for e in entries if e["id"] not in before]
    assert len(new) == 1, new
    entry = new[0]
    assert {"id", "workspace_id", "workspace", "name", "hint", "created_at", "revoked_at"} <= set(entry), entry
    assert entry["workspace"] == workspace
    assert entry["workspace_id"]
    assert entry["revoked_at"] is None
    assert entry["hint"] != key

    client = agentd.client(key)
    assert collect(client.beta.agents.list()) == []  # a new workspace is empty

    agentd.revoke_key(entry["id"])
    revoked = {e["id"]: e for e in agentd.list_keys()}[entry["id"]]
    assert revoked["revoked_at"] is not None

    deadline = time.monotonic() + 10
    while True:
        try:
            client.beta.agents.list()
        except anthropic.AuthenticationError as err:
            assert_error_envelope(err.response, 401, "authentication_error")
            break
        assert time.monotonic() < deadline, "a revoked key still authenticates after 10 s"
        time.sleep(0.5)


def test_dev_prints_a_ready_to_paste_sdk_line(launch: Callable[..., Deployment]) -> None:
    deployment = launch("dev")
    line = deployment.dev_line
    assert line, "`agentd dev` should print an `ANTHROPIC_BASE_URL=… ANTHROPIC_API_KEY=…` line"
    settings = dict(word.split("=", 1) for word in line.split() if "=" in word)
    assert settings.get("ANTHROPIC_BASE_URL", "").rstrip("/") == deployment.url
    key = settings.get("ANTHROPIC_API_KEY")
    assert key, line
    assert collect(deployment.client(key).beta.agents.list()) == []


# ---------------------------------------------------------------------------------------
# request ids and beta selectors


def test_every_response_has_a_request_id(agentd: Deployment, http: httpx.Client, model_id: str) -> None:
    client = agentd.client()
    agent = client.beta.agents.create(name=unique("rid"), model=model_id)
    assert agent._request_id, "a successful response carries request-id"

    responses = {
        "ok": http.get("/v1/agents", headers=agentd.headers()),
        "ok models": http.get("/v1/models", headers=agentd.headers(beta=False)),
        "missing beta": http.get("/v1/agents", headers=agentd.headers(beta=False)),
        "bad key": http.get("/v1/agents", headers=agentd.headers("sk-agentd-test-wrong")),
        "unknown agent": http.get("/v1/agents/agent_nope", headers=agentd.headers()),
        "unknown route": http.get("/v1/no-such-family", headers=agentd.headers()),
    }
    seen = set()
    for label, response in responses.items():
        request_id = response.headers.get("request-id")
        assert request_id, f"{label}: no request-id header ({response.status_code})"
        assert request_id not in seen, f"{label}: request-id {request_id} reused"
        seen.add(request_id)
        if response.status_code >= 400:
            assert_error_envelope(response, response.status_code, None)
    assert responses["ok"].status_code == 200
    assert responses["unknown agent"].status_code == 404
    assert responses["unknown route"].status_code == 404


def test_missing_beta_selector_is_rejected(agentd: Deployment, http: httpx.Client) -> None:
    response = http.get("/v1/agents", headers=agentd.headers(beta=False))
    body = assert_error_envelope(response, 400, "invalid_request_error")
    assert BETA in body["error"]["message"], body

    other = http.get("/v1/agents", headers={**agentd.headers(beta=False), "anthropic-beta": "files-api-2025-04-14"})
    assert_error_envelope(other, 400, "invalid_request_error")


def test_beta_header_is_a_comma_list_with_unknown_values_ignored(agentd: Deployment, http: httpx.Client) -> None:
    headers = {**agentd.headers(), "anthropic-beta": f"x-unknown-2099-01-01,{BETA},oauth-2025-04-20"}
    response = http.get("/v1/agents", headers=headers)
    assert response.status_code == 200, response.text


def test_models_need_no_beta_selector(agentd: Deployment, http: httpx.Client) -> None:
    response = http.get("/v1/models", headers=agentd.headers(beta=False))
    assert response.status_code == 200, response.text
    assert response.json()["data"]


# ---------------------------------------------------------------------------------------
# workspace scope


def test_other_workspace_cannot_reach_default_agents(
    agentd: Deployment, client: anthropic.Anthropic, model_id: str
) -> None:
    ours = client.beta.agents.create(name=unique("mine"), model=model_id)
    other = agentd.client(agentd.key_for("other"))

    with pytest.raises(anthropic.NotFoundError) as caught:
        other.beta.agents.retrieve(ours.id)
    assert_error_envelope(caught.value.response, 404, "not_found_error")
    with pytest.raises(anthropic.NotFoundError):
        other.beta.agents.retrieve(ours.id, version=1)
    with pytest.raises(anthropic.NotFoundError):
        other.beta.agents.update(ours.id, description="hijacked")
    with pytest.raises(anthropic.NotFoundError):
        other.beta.agents.archive(ours.id)
    with pytest.raises(anthropic.NotFoundError):
        collect(other.beta.agents.versions.list(ours.id))
    with pytest.raises(anthropic.NotFoundError):
        other.post(
            f"/v1/agents/{ours.id}/disable", cast_to=object, body={}, options={"headers": {"anthropic-beta": BETA}}
        )
    assert ours.id not in {a.id for a in collect(other.beta.agents.list(include_archived=True, limit=100))}

    theirs = other.beta.agents.create(name=unique("theirs"), model=model_id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.agents.retrieve(theirs.id)

    unchanged = client.beta.agents.retrieve(ours.id)
    assert unchanged.version == 1
    assert unchanged.archived_at is None
    assert unchanged.description is None


def test_workspace_path_projection(
    agentd: Deployment, client: anthropic.Anthropic, http: httpx.Client, model_id: str
) -> None:
    client.beta.agents.create(name=unique("flat"), model=model_id)
    headers = agentd.headers()

    flat = list_all(http, "/v1/agents", headers)
    projected = list_all(http, "/v1/workspaces/default/agents", headers)
    assert flat, "workspace default has agents"
    assert sorted(a["id"] for a in projected) == sorted(a["id"] for a in flat)

    body = agent_body(model_id)
    created = http.post("/v1/workspaces/default/agents", json=body, headers=headers)
    assert created.is_success, created.text
    agent_id = created.json()["id"]
    assert client.beta.agents.retrieve(agent_id).name == body["name"]

    fetched = http.get(f"/v1/workspaces/default/agents/{agent_id}", headers=headers)
    assert fetched.status_code == 200, fetched.text
    via_sdk = client.beta.agents.retrieve(agent_id)
    assert (fetched.json()["id"], fetched.json()["name"], fetched.json()["version"]) == (
        via_sdk.id,
        via_sdk.name,
        via_sdk.version,
    )

    # The other workspace's path does not see it.
    other_headers = agentd.headers(agentd.key_for("other"))
    response = http.get(f"/v1/workspaces/other/agents/{agent_id}", headers=other_headers)
    assert_error_envelope(response, 404, "not_found_error")


def test_workspace_the_key_cannot_use_is_refused(
    agentd: Deployment, client: anthropic.Anthropic, http: httpx.Client
) -> None:
    other_id = agentd.workspace_id("other")
    own_id = agentd.workspace_id("default")
    assert other_id != own_id

    # Header naming the key's own workspace: fine.
    assert isinstance(collect(client.beta.agents.list(workspace_id=own_id)), list)

    # Header naming another workspace: refused.
    with pytest.raises(anthropic.APIStatusError) as caught:
        client.beta.agents.list(workspace_id=other_id)
    assert caught.value.status_code in FORBIDDEN, caught.value
    assert_error_envelope(caught.value.response, caught.value.status_code, None)
    assert caught.value.type in ("permission_error", "not_found_error")

    # Path naming another workspace, or one that does not exist: refused.
    for path in ("/v1/workspaces/other/agents", f"/v1/workspaces/{unique('nowhere')}/agents"):
        response = http.get(path, headers=agentd.headers())
        assert response.status_code in FORBIDDEN, f"{path}: {response.status_code} {response.text}"
        assert_error_envelope(response, response.status_code, None)


# ---------------------------------------------------------------------------------------
# rate limits


def test_metered_responses_carry_ratelimit_headers(
    agentd: Deployment, client: anthropic.Anthropic, model_id: str
) -> None:
    created = client.beta.agents.with_raw_response.create(name=unique("meter"), model=model_id)
    assert_ratelimit_headers(created.headers, GENEROUS_CREATE)
    agent = created.parse()

    for raw in (
        client.beta.agents.with_raw_response.list(),
        client.beta.agents.with_raw_response.retrieve(agent.id),
        client.beta.agents.versions.with_raw_response.list(agent.id),
        client.beta.models.with_raw_response.list(),
    ):
        assert_ratelimit_headers(raw.headers, GENEROUS_READ)


@pytest.mark.parametrize("mode", ["dev", "prod"])
def test_create_bucket_is_exhausted(launch: Callable[..., Deployment], mode: str) -> None:
    deployment = launch(mode, create_limit=3)
    client = deployment.client()
    http = deployment.http()
    model_id = pick_model(client)

    first = client.beta.agents.with_raw_response.create(name=unique("rl"), model=model_id)
    remaining = [assert_ratelimit_headers(first.headers, 3)]
    agent = first.parse()

    # Reads have their own bucket.
    client.beta.agents.retrieve(agent.id)
    collect(client.beta.agents.list())

    # An update changes a resource: it draws from the create bucket too.
    updated = client.beta.agents.with_raw_response.update(agent.id, description="edit 1")
    remaining.append(assert_ratelimit_headers(updated.headers, 3))

    # Flat and workspace-path requests share one bucket.
    second = http.post("/v1/workspaces/default/agents", json=agent_body(model_id), headers=deployment.headers())
    assert second.is_success, second.text
    remaining.append(assert_ratelimit_headers(second.headers, 3))
    assert remaining == [2, 1, 0]

    with pytest.raises(anthropic.RateLimitError) as caught:
        client.beta.agents.create(name=unique("rl"), model=model_id)
    response = caught.value.response
    assert_error_envelope(response, 429, "rate_limit_error")
    retry_after = response.headers.get("retry-after", "")
    assert retry_after.isdigit() and 1 <= int(retry_after) <= 60, f"retry-after {retry_after!r}"
    assert response.headers.get("anthropic-ratelimit-requests-limit") == "3"
    assert assert_ratelimit_headers(response.headers, 3) == 0

    with pytest.raises(anthropic.RateLimitError) as caught:
        client.beta.agents.update(agent.id, description="edit 2")
    assert_error_envelope(caught.value.response, 429, "rate_limit_error")

    again = http.post("/v1/workspaces/default/agents", json=agent_body(model_id), headers=deployment.headers())
    assert_error_envelope(again, 429, "rate_limit_error")

    # Reads still answer; rejected writes stored nothing.
    listed = collect(client.beta.agents.list())
    assert len(listed) == 2
    assert client.beta.agents.retrieve(agent.id).description == "edit 1"


def test_two_gateways_share_one_bucket(launch: Callable[..., Deployment]) -> None:
    deployment = launch("prod", create_limit=3, worker=False)
    second_url = deployment.start_gateway()
    a = deployment.client()
    b = deployment.client(base_url=second_url)
    model_id = pick_model(a)

    made = [
        a.beta.agents.create(name=unique("gw-a"), model=model_id),
        b.beta.agents.create(name=unique("gw-b"), model=model_id),
        a.beta.agents.create(name=unique("gw-a"), model=model_id),
    ]
    with pytest.raises(anthropic.RateLimitError):
        b.beta.agents.create(name=unique("gw-b"), model=model_id)
    with pytest.raises(anthropic.RateLimitError):
        a.beta.agents.create(name=unique("gw-a"), model=model_id)

    # One store behind both.
    assert {x.id for x in collect(b.beta.agents.list())} == {x.id for x in made}


def test_unreachable_limiter_fails_closed(launch: Callable[..., Deployment], tmp_path: Path) -> None:
    redis = PrivateRedis(tmp_path / "redis")
    try:
        deployment = launch("prod", worker=False, redis_url=redis.url)
        client = deployment.client()
        assert isinstance(collect(client.beta.agents.list()), list)

        redis.stop()
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.beta.agents.list()
        err = caught.value
        assert err.status_code == 503, err
        assert isinstance(err, anthropic.InternalServerError)
        assert_error_envelope(err.response, 503, "api_error")

        with pytest.raises(anthropic.APIStatusError) as caught:
            client.beta.agents.create(name=unique("down"), model=pick_model(client))
        assert caught.value.status_code == 503
    finally:
        redis.stop()
