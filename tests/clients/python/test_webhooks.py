"""Webhooks (docs/api/webhooks.md; issue 21 item 4), both modes.

Subscriptions are managed under `/v1/config/webhook-subscriptions` (RFC 9457 errors) and,
over the same rows, through the SDK's organization endpoint API
(`client.beta.organization.webhooks`, `webhooks-2026-10-07`). Lifecycle facts are written
to a durable outbox in the transaction of the fact, delivered at least once as Standard
Webhooks messages, and every delivery here is verified by the official SDK's
`client.beta.webhooks.unwrap` with the subscription's secret. A receiver started by the
test answers per path: 200, a 503 then 200 (retried under the same `webhook-id`), 410
(given up at once), or always 500 (the subscription is disabled after 20 consecutive
failed attempts). Targets on 127.0.0.1 need `AGENTD_WEBHOOKS_ALLOW_PRIVATE`, which only
the deployments this file launches set; the shared deployment refuses them.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable

import anthropic
import pytest

from fake_models import FakeAnthropic, call, say
from harness import BETA, Deployment, unique

SUBSCRIPTIONS = "/v1/config/webhook-subscriptions"
ORG_BETA = "webhooks-2026-10-07"
MODEL = "claude-sonnet-4-6"
WAIT = 30.0


class Receiver:
    """An HTTP receiver: each path answers the statuses queued for it (then 200)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[tuple[str, dict[str, str], bytes, int]] = []
        self.scripts: dict[str, list[int]] = {}
        self.always: dict[str, int] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                with outer.lock:
                    queued = outer.scripts.get(self.path, [])
                    status = queued.pop(0) if queued else outer.always.get(self.path, 200)
                    outer.requests.append((self.path, headers, body, status))
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"

    def url(self, path: str) -> str:
        return self.base + path

    def received(self, path: str) -> list[tuple[dict[str, str], bytes, int]]:
        with self.lock:
            return [(h, b, s) for p, h, b, s in self.requests if p == path]

    def wait(self, path: str, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = WAIT) -> list[tuple[dict[str, str], bytes, int]]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = self.received(path)
            if predicate([json.loads(body) for _, body, _ in got]):
                return got
            time.sleep(0.1)
        raise AssertionError(f"{path}: no matching deliveries; got {[json.loads(b) for _, b, _ in self.received(path)]}")

    def close(self) -> None:
        self.server.shutdown()


@pytest.fixture
def receiver() -> Any:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


@pytest.fixture
def hooks(turns: Deployment, launch: Callable[..., Deployment], provider_env: dict[str, str]) -> Deployment:
    """A deployment (the mode of `turns`) that may deliver to 127.0.0.1, retrying fast."""
    return launch(turns.mode, extra_env={
        **provider_env,
        "AGENTD_WEBHOOKS_ALLOW_PRIVATE": "true",
        "AGENTD_WEBHOOK_RETRY_BASE": "200ms",
    })


def problem(response: Any, status: int, *fragments: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body = response.json()
    assert body["status"] == status and body["title"] and body["code"], body
    for fragment in fragments:
        assert fragment in body["detail"], (fragment, body)
    return body


def subscribe(deployment: Deployment, id: str, url: str, event_types: list[str], key: str | None = None) -> dict[str, Any]:
    response = deployment.http().put(f"{SUBSCRIPTIONS}/{id}", json={"url": url, "event_types": event_types},
                                     headers=deployment.headers(key, beta=False))
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["secret"].startswith("whsec_") and body["enabled"] is True and body["health"] == "active", body
    return body


def verify(client: anthropic.Anthropic, secret: str, delivery: tuple[dict[str, str], bytes, int]) -> Any:
    """The official SDK's verification of one delivery (raises when the signature is wrong)."""
    headers, body, _ = delivery
    event = client.beta.webhooks.unwrap(body.decode(), headers=headers, key=secret)
    assert headers["webhook-id"] == event.id, (headers, event)
    return event


def deliveries(deployment: Deployment, id: str) -> list[dict[str, Any]]:
    response = deployment.http().get(f"{SUBSCRIPTIONS}/{id}/deliveries", headers=deployment.headers(beta=False))
    assert response.status_code == 200, response.text
    return response.json()["data"]


def wait_deliveries(deployment: Deployment, id: str, predicate: Callable[[list[dict[str, Any]]], bool]) -> list[dict[str, Any]]:
    deadline = time.monotonic() + WAIT
    while True:
        shown = deliveries(deployment, id)
        if predicate(shown):
            return shown
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)


