"""Providers, models and credentials on the control plane (docs/api/config.md "Providers,
models and credentials"; issue 21 item 2), both modes.

Every test works in a workspace of its own (configuration is per workspace), with model
servers of its own (the scriptable fakes of fake_models.py, each with its own API key,
which the fake checks): every route's create / replace / read, RFC 9457 problems, secrets
never echoed, `/v1/models` showing a configured model, a provider endpoint changed at
runtime used by the next turns on every worker without a restart, and a price change that
leaves the prices frozen into an existing session alone.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Iterator

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, say
from harness import RECORDER, Deployment, unique
from test_turns import history, user_message, wait_idle

BIG_BUDGET = {"type": "limit", "max_list_cost": {"amount": "1000000", "currency": "USD"}}


class Config:
    """The control plane of one workspace, over raw HTTP (the SDK has no such routes)."""

    def __init__(self, deployment: Deployment, key: str) -> None:
        self.deployment = deployment
        self.key = key
        self.http: httpx.Client = deployment.http()
        self.headers = deployment.headers(key, beta=False)

    def call(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return self.http.request(method, f"/v1/config{path}", json=body, headers=self.headers)

    def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> dict[str, Any]:
        response = self.call(method, path, body)
        assert response.status_code == status, (method, path, response.status_code, response.text)
        assert response.headers["content-type"].startswith("application/json"), response.headers
        return response.json()

    def client(self) -> anthropic.Anthropic:
        return self.deployment.client(self.key)


def problem(response: httpx.Response, status: int, code: str, *fragments: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["type"] == "about:blank" and body["status"] == status and body["title"], body
    assert body["code"] == code, body
    assert body["request_id"], body
    for fragment in fragments:
        assert fragment in body["detail"], (fragment, body)
    return body


@pytest.fixture
def config(agentd: Deployment) -> Config:
    """A brand-new workspace's control plane."""
    return Config(agentd, agentd.create_key(unique("cfg-ws")))


@pytest.fixture
def fakes() -> Iterator[tuple[FakeAnthropic, FakeAnthropic]]:
    """Two Anthropic model servers, each with its own key."""
    servers = [FakeAnthropic(api_key=RECORDER.secret(f"sk-ant-cfg-{uuid.uuid4().hex}{uuid.uuid4().hex}")) for _ in range(2)]
    try:
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.close()


def configure_model(config: Config, fake: FakeAnthropic, model: str, prices: dict[str, int] | None = None) -> str:
    """Provider → credential → endpoint → offering (→ prices) for `model`; the credential id."""
    config.ok("PUT", "/providers/fakes", {"kind": "anthropic", "display_name": "The fakes"}, status=201)
    credential = config.ok("POST", "/credentials", {"name": "first", "secret": fake.api_key}, status=201)
    config.ok("PUT", "/providers/fakes/endpoints/main", {"base_url": fake.url, "credential_id": credential["id"]}, status=201)
    config.ok("POST", "/offerings", {"model_id": model, "provider_id": "fakes", "provider_model": "claude-upstream"}, status=201)
    if prices is not None:
        config.ok("PUT", f"/model-attributes/{model}", {"display_name": f"{model} (configured)", "prices": prices}, status=201)
    return credential["id"]


def run_turn(client: anthropic.Anthropic, session_id: str, text: str, count: int) -> None:
    client.beta.sessions.events.send(session_id, events=[user_message(text)])
    wait_idle(client, session_id, count)


def session_on(client: anthropic.Anthropic, model: str, **fields: Any) -> str:
    agent = client.beta.agents.create(name=unique("cfg-agent"), model=model)
    environment = client.beta.environments.create(name=unique("cfg-env"), config={"type": "cloud"})
    return client.beta.sessions.create(agent=agent.id, environment_id=environment.id, **fields).id


