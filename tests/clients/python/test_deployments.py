"""Deployments and deployment runs: every method of `client.beta.deployments` and
`client.beta.deployment_runs`, the create and update refusals of docs/api/deployments.md,
run now (a session that carries the deployment's id and is listed by
`sessions.list(deployment_id=…)`), up to 500 resources, the runs list filters,
pause/unpause, archive, auto-pause on every cause agentd can meet (each scheduled fire
records the typed error of the run union and pauses with it), the reach of other
workspaces, and a `* * * * *` schedule under two gateways that fires exactly one run per
slot. The fleet (two gateways, three workers, one SIGKILLed mid-turn, three minutes) is
test_deployments_fleet.py.

Wire facts: managed-agents-wire.md §2.8 and §2.9 (routes and rules), §2B.7 (bodies),
§3.7 (BetaManagedAgentsDeployment, BetaManagedAgentsDeploymentRun). Strict response
validation is on.
"""

from __future__ import annotations

import time
from zoneinfo import ZoneInfo
from typing import Any, Callable

import anthropic
import pytest

from harness import Deployment, collect, error_body, pick_model, unique

MISSING_DEPLOYMENT = "depl_" + "0" * 26
MISSING_RUN = "drun_" + "0" * 26


def refused(call_: Callable[[], Any], status: int, *fragments: str) -> dict[str, Any]:
    with pytest.raises(anthropic.APIStatusError) as caught:
        call_()
    body = error_body(caught.value)
    assert caught.value.status_code == status, (caught.value.status_code, body)
    for fragment in fragments:
        assert fragment in body["error"]["message"], (fragment, body)
    return body


def message(value: str) -> dict[str, Any]:
    return {"type": "user.message", "content": [{"type": "text", "text": value}]}


def setup(client: anthropic.Anthropic, model_id: str) -> tuple[str, str]:
    """An agent without tools (its sessions need no hands) and an environment."""
    agent = client.beta.agents.create(name=unique("deployed"), model=model_id)
    environment = client.beta.environments.create(name=unique("depl-env"), config={"type": "cloud"})
    return agent.id, environment.id