def run_turn(client: anthropic.Anthropic, fake: FakeAnthropic, environment_id: str) -> tuple[str, str]:
    key = unique("hook-turn")
    fake.script(key, say(f"done {key}"))
    agent = client.beta.agents.create(name=unique("hook-agent"), model=MODEL)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment_id)
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": f"hi {key}"}]}])
    deadline = time.monotonic() + WAIT
    while client.beta.sessions.retrieve(session.id).status != "idle" or not any(
        e.type == "session.status_idle" for e in client.beta.sessions.events.list(session.id, limit=100).data
    ):
        assert time.monotonic() < deadline, "the turn never ended"
        time.sleep(0.1)
    return agent.id, session.id


def test_refusals_on_the_shared_deployment(agentd: Deployment) -> None:
    """Private, loopback, metadata and plain-http targets, unknown event types and bad ids
    are refused as problems; the organization API without its selector does not exist."""
    http, headers = agentd.http(), agentd.headers(beta=False)
    for url, fragment in (
        ("https://127.0.0.1/hook", "public"),
        ("https://169.254.169.254/latest", "public"),
        ("http://hooks.invalid/hook", "https"),
        ("not a url", "url"),
    ):
        response = http.put(f"{SUBSCRIPTIONS}/{unique('bad')}", json={"url": url, "event_types": ["agent.created"]}, headers=headers)
        body = problem(response, 422, fragment)
        assert "127.0.0.1" not in body["detail"] and "169.254" not in body["detail"], body
    for types, fragment in ((["external_key.failed"], "does not deliver"), ([], "at least one"), ("agent.created", "array")):
        response = http.put(f"{SUBSCRIPTIONS}/{unique('bad')}", json={"url": "https://hooks.invalid/x", "event_types": types}, headers=headers)
        problem(response, 422, fragment)
    problem(http.put(f"{SUBSCRIPTIONS}/{unique('bad')}", json={"url": "https://hooks.invalid/x", "event_types": ["agent.created"], "secret": "x"}, headers=headers), 422, "unknown field")
    for raw in (b"[1]", b"not json"):
        problem(http.put(f"{SUBSCRIPTIONS}/{unique('bad')}", content=raw, headers={**headers, "content-type": "application/json"}), 400)
    problem(http.get(f"{SUBSCRIPTIONS}/bad%2Fid", headers=headers), 404)
    problem(http.get(f"{SUBSCRIPTIONS}/{unique('missing')}", headers=headers), 404, "not found")
    problem(http.delete(f"{SUBSCRIPTIONS}/{unique('missing')}", headers=headers), 404)
    problem(http.get(SUBSCRIPTIONS), 401)
    # The organization endpoint API: 404 without `webhooks-2026-10-07`, as the SDK documents.
    missing = http.get("/v1/organizations/webhooks", headers=headers)
    assert missing.status_code == 404 and missing.json()["type"] == "error", missing.text
    refused = agentd.client()
    with pytest.raises(anthropic.BadRequestError) as error:
        refused.beta.organization.webhooks.create(enabled_events=["user_profile.program_status_updated"], url="https://127.0.0.1/x")
    assert "agentd does not deliver" in str(error.value) or "public" in str(error.value), error.value


