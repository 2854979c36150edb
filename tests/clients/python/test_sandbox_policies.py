"""Sandbox execution policies (docs/api/sandbox-policies.md), in both modes.

The API: versioned policies whose versions never change (`expected_current` CAS → 409),
the presets, the config schema with unknown fields refused, bindings that pin an exact
version (a disabled version → 422). And the runner's enforcement of the version a
session pinned at its creation: a tool past its memory or process limit is stopped and
reported, a policy the runner cannot meet fails closed: the runner refuses the work item
and the session gets a `session.error` naming the policy (and each sandbox call an error
result), and a rebinding reaches the next session, not a running one. The refusal
route itself is driven by hand too.

The runner is the in-process one of `agentd dev`, or `agentd runner` beside the
gateway (test_hands.py's `cloud_hands`). The model is the scriptable fake.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import httpx
import pytest

from fake_models import FakeAnthropic, call, say
from harness import Deployment, assert_error_envelope, unique
from test_hands import (  # noqa: F401 (the fixture)
    CloudHands,
    api_environment_key,
    assert_unique_ids,
    auth,
    events_of,
    cloud_hands,
    make_environment,
    make_hands_session,
    of_type,
    poll,
    poll_item,
    result_text,
    runner_tail,
    sessions_token,
    user_message,
    wait_events,
    wait_idles,
    wait_work_state,
)

POLICIES = "/v1/ext/sandbox-execution-policies"
MIB = 1024 * 1024


def binding_path(environment_id: str) -> str:
    return f"/v1/ext/environments/{environment_id}/sandbox-execution-policy"


def create(http: httpx.Client, headers: dict[str, str], body: dict[str, Any]) -> dict[str, Any]:
    response = http.post(POLICIES, json=body, headers=headers)
    assert response.status_code == 201, response.text[:500]
    return response.json()


def bind(http: httpx.Client, headers: dict[str, str], environment_id: str, policy_id: str, version: int) -> dict[str, Any]:
    response = http.post(binding_path(environment_id), json={"policy_id": policy_id, "version": version}, headers=headers)
    assert response.status_code == 200, response.text[:500]
    return response.json()


# ---------------------------------------------------------------------------------------
# The API


def test_versions_are_immutable_and_written_by_compare_and_swap(turns: Deployment) -> None:
    http, headers = turns.http(), turns.headers()
    policy_id = unique("ci").lower()
    first = create(http, headers, {"id": policy_id, "config": {"limits": {"memory_bytes": 256 * MIB}}})
    assert first["type"] == "sandbox_execution_policy" and first["version"] == 1 and first["preset"] is False
    assert first["config"] == {
        "isolation": "namespace",
        "limits": {"cpu_millis": None, "memory_bytes": 256 * MIB, "disk_bytes": None, "pids": None},
    }, "defaults filled in"
    assert (first["provisioning"], first["idle_retention"], first["disabled"]) == ("eager", None, False)

    again = http.post(POLICIES, json={"id": policy_id, "config": {}}, headers=headers)
    assert_error_envelope(again, 409, "conflict_error")

    second_body = {"expected_current": 1, "config": {"isolation": "workdir", "limits": {"pids": 64}}, "disabled": True}
    second = http.post(f"{POLICIES}/{policy_id}/versions", json=second_body, headers=headers)
    assert second.status_code == 200, second.text[:500]
    assert (second.json()["version"], second.json()["disabled"]) == (2, True)
    stale = http.post(f"{POLICIES}/{policy_id}/versions", json=second_body, headers=headers)
    body = assert_error_envelope(stale, 409, "conflict_error")
    assert "current version is 2" in body["error"]["message"], body

    assert http.get(f"{POLICIES}/{policy_id}", headers=headers).json()["version"] == 2
    assert http.get(f"{POLICIES}/{policy_id}/versions/1", headers=headers).json() == first, "version 1 never changes"
    assert_error_envelope(http.get(f"{POLICIES}/{policy_id}/versions/3", headers=headers), 404, "not_found_error")
    assert_error_envelope(http.get(f"{POLICIES}/{policy_id}/versions/x", headers=headers), 404, "not_found_error")
    missing = http.post(f"{POLICIES}/{unique('nope').lower()}/versions", json={"expected_current": 1, "config": {}}, headers=headers)
    assert_error_envelope(missing, 404, "not_found_error")

    # Another workspace sees none of it.
    other = turns.headers(turns.create_key(unique("ws-policies")))
    assert_error_envelope(http.get(f"{POLICIES}/{policy_id}", headers=other), 404, "not_found_error")
    listed = http.get(POLICIES, headers=other, params={"limit": 100}).json()
    assert [p["id"] for p in listed["data"]] == ["standard", "locked-down"], "only the presets"


def test_bad_configs_are_refused_and_nothing_is_stored(turns: Deployment) -> None:
    http, headers = turns.http(), turns.headers()
    policy_id = unique("bad").lower()
    refusals = {
        "config.colour: unknown field": {"config": {"colour": "red"}},
        "config.limits.cpu: unknown field": {"config": {"limits": {"cpu": 1}}},
        "config.limits.pids: expected an integer": {"config": {"limits": {"pids": 0}}},
        "config.isolation: expected": {"config": {"isolation": "vm"}},
        "config.requests: resource reservations are not supported": {"config": {"requests": {"cpu_millis": 100}}},
        "provisioning: `on_tool_use` is not supported": {"config": {}, "provisioning": "on_tool_use"},
        "idle_retention.mode: `checkpoint_and_release` is not supported": {
            "config": {},
            "idle_retention": {"mode": "checkpoint_and_release"},
        },
        "extra: unknown field": {"config": {}, "extra": 1},
        "config: required": {},
        "id: expected 1 to 64 lowercase": {"config": {}, "id": "Not An Id"},
    }
    for expected, body in refusals.items():
        body = {"id": policy_id, **body}
        answer = http.post(POLICIES, json=body, headers=headers)
        error = assert_error_envelope(answer, 400, "invalid_request_error")
        assert error["error"]["message"].startswith(expected), (body, error)
    assert_error_envelope(http.get(f"{POLICIES}/{policy_id}", headers=headers), 404, "not_found_error")


def test_presets_are_listed_bindable_and_read_only(turns: Deployment) -> None:
    http, headers = turns.http(), turns.headers()
    listed = http.get(POLICIES, headers=headers, params={"limit": 2}).json()
    assert [p["id"] for p in listed["data"]] == ["standard", "locked-down"] and listed["has_more"] in (True, False)
    locked = http.get(f"{POLICIES}/locked-down", headers=headers).json()
    assert locked["preset"] is True and locked["config"]["isolation"] == "container"
    assert locked["config"]["limits"]["cpu_millis"] == 2000 and locked["config"]["limits"]["memory_bytes"] == 2048 * MIB
    assert http.get(f"{POLICIES}/standard/versions/1", headers=headers).json()["config"]["isolation"] == "namespace"
    assert_error_envelope(http.post(POLICIES, json={"id": "standard", "config": {}}, headers=headers), 409, "conflict_error")
    versioned = http.post(f"{POLICIES}/standard/versions", json={"expected_current": 1, "config": {}}, headers=headers)
    assert_error_envelope(versioned, 409, "conflict_error")


def test_bindings_pin_an_exact_enabled_version(turns: Deployment) -> None:
    client, http, headers = turns.client(), turns.http(), turns.headers()
    environment_id = make_environment(client, "cloud")
    unbound = http.get(binding_path(environment_id), headers=headers).json()
    assert (unbound["policy_id"], unbound["version"]) == (None, None), unbound

    policy_id = unique("pin").lower()
    create(http, headers, {"id": policy_id, "config": {}})
    http.post(f"{POLICIES}/{policy_id}/versions", json={"expected_current": 1, "config": {}, "disabled": True}, headers=headers)
    refused = http.post(binding_path(environment_id), json={"policy_id": policy_id, "version": 2}, headers=headers)
    body = assert_error_envelope(refused, 422, "invalid_request_error")
    assert "disabled" in body["error"]["message"], body
    missing = http.post(binding_path(environment_id), json={"policy_id": policy_id, "version": 3}, headers=headers)
    assert_error_envelope(missing, 404, "not_found_error")
    bad = http.post(binding_path(environment_id), json={"policy_id": policy_id, "version": 1, "pin": True}, headers=headers)
    assert_error_envelope(bad, 400, "invalid_request_error")
    assert http.get(binding_path(environment_id), headers=headers).json()["policy_id"] is None, "nothing bound"

    bound = bind(http, headers, environment_id, policy_id, 1)
    assert (bound["environment_id"], bound["policy_id"], bound["version"], bound["provisioning"]) == (
        environment_id,
        policy_id,
        1,
        "eager",
    )
    assert http.get(binding_path(environment_id), headers=headers).json() == bound

    # A self_hosted environment's hands are the customer's: nothing there would enforce it.
    self_hosted = make_environment(client, "self_hosted")
    refused = http.post(binding_path(self_hosted), json={"policy_id": "standard", "version": 1}, headers=headers)
    assert "self_hosted" in assert_error_envelope(refused, 409, "conflict_error")["error"]["message"]
    # An archived environment's binding is frozen.
    client.beta.environments.archive(environment_id)
    frozen = http.post(binding_path(environment_id), json={"policy_id": "standard", "version": 1}, headers=headers)
    assert_error_envelope(frozen, 409, "conflict_error")
    # Credentials narrower than an API key do not reach policies or bindings.
    live = make_environment(client, "cloud")
    environment_key = turns.create_environment_key(live)
    for method, path in (("GET", POLICIES), ("GET", binding_path(live)), ("POST", binding_path(live))):
        answer = http.request(method, path, headers=auth(environment_key), json={"policy_id": "standard", "version": 1})
        assert answer.status_code == 403, (method, path, answer.text[:300])


# ---------------------------------------------------------------------------------------
# The runner's enforcement


def run_bash(
    turns: Deployment, hands: CloudHands, fake_anthropic: FakeAnthropic, session_id: str, command: str
) -> dict[str, Any]:
    """One turn whose model calls bash once: the call's committed result."""
    client = hands.client
    key = unique("policybash")
    fake_anthropic.script(key, call("bash", {"command": command}), say("done"))
    before = len(of_type(wait_idles(turns.http(), turns.headers(hands.api_key), session_id, count=0), "session.status_idle"))
    client.beta.sessions.events.send(session_id, events=[user_message(f"run it {key}")])
    events = wait_idles(
        turns.http(), turns.headers(hands.api_key), session_id, count=before + 1, on_timeout=lambda: runner_tail(hands)
    )
    results = of_type(events, "agent.tool_result")
    assert results, f"no tool result: {[e['type'] for e in events]}\n{runner_tail(hands)}"
    return results[-1]