def test_create_retrieve_update_list_and_refusals(client: anthropic.Anthropic, model_id: str) -> None:
    agent, environment = setup(client, model_id)
    created = client.beta.deployments.create(
        name=unique("nightly"),
        agent=agent,
        environment_id=environment,
        initial_events=[message("hello"), {"type": "system.message", "content": [{"type": "text", "text": "ctx"}]}],
        description="does things",
        metadata={"team": "a"},
        schedule={"type": "cron", "expression": "0 9 * * 1-5", "timezone": "America/Los_Angeles"},
    )
    assert created.id.startswith("depl_") and created.type == "deployment"
    assert created.status == "active" and created.paused_reason is None and created.archived_at is None
    assert created.agent.id == agent and created.agent.version == 1, "a bare id pins the latest version"
    assert [e.type for e in created.initial_events] == ["user.message", "system.message"]
    assert created.schedule is not None and created.schedule.type == "cron"
    assert created.schedule.last_run_at is None
    upcoming = created.schedule.upcoming_runs_at or []
    assert len(upcoming) == 5 and upcoming == sorted(upcoming)
    local = [t.astimezone(ZoneInfo("America/Los_Angeles")) for t in upcoming]
    assert all(t.weekday() < 5 and (t.hour, t.minute) == (9, 0) for t in local), local
    assert created.vault_ids == [] and created.resources == [] and created.metadata == {"team": "a"}
    again = client.beta.deployments.retrieve(created.id)
    assert again.model_dump(exclude={"schedule"}) == created.model_dump(exclude={"schedule"})

    # Update: tri-state rules.
    updated = client.beta.deployments.update(
        created.id, schedule=None, description=None, metadata={"team": None, "x": "y"}, name="renamed"
    )
    assert updated.schedule is None, "schedule null: manual only"
    assert updated.description is None and updated.metadata == {"x": "y"} and updated.name == "renamed"
    assert [e.type for e in updated.initial_events] == ["user.message", "system.message"], "kept when omitted"
    client.beta.agents.update(agent, version=1, description="v2")
    repinned = client.beta.deployments.update(created.id, agent=agent)
    assert repinned.agent.version == 2, "a string agent re-pins the latest version"
    pinned = client.beta.deployments.update(created.id, agent={"type": "agent", "id": agent, "version": 1})
    assert pinned.agent.version == 1
    refused(lambda: client.beta.deployments.update(created.id, initial_events=[]), 400, "initial_events")
    refused(
        lambda: client.beta.deployments.update(created.id, extra_body={"initial_events": None}), 400, "initial_events"
    )
    refused(lambda: client.beta.deployments.update(created.id, extra_body={"name": None}), 400, "name")

    # Create refusals, each naming the field.
    base: dict[str, Any] = {"name": "x", "agent": agent, "environment_id": environment, "initial_events": [message("x")]}
    for change, fragment in [
        ({"initial_events": []}, "initial_events"),
        ({"initial_events": [message("x")] * 51}, "initial_events"),
        ({"initial_events": [{"type": "user.interrupt"}]}, "initial_events[0].type"),
        ({"agent": "agent_" + "0" * 26}, "agent"),
        ({"environment_id": "env_" + "0" * 26}, "environment_id"),
        ({"vault_ids": ["vlt_x"] * 51}, "vault_ids"),
        ({"vault_ids": ["vlt_" + "0" * 26]}, "vault_ids[0]"),
        ({"schedule": {"type": "cron", "expression": "0 0 9 * * 1", "timezone": "UTC"}}, "seconds"),
        ({"schedule": {"type": "cron", "expression": "@daily", "timezone": "UTC"}}, "@daily"),
        ({"schedule": {"type": "cron", "expression": "0 9 L * *", "timezone": "UTC"}}, "day-of-month"),
        ({"schedule": {"type": "cron", "expression": "0 9 * * 1#2", "timezone": "UTC"}}, "day-of-week"),
        ({"schedule": {"type": "cron", "expression": "0 9 ? * *", "timezone": "UTC"}}, "?"),
        ({"schedule": {"type": "cron", "expression": "0 9 * * *", "timezone": "Mars/Base"}}, "schedule.timezone"),
        ({"agent": {"type": "agent", "id": agent}}, "agent.version"),
        ({"resources": [{"type": "file", "file_id": "file_x"}] * 501}, "resources: at most 500"),
        ({"resources": [{"type": "file", "file_id": "file_" + "0" * 26}]}, "file"),
    ]:
        refused(lambda: client.beta.deployments.create(**(base | change)), 400, fragment)

    # List: status filter, include_archived, not both.
    paused = client.beta.deployments.create(**base)
    client.beta.deployments.pause(paused.id)
    ids = lambda **q: [d.id for d in collect(client.beta.deployments.list(limit=100, **q))]  # noqa: E731
    assert paused.id in ids(status="paused") and paused.id not in ids(status="active")
    assert created.id in ids(status="active") and created.id not in ids(status="paused")
    assert created.id in ids(agent_id=agent) and created.id not in ids(agent_id="agent_" + "0" * 26)
    refused(lambda: client.beta.deployments.list(status="paused", include_archived=True), 400, "include_archived")
    client.beta.deployments.archive(paused.id)
    assert paused.id not in ids() and paused.id in ids(include_archived=True)


def test_run_now_creates_a_session_of_the_deployment(client: anthropic.Anthropic, model_id: str) -> None:
    agent, environment = setup(client, model_id)
    deployment = client.beta.deployments.create(
        name=unique("manual"), agent=agent, environment_id=environment, initial_events=[message("go")]
    )
    run = client.beta.deployments.run(deployment.id)
    assert run.id.startswith("drun_") and run.type == "deployment_run"
    assert run.trigger_context.type == "manual" and run.error is None and run.session_id
    assert run.deployment_id == deployment.id and run.agent.id == agent and run.agent.version == 1
    session = client.beta.sessions.retrieve(run.session_id)
    assert session.deployment_id == deployment.id
    assert [s.id for s in collect(client.beta.sessions.list(deployment_id=deployment.id, limit=100))] == [session.id]
    other = client.beta.deployments.create(
        name=unique("other"), agent=agent, environment_id=environment, initial_events=[message("go")]
    )
    assert collect(client.beta.sessions.list(deployment_id=other.id, limit=100)) == []
    # The session's first event is the deployment's initial event.
    events = collect(client.beta.sessions.events.list(session.id, limit=100))
    assert events[0].type == "user.message" and events[0].content[0].text == "go"  # type: ignore[union-attr]
    assert client.beta.deployment_runs.retrieve(run.id).model_dump() == run.model_dump()
    refused(lambda: client.beta.deployment_runs.retrieve(MISSING_RUN), 404)