def test_every_route_answers_and_refuses_as_documented(config: Config, agentd: Deployment, fakes: Any) -> None:
    fake, _ = fakes
    # Nothing configured yet: 404 problems, and the bootstrap catalog.
    problem(config.call("GET", "/providers/nope"), 404, "not_found", "provider not found: nope")
    problem(config.call("GET", "/providers/..%2Fx"), 404, "not_found")
    catalog = config.ok("GET", "/catalog")
    assert catalog["object"] == "model_catalog" and catalog["config_revision"] == 0
    assert catalog["data"] and all(m["source"] == "bootstrap" for m in catalog["data"])

    # Providers: 201 then 200, the path id authoritative, bodies checked field by field.
    problem(config.call("PUT", "/providers/p1", {"kind": "bedrock"}), 422, "validation_failed", "kind")
    problem(config.call("PUT", "/providers/p1", {"kind": "anthropic", "colour": "red"}), 422, "validation_failed", "colour")
    problem(config.call("PUT", "/providers/p1", {}), 422, "validation_failed", "kind: required")
    created = config.ok("PUT", "/providers/p1", {"kind": "openai_compatible"}, status=201)
    assert created["object"] == "model_provider" and created["id"] == "p1" and created["kind"] == "openai_compatible"
    assert created["endpoints"] == [] and created["config_revision"] == 1
    replaced = config.ok("PUT", "/providers/p1", {"kind": "anthropic", "display_name": "P one"})
    assert replaced["kind"] == "anthropic" and replaced["config_revision"] == 2
    assert replaced["created_at"] == created["created_at"]
    assert config.ok("GET", "/providers/p1")["display_name"] == "P one"

    # Credentials: write-only.
    secret = RECORDER.secret(f"sk-cfg-secret-{uuid.uuid4().hex}")
    problem(config.call("POST", "/credentials", {"name": "k"}), 422, "validation_failed", "secret: required")
    made = config.call("POST", "/credentials", {"name": "k", "secret": secret})
    assert made.status_code == 201 and secret not in made.text, made.text
    credential = made.json()
    assert credential["id"].startswith("pcrd_") and credential["object"] == "provider_credential"
    assert credential["status"] == "active" and credential["archived_at"] is None
    assert set(credential) == {"object", "id", "name", "status", "created_at", "archived_at", "config_revision"}
    listed = config.call("GET", "/credentials")
    assert secret not in listed.text and [c["id"] for c in listed.json()["data"]] == [credential["id"]]
    one = config.call("GET", f"/credentials/{credential['id']}")
    assert one.status_code == 200 and secret not in one.text
    problem(config.call("GET", "/credentials/vcrd_01jd0000000000000000000000"), 404, "not_found")

    # Endpoints.
    endpoint = {"base_url": fake.url, "credential_id": credential["id"], "connect_timeout_ms": 2000}
    problem(config.call("PUT", "/providers/ghost/endpoints/e1", endpoint), 404, "not_found", "provider not found: ghost")
    problem(config.call("PUT", "/providers/p1/endpoints/e1", {**endpoint, "base_url": "ftp://x"}), 422, "validation_failed", "base_url")
    problem(config.call("PUT", "/providers/p1/endpoints/e1", {**endpoint, "base_url": "http://u:p@h"}), 422, "validation_failed", "base_url")
    problem(config.call("PUT", "/providers/p1/endpoints/e1", {**endpoint, "credential_pool_id": "pool"}), 422, "validation_failed", "not both")
    ghost = "pcrd_01jd0000000000000000000000"
    problem(config.call("PUT", "/providers/p1/endpoints/e1", {**endpoint, "credential_id": ghost}), 422, "validation_failed", "credential_id")
    problem(config.call("PUT", "/providers/p1/endpoints/e1", {**endpoint, "request_timeout_ms": 0}), 422, "validation_failed", "request_timeout_ms")
    put = config.ok("PUT", "/providers/p1/endpoints/e1", endpoint, status=201)
    assert put["object"] == "provider_endpoint" and put["credential_id"] == credential["id"] and put["connect_timeout_ms"] == 2000
    got = config.ok("GET", "/providers/p1/endpoints/e1")
    assert got["base_url"] == fake.url and got["provider_id"] == "p1"
    assert [e["id"] for e in config.ok("GET", "/providers/p1")["endpoints"]] == ["e1"]
    problem(config.call("GET", "/providers/p1/endpoints/e2"), 404, "not_found")

    # Offerings and model attributes.
    model = unique("cfg-model")
    problem(config.call("POST", "/offerings", {"model_id": model, "provider_id": "ghost"}), 422, "validation_failed", "provider_id")
    problem(config.call("POST", "/offerings", {"model_id": "has space", "provider_id": "p1"}), 422, "validation_failed", "model_id")
    offering = config.ok("POST", "/offerings", {"model_id": model, "provider_id": "p1"}, status=201)
    assert offering["provider_model"] == model, "the upstream name defaults to the model id"
    again = config.ok("POST", "/offerings", {"model_id": model, "provider_id": "p1", "provider_model": "upstream-x"})
    assert again["provider_model"] == "upstream-x"
    prices = {"input": 2_000_000, "output": 8_000_000}
    problem(config.call("PUT", f"/model-attributes/{model}", {"prices": {"input": -1, "output": 1}}), 422, "validation_failed", "prices.input")
    problem(config.call("PUT", f"/model-attributes/{model}", {"prices": {"output": 1}}), 422, "validation_failed", "prices.input")
    attributes = config.ok("PUT", f"/model-attributes/{model}", {"display_name": "Configured", "max_input_tokens": 32000, "prices": prices}, status=201)
    assert attributes["prices"]["input"] == 2_000_000 and attributes["prices"]["cache_read"] == 0

    # The effective catalog and the Models API reflect it (this workspace only).
    catalog = config.ok("GET", "/catalog")
    (entry,) = [m for m in catalog["data"] if m["id"] == model]
    assert entry["source"] == "configured" and entry["provider"] == {"id": "p1", "kind": "anthropic"}
    assert entry["provider_model"] == "upstream-x" and entry["endpoint_id"] == "e1"
    assert entry["display_name"] == "Configured" and entry["max_input_tokens"] == 32000 and entry["prices"]["output"] == 8_000_000
    assert catalog["config_revision"] >= 6
    client = config.client()
    listed_models = [m.id for m in client.models.list(limit=1000)]
    assert model in listed_models and listed_models[0] == model, "newest first"
    retrieved = client.models.retrieve(model)
    assert retrieved.display_name == "Configured" and retrieved.max_input_tokens == 32000
    other = agentd.client(agentd.create_key(unique("cfg-other")))
    assert model not in [m.id for m in other.models.list(limit=1000)], "another workspace's catalog is its own"
    with pytest.raises(anthropic.NotFoundError):
        other.models.retrieve(model)
    other_config = Config(agentd, other.api_key)
    problem(other_config.call("GET", "/providers/p1"), 404, "not_found")
    problem(other_config.call("GET", f"/credentials/{credential['id']}"), 404, "not_found")
    problem(other_config.call("POST", f"/credentials/{credential['id']}/archive"), 404, "not_found")

    # Pools.
    second = config.ok("POST", "/credentials", {"name": "second", "secret": RECORDER.secret(f"sk-cfg-{uuid.uuid4().hex}")}, status=201)
    problem(config.call("PUT", "/credential-pools/pool", {"credential_ids": []}), 422, "validation_failed", "credential_ids")
    problem(config.call("PUT", "/credential-pools/pool", {"credential_ids": [credential["id"], ghost]}), 422, "validation_failed", "credential_ids[1]")
    problem(config.call("PUT", "/credential-pools/pool", {"credential_ids": [second["id"], second["id"]]}), 422, "validation_failed", "twice")
    pool = config.ok("PUT", "/credential-pools/pool", {"credential_ids": [second["id"], credential["id"]], "cooldown_ms": 5000}, status=201)
    assert pool["credential_ids"] == [second["id"], credential["id"]] and pool["cooldown_ms"] == 5000
    assert [c["status"] for c in pool["credentials"]] == ["active", "active"]
    assert config.ok("GET", "/credential-pools/pool")["credential_ids"] == pool["credential_ids"]
    problem(config.call("GET", "/credential-pools/none"), 404, "not_found")

    # Inference profiles and resolve.
    problem(config.call("PUT", "/inference-profiles/fast", {"candidates": []}), 422, "validation_failed", "candidates")
    profile = config.ok("PUT", "/inference-profiles/fast", {"candidates": ["nowhere-model", model]}, status=201)
    assert profile["candidates"] == ["nowhere-model", model]
    assert config.ok("GET", "/inference-profiles/fast")["object"] == "inference_profile"
    resolved = config.ok("POST", "/inference-profiles/fast/resolve")
    assert resolved["model_id"] == model and resolved["provider_id"] == "p1" and resolved["endpoint_id"] == "e1"
    assert [c["eligible"] for c in resolved["candidates"]] == [False, True]
    assert "not in the catalog" in resolved["candidates"][0]["reason"]
    problem(config.call("POST", "/inference-profiles/none/resolve"), 404, "not_found")

    # Archiving: idempotent, and the endpoint that used the credential can no longer serve.
    archived = config.ok("POST", f"/credentials/{credential['id']}/archive")
    assert archived["status"] == "archived" and archived["archived_at"]
    assert config.ok("POST", f"/credentials/{credential['id']}/archive")["archived_at"] == archived["archived_at"]
    assert [c["status"] for c in config.ok("GET", "/credential-pools/pool")["credentials"]] == ["active", "archived"]
    problem(config.call("POST", "/inference-profiles/fast/resolve"), 404, "model_unresolved", "no active credential")

    # Unknown routes and methods on the control plane answer as problems too.
    problem(config.call("DELETE", "/providers/p1"), 405, "method_not_allowed")


