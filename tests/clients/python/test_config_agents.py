"""Agent authoring on the control plane (docs/api/config.md; issue 21 items 1 and 6), both
modes: drafts put, read and listed; validation listing every problem by JSON pointer;
publication as a new version of the managed agent that the official SDK reads
(`client.beta.agents.retrieve`), idempotent for the same content; publications by
fingerprint; RFC 9457 problem answers for every refusal, admission's included; another
workspace's drafts, agents and publications are missing.
"""

from __future__ import annotations

import random
from typing import Any

import anthropic
import httpx

from harness import Deployment, unique

CONFIG = "/v1/config/agents"
CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"


def new_agent_id() -> str:
    """An agent id a client mints for a draft of a new agent (`agent_` + 26 base32)."""
    return "agent_" + "".join(random.choice(CROCKFORD) for _ in range(26))


def problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """An RFC 9457 problem of the control plane."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["type"] == "about:blank" and body["status"] == status, body
    assert body["title"] and body["detail"], body
    assert body["code"] == code, body
    assert body["request_id"].startswith("req_"), body
    return body


def test_drafts_are_put_read_and_listed(agentd: Deployment, model_id: str) -> None:
    # A workspace of its own: the list holds exactly this test's drafts.
    key = agentd.create_key(unique("ws-config"))
    client, http, headers = agentd.client(key), agentd.http(), agentd.headers(key, beta=False)
    agents = [client.beta.agents.create(name=unique("authored"), model=model_id) for _ in range(3)]
    for agent in agents:
        config = {"name": f"{agent.name} draft", "model": model_id, "system": "be brief", "metadata": {"k": "v"}}
        made = http.put(f"{CONFIG}/{agent.id}", json=config, headers=headers)
        assert made.status_code == 201, made.text
        assert made.json()["revision"] == 1 and made.json()["config"] == config
        assert made.json()["type"] == "agent_draft" and made.json()["agent_id"] == agent.id
    # Replaced whole, the path's id authoritative (a matching `id` in the body is fine).
    first = agents[0]
    replaced = http.put(f"{CONFIG}/{first.id}", json={"id": first.id, "name": "v2"}, headers=headers)
    assert replaced.status_code == 200, replaced.text
    assert (replaced.json()["revision"], replaced.json()["config"]) == (2, {"name": "v2"})
    read = http.get(f"{CONFIG}/{first.id}", headers=headers)
    assert read.status_code == 200 and read.json() == replaced.json(), read.text
    mismatch = http.put(f"{CONFIG}/{first.id}", json={"id": agents[1].id, "name": "x"}, headers=headers)
    assert problem(mismatch, 422, "validation_failed")["errors"][0]["path"] == "/id"
    # The draft changed nothing of the agent.
    assert client.beta.agents.retrieve(first.id).version == 1

    # Listed newest agent first, in pages.
    page = http.get(CONFIG, params={"limit": 2}, headers=headers).json()
    assert [d["agent_id"] for d in page["data"]] == [agents[2].id, agents[1].id], page
    assert page["next_page"], page
    rest = http.get(CONFIG, params={"limit": 2, "page": page["next_page"]}, headers=headers).json()
    assert [d["agent_id"] for d in rest["data"]] == [agents[0].id] and rest["next_page"] is None, rest
    # Discarded: gone from reads and lists, the agent untouched.
    assert http.delete(f"{CONFIG}/{first.id}", headers=headers).status_code == 204
    problem(http.get(f"{CONFIG}/{first.id}", headers=headers), 404, "not_found")
    listed = http.get(CONFIG, headers=headers).json()["data"]
    assert first.id not in [d["agent_id"] for d in listed]
    assert client.beta.agents.retrieve(first.id).name == first.name


def test_validate_lists_every_problem_and_publish_refuses_them(
    agentd: Deployment, client: anthropic.Anthropic, http: httpx.Client, model_id: str
) -> None:
    headers = agentd.headers(beta=False)
    agent = client.beta.agents.create(name=unique("to-validate"), model=model_id)
    draft = {
        "name": "",
        "model": "no-such-model",
        "tools": [
            {"type": "custom", "name": "bad name!", "description": "d", "input_schema": {"type": "object"}},
            {"type": "mystery"},
        ],
        "skills": [{"type": "weird", "skill_id": "x"}],
        "surprise": 1,
    }
    assert http.put(f"{CONFIG}/{agent.id}", json=draft, headers=headers).status_code == 201
    checked = http.post(f"{CONFIG}/{agent.id}/validate", headers=headers)
    assert checked.status_code == 200, checked.text
    body = checked.json()
    assert body["valid"] is False and body["config"] is None, body
    paths = [e["path"] for e in body["errors"]]
    for path in ["/surprise", "/name", "/model/id", "/tools/0/name", "/tools/1/type", "/skills/0/type"]:
        assert path in paths, (path, body["errors"])
    assert all(e["message"] for e in body["errors"]), body

    refused = problem(http.post(f"{CONFIG}/{agent.id}/publish", headers=headers), 422, "validation_failed")
    assert refused["errors"] == body["errors"], refused
    assert client.beta.agents.retrieve(agent.id).version == 1, "nothing was written"

    # Fixed: valid, with the configuration publishing would write (defaults resolved).
    assert http.put(f"{CONFIG}/{agent.id}", json={"name": "fixed", "model": model_id}, headers=headers).is_success
    valid = http.post(f"{CONFIG}/{agent.id}/validate", json={}, headers=headers).json()
    assert valid["valid"] is True and valid["errors"] == [], valid
    assert valid["config"]["model"]["id"] == model_id and valid["config"]["name"] == "fixed", valid


def test_publish_makes_a_version_the_sdk_reads_once_per_content(
    agentd: Deployment, client: anthropic.Anthropic, http: httpx.Client, model_id: str
) -> None:
    headers = agentd.headers(beta=False)
    agent = client.beta.agents.create(name=unique("to-publish"), model=model_id)
    config = {"name": unique("published"), "model": model_id, "system": "You answer in haiku.", "metadata": {"a": "1"}}
    assert http.put(f"{CONFIG}/{agent.id}", json=config, headers=headers).status_code == 201

    first = http.post(f"{CONFIG}/{agent.id}/publish", headers=headers)
    assert first.status_code == 201, first.text
    published = first.json()
    fingerprint = published["fingerprint"]
    assert len(fingerprint) == 64 and published["type"] == "agent_publication", published
    assert (published["agent_id"], published["agent_version"], published["agent"]["version"]) == (agent.id, 2, 2)
    # The official SDK sees the new version, written as the managed update writes it.
    retrieved = client.beta.agents.retrieve(agent.id)
    assert (retrieved.version, retrieved.name, retrieved.system) == (2, config["name"], config["system"])
    assert retrieved.metadata == {"a": "1"}
    assert [v.version for v in client.beta.agents.versions.list(agent.id)] == [2, 1]

    # The same content again: the same fingerprint and publication, no new version.
    again = http.post(f"{CONFIG}/{agent.id}/publish", json={}, headers=headers)
    assert again.status_code == 200, again.text
    assert again.json()["fingerprint"] == fingerprint and again.json()["agent_version"] == 2
    assert again.json()["created_at"] == published["created_at"]
    assert client.beta.agents.retrieve(agent.id).version == 2

    # The publication, and its export (a body `POST /v1/agents` takes as it is).
    read = http.get(f"/v1/config/publications/{fingerprint}", headers=headers)
    assert read.status_code == 200, read.text
    assert read.json()["config"]["name"] == config["name"] and read.json()["agent_version"] == 2
    exported = http.get(f"/v1/config/publications/{fingerprint}/export", headers=headers)
    assert exported.status_code == 200 and exported.json() == read.json()["config"], exported.text
    copy = http.post("/v1/agents", json=exported.json(), headers=agentd.headers())
    assert copy.status_code == 200, copy.text
    assert (copy.json()["name"], copy.json()["system"]) == (config["name"], config["system"])

    # Changed elsewhere, then the draft published again: a new version with the draft's
    # content; the publication of that content stays the first one (immutable).
    client.beta.agents.update(agent.id, version=2, name="changed through the managed API")
    back = http.post(f"{CONFIG}/{agent.id}/publish", headers=headers)
    assert back.status_code == 200, back.text
    assert (back.json()["fingerprint"], back.json()["agent_version"], back.json()["agent"]["version"]) == (
        fingerprint,
        2,
        4,
    )
    assert client.beta.agents.retrieve(agent.id).name == config["name"]


def test_a_draft_of_a_new_agent_creates_it_on_publish(
    agentd: Deployment, client: anthropic.Anthropic, http: httpx.Client, model_id: str
) -> None:
    headers = agentd.headers(beta=False)
    agent_id = new_agent_id()
    assert http.put(f"{CONFIG}/{agent_id}", json={"name": "brand new", "model": model_id}, headers=headers).is_success
    published = http.post(f"{CONFIG}/{agent_id}/publish", headers=headers)
    assert published.status_code == 201, published.text
    assert published.json()["agent"]["id"] == agent_id and published.json()["agent_version"] == 1
    agent = client.beta.agents.retrieve(agent_id)
    assert (agent.id, agent.name, agent.version) == (agent_id, "brand new", 1)


def test_every_refusal_is_a_problem(agentd: Deployment, client: anthropic.Anthropic, http: httpx.Client) -> None:
    headers = agentd.headers(beta=False)
    missing = new_agent_id()
    problem(http.get(f"{CONFIG}/{missing}", headers=headers), 404, "not_found")
    problem(http.post(f"{CONFIG}/{missing}/validate", headers=headers), 404, "not_found")
    problem(http.get(f"{CONFIG}/not-an-agent-id", headers=headers), 404, "not_found")
    problem(http.get("/v1/config/publications/" + "0" * 64, headers=headers), 404, "not_found")
    problem(http.get("/v1/config/nothing-here", headers=headers), 404, "not_found")
    not_allowed = problem(http.delete(CONFIG, headers=headers), 405, "method_not_allowed")
    assert "DELETE" in not_allowed["detail"]
    problem(http.put(f"{CONFIG}/{missing}", content=b"[1, 2]", headers=headers), 400, "invalid_request")
    problem(
        http.put(f"{CONFIG}/{missing}", content=b"name=x", headers={**headers, "content-type": "text/plain"}),
        415,
        "unsupported_media_type",
    )
    # Admission's refusals, before any handler: no key, a wrong key.
    problem(http.get(CONFIG), 401, "unauthenticated")
    problem(http.get(CONFIG, headers={"x-api-key": "sk-agentd-not-a-key"}), 401, "unauthenticated")
    # A narrower credential never reaches the control plane.
    environment = client.beta.environments.create(name=unique("config-env"), config={"type": "cloud"})
    environment_key = agentd.create_environment_key(environment.id)
    denied = http.get(CONFIG, headers={"x-api-key": environment_key})
    problem(denied, 403, "permission_denied")
    # The managed API keeps its own envelope.
    managed = http.get(f"/v1/agents/{missing}", headers=agentd.headers())
    assert managed.status_code == 404 and managed.json()["type"] == "error", managed.text


def test_another_workspace_finds_nothing(
    agentd: Deployment, client: anthropic.Anthropic, http: httpx.Client, model_id: str
) -> None:
    headers = agentd.headers(beta=False)
    agent = client.beta.agents.create(name=unique("ours"), model=model_id)
    assert http.put(f"{CONFIG}/{agent.id}", json={"name": "ours", "model": model_id}, headers=headers).is_success
    fingerprint = http.post(f"{CONFIG}/{agent.id}/publish", headers=headers).json()["fingerprint"]

    other = agentd.headers(agentd.key_for("other"), beta=False)
    for method, path in [
        ("GET", f"{CONFIG}/{agent.id}"),
        ("POST", f"{CONFIG}/{agent.id}/validate"),
        ("POST", f"{CONFIG}/{agent.id}/publish"),
        ("DELETE", f"{CONFIG}/{agent.id}"),
        ("GET", f"/v1/config/publications/{fingerprint}"),
        ("GET", f"/v1/config/publications/{fingerprint}/export"),
        ("GET", f"/v1/workspaces/other/config/agents/{agent.id}"),
    ]:
        problem(http.request(method, path, headers=other), 404, "not_found")
    # Nor may it draft our agent.
    taken = http.put(f"{CONFIG}/{agent.id}", json={"name": "theirs", "model": model_id}, headers=other)
    problem(taken, 404, "not_found")
    assert agent.id not in [d["agent_id"] for d in http.get(CONFIG, headers=other).json()["data"]]
    # Ours is untouched; the workspace path of our own workspace serves it.
    ours = http.get(f"/v1/workspaces/default/config/agents/{agent.id}", headers=headers)
    assert ours.status_code == 200 and ours.json()["config"]["name"] == "ours", ours.text
    assert client.beta.agents.retrieve(agent.id).version == 2