def test_runs_filters_pause_and_auto_pause_on_archived_agent(client: anthropic.Anthropic, model_id: str) -> None:
    agent, environment = setup(client, model_id)
    deployment = client.beta.deployments.create(
        name=unique("filters"), agent=agent, environment_id=environment, initial_events=[message("go")]
    )
    ok = client.beta.deployments.run(deployment.id)
    runs = lambda **q: [r.id for r in collect(client.beta.deployment_runs.list(limit=100, **q))]  # noqa: E731
    assert runs(deployment_id=deployment.id) == [ok.id]
    assert runs(deployment_id=MISSING_DEPLOYMENT) == [], "unknown deployment: an empty page"
    assert runs(deployment_id=deployment.id, trigger_type="manual") == [ok.id]
    assert runs(deployment_id=deployment.id, trigger_type="schedule") == []
    assert runs(deployment_id=deployment.id, has_error=True) == []
    assert runs(deployment_id=deployment.id, has_error=False) == [ok.id]
    assert runs(deployment_id=deployment.id, created_at_gt=ok.created_at) == []
    assert runs(deployment_id=deployment.id, created_at_gte=ok.created_at) == [ok.id]
    assert runs(deployment_id=deployment.id, created_at_lt=ok.created_at) == []
    assert runs(deployment_id=deployment.id, created_at_lte=ok.created_at) == [ok.id]
    refused(lambda: client.beta.deployment_runs.list(trigger_type="cron"), 400, "trigger_type")  # type: ignore[arg-type]

    # Pause / unpause.
    paused = client.beta.deployments.pause(deployment.id)
    assert paused.status == "paused" and paused.paused_reason is not None and paused.paused_reason.type == "manual"
    resumed = client.beta.deployments.unpause(deployment.id)
    assert resumed.status == "active" and resumed.paused_reason is None

    # An archived agent: the run records a typed error (a manual run does not pause).
    client.beta.agents.archive(agent)
    failed = client.beta.deployments.run(deployment.id)
    assert failed.session_id is None and failed.error is not None and failed.error.type == "agent_archived_error"
    assert runs(deployment_id=deployment.id, has_error=True) == [failed.id]
    assert client.beta.deployments.retrieve(deployment.id).status == "active"
    # New deployments of it are refused.
    refused(
        lambda: client.beta.deployments.create(
            name="x", agent=agent, environment_id=environment, initial_events=[message("x")]
        ),
        400,
        "archived",
    )

    # Archive: runs and updates refused afterwards; retrieving still works.
    archived = client.beta.deployments.archive(deployment.id)
    assert archived.archived_at is not None and archived.status == "active"
    assert client.beta.deployments.archive(deployment.id).archived_at == archived.archived_at, "idempotent"
    refused(lambda: client.beta.deployments.run(deployment.id), 400, "archived")
    refused(lambda: client.beta.deployments.pause(deployment.id), 400, "archived")
    refused(lambda: client.beta.deployments.update(deployment.id, name="n"), 400, "archived")


def test_other_workspaces_and_unknown_ids_are_404(
    client: anthropic.Anthropic, model_id: str, workspace_client: Callable[[], anthropic.Anthropic]
) -> None:
    agent, environment = setup(client, model_id)
    deployment = client.beta.deployments.create(
        name=unique("mine"), agent=agent, environment_id=environment, initial_events=[message("go")]
    )
    run = client.beta.deployments.run(deployment.id)
    other = workspace_client()
    for attempt in (
        other.beta.deployments.retrieve,
        other.beta.deployments.archive,
        other.beta.deployments.pause,
        other.beta.deployments.unpause,
        other.beta.deployments.run,
    ):
        refused(lambda: attempt(deployment.id), 404)
    refused(lambda: other.beta.deployments.update(deployment.id, name="stolen"), 404)
    refused(lambda: other.beta.deployment_runs.retrieve(run.id), 404)
    assert collect(other.beta.deployments.list(limit=100)) == []
    assert collect(other.beta.deployment_runs.list(deployment_id=deployment.id, limit=100)) == []
    refused(lambda: client.beta.deployments.retrieve(MISSING_DEPLOYMENT), 404)
    refused(lambda: client.beta.deployments.retrieve("not-an-id"), 404)


