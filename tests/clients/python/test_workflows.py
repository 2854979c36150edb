"""Workflow revisions (docs/api/workflows.md; issue 23 item 3), both modes, over plain
HTTP with an API key (the SDK has no workflow API): a save validates the whole request —
every problem answered with its JSON pointer, nothing stored —, resolves the environments
it requires, stores an immutable content-addressed revision (identical content reuses it)
and moves the project override by compare-and-swap; racing saves have one winner; an
idempotency key replays its first answer; a clear moves the override to none; revisions
stay readable, unchanged, whatever the override does; another workspace sees nothing;
credentials other than an API key are refused.
"""

from __future__ import annotations

import copy
import threading
from typing import Any, Callable

import anthropic
import httpx
import pytest

from harness import Deployment, unique
from test_hands import make_environment, make_hands_session, poll_item, sessions_token


def base(project: str, definition: str = "bug-fix") -> str:
    return f"/api/projects/{project}/workflows/{definition}"


def declaration(environment_id: str, name: str = "Bug fix") -> dict[str, Any]:
    """triage → work ⇄ review → done | canceled, the work done by the `coder` requirement."""

    def transition(key: str, to: str) -> dict[str, Any]:
        return {"key": key, "name": key.title(), "description": "", "icon": "", "to": to, "when": f"choice == '{key}'"}

    def state(name: str, group: str, completion: str, *transitions: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"name": name, "description": "", "icon": "", "state_group": group, "completion": completion,
                "transitions": list(transitions), **extra}

    return {
        "name": name,
        "description": "From report to merged fix.",
        "icon": "bug",
        "start": "triage",
        "max_iterations": 5,
        "inputs": {"report": {"type": "string", "required": True}},
        "requires": {"coder": {"description": "where fixes are made", "environment": environment_id}},
        "outputs": {"patch": {"from": "states.work.outputs.patch"}},
        "states": {
            "triage": state("Triage", "backlog", "open", transition("accept", "work"), transition("reject", "canceled"),
                            slots=[{"responsibility": "reviewer", "team": "maintainers"}]),
            "work": state("Work", "in_progress", "open", transition("submit", "review"),
                          environment="coder", wip_limit=3, instruction="Fix the bug.",
                          slots=[{"responsibility": "executor", "agent": "workflow.requires.coder"}],
                          inputs={"report": "workflow.inputs.report", "notes": "states.review.outputs.notes"},
                          outputs={"patch": {"type": "resource"}}),
            "review": state("Review", "review", "open", transition("approve", "done"), transition("rework", "work"),
                            outputs={"notes": {"type": "string"}}),
            "done": state("Done", "done", "completed"),
            "canceled": state("Canceled", "canceled", "canceled"),
        },
    }


class Workflows:
    """One project's workflow API, with one key."""

    def __init__(self, agentd: Deployment, key: str | None = None, project: str | None = None) -> None:
        self.http = agentd.http()
        self.headers = agentd.headers(key, beta=False)
        self.project = project or unique("proj").lower()
        self.path = base(self.project)

    def save(self, decl: dict[str, Any], expected: int, key: str | None = None, **extra: Any) -> httpx.Response:
        body = {"expected_override_version": expected, "idempotency_key": key or unique("save"), "declaration": decl, **extra}
        return self.http.post(f"{self.path}/revision", json=body, headers=self.headers)

    def clear(self, expected: Any) -> httpx.Response:
        return self.http.post(f"{self.path}/override/clear", json={"expected_override_version": expected}, headers=self.headers)

    def current(self) -> httpx.Response:
        return self.http.get(f"{self.path}/override", headers=self.headers)

    def revision(self, revision_id: str) -> httpx.Response:
        return self.http.get(f"{self.path}/revisions/{revision_id}", headers=self.headers)


def error(response: httpx.Response, status: int, kind: str) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == kind, body
    assert body["request_id"].startswith("req_"), body
    return body["error"]


def ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 200, (response.status_code, response.text)
    return response.json()


@pytest.fixture
def environment(client: anthropic.Anthropic) -> str:
    return client.beta.environments.create(name=unique("wf-env"), config={"type": "cloud"}).id