def test_a_price_change_never_alters_a_sessions_frozen_prices(config: Config, fakes: Any) -> None:
    fake, _ = fakes
    model = unique("cfg-priced")
    # $1,000 per million input tokens: 10,000 input tokens cost $10 = 1,000 cents.
    configure_model(config, fake, model, prices={"input": 1_000_000_000, "output": 0})
    client = config.client()
    before = session_on(client, model, budget=BIG_BUDGET)
    config.ok("PUT", f"/model-attributes/{model}", {"prices": {"input": 3_000_000_000, "output": 0}})
    catalog = config.ok("GET", "/catalog")
    assert [m["prices"]["input"] for m in catalog["data"] if m["id"] == model] == [3_000_000_000]
    after = session_on(client, model, budget=BIG_BUDGET)
    fake.default_reply = lambda: say("ok", input_tokens=10_000, output_tokens=1)
    for session in (before, after):
        run_turn(client, session, "spend", 1)
    costs = {s: client.beta.sessions.retrieve(s).usage.list_cost for s in (before, after)}
    assert (costs[before].amount, costs[before].currency) == ("1000", "USD"), "the session keeps its creation's prices"
    assert costs[after].amount == "3000", "a session created after the change has the new prices"


def test_an_endpoint_changed_at_runtime_serves_the_next_turns_on_every_worker(
    config: Config, agentd: Deployment, fakes: Any
) -> None:
    # In prod a second worker for this test: the change must reach every worker.
    extra = agentd.start_worker() if agentd.mode == "prod" else None
    try:
        turn_after_turn(config, *fakes)
    finally:
        if extra is not None:
            extra.stop()