def test_a_schedule_fires_exactly_once_per_slot_under_two_gateways(launch: Callable[..., Deployment]) -> None:
    # Two gateways (each runs the scheduler, ticking every 100 ms) and two workers.
    deployment = launch("prod", extra_env={"AGENTD_TEST_DEPLOYMENT_TICK_MS": "100"})
    deployment.start_gateway()
    deployment.start_worker()
    client = deployment.client()
    model_id = pick_model(client)
    agent, environment = setup(client, model_id)
    every_minute = {"type": "cron", "expression": "* * * * *", "timezone": "UTC"}
    deployments = [
        client.beta.deployments.create(
            name=unique("minutely"),
            agent=agent,
            environment_id=environment,
            initial_events=[message("tick")],
            schedule=every_minute,
        ).id
        for _ in range(4)
    ]
    # An archived agent pauses a scheduled deployment at its next fire.
    doomed_agent, _ = setup(client, model_id)
    doomed = client.beta.deployments.create(
        name=unique("doomed"), agent=doomed_agent, environment_id=environment, initial_events=[message("x")],
        schedule=every_minute,
    )
    client.beta.agents.archive(doomed_agent)

    def scheduled(deployment_id: str) -> list[Any]:
        return collect(client.beta.deployment_runs.list(deployment_id=deployment_id, trigger_type="schedule", limit=100))

    deadline = time.monotonic() + 150
    while not all(len(scheduled(d)) >= 2 for d in deployments):
        assert time.monotonic() < deadline, [len(scheduled(d)) for d in deployments]
        time.sleep(1)
    time.sleep(2)  # both gateways have ticked many times past the second slot
    for deployment_id in deployments:
        runs = scheduled(deployment_id)
        slots = [r.trigger_context.scheduled_at for r in runs]  # type: ignore[union-attr]
        assert len(slots) == len(set(slots)), f"a slot fired twice: {slots}"
        assert all(s.second == 0 for s in slots), slots
        assert all(r.session_id and r.error is None for r in runs), runs
        sessions = collect(client.beta.sessions.list(deployment_id=deployment_id, limit=100))
        assert sorted(s.id for s in sessions) == sorted(r.session_id for r in runs)
        current = client.beta.deployments.retrieve(deployment_id)
        assert current.schedule is not None and current.schedule.last_run_at is not None
    paused = client.beta.deployments.retrieve(doomed.id)
    assert paused.status == "paused" and paused.paused_reason is not None, paused
    assert paused.paused_reason.type == "error" and paused.paused_reason.error.type == "agent_archived_error"  # type: ignore[union-attr]
    (failed,) = scheduled(doomed.id)
    assert failed.error is not None and failed.error.type == "agent_archived_error" and failed.session_id is None
    for deployment_id in deployments:
        client.beta.deployments.archive(deployment_id)


def test_a_rate_limited_fire_records_a_typed_error_and_the_schedule_goes_on(
    launch: Callable[..., Deployment],
) -> None:
    # A small create bucket (6 a minute, 0.1 token a second): a scheduled fire spends it
    # like any session create.
    deployment = launch("dev", create_limit=6, extra_env={"AGENTD_TEST_DEPLOYMENT_TICK_MS": "100"})
    client = deployment.client().with_options(max_retries=0)
    model_id = pick_model(client)
    agent, environment = setup(client, model_id)
    created = client.beta.deployments.create(
        name=unique("limited"),
        agent=agent,
        environment_id=environment,
        initial_events=[message("tick")],
        schedule={"type": "cron", "expression": "* * * * *", "timezone": "UTC"},
    )
    assert created.schedule is not None and created.schedule.upcoming_runs_at
    target = next(t for t in created.schedule.upcoming_runs_at if t.timestamp() - time.time() > 4)
    time.sleep(max(0.0, target.timestamp() - time.time() - 2.5))
    # Empty the bucket just before the slot.
    with pytest.raises(anthropic.RateLimitError):
        for _ in range(10):
            client.beta.agents.create(name=unique("drain"), model=model_id)

    def at_target() -> list[Any]:
        runs = collect(client.beta.deployment_runs.list(deployment_id=created.id, trigger_type="schedule", limit=100))
        return [r for r in runs if r.trigger_context.scheduled_at == target]  # type: ignore[union-attr]

    deadline = time.monotonic() + 30
    while not at_target():
        assert time.monotonic() < deadline, "the slot did not fire"
        time.sleep(0.5)
    (limited,) = at_target()
    assert limited.session_id is None and limited.error is not None, limited
    assert limited.error.type == "session_rate_limited_error", limited.error
    current = client.beta.deployments.retrieve(created.id)
    assert current.status == "active" and current.paused_reason is None, "a rate-limited fire does not pause"
    assert current.schedule is not None and current.schedule.upcoming_runs_at
    assert current.schedule.upcoming_runs_at[0] > target, "the schedule goes on"