def test_a_save_answers_the_revision_and_the_override(agentd: Deployment, environment: str) -> None:
    flows = Workflows(agentd)
    error(flows.current(), 404, "not_found_error")
    decl = declaration(environment)
    answer = flows.save(decl, 0)
    # Metered like every managed write (the organization's create bucket).
    assert "anthropic-ratelimit-requests-limit" in answer.headers, answer.headers
    saved = ok(answer)
    revision, override = saved["revision"], saved["override"]
    assert set(revision) == {"type", "id", "project", "definition", "content_sha256", "declaration", "resolved",
                             "created_at", "reused"}, revision
    assert revision["type"] == "workflow_revision" and revision["reused"] is False
    assert revision["id"] == "wfrev_" + revision["content_sha256"] and len(revision["content_sha256"]) == 64
    assert (revision["project"], revision["definition"]) == (flows.project, "bug-fix")
    assert revision["declaration"] == decl, "stored as written"
    resolved = revision["resolved"]["requires"]["coder"]["environment"]
    assert resolved["id"] == environment and resolved["version"] >= 1 and len(resolved["config_sha256"]) == 64, resolved
    assert override == {"type": "workflow_override", "project": flows.project, "definition": "bug-fix",
                        "revision_id": revision["id"], "override_version": 1, "updated_at": override["updated_at"]}
    assert ok(flows.current()) == override
    stored = ok(flows.revision(revision["id"]))
    assert stored == {k: v for k, v in revision.items() if k != "reused"}


def test_identical_content_reuses_its_revision(agentd: Deployment, environment: str) -> None:
    flows = Workflows(agentd)
    first = ok(flows.save(declaration(environment), 0))["revision"]
    other = ok(flows.save(declaration(environment, name="Other"), 1))["revision"]
    assert other["id"] != first["id"] and other["reused"] is False
    again = ok(flows.save(declaration(environment), 2))
    assert again["revision"] == {**first, "reused": True}, "the same revision, created once"
    assert (again["override"]["revision_id"], again["override"]["override_version"]) == (first["id"], 3)


def test_a_revision_pins_the_environment_as_it_was_saved(
    agentd: Deployment, client: anthropic.Anthropic, environment: str
) -> None:
    flows = Workflows(agentd)
    first = ok(flows.save(declaration(environment), 0))["revision"]
    pinned = first["resolved"]["requires"]["coder"]["environment"]
    client.beta.environments.update(environment, config={"type": "cloud", "networking": {"type": "limited"}})
    # The same declaration now resolves to another environment revision: a new revision.
    second = ok(flows.save(declaration(environment), 1))["revision"]
    assert second["id"] != first["id"] and second["reused"] is False
    now = second["resolved"]["requires"]["coder"]["environment"]
    assert now["id"] == pinned["id"] and now["version"] > pinned["version"], (pinned, now)
    assert now["config_sha256"] != pinned["config_sha256"], (pinned, now)
    # The first revision still says what it was saved with.
    assert ok(flows.revision(first["id"]))["resolved"]["requires"]["coder"]["environment"] == pinned