def turn_after_turn(config: Config, first: FakeAnthropic, second: FakeAnthropic) -> None:
    model = unique("cfg-live")
    configure_model(config, first, model)
    client = config.client()
    session = session_on(client, model)
    key = unique("turn")
    run_turn(client, session, f"before {key}", 1)
    (request,) = first.requests
    assert request.headers["x-api-key"] == first.api_key, "the stored credential authenticates"
    assert request.body["model"] == "claude-upstream", "the offering's upstream name is sent"
    assert not second.requests

    # Point the provider at the second server with its own credential: no restart.
    credential = config.ok("POST", "/credentials", {"name": "second", "secret": second.api_key}, status=201)
    config.ok("PUT", "/providers/fakes/endpoints/main", {"base_url": second.url, "credential_id": credential["id"]})
    turns = 1
    deadline = time.monotonic() + 10
    while not second.requests:
        assert time.monotonic() < deadline, "the change did not reach a worker within 10 s"
        turns += 1
        run_turn(client, session, f"after {key} {turns}", turns)
    served_first = len(first.requests)
    # From then on every turn, whichever worker takes it, goes to the second server.
    for _ in range(4):
        turns += 1
        run_turn(client, session, f"later {key} {turns}", turns)
    errors = [e.error.message for e in history(client, session) if e.type == "session.error"]
    assert not errors, errors
    assert len(first.requests) == served_first, "no worker kept the old endpoint"
    assert all(r.headers["x-api-key"] == second.api_key for r in second.requests)
    assert len(second.requests) == turns - served_first