# A tool that allocates 200 MiB at once (dd's buffer), and one that forks until refused.
ALLOCATE = "dd if=/dev/zero of=/dev/null bs=200M count=1; echo exit=$?"
FORK = (
    "/usr/bin/python3 -c 'import os, time\n"
    "n = 0\n"
    "try:\n"
    "    while n < 500:\n"
    "        if os.fork() == 0:\n"
    "            time.sleep(3); os._exit(0)\n"
    "        n += 1\n"
    "except OSError as e:\n"
    "    print(\"refused after\", n, e)\n"
    "print(\"forked\", n)'"
)


def policy_session(
    turns: Deployment, hands: CloudHands, config: dict[str, Any] | str
) -> tuple[str, str, str]:
    """A cloud environment bound to a new policy of `config` (or to a preset by name), and
    a session of it: (environment, policy, session)."""
    http, headers = turns.http(), turns.headers(hands.api_key)
    environment_id = make_environment(hands.client, "cloud")
    if isinstance(config, str):
        policy_id = config
    else:
        policy_id = unique("enforce").lower()
        create(http, headers, {"id": policy_id, "config": config})
    bind(http, headers, environment_id, policy_id, 1)
    return environment_id, policy_id, make_hands_session(hands.client, environment_id).id


@pytest.mark.skipif(os.geteuid() != 0, reason="per-session process limits need a root runner")
def test_a_tool_past_its_memory_or_process_limit_is_stopped_and_reported(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    _, _, session_id = policy_session(turns, cloud_hands, {"limits": {"memory_bytes": 64 * MIB, "pids": 12}})
    memory = run_bash(turns, cloud_hands, fake_anthropic, session_id, ALLOCATE)
    assert "memory exhausted" in result_text(memory) and "exit=1" in result_text(memory), memory
    forks = run_bash(turns, cloud_hands, fake_anthropic, session_id, FORK)
    text = result_text(forks)
    assert "refused after" in text and "Resource temporarily unavailable" in text, forks
    forked = int(text.split("refused after", 1)[1].split()[0])
    assert forked < 12, f"the process limit held: {text}"
    # The same tools without a policy (the runner's own, wider limits) run to the end.
    free_session = make_hands_session(cloud_hands.client, make_environment(cloud_hands.client, "cloud")).id
    free = run_bash(turns, cloud_hands, fake_anthropic, free_session, ALLOCATE)
    assert "exit=0" in result_text(free), free


def errors_of(events: list[dict[str, Any]]) -> list[str]:
    return [e["error"]["message"] for e in of_type(events, "session.error")]


def work_items(turns: Deployment, api_key: str, environment_id: str) -> list[dict[str, Any]]:
    env_key = api_environment_key(turns, api_key, environment_id)["secret"]
    answer = turns.http().get(f"/v1/environments/{environment_id}/work", headers=auth(env_key), params={"limit": 100})
    assert answer.status_code == 200, answer.text[:300]
    return answer.json()["data"]


def refused(turns: Deployment, hands: CloudHands, environment_id: str) -> list[dict[str, Any]]:
    """Waits until the runner has refused the item queued at the session's start (and so
    every item of the environment is stopped); the items."""
    deadline = time.monotonic() + 20
    while True:
        items = work_items(turns, hands.api_key, environment_id)
        if items and all(item["state"] == "stopped" for item in items):
            return items
        if time.monotonic() > deadline:
            pytest.fail(f"the runner did not refuse the work: {items}\n{runner_tail(hands)}")
        time.sleep(0.1)


def test_a_policy_the_runner_cannot_meet_fails_closed(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    """The runner refuses the session's work items rather than run anything: the item
    queued at the session's start is stopped and the idle session is left as it is; a
    turn that calls a sandbox tool gets an error result naming the policy and ends with a
    session.error, and nothing runs."""
    http, headers = turns.http(), turns.headers(cloud_hands.api_key)
    environment_id, _, locked = policy_session(turns, cloud_hands, "locked-down")
    (first,) = refused(turns, cloud_hands, environment_id)
    assert not of_type(events_of(http, headers, locked), "session.error"), "no call was open: nothing to tell"
    assert cloud_hands.client.beta.sessions.retrieve(locked).status == "idle"

    result = run_bash(turns, cloud_hands, fake_anthropic, locked, "echo ran")
    assert result.get("is_error") is True, result
    text = result_text(result)
    assert text.startswith("the environment's hands refused this session: sandbox execution policy locked-down"), text
    assert "asks for isolation `container`" in text and "ran" not in text.split(), result
    events = events_of(http, headers, locked)
    assert_unique_ids(events)
    assert errors_of(events) == [text], errors_of(events)
    assert [i["stop_reason"]["type"] for i in of_type(events, "session.status_idle")] == ["retries_exhausted"]
    # Every item the session's turn queued was refused too: nothing is left offered.
    items = refused(turns, cloud_hands, environment_id)
    assert len(items) >= 2 and first["id"] in {item["id"] for item in items}, items


def test_a_work_item_refused_by_hand(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    """`POST /v1/ext/environments/{env}/work/{work}/refuse` with a self-hosted
    environment's hands: bad bodies are refused and change nothing; a refusal answers the
    open sandbox call with an error naming the reason, ends the turn with a session.error,
    stops the item; a second refusal is a 409."""
    client, http, headers = turns.client(), turns.http(), turns.headers()
    environment_id = client.beta.environments.create(name=unique("refuse"), config={"type": "self_hosted"}).id
    env_key = api_environment_key(turns, turns.bootstrap_key, environment_id)["secret"]
    key = unique("refuse")
    fake_anthropic.script(key, call("bash", {"command": "echo never"}), say("must not be asked"))
    session = make_hands_session(client, environment_id)
    item = poll_item(http, environment_id, env_key)
    token = sessions_token(item)
    client.beta.sessions.events.send(session.id, events=[user_message(f"call a tool {key}")])
    events = wait_events(http, headers, session.id, lambda evs: bool(of_type(evs, "agent.tool_use")), what="the call")
    (use,) = of_type(events, "agent.tool_use")

    path = f"/v1/ext/environments/{environment_id}/work/{item['id']}/refuse"
    for body, field in (({}, "reason"), ({"reason": 3}, "reason"), ({"reason": "  "}, "reason"),
                        ({"reason": "x", "force": True}, "force"), ({"reason": "a\u0000b"}, "reason"),
                        ({"reason": "x" * 2001}, "reason")):
        bad = http.post(path, json=body, headers=auth(token))
        assert field in assert_error_envelope(bad, 400, "invalid_request_error")["error"]["message"], (body, bad.text)
    other = http.post(f"/v1/ext/environments/{environment_id}/work/work_0123456789abcdef0123456789/refuse",
                      json={"reason": "x"}, headers=auth(env_key))
    assert other.status_code == 404, other.text[:300]
    assert client.beta.sessions.retrieve(session.id).status == "running", "nothing changed"

    refused = http.post(path, json={"reason": "this worker has no GPU"}, headers=auth(token))
    assert refused.status_code == 200, refused.text[:500]
    assert refused.json()["state"] == "stopped" and refused.json()["stopped_at"], refused.json()
    events = wait_idles(http, headers, session.id)
    (result,) = of_type(events, "agent.tool_result")
    assert result["tool_use_id"] == use["id"] and result["is_error"] is True, result
    assert result_text(result) == "the environment's hands refused this session: this worker has no GPU", result
    assert errors_of(events) == ["the environment's hands refused this session: this worker has no GPU"]
    assert [i["stop_reason"]["type"] for i in of_type(events, "session.status_idle")] == ["retries_exhausted"]
    assert len(fake_anthropic.received(key)) == 1, "the refused turn does not ask the model again"
    wait_work_state(http, headers, environment_id, item["id"], "stopped", timeout=5)
    again = http.post(path, json={"reason": "still no GPU"}, headers=auth(env_key))
    assert_error_envelope(again, 409, "conflict_error")
    assert poll(http, environment_id, env_key).json() is None, "a refused item is not offered again"
    assert errors_of(events_of(http, headers, session.id)) == errors_of(events), "the 409 committed nothing"

    # A refusal while no sandbox call is open stops the item and commits nothing.
    quiet = make_hands_session(client, environment_id)
    item = poll_item(http, environment_id, env_key)
    assert item["data"]["id"] == quiet.id, item
    stopped = http.post(f"/v1/ext/environments/{environment_id}/work/{item['id']}/refuse",
                        json={"reason": "no GPU"}, headers=auth(sessions_token(item)))
    assert stopped.status_code == 200 and stopped.json()["state"] == "stopped", stopped.text[:300]
    assert events_of(http, headers, quiet.id) == [], "an idle session is left as it is"


@pytest.fixture
def hands_without_cgroups(
    turns: Deployment, launch: Callable[..., Deployment], provider_env: dict[str, str], tmp_path: Path
) -> Iterator[tuple[Deployment, CloudHands]]:
    """Cloud hands whose runner may not use cgroups (`AGENTD_SANDBOX_CGROUPS=off`)."""
    off = {"AGENTD_SANDBOX_CGROUPS": "off"}
    if turns.mode == "dev":
        deployment = launch("dev", extra_env={**provider_env, **off})
        root = Path(deployment.cli_env["AGENTD_DATA_DIR"]) / "sandboxes"
        yield deployment, CloudHands(deployment.client(), deployment.bootstrap_key, root, None)
        return
    workspace = unique("nocgroup")
    api_key = turns.create_key(workspace)
    runner = turns.start_runner(turns.create_runner_key(workspace), tmp_path / "sandboxes", off)
    try:
        yield turns, CloudHands(turns.client(api_key), api_key, tmp_path / "sandboxes", runner)
    finally:
        runner.stop()


def test_a_cpu_rate_without_cgroups_fails_closed(
    hands_without_cgroups: tuple[Deployment, CloudHands], fake_anthropic: FakeAnthropic
) -> None:
    deployment, hands = hands_without_cgroups
    environment_id, _, capped = policy_session(deployment, hands, {"limits": {"cpu_millis": 500}})
    refused(deployment, hands, environment_id)
    result = run_bash(deployment, hands, fake_anthropic, capped, "echo ran")
    assert result.get("is_error") is True and "cpu_millis" in result_text(result), result
    assert "cgroup" in result_text(result), result


def cgroups_usable() -> bool:
    """Whether this machine lets a root runner make cgroups with a cpu controller (v1 or v2)."""
    own = Path("/proc/self/cgroup").read_text()
    for line in own.splitlines():
        _, controllers, path = line.split(":", 2)
        if "cpu" in controllers.split(",") or (controllers == "" and Path("/sys/fs/cgroup/cgroup.subtree_control").exists()):
            base = Path("/sys/fs/cgroup") / ("cpu" if controllers else "") / path.lstrip("/")
            probe = base / f"agentd-pytest-{os.getpid()}"
            try:
                probe.mkdir()
                probe.rmdir()
                return True
            except OSError:
                continue
    return False


# Busy for 1.5 s of wall time, then the CPU seconds the process got.
BUSY = (
    "/usr/bin/python3 -c 'import os, time\n"
    "t = time.time()\n"
    "while time.time() - t < 1.5: pass\n"
    "c = os.times()\n"
    "print(\"cpu\", round(c.user + c.system, 3))'"
)


@pytest.mark.skipif(os.geteuid() != 0 or not cgroups_usable(), reason="needs a root runner that may make cgroups")
def test_a_cpu_rate_and_session_totals_are_held_by_cgroups(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    """With cgroups, cpu_millis is enforced (a busy loop gets about its rate), and
    memory_bytes caps the session's processes together: three that each fit the per
    process limit do not fit together."""
    _, _, capped = policy_session(turns, cloud_hands, {"limits": {"cpu_millis": 250, "memory_bytes": 256 * MIB}})
    busy = run_bash(turns, cloud_hands, fake_anthropic, capped, BUSY)
    assert result_text(busy).startswith("cpu "), busy
    cpu = float(result_text(busy).split()[1])
    assert cpu < 0.9, f"250 millicores for 1.5 s give about 0.4 s of CPU, got {cpu}: {busy}"
    together = (
        "for i in 1 2 3; do ( /usr/bin/python3 -c 'import time; b = b\"x\" * (100 << 20); time.sleep(3)' "
        "2>/dev/null; echo \"exit $?\" ) & done; wait"
    )
    text = result_text(run_bash(turns, cloud_hands, fake_anthropic, capped, together))
    statuses = [line for line in text.splitlines() if line.startswith("exit ")]
    assert len(statuses) == 3 and statuses.count("exit 0") < 3, f"300 MiB in a 256 MiB session: {text}"
    # Uncapped, the same busy loop gets its 1.5 s (what the assertion above is measured against).
    free = make_hands_session(cloud_hands.client, make_environment(cloud_hands.client, "cloud")).id
    unthrottled = float(result_text(run_bash(turns, cloud_hands, fake_anthropic, free, BUSY)).split()[1])
    assert unthrottled > cpu, (unthrottled, cpu)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs the memory limit the root runner enforces")
def test_a_rebinding_reaches_the_next_session_not_a_running_one(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic
) -> None:
    http, headers = turns.http(), turns.headers(cloud_hands.api_key)
    environment_id, policy_id, running = policy_session(turns, cloud_hands, {"limits": {"memory_bytes": 64 * MIB}})
    assert "memory exhausted" in result_text(run_bash(turns, cloud_hands, fake_anthropic, running, ALLOCATE))
    wider = http.post(
        f"{POLICIES}/{policy_id}/versions",
        json={"expected_current": 1, "config": {"limits": {"memory_bytes": 1024 * MIB}}},
        headers=headers,
    )
    assert wider.status_code == 200, wider.text[:500]
    bind(http, headers, environment_id, policy_id, 2)
    # The running session keeps the version it pinned; a new one gets version 2.
    assert "memory exhausted" in result_text(run_bash(turns, cloud_hands, fake_anthropic, running, ALLOCATE))
    fresh = make_hands_session(cloud_hands.client, environment_id).id
    assert "exit=0" in result_text(run_bash(turns, cloud_hands, fake_anthropic, fresh, ALLOCATE))