def test_lifecycle_events_are_signed_and_delivered(hooks: Deployment, fake_anthropic: FakeAnthropic, receiver: Receiver) -> None:
    """A session's lifecycle and its resources' facts arrive once each, stamped in the
    order they happened, verifiable with the SDK and visible as delivered through the API; another
    workspace's facts and subscriptions stay out of reach."""
    client = hooks.client()
    types = [
        "session.created", "session.status_run_started", "session.status_idled", "session.archived",
        "agent.created", "agent.archived", "environment.created", "vault.created", "vault_credential.created",
        "memory_store.created",
    ]
    created = subscribe(hooks, "lifecycle", receiver.url("/ok"), types)
    secret = created["secret"]
    shown = hooks.http().get(f"{SUBSCRIPTIONS}/lifecycle", headers=hooks.headers(beta=False)).json()
    assert "secret" not in shown and shown["event_types"] == sorted(types), shown
    assert secret not in json.dumps(hooks.http().get(SUBSCRIPTIONS, headers=hooks.headers(beta=False)).json())

    environment = client.beta.environments.create(name=unique("hook-env"), config={"type": "cloud"})
    agent_id, session_id = run_turn(client, fake_anthropic, environment.id)
    client.beta.sessions.archive(session_id)
    client.beta.agents.archive(agent_id)
    client.beta.agents.archive(agent_id)  # archiving again reports nothing
    vault = client.beta.vaults.create(display_name=unique("hook-vault"))
    credential = client.beta.vaults.credentials.create(
        vault.id, auth={"type": "static_bearer", "token": unique("tok") + "z" * 16, "mcp_server_url": "https://mcp.invalid/mcp"},
    )
    store = client.beta.memory_stores.create(name=unique("hook-store"))

    def has_all(events: list[dict[str, Any]]) -> bool:
        return {e["data"]["type"] for e in events} >= set(types)

    got = receiver.wait("/ok", has_all)
    events = [verify(client, secret, delivery) for delivery in got]
    by_type: dict[str, list[Any]] = {}
    for event in events:
        assert event.type == "event" and event.data.workspace_id and event.data.organization_id, event
        by_type.setdefault(event.data.type, []).append(event)
    assert [e.data.id for e in by_type["session.created"]] == [session_id]
    assert [e.data.id for e in by_type["agent.archived"]] == [agent_id], "archiving twice reports once"
    assert by_type["environment.created"][0].data.id == environment.id
    assert by_type["vault.created"][0].data.id == vault.id
    assert by_type["vault_credential.created"][0].data.id == credential.id
    assert by_type["vault_credential.created"][0].data.vault_id == vault.id
    assert by_type["memory_store.created"][0].data.id == store.id
    # Deliveries of one batch go out concurrently: receivers order events by `created_at`.
    lifecycle = ["session.created", "session.status_run_started", "session.status_idled", "session.archived"]
    of_session = {e.data.type: e for e in events if e.data.id == session_id}
    assert sorted(of_session) == sorted(lifecycle), of_session
    times = [of_session[t].created_at for t in lifecycle]
    assert times == sorted(times), times
    assert len({e.id for e in events}) == len(events), "every event is delivered once"
    # A tampered body or a wrong key fails the SDK's verification.
    headers, body, _ = got[0]
    with pytest.raises(Exception):
        client.beta.webhooks.unwrap(body.decode().replace("event", "evenT", 1), headers=headers, key=secret)
    with pytest.raises(Exception):
        client.beta.webhooks.unwrap(body.decode(), headers=headers, key="whsec_" + "A" * 32)

    shown = wait_deliveries(hooks, "lifecycle", lambda d: len(d) >= len(events) and all(x["state"] == "delivered" for x in d))
    assert all(d["attempts"] == 1 and d["last_status"] == 200 for d in shown), shown

    # Another workspace: its facts are not delivered here, and it cannot see this subscription.
    other = hooks.client(hooks.create_key(unique("ws")))
    other.beta.agents.create(name=unique("other-agent"), model=MODEL)
    response = hooks.http().get(f"{SUBSCRIPTIONS}/lifecycle", headers=hooks.headers(other.api_key, beta=False))
    problem(response, 404)
    assert hooks.http().get(SUBSCRIPTIONS, headers=hooks.headers(other.api_key, beta=False)).json() == {"data": []}
    time.sleep(1.0)
    ids = {json.loads(b)["data"]["id"] for _, b, _ in receiver.received("/ok")}
    assert all(not i.startswith("agent_") or i == agent_id for i in ids), ids

    # Replacing keeps the secret; deleting stops deliveries.
    replaced = hooks.http().put(f"{SUBSCRIPTIONS}/lifecycle", json={"url": receiver.url("/ok"), "event_types": ["agent.created"]},
                                headers=hooks.headers(beta=False))
    assert replaced.status_code == 200 and "secret" not in replaced.json() and replaced.json()["event_types"] == ["agent.created"], replaced.text
    again = client.beta.agents.create(name=unique("hook-agent"), model=MODEL)
    (last,) = [d for d in receiver.wait("/ok", lambda e: any(x["data"]["id"] == again.id for x in e)) if json.loads(d[1])["data"]["id"] == again.id]
    verify(client, secret, last)
    assert hooks.http().delete(f"{SUBSCRIPTIONS}/lifecycle", headers=hooks.headers(beta=False)).status_code == 204
    gone = client.beta.agents.create(name=unique("hook-agent"), model=MODEL)
    time.sleep(1.0)
    assert all(json.loads(b)["data"]["id"] != gone.id for _, b, _ in receiver.received("/ok"))