def test_a_gone_file_or_archived_memory_store_is_a_typed_run_error(client: anthropic.Anthropic, model_id: str) -> None:
    agent, environment = setup(client, model_id)
    uploaded = client.beta.files.upload(file=("notes.txt", b"hello", "text/plain"))
    store = client.beta.memory_stores.create(name=unique("depl-store"))
    with_file = client.beta.deployments.create(
        name=unique("files"),
        agent=agent,
        environment_id=environment,
        initial_events=[message("go")],
        resources=[{"type": "file", "file_id": uploaded.id}],
    )
    with_store = client.beta.deployments.create(
        name=unique("stores"),
        agent=agent,
        environment_id=environment,
        initial_events=[message("go")],
        resources=[{"type": "memory_store", "memory_store_id": store.id}],
    )
    assert [r.type for r in with_file.resources] == ["file"] and with_file.resources[0].file_id == uploaded.id  # type: ignore[union-attr]
    first = client.beta.deployments.run(with_store.id)
    assert first.session_id and first.error is None, first
    client.beta.files.delete(uploaded.id)
    client.beta.memory_stores.archive(store.id)
    gone = client.beta.deployments.run(with_file.id)
    assert gone.error is not None and gone.error.type == "file_not_found_error" and gone.session_id is None, gone
    archived = client.beta.deployments.run(with_store.id)
    assert archived.error is not None and archived.error.type == "memory_store_archived_error", archived


def test_a_gateway_killed_between_a_runs_session_and_its_first_message_loses_nothing(
    launch: Callable[..., Deployment],
) -> None:
    # The second gateway dies (AGENTD_FAULT_CRASH_AT) right after it commits a run's
    # session and before it submits the session's initial events. The first gateway's
    # scheduler finishes the run once it is 30 s old: the session gets its message, once,
    # and answers it.
    deployment = launch("prod", extra_env={"AGENTD_TEST_DEPLOYMENT_TICK_MS": "100"})
    doomed_url = deployment.start_gateway({"AGENTD_FAULT_CRASH_AT": "session.created@1"})
    client = deployment.client()
    agent, environment = setup(client, pick_model(client))
    created = client.beta.deployments.create(
        name=unique("crash"), agent=agent, environment_id=environment, initial_events=[message("survive")]
    )
    with pytest.raises(anthropic.APIConnectionError):
        deployment.client(base_url=doomed_url).beta.deployments.run(created.id)
    deadline = time.monotonic() + 90
    while True:
        runs = collect(client.beta.deployment_runs.list(deployment_id=created.id, limit=10))
        assert len(runs) == 1, runs
        if runs[0].session_id:
            break
        assert time.monotonic() < deadline, "the run was never finished"
        time.sleep(1)
    session_id = runs[0].session_id

    def types() -> list[str]:
        return [e.type for e in client.beta.sessions.events.list(session_id)]

    # The message was submitted, and its turn ran to its end.
    while "session.status_idle" not in types():
        assert time.monotonic() < deadline, ("the initial message never ran", types())
        time.sleep(0.5)
    seen = types()
    assert seen.count("user.message") == 1, f"the initial message was submitted once: {seen}"
    assert seen.index("user.message") < seen.index("session.status_running") < seen.index("session.status_idle")


def repositories(count: int) -> list[dict[str, Any]]:
    return [
        {"type": "github_repository", "url": f"https://github.com/example/repo-{i}", "mount_path": f"/workspace/r{i}"}
        for i in range(count)
    ]