def invalid_cases(environment: str, archived: str) -> list[tuple[str, Callable[[dict[str, Any]], None]]]:
    """(pointer, change to a valid request) for every rule of docs/api/workflows.md."""

    def d(body: dict[str, Any]) -> dict[str, Any]:
        return body["declaration"]

    def s(body: dict[str, Any], key: str) -> dict[str, Any]:
        return body["declaration"]["states"][key]

    def t(key: str, to: str) -> dict[str, Any]:
        return {"key": key, "name": "x", "description": "", "icon": "", "to": to, "when": "true"}

    return [
        ("/surprise", lambda b: b.update(surprise=1)),
        ("/idempotency_key", lambda b: b.pop("idempotency_key")),
        ("/expected_override_version", lambda b: b.update(expected_override_version="1")),
        ("/declaration/join_policy", lambda b: d(b).update(join_policy="all")),
        ("/declaration/name", lambda b: d(b).pop("name")),
        ("/declaration/icon", lambda b: d(b).update(icon=7)),
        ("/declaration/description", lambda b: d(b).update(description="x" * 4097)),
        ("/declaration/start", lambda b: d(b).update(start="nowhere")),
        ("/declaration/max_iterations", lambda b: d(b).update(max_iterations=1001)),
        ("/declaration/states/work/retries", lambda b: s(b, "work").update(retries=2)),
        ("/declaration/states/work/state_group", lambda b: s(b, "work").update(state_group="doing")),
        ("/declaration/states/done/completion", lambda b: s(b, "done").update(completion="finished")),
        ("/declaration/states/work/wip_limit", lambda b: s(b, "work").update(wip_limit=0)),
        ("/declaration/states/work/transitions", lambda b: s(b, "work").pop("transitions")),
        ("/declaration/states/work/transitions/0/to", lambda b: s(b, "work")["transitions"][0].update(to="limbo")),
        ("/declaration/states/work/transitions/0/weight", lambda b: s(b, "work")["transitions"][0].update(weight=1)),
        ("/declaration/states/review/transitions/1/key", lambda b: s(b, "review")["transitions"][1].update(key="approve")),
        ("/declaration/states/done/transitions", lambda b: s(b, "done")["transitions"].append(t("reopen", "work"))),
        ("/declaration/states/work/slots/1",
         lambda b: s(b, "work")["slots"].append({"responsibility": "executor", "agent": "workflow.requires.coder"})),
        ("/declaration/states/work/slots/0/agent", lambda b: s(b, "work")["slots"][0].update(agent="workflow.requires.nobody")),
        ("/declaration/states/work/slots/0/agent", lambda b: s(b, "work")["slots"][0].update(agent="agent_123")),
        ("/declaration/states/triage/slots/0", lambda b: s(b, "triage")["slots"][0].update(actor="alice")),
        ("/declaration/states/work/inputs/report", lambda b: s(b, "work")["inputs"].update(report="workflow.inputs.nothing")),
        ("/declaration/states/work/inputs/notes", lambda b: s(b, "work")["inputs"].update(notes="states.review.outputs.nothing")),
        ("/declaration/states/work/inputs/report", lambda b: s(b, "work")["inputs"].update(report="env.HOME")),
        ("/declaration/states/work/environment", lambda b: s(b, "work").update(environment="builder")),
        ("/declaration/outputs/patch/from", lambda b: d(b)["outputs"]["patch"].update({"from": "states.work.outputs.none"})),
        ("/declaration/requires/coder/kind", lambda b: d(b)["requires"]["coder"].update(kind="env")),
        ("/declaration/requires/coder/environment", lambda b: d(b)["requires"]["coder"].pop("environment")),
        # The environment must be an existing, live environment of the workspace, by id.
        ("/declaration/requires/coder/environment", lambda b: d(b)["requires"]["coder"].update(environment="env_" + "0" * 26)),
        ("/declaration/requires/coder/environment", lambda b: d(b)["requires"]["coder"].update(environment="hands-env-name")),
        ("/declaration/requires/coder/environment", lambda b: d(b)["requires"]["coder"].update(environment=archived)),
    ]


def test_every_rule_is_refused_with_its_pointer_and_nothing_is_stored(
    agentd: Deployment, client: anthropic.Anthropic, environment: str
) -> None:
    flows = Workflows(agentd)
    first = ok(flows.save(declaration(environment), 0))
    archived = client.beta.environments.create(name=unique("wf-archived"), config={"type": "cloud"}).id
    client.beta.environments.archive(archived)
    valid = {"expected_override_version": 1, "idempotency_key": "k", "declaration": declaration(environment, name="New")}
    for pointer, change in invalid_cases(environment, archived):
        body = {**copy.deepcopy(valid), "idempotency_key": unique("bad")}
        change(body)
        refused = error(flows.http.post(f"{flows.path}/revision", json=body, headers=flows.headers), 400,
                        "invalid_request_error")
        assert refused["details"]["error_code"] == "validation_failed", refused
        pointers = [problem["path"] for problem in refused["details"]["errors"]]
        assert pointer in pointers, (pointer, refused)
        assert all(problem["message"] for problem in refused["details"]["errors"]), refused
    # Nothing was stored: the override is where the valid save left it.
    assert ok(flows.current()) == first["override"]
    # Every problem at once, not only the first.
    body = copy.deepcopy(valid)
    body["surprise"] = True
    body["declaration"]["start"] = "nowhere"
    body["declaration"]["states"]["work"]["state_group"] = "doing"
    refused = error(flows.http.post(f"{flows.path}/revision", json=body, headers=flows.headers), 400, "invalid_request_error")
    pointers = {problem["path"] for problem in refused["details"]["errors"]}
    assert {"/surprise", "/declaration/start", "/declaration/states/work/state_group"} <= pointers, refused
    # Malformed JSON and a body that is not an object are 400s too.
    malformed = flows.http.post(f"{flows.path}/revision", content=b"{", headers={**flows.headers, "content-type": "application/json"})
    error(malformed, 400, "invalid_request_error")
    error(flows.http.post(f"{flows.path}/revision", json=[1], headers=flows.headers), 400, "invalid_request_error")
    assert ok(flows.current()) == first["override"]


