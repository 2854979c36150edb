"""Erasure of a data subject (`POST /v1/user_profiles/{id}/erasure`, spec §4.5;
docs/api/user-profiles.md, "Erasure"), both modes: the beta selector is required, an
unknown or foreign profile is 404 with nothing deleted, and a canary written through
every path a session has — its messages, the model's answer, a tool's input and output,
a file it wrote under /mnt/session/outputs/, a memory it wrote — is gone afterwards from
the database (SQLite or PostgreSQL), the object store and Redis, while another subject's
session is untouched. A repeat returns a receipt with 0 and recreates nothing.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, call, say
from harness import Deployment, collect, unique
from test_hands import (
    CloudHands,
    cloud_hands,  # noqa: F401 - fixture
    idles,
    make_environment,
    runner_tail,
    types_of,
    user_message,
    wait_idles,
)

BETA = "user-profiles-2026-08-18"
MODEL = "claude-sonnet-4-6"
TOOLSET = {"type": "agent_toolset_20260401"}
MISSING_PROFILE = "uprof_" + "0" * 26


def erase(deployment: Deployment, api_key: str, profile_id: str, *, beta: str | None = BETA) -> httpx.Response:
    headers = deployment.headers(api_key)
    if beta is None:
        headers.pop("anthropic-beta", None)
    else:
        headers["anthropic-beta"] = beta
    return deployment.http().post(f"/v1/user_profiles/{profile_id}/erasure", headers=headers)


def database_text(deployment: Deployment) -> str:
    """Every row of the deployment's database, as text."""
    if deployment.mode == "dev":
        database = Path(deployment.cli_env["AGENTD_DATA_DIR"]) / "agentd.db"
        with sqlite3.connect(database, timeout=10) as connection:
            return "\n".join(connection.iterdump())
    dump = subprocess.run(
        ["pg_dump", "--data-only", "--no-owner", "-d", deployment.cli_env["AGENTD_DATABASE_URL"]],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert dump.returncode == 0, dump.stderr
    return dump.stdout


def blob_text(deployment: Deployment) -> str:
    """The names of every stored object and, in dev (a directory), their bytes."""
    keys = deployment.blob_keys()
    parts = list(keys)
    if deployment.blob_dir is not None:
        for key in keys:
            parts.append((deployment.blob_dir / key).read_bytes().decode("utf-8", "replace"))
    return "\n".join(parts)


def redis_text(deployment: Deployment) -> str:
    """Every key under the deployment's Redis prefix with its value (prod; dev has no Redis)."""
    url = deployment.cli_env.get("AGENTD_REDIS_URL")
    if deployment.mode == "dev" or not url:
        return ""
    prefix = deployment.cli_env.get("AGENTD_REDIS_PREFIX", "")
    cli = ["redis-cli", "-u", url]
    keys = subprocess.run([*cli, "--scan", "--pattern", f"{prefix}*"], capture_output=True, text=True, timeout=10).stdout.split()
    parts = list(keys)
    for key in keys:
        kind = subprocess.run([*cli, "TYPE", key], capture_output=True, text=True, timeout=10).stdout.strip()
        read = {"string": ["GET"], "hash": ["HGETALL"], "list": ["LRANGE", "0", "-1"], "set": ["SMEMBERS"],
                "zset": ["ZRANGE", "0", "-1"], "stream": ["XRANGE", "-", "+"]}.get(kind)
        if read:
            parts.append(subprocess.run([*cli, read[0], key, *read[1:]], capture_output=True, text=True, timeout=10).stdout)
    return "\n".join(parts)


def test_erasure_requires_the_selector_and_a_known_profile(agentd: Deployment, client: anthropic.Anthropic,
                                                            workspace_client: Any) -> None:
    profile = client.beta.user_profiles.create(name=unique("subject"))
    refused = erase(agentd, agentd.bootstrap_key, profile.id, beta=None)
    assert refused.status_code == 400 and BETA in refused.json()["error"]["message"], refused.text
    assert refused.json()["type"] == "error" and refused.json()["error"]["type"] == "invalid_request_error"
    missing = erase(agentd, agentd.bootstrap_key, MISSING_PROFILE)
    assert missing.status_code == 404 and missing.json()["error"]["type"] == "not_found_error", missing.text
    assert erase(agentd, agentd.bootstrap_key, "not-an-id").status_code in (400, 404)
    # Another workspace's profile: 404, and nothing of it is touched.
    other = workspace_client()
    theirs = other.beta.user_profiles.create(name=unique("theirs"))
    assert erase(agentd, agentd.bootstrap_key, theirs.id).status_code == 404
    assert other.beta.user_profiles.retrieve(theirs.id).id == theirs.id

    # An existing subject with nothing recorded: zero is a valid count, also on repeat.
    for _ in range(2):
        done = erase(agentd, agentd.bootstrap_key, profile.id)
        assert done.status_code == 200, done.text
        receipt = done.json()
        assert receipt["type"] == "user_profile_erasure" and receipt["status"] == "completed", receipt
        assert receipt["user_profile_id"] == profile.id and receipt["records_removed"] == 0, receipt
        assert receipt["id"].startswith("uperas_") and receipt["completed_at"] is not None


def test_a_canary_written_through_every_path_is_gone_after_erasure(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic  # noqa: F811 - fixture
) -> None:
    client = cloud_hands.client
    canary = unique("CANARYX").replace("-", "")
    memory = client.beta.memory_stores.create(name=unique("Notes"))
    mount = f"/mnt/memory/{memory.name.lower()}"
    environment = make_environment(client, "cloud")
    agent = client.beta.agents.create(name=unique("erased-agent"), model=MODEL, tools=[TOOLSET])
    profile = client.beta.user_profiles.create(name=unique("subject"))
    bystander_profile = client.beta.user_profiles.create(name=unique("bystander"))

    def session_of(subject: str) -> Any:
        return client.beta.sessions.create(
            agent=agent.id,
            environment_id=environment,
            resources=[{"type": "memory_store", "memory_store_id": memory.id}],
            extra_body={"user_profile_id": subject, "content_capture": "full"},
        )

    subject = session_of(profile.id)
    bystander = session_of(bystander_profile.id)
    key = unique("canary")
    fake_anthropic.script(
        key,
        call("bash", {"command": f"printf '{canary} note' > {mount}/{canary}.md && printf '{canary} out' > "
                                 f"/mnt/session/outputs/{canary}.txt && echo {canary} done"}),
        say(f"Kept {canary}."),
    )
    client.beta.sessions.events.send(subject.id, events=[user_message(f"remember {canary} {key}")])
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    events = wait_idles(http, headers, subject.id, timeout=120, on_timeout=lambda: runner_tail(cloud_hands))
    assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
    other_key = unique("bystander")
    fake_anthropic.script(other_key, say("Nothing to keep."))
    client.beta.sessions.events.send(bystander.id, events=[user_message(f"hello {other_key}")])
    wait_idles(http, headers, bystander.id, timeout=60, on_timeout=lambda: runner_tail(cloud_hands))

    outputs = collect(client.beta.files.list(scope_id=subject.id))
    assert [f.filename for f in outputs] == [f"{canary}.txt"], outputs
    memories = collect(client.beta.memory_stores.memories.list(memory.id, view="full"))
    assert [m.path for m in memories] == [f"/{canary}.md"], memories
    # The test can fail: before the erasure the canary is in the database and the object store.
    assert canary in database_text(turns)
    assert turns.file_blob_exists(outputs[0].id)

    done = erase(turns, cloud_hands.api_key, profile.id)
    assert done.status_code == 200, done.text
    receipt = done.json()
    assert receipt["status"] == "completed" and receipt["records_removed"] >= 8, receipt

    assert canary not in database_text(turns), "the database holds no trace of the subject's content"
    assert not turns.file_blob_exists(outputs[0].id), "the file's object is gone"
    assert canary not in blob_text(turns)
    assert canary not in redis_text(turns)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.retrieve(subject.id)
    assert collect(client.beta.files.list(scope_id=subject.id)) == []
    assert collect(client.beta.memory_stores.memories.list(memory.id)) == []
    for version in collect(client.beta.memory_stores.memory_versions.list(memory.id)):
        assert version.redacted_at is not None or version.operation == "deleted", version
    # The other subject's session is untouched; the profile itself stays.
    assert len(collect(client.beta.sessions.events.list(bystander.id))) >= 3
    assert client.beta.user_profiles.retrieve(profile.id).id == profile.id

    again = erase(turns, cloud_hands.api_key, profile.id).json()
    assert again["records_removed"] == 0 and again["id"] != receipt["id"], again
    assert canary not in database_text(turns)