def test_a_deployment_takes_up_to_500_resources_and_its_sessions_get_them_all(
    client: anthropic.Anthropic, model_id: str
) -> None:
    agent, environment = setup(client, model_id)
    fields: dict[str, Any] = {"agent": agent, "environment_id": environment, "initial_events": [message("go")]}
    refused(
        lambda: client.beta.deployments.create(name=unique("too-many"), resources=repositories(501), **fields),
        400,
        "resources: at most 500",
    )
    created = client.beta.deployments.create(name=unique("many"), resources=repositories(500), **fields)
    assert len(created.resources) == 500 and created.resources[499].url == "https://github.com/example/repo-499"  # type: ignore[union-attr]
    refused(lambda: client.beta.deployments.update(created.id, resources=repositories(501)), 400, "resources: at most 500")
    assert len(client.beta.deployments.update(created.id, resources=repositories(300)).resources) == 300
    assert len(client.beta.deployments.update(created.id, resources=repositories(500)).resources) == 500
    # A fire gives its session every one of them.
    run = client.beta.deployments.run(created.id)
    assert run.session_id and run.error is None, run
    mounted = collect(client.beta.sessions.resources.list(run.session_id, limit=1000))
    assert sorted(r.mount_path for r in mounted) == sorted(f"/workspace/r{i}" for i in range(500))  # type: ignore[union-attr]
    # A session created directly keeps its own limit.
    refused(
        lambda: client.beta.sessions.create(agent=agent, environment_id=environment, resources=repositories(101)),
        400,
        "resources",
    )


EVERY_MINUTE = {"type": "cron", "expression": "* * * * *", "timezone": "UTC"}


def skill_files(name: str, note: str = "v1") -> list[tuple[str, bytes, str]]:
    skill_md = f"---\nname: {name}\ndescription: Says {note}.\n---\n\nSay {note}.\n"
    return [(f"{name}/SKILL.md", skill_md.encode(), "text/markdown")]