def test_a_stale_override_version_is_a_409_naming_the_current_one(agentd: Deployment, environment: str) -> None:
    flows = Workflows(agentd)
    ok(flows.save(declaration(environment), 0))
    for stale in (0, 2):
        refused = error(flows.save(declaration(environment, name="Late"), stale), 409, "conflict_error")
        assert "at version 1" in refused["message"], refused
    assert ok(flows.current())["override_version"] == 1


def test_racing_saves_expecting_one_version_have_one_winner(agentd: Deployment, environment: str) -> None:
    flows = Workflows(agentd)
    ok(flows.save(declaration(environment), 0))
    answers: list[httpx.Response] = []
    lock, start = threading.Lock(), threading.Barrier(8)

    def race(n: int) -> None:
        http = agentd.http()
        body = {"expected_override_version": 1, "idempotency_key": unique("race"),
                "declaration": declaration(environment, name=f"Racer {n}")}
        start.wait()
        answer = http.post(f"{flows.path}/revision", json=body, headers=flows.headers)
        with lock:
            answers.append(answer)

    racers = [threading.Thread(target=race, args=(n,)) for n in range(8)]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(60)
    statuses = sorted(answer.status_code for answer in answers)
    assert statuses == [200] + [409] * 7, [(a.status_code, a.text[:200]) for a in answers]
    winner = next(answer.json() for answer in answers if answer.status_code == 200)
    current = ok(flows.current())
    assert (current["revision_id"], current["override_version"]) == (winner["revision"]["id"], 2), (current, winner)
    assert ok(flows.revision(winner["revision"]["id"]))["declaration"] == winner["revision"]["declaration"]


def test_an_idempotent_replay_answers_the_first_body(
    agentd: Deployment, client: anthropic.Anthropic, environment: str
) -> None:
    flows = Workflows(agentd)
    first = flows.save(declaration(environment), 0, key="save-once")
    assert first.status_code == 200, first.text
    ok(flows.save(declaration(environment, name="Moved on"), 1))
    replay = flows.save(declaration(environment), 0, key="save-once")
    assert (replay.status_code, replay.json()) == (200, first.json()), "the first answer, though the override moved"
    assert ok(flows.current())["override_version"] == 2, "a replay moves nothing"
    # The same key with another request is refused, and changes nothing.
    refused = error(flows.save(declaration(environment, name="Else"), 2, key="save-once"), 409, "conflict_error")
    assert "idempotency_key" in refused["message"], refused
    assert ok(flows.current())["override_version"] == 2
    # Keys are per project and definition: the same key elsewhere is a new save.
    elsewhere = Workflows(agentd)
    assert ok(elsewhere.save(declaration(environment), 0, key="save-once"))["override"]["override_version"] == 1
    # A replay answers what was answered, even once the environment it required is archived.
    client.beta.environments.archive(environment)
    late = flows.save(declaration(environment), 0, key="save-once")
    assert (late.status_code, late.json()) == (200, first.json())
    error(flows.save(declaration(environment), 2), 400, "invalid_request_error")