def test_retries_give_up_and_auto_disable(hooks: Deployment, receiver: Receiver) -> None:
    """A 503 is retried under the same webhook-id and then delivered; a 410 is given up at
    once; a receiver that always fails disables its subscription after 20 consecutive
    failed attempts, and events after that are not delivered; re-enabling resumes."""
    client = hooks.client()
    flaky = subscribe(hooks, "flaky", receiver.url("/flaky"), ["agent.created"])
    subscribe(hooks, "gone", receiver.url("/gone"), ["agent.created"])
    receiver.scripts["/flaky"] = [503]
    receiver.always["/gone"] = 410
    agent = client.beta.agents.create(name=unique("retry-agent"), model=MODEL)

    got = receiver.wait("/flaky", lambda events: len(events) >= 2)
    assert [status for _, _, status in got[:2]] == [503, 200], got
    assert got[0][0]["webhook-id"] == got[1][0]["webhook-id"], "a retry carries the same webhook-id"
    assert got[0][1] == got[1][1], "and the same body"
    assert verify(client, flaky["secret"], got[1]).data.id == agent.id
    (flaky_delivery,) = wait_deliveries(hooks, "flaky", lambda d: len(d) == 1 and d[0]["state"] == "delivered")
    assert flaky_delivery["attempts"] == 2 and flaky_delivery["last_status"] == 200, flaky_delivery

    (gone_delivery,) = wait_deliveries(hooks, "gone", lambda d: len(d) == 1 and d[0]["state"] == "failed")
    assert gone_delivery["attempts"] == 1 and gone_delivery["last_status"] == 410, gone_delivery
    time.sleep(1.0)
    assert len(receiver.received("/gone")) == 1, "a 410 is not retried"

    # Always 500: every attempt fails; 20 consecutive failures disable the subscription.
    subscribe(hooks, "down", receiver.url("/down"), ["environment.created"])
    receiver.always["/down"] = 500
    for _ in range(21):
        client.beta.environments.create(name=unique("down-env"), config={"type": "cloud"})
    deadline = time.monotonic() + 60
    while True:
        shown = hooks.http().get(f"{SUBSCRIPTIONS}/down", headers=hooks.headers(beta=False)).json()
        if not shown["enabled"]:
            break
        assert time.monotonic() < deadline, shown
        time.sleep(0.2)
    assert shown["health"] == "delivery_failed" and "20 consecutive" in shown["disabled_reason"], shown
    time.sleep(1.0)
    attempts = len(receiver.received("/down"))
    assert attempts >= 20, attempts
    client.beta.environments.create(name=unique("down-env"), config={"type": "cloud"})
    time.sleep(1.5)
    assert len(receiver.received("/down")) == attempts, "a disabled subscription gets nothing"

    # Re-enabled (the body says so) it delivers again, from a clean failure count.
    receiver.always["/down"] = 200
    response = hooks.http().put(f"{SUBSCRIPTIONS}/down", json={"url": receiver.url("/down"), "event_types": ["environment.created"], "enabled": True},
                                headers=hooks.headers(beta=False))
    body = response.json()
    assert response.status_code == 200 and body["enabled"] and body["health"] == "active" and body["disabled_reason"] is None, body
    env = client.beta.environments.create(name=unique("up-env"), config={"type": "cloud"})
    receiver.wait("/down", lambda events: any(e["data"]["id"] == env.id for e in events))


