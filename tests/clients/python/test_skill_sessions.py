"""Skills in running sessions: an agent's custom skill pinned when the session is
created, listed in the system prompt, and unpacked where its hands run — at
`/mnt/skills/<name>/` by our runner, and at `{workdir}/skills/<name>/` by the official
`EnvironmentWorker` (anthropic 2.10.0, unpatched; managed-agents-wire.md §5.3 steps 4–5).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anthropic

from fake_models import FakeAnthropic, call, say
from harness import Deployment, unique
from test_hands import (
    CloudHands,
    cloud_hands,  # noqa: F401 - fixture
    idles,
    make_environment,
    message_texts,
    of_type,
    result_text,
    results_by_call,
    runner_tail,
    start_sdk_worker,
    types_of,
    user_message,
    wait_idles,
)

MODEL = "claude-sonnet-4-6"
TOOLSET = {"type": "agent_toolset_20260401"}


def make_skill(client: anthropic.Anthropic) -> tuple[Any, str, str]:
    """A skill with a SKILL.md and a script; returns it, its name and its SKILL.md."""
    name = unique("greeter").lower()
    skill_md = f"---\nname: {name}\ndescription: Greets people by name in their own language.\n---\n\nRun scripts/hello.sh NAME.\n"
    skill = client.beta.skills.create(
        files=[
            (f"{name}/SKILL.md", skill_md.encode(), "text/markdown"),
            (f"{name}/scripts/hello.sh", b"echo hello $1\n", "text/x-shellscript"),
        ]
    )
    return skill, name, skill_md


def system_prompt(fake: FakeAnthropic, key: str) -> str:
    request = fake.received(key)[0]
    system = request.body.get("system")
    if isinstance(system, list):
        return "\n".join(block.get("text", "") for block in system)
    return system or ""


def test_runner_mounts_the_agents_skill(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic  # noqa: F811 - fixture
) -> None:
    client = cloud_hands.client
    skill, name, skill_md = make_skill(client)
    agent = client.beta.agents.create(
        name=unique("skilled"), model=MODEL, tools=[TOOLSET], skills=[{"type": "custom", "skill_id": skill.id}]
    )
    environment_id = make_environment(client, "cloud")
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment_id)
    pinned = session.agent.skills[0]
    assert pinned.version == skill.latest_version_id, "latest is pinned when the session is created"
    key = unique("skillcat")
    fake_anthropic.script(
        key,
        call("bash", {"command": f"cat /mnt/skills/{name}/SKILL.md; sh /mnt/skills/{name}/scripts/hello.sh Ada"}),
        say("Read the skill."),
    )
    client.beta.sessions.events.send(session.id, events=[user_message(f"greet Ada {key}")])
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    events = wait_idles(http, headers, session.id, on_timeout=lambda: runner_tail(cloud_hands))
    assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
    (use,) = of_type(events, "agent.tool_use")
    output = result_text(results_by_call(events, "agent.tool_result")[use["id"]])
    assert output == skill_md + "hello Ada", output
    assert message_texts(events) == ["Read the skill."]
    system = system_prompt(fake_anthropic, key)
    assert f"{name}: Greets people by name in their own language." in system, system
    assert f"/mnt/skills/{name}/SKILL.md" in system, system


def test_sdk_environment_worker_runs_a_session_with_a_skill(
    turns: Deployment, fake_anthropic: FakeAnthropic, tmp_path: Path
) -> None:
    client = turns.client()
    skill, name, skill_md = make_skill(client)
    environment_id = make_environment(client, "self_hosted")
    environment_key = turns.create_environment_key(environment_id)
    agent = client.beta.agents.create(
        name=unique("skilled-sdk"), model=MODEL, tools=[TOOLSET], skills=[{"type": "custom", "skill_id": skill.id}]
    )
    worker, workdir = start_sdk_worker(turns, tmp_path, environment_id, environment_key, unique("sdk-skills"))
    try:
        key = unique("sdkskill")
        fake_anthropic.script(
            key,
            call("bash", {"command": f"cat skills/{name}/SKILL.md"}),
            say("The worker has the skill."),
        )
        session = client.beta.sessions.create(agent=agent.id, environment_id=environment_id)
        client.beta.sessions.events.send(session.id, events=[user_message(f"use the skill {key}")])
        http = turns.http()
        events = wait_idles(http, turns.headers(), session.id, on_timeout=worker.output_tail)
        assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
        (use,) = of_type(events, "agent.tool_use")
        output = result_text(results_by_call(events, "user.tool_result")[use["id"]])
        assert output.rstrip("\n") == skill_md.rstrip("\n"), output
        # The worker downloaded the version's archive and unpacked it, wrapper stripped.
        assert (workdir / "skills" / name / "SKILL.md").read_text() == skill_md
        assert (workdir / "skills" / name / "scripts" / "hello.sh").read_bytes() == b"echo hello $1\n"
        system = system_prompt(fake_anthropic, key)
        assert f"skills/{name}/SKILL.md" in system and "/mnt/skills" not in system, system
        assert worker.alive(), worker.output_tail()
    finally:
        worker.stop(timeout=5)