def test_a_clear_is_compare_and_swap_and_removes_only_the_override(agentd: Deployment, environment: str) -> None:
    flows = Workflows(agentd)
    error(flows.clear(0), 404, "not_found_error")
    saved = ok(flows.save(declaration(environment), 0))
    revision_id = saved["revision"]["id"]
    before = ok(flows.revision(revision_id))
    moved = ok(flows.save(declaration(environment, name="Next"), 1))
    assert ok(flows.revision(revision_id)) == before, "a revision is unchanged after the override moved"
    for stale in (0, 1, 3):
        assert "at version 2" in error(flows.clear(stale), 409, "conflict_error")["message"]
    for bad in ("2", -1, None):
        error(flows.clear(bad), 400, "invalid_request_error")
    cleared = ok(flows.clear(2))["override"]
    assert (cleared["revision_id"], cleared["override_version"]) == (None, 3), cleared
    assert ok(flows.current()) == cleared
    # The revisions stay, unchanged: pinned work keeps reading them.
    assert ok(flows.revision(revision_id)) == before
    assert ok(flows.revision(moved["revision"]["id"]))["declaration"]["name"] == "Next"
    # A later save works from the new version, which is never reused.
    error(flows.save(declaration(environment), 2), 409, "conflict_error")
    again = ok(flows.save(declaration(environment), 3))
    assert again["revision"]["reused"] is True and again["override"]["override_version"] == 4
    assert again["override"]["revision_id"] == revision_id
    assert ok(flows.clear(4))["override"]["override_version"] == 5


def test_another_workspace_cannot_see_it(agentd: Deployment, environment: str) -> None:
    ours = Workflows(agentd)
    saved = ok(ours.save(declaration(environment), 0))
    theirs = Workflows(agentd, agentd.key_for(unique("wf-other")), project=ours.project)
    error(theirs.current(), 404, "not_found_error")
    error(theirs.revision(saved["revision"]["id"]), 404, "not_found_error")
    error(theirs.clear(1), 404, "not_found_error")
    # Our environment is not theirs to require either.
    refused = error(theirs.save(declaration(environment), 0), 400, "invalid_request_error")
    assert [p["path"] for p in refused["details"]["errors"]] == ["/declaration/requires/coder/environment"], refused
    assert ok(ours.current()) == saved["override"]


def test_credentials_other_than_an_api_key_are_refused(
    agentd: Deployment, client: anthropic.Anthropic, http: httpx.Client, environment: str
) -> None:
    flows = Workflows(agentd)
    saved = ok(flows.save(declaration(environment), 0))
    self_hosted = make_environment(client, "self_hosted")
    session = make_hands_session(client, self_hosted)
    environment_key = agentd.create_environment_key(self_hosted)
    token = sessions_token(poll_item(http, self_hosted, environment_key))
    grant = {
        "authority_id": "wf-auth", "application_scope": "wf", "actor_key": "user-1",
        "protocols": ["ai-sdk"], "operations": ["thread.run", "thread.messages.read"],
        "thread_bindings": [{"external_thread_id": unique("t"), "managed_session_id": session.id}],
        "expires_in_seconds": 120,
    }
    issued = http.post("/v1/application-access-tokens", json=grant, headers=agentd.headers(beta=False))
    assert issued.status_code in (200, 201), issued.text
    app_token = issued.json()["access_token"]
    credentials = {
        "environment key": environment_key,
        "runner key": agentd.create_runner_key(),
        "sessions token": token,
        "application access token": app_token,
    }
    for name, credential in credentials.items():
        headers = {"authorization": f"Bearer {credential}"}
        body = {"expected_override_version": 1, "idempotency_key": "x", "declaration": declaration(environment)}
        for method, path, payload in [
            ("GET", f"{flows.path}/override", None),
            ("GET", f"{flows.path}/revisions/{saved['revision']['id']}", None),
            ("POST", f"{flows.path}/revision", body),
            ("POST", f"{flows.path}/override/clear", {"expected_override_version": 1}),
        ]:
            answer = http.request(method, path, json=payload, headers=headers)
            assert answer.status_code == 403, (name, method, path, answer.text)
            assert answer.json()["error"]["type"] == "permission_error", (name, answer.text)
    # No key at all, a wrong key: 401.
    error(http.get(f"{flows.path}/override"), 401, "authentication_error")
    error(http.get(f"{flows.path}/override", headers={"x-api-key": "sk-agentd-not-a-key"}), 401, "authentication_error")
    assert ok(flows.current()) == saved["override"], "nothing changed"