def test_every_cause_auto_pauses_a_schedule_with_the_typed_error_of_its_run(
    client: anthropic.Anthropic, model_id: str
) -> None:
    """One deployment per cause of the paused-reason union that agentd can meet, each on
    a `* * * * *` schedule and broken before its first slot: at that slot its run records
    the typed error and the deployment pauses with exactly that error; nothing fires
    after. Two controls fire and stay active: a self-hosted environment with a memory
    store only (the customer's worker syncs stores) and a skill with a version left."""
    # Everything below is created and broken before the first slot: start early in a minute.
    if time.time() % 60 > 30:
        time.sleep(61 - time.time() % 60)
    first_slot = (time.time() // 60 + 1) * 60
    agent, environment = setup(client, model_id)
    base: dict[str, Any] = {"initial_events": [message("go")], "schedule": EVERY_MINUTE}

    def deploy(name: str, **fields: Any) -> str:
        return client.beta.deployments.create(
            name=unique(name), **({"agent": agent, "environment_id": environment} | base | fields)
        ).id

    def skilled(skills: list[dict[str, Any]]) -> str:
        return client.beta.agents.create(name=unique("skilled"), model=model_id, skills=skills).id  # type: ignore[arg-type]

    expected: dict[str, str] = {}
    breaks: list[Callable[[], Any]] = []

    # A skill of the agent deleted.
    gone = client.beta.skills.create(files=skill_files(unique("gone").lower()))
    expected[deploy("skill", agent=skilled([{"type": "custom", "skill_id": gone.id}]))] = "skill_not_found_error"
    breaks.append(lambda: client.beta.skills.delete(gone.id))
    # The pinned version of a skill deleted (another version is left).
    name = unique("pinned").lower()
    pinned = client.beta.skills.create(files=skill_files(name))
    newer = client.beta.skills.versions.create(pinned.id, files=skill_files(name, "v2"))
    on_old = skilled([{"type": "custom", "skill_id": pinned.id, "version": pinned.latest_version_id}])
    expected[deploy("skill-version", agent=on_old)] = "skill_not_found_error"
    breaks.append(lambda: client.beta.skills.versions.delete(pinned.latest_version_id, skill_id=pinned.id))
    # Control: `latest` of the same skill follows the versions left.
    on_latest = deploy("skill-latest", agent=skilled([{"type": "custom", "skill_id": pinned.id}]))
    # A self-hosted environment with a file resource (refused at no create: at each fire).
    self_hosted = client.beta.environments.create(name=unique("self-hosted"), config={"type": "self_hosted"}).id
    uploaded = client.beta.files.upload(file=("notes.txt", b"hello", "text/plain"))
    file_resource = [{"type": "file", "file_id": uploaded.id}]
    expected[deploy("self-hosted", environment_id=self_hosted, resources=file_resource)] = (
        "self_hosted_resources_unsupported_error"
    )
    # Control: a self-hosted environment with a memory store only.
    store = client.beta.memory_stores.create(name=unique("kept"))
    stores_only = deploy(
        "self-hosted-store", environment_id=self_hosted, resources=[{"type": "memory_store", "memory_store_id": store.id}]
    )
    # The causes the first part implemented, each exercised by a scheduled fire.
    archived_agent, _ = setup(client, model_id)
    expected[deploy("agent", agent=archived_agent)] = "agent_archived_error"
    breaks.append(lambda: client.beta.agents.archive(archived_agent))
    for kind, verb in (("environment_archived_error", "archive"), ("environment_not_found_error", "delete")):
        env = client.beta.environments.create(name=unique("doomed-env"), config={"type": "cloud"}).id
        expected[deploy(verb + "-env", environment_id=env)] = kind
        breaks.append(lambda env=env, verb=verb: getattr(client.beta.environments, verb)(env))
    for kind, verb in (("vault_archived_error", "archive"), ("vault_not_found_error", "delete")):
        vault = client.beta.vaults.create(display_name=unique("doomed-vault")).id
        expected[deploy(verb + "-vault", vault_ids=[vault])] = kind
        breaks.append(lambda vault=vault, verb=verb: getattr(client.beta.vaults, verb)(vault))
    doomed_file = client.beta.files.upload(file=("gone.txt", b"bye", "text/plain"))
    expected[deploy("file", resources=[{"type": "file", "file_id": doomed_file.id}])] = "file_not_found_error"
    breaks.append(lambda: client.beta.files.delete(doomed_file.id))
    for kind, verb in (("memory_store_archived_error", "archive"), ("session_resource_not_found_error", "delete")):
        doomed_store = client.beta.memory_stores.create(name=unique("doomed-store")).id
        expected[deploy(verb + "-store", resources=[{"type": "memory_store", "memory_store_id": doomed_store}])] = kind
        breaks.append(lambda s=doomed_store, verb=verb: getattr(client.beta.memory_stores, verb)(s))
    for do in breaks:
        do()
    assert client.beta.skills.retrieve(pinned.id).latest_version_id == newer.id
    assert time.time() < first_slot - 0.5, "the setup ran into the first slot: the test would prove nothing"

    def scheduled(deployment_id: str) -> list[Any]:
        return collect(client.beta.deployment_runs.list(deployment_id=deployment_id, trigger_type="schedule", limit=100))

    watched = [*expected, on_latest, stores_only]
    deadline = time.monotonic() + 75  # the next whole minute, plus margin
    while not all(scheduled(d) for d in watched):
        assert time.monotonic() < deadline, {d: len(scheduled(d)) for d in watched}
        time.sleep(1)
    for deployment_id, kind in expected.items():
        (run,) = scheduled(deployment_id)
        assert run.session_id is None and run.error is not None and run.error.type == kind, (kind, run)
        current = client.beta.deployments.retrieve(deployment_id)
        assert current.status == "paused" and current.paused_reason is not None, (kind, current)
        assert current.paused_reason.type == "error", (kind, current.paused_reason)
        assert current.paused_reason.error.model_dump() == run.error.model_dump(), (kind, current.paused_reason)  # type: ignore[union-attr]
    for control in (on_latest, stores_only):
        (run,) = scheduled(control)
        assert run.session_id and run.error is None, run
        assert client.beta.deployments.retrieve(control).status == "active"
        client.beta.deployments.archive(control)
    # A manual run of a deployment paused by a skill records the error again and
    # changes nothing else.
    skill_deployment = next(d for d, k in expected.items() if k == "skill_not_found_error")
    manual = client.beta.deployments.run(skill_deployment)
    assert manual.error is not None and manual.error.type == "skill_not_found_error", manual
    assert client.beta.deployments.retrieve(skill_deployment).paused_reason.error.type == "skill_not_found_error"  # type: ignore[union-attr]