def test_organization_endpoint_api(hooks: Deployment, receiver: Receiver) -> None:
    """`client.beta.organization.webhooks` over the same subscriptions: create shows the
    signing secret once, list pages, update changes only what it names, regenerating the
    secret signs the next delivery with the new one, delete answers the deleted shape."""
    # Not strict: the SDK's `enabled_events` literal knows only organization events.
    client = anthropic.Anthropic(base_url=hooks.url, api_key=hooks.bootstrap_key, max_retries=0)
    endpoints = client.beta.organization.webhooks
    made = [
        endpoints.create(enabled_events=["agent.created"], url=receiver.url(f"/org{i}"), name=f"hook {i}", description="notes")
        for i in range(3)
    ]
    first = made[0]
    assert first.id.startswith("whep_") and first.signing_secret.startswith("whsec_") and first.state == "enabled", first
    assert first.name == "hook 0" and first.description == "notes" and first.disabled_reason == "", first
    fetched = endpoints.retrieve(first.id)
    assert fetched.id == first.id and "signing_secret" not in fetched.to_dict(), fetched
    # Listed newest first, two per page; the SDK follows the pages.
    page = endpoints.list(limit=2)
    assert [e.id for e in page.data] == [made[2].id, made[1].id] and page.has_more, page
    assert [e.id for e in endpoints.list(limit=2, order="asc").data] == [made[0].id, made[1].id]
    assert [e.id for e in collect_all(endpoints.list(limit=2))] == [m.id for m in reversed(made)]
    # The control plane sees the same subscriptions.
    listed = hooks.http().get(SUBSCRIPTIONS, headers=hooks.headers(beta=False)).json()["data"]
    assert {m.id for m in made} <= {s["id"] for s in listed}

    updated = endpoints.update(made[1].id, state="disabled", name="renamed")
    assert updated.state == "disabled" and updated.name == "renamed" and updated.url == made[1].url and updated.description == "notes", updated
    assert updated.enabled_events == ["agent.created"], "an update without enabled_events keeps them"

    new_secret = endpoints.regenerate_signing_secret(first.id).signing_secret
    assert new_secret.startswith("whsec_") and new_secret != first.signing_secret
    agent = hooks.client().beta.agents.create(name=unique("org-agent"), model=MODEL)
    got = receiver.wait("/org0", lambda events: any(e["data"]["id"] == agent.id for e in events))
    delivery = next(d for d in got if json.loads(d[1])["data"]["id"] == agent.id)
    verify(hooks.client(), new_secret, delivery)
    with pytest.raises(Exception):
        hooks.client().beta.webhooks.unwrap(delivery[1].decode(), headers=delivery[0], key=first.signing_secret)
    time.sleep(1.0)
    assert not receiver.received("/org1"), "a disabled endpoint gets nothing"

    deleted = endpoints.delete(made[2].id)
    assert deleted.id == made[2].id and deleted.type == "webhook_endpoint_deleted"
    with pytest.raises(anthropic.NotFoundError):
        endpoints.retrieve(made[2].id)


def collect_all(page: Any) -> list[Any]:
    return [item for item in page]


def test_a_multiagent_sessions_threads_are_reported_and_it_idles_once(
    hooks: Deployment, fake_anthropic: FakeAnthropic, receiver: Receiver
) -> None:
    """docs/api/multiagent.md: a subagent's thread is `session.thread_created` and
    `session.thread_idled` naming the thread (verified with the SDK's own union), and the
    session itself idles once — when every thread is idle, not when a thread is."""
    client = hooks.client()
    types = ["session.status_idled", "session.thread_created", "session.thread_idled"]
    secret = subscribe(hooks, "threads", receiver.url("/threads"), types)["secret"]
    environment = client.beta.environments.create(name=unique("hook-env"), config={"type": "cloud"})
    helper = client.beta.agents.create(name=unique("hook-helper"), model=MODEL)
    boss = client.beta.agents.create(
        name=unique("hook-boss"), model=MODEL, multiagent={"type": "coordinator", "agents": [helper.id]}
    )
    key, job = unique("hook-boss"), unique("hook-job")
    fake_anthropic.script(key, call("spawn_thread", {"agent": helper.name, "message": job}), say(f"done {key}"))
    fake_anthropic.script(job, say("child done"))
    session = client.beta.sessions.create(agent=boss.id, environment_id=environment.id)
    client.beta.sessions.events.send(session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": key}]}])

    got = receiver.wait("/threads", lambda e: {x["data"]["type"] for x in e} >= set(types))
    events = [verify(client, secret, delivery) for delivery in got]
    thread_id = next(t.id for t in client.beta.sessions.threads.list(session.id) if t.parent_thread_id)
    of_type = lambda t: [e.data for e in events if e.data.type == t]  # noqa: E731
    assert [(d.id, d.session_thread_id) for d in of_type("session.thread_created")] == [(session.id, thread_id)]
    assert [(d.id, d.session_thread_id) for d in of_type("session.thread_idled")] == [(session.id, thread_id)]
    time.sleep(1.0)
    idled = [json.loads(b)["data"] for _, b, _ in receiver.received("/threads") if json.loads(b)["data"]["type"] == "session.status_idled"]
    assert [d["id"] for d in idled] == [session.id], "the session idles once, after its last thread"
