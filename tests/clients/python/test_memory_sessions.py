"""Memory in sessions (docs/api/memory.md, "Memory in sessions"): memory stores attached
to sessions as `memory_store` resources — checked and snapshotted when attached, listed
by `sessions.list(memory_store_id=…)`, described in the system prompt — and mounted at
`/mnt/memory/<slug>/` by the hands: our runner (cloud environments) downloads every
memory when it prepares the session and writes back what the agent's tools change after
each tool call, with the work item's sessions token, so each version is the session's;
the SDK's `EnvironmentWorker` (anthropic 2.10.0, unpatched) does the same on its own host
for a self_hosted environment.

Wire facts: managed-agents-wire.md §2.2 (`memory_store_id` filter), §2B.2
(`BetaManagedAgentsMemoryStoreResourceParam`), §3.4 and `BetaManagedAgentsMemoryStoreResource`
(name/description snapshotted, `mount_path` output-only), §2.11 (memory rules), §5.3 step 6
(the worker's memory sync). Every test runs in both modes (`agentd dev`; gateway, worker
and `agentd runner` on PostgreSQL/NATS/Redis); strict response validation is on.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import anthropic
import pytest

from fake_models import FakeAnthropic, Reply, call, say, tool_use
from harness import Deployment, collect, unique
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
from test_skill_sessions import system_prompt

MODEL = "claude-sonnet-4-6"
TOOLSET = {"type": "agent_toolset_20260401"}


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_store(client: anthropic.Anthropic, prefix: str, description: str = "", **seeds: str) -> tuple[Any, str]:
    """A store with a unique name (so a unique mount directory) and `path=content` seeds;
    returns it and its mount path."""
    name = unique(prefix)
    store = client.beta.memory_stores.create(name=name, description=description)
    for path, content in seeds.items():
        client.beta.memory_stores.memories.create(store.id, path=f"/{path}", content=content)
    return store, f"/mnt/memory/{name.lower()}"


def memories(client: anthropic.Anthropic, store_id: str) -> dict[str, str]:
    """The store's memories: path → content."""
    return {m.path: m.content for m in collect(client.beta.memory_stores.memories.list(store_id, view="full"))}


def versions(client: anthropic.Anthropic, store_id: str, **filters: Any) -> list[Any]:
    return collect(client.beta.memory_stores.memory_versions.list(store_id, **filters))


def hands_session(client: anthropic.Anthropic, environment_id: str, *resources: dict[str, Any]) -> Any:
    agent = client.beta.agents.create(name=unique("memory-agent"), model=MODEL, tools=[TOOLSET])
    return client.beta.sessions.create(agent=agent.id, environment_id=environment_id, resources=list(resources))


def bad_request(call_: Any, *fragments: str) -> str:
    with pytest.raises(anthropic.BadRequestError) as refused:
        call_()
    message = refused.value.message
    for fragment in fragments:
        assert fragment in message, (fragment, message)
    return message


def run_turn(
    deployment: Deployment, hands: CloudHands, session_id: str, key: str
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Sends the session's first turn, keyed `key`; waits until it idles; returns the
    events and the results of its calls, in order."""
    hands.client.beta.sessions.events.send(session_id, events=[user_message(f"go {key}")])
    headers = deployment.headers(hands.api_key)
    events = wait_idles(deployment.http(), headers, session_id, timeout=60, on_timeout=lambda: runner_tail(hands))
    assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
    results = results_by_call(events, "agent.tool_result")
    return events, [results[u["id"]] for u in of_type(events, "agent.tool_use")]


def bash(command: str) -> Reply:
    return call("bash", {"command": command})


# ---------------------------------------------------------------------------------------
# Attaching stores: the rules, the snapshot, the list filter


def test_attaching_memory_stores_checks_and_snapshots_them(agentd: Deployment) -> None:
    client = agentd.client()
    http = agentd.http()
    environment = make_environment(client, "cloud")
    agent = client.beta.agents.create(name=unique("memory-agent"), model="claude-sonnet-4-5")
    notes = client.beta.memory_stores.create(name=unique("Team Notes"), description="What the team decided.")
    prefs = client.beta.memory_stores.create(name=unique("prefs"))

    def create(*resources: dict[str, Any]) -> Any:
        return client.beta.sessions.create(agent=agent.id, environment_id=environment, resources=list(resources))

    session = create(
        {"type": "file", "file_id": client.beta.files.upload(file=("a.txt", b"a")).id},
        {"type": "memory_store", "memory_store_id": notes.id, "instructions": "Record decisions with their date."},
        {"type": "memory_store", "memory_store_id": prefs.id, "access": "read_only"},
    )
    _, first, second = session.resources
    slug = notes.name.lower().replace(" ", "-")
    assert (first.type, first.memory_store_id, first.access) == ("memory_store", notes.id, "read_write")
    assert (first.name, first.description, first.mount_path) == (notes.name, "What the team decided.", f"/mnt/memory/{slug}")
    assert first.instructions == "Record decisions with their date."
    assert (second.access, second.description, second.mount_path) == ("read_only", "", f"/mnt/memory/{prefs.name}")
    # Snapshotted: later edits of the store do not reach the session.
    client.beta.memory_stores.update(notes.id, name=unique("renamed"), description="changed")
    listed = client.beta.sessions.resources.list(session.id).data
    assert (listed[1].name, listed[1].description) == (notes.name, "What the team decided.")
    assert client.beta.sessions.retrieve(session.id).resources[1].mount_path == f"/mnt/memory/{slug}"

    # Refusals name the entry and the store.
    missing = "memstore_" + "0" * 26
    bad_request(lambda: create({"type": "memory_store", "memory_store_id": missing}), "resources[0]", missing)
    bad_request(lambda: create({"type": "memory_store", "memory_store_id": "nope"}), "resources[0].memory_store_id")
    archived = client.beta.memory_stores.create(name=unique("archived"))
    client.beta.memory_stores.archive(archived.id)
    bad_request(
        lambda: create({"type": "memory_store", "memory_store_id": prefs.id}, {"type": "memory_store", "memory_store_id": archived.id}),
        "resources[1]",
        archived.id,
        "archived",
    )
    bad_request(
        lambda: create({"type": "memory_store", "memory_store_id": prefs.id, "access": "write"}),  # type: ignore[typeddict-item]
        "resources[0].access",
    )
    bad_request(
        lambda: create({"type": "memory_store", "memory_store_id": prefs.id}, {"type": "memory_store", "memory_store_id": prefs.id}),
        "resources[1]",
        prefs.id,
        "twice",
    )
    twin = client.beta.memory_stores.create(name=prefs.name.upper())
    bad_request(
        lambda: create({"type": "memory_store", "memory_store_id": prefs.id}, {"type": "memory_store", "memory_store_id": twin.id}),
        "resources[1]",
        twin.id,
        prefs.id,
        f"/mnt/memory/{prefs.name}",
    )
    bad_request(
        lambda: create({"type": "memory_store", "memory_store_id": prefs.id, "instructions": "x" * 4097}),
        "resources[0].instructions",
    )
    made = client.beta.files.upload(file=("m.txt", b"m")).id
    bad_request(
        lambda: create({"type": "file", "file_id": made, "mount_path": f"/mnt/memory/{prefs.name}/m.txt"}),
        "mount_path",
        "/mnt/memory/",
    )
    # Memory stores are attached at creation (or by the manifest), not by resources.add.
    add = http.post(
        f"/v1/sessions/{session.id}/resources",
        json={"type": "memory_store", "memory_store_id": prefs.id},
        headers=agentd.headers(),
    )
    assert add.status_code == 400 and "memory stores are attached when the session is created" in add.text, add.text

    # sessions.list(memory_store_id=…): the sessions with that store among their resources.
    other = create({"type": "memory_store", "memory_store_id": notes.id})
    snapshot = other.resources[0]
    assert (snapshot.name, snapshot.description) != (notes.name, "What the team decided."), "attached after the edit"
    listed_ids = lambda store_id: [s.id for s in collect(client.beta.sessions.list(memory_store_id=store_id))]  # noqa: E731
    assert listed_ids(notes.id) == [other.id, session.id]
    assert listed_ids(prefs.id) == [session.id]
    assert listed_ids(archived.id) == []
    response = http.get("/v1/sessions", params={"memory_store_id": "nope"}, headers=agentd.headers())
    assert response.status_code == 400 and "memory_store_id" in response.text, response.text

    # The manifest replace attaches by the same rules; the filter follows the resources.
    path = f"/v1/ext/sessions/{other.id}/resources"
    refused = http.put(path, json={"resources": [{"type": "memory_store", "memory_store_id": archived.id}]}, headers=agentd.headers())
    assert refused.status_code == 400 and archived.id in refused.text, refused.text
    replaced = http.put(
        path,
        json={"resources": [{"type": "memory_store", "memory_store_id": notes.id, "access": "read_only"}, {"type": "memory_store", "memory_store_id": prefs.id}]},
        headers=agentd.headers(),
    )
    assert replaced.status_code == 200, replaced.text
    kept, added = replaced.json()["resources"]
    # A store already attached keeps its snapshot; its access is the new one.
    assert (kept["access"], kept["name"], kept["description"]) == ("read_only", snapshot.name, "changed"), kept
    assert added["mount_path"] == f"/mnt/memory/{prefs.name}"
    assert listed_ids(prefs.id) == [other.id, session.id]
    emptied = http.put(path, json={"resources": []}, headers=agentd.headers())
    assert emptied.status_code == 200, emptied.text
    assert listed_ids(notes.id) == [session.id]
    # Archiving a store keeps the sessions it is attached to; deleting a session drops it.
    client.beta.memory_stores.archive(prefs.id)
    assert listed_ids(prefs.id) == [session.id]
    client.beta.sessions.delete(session.id)
    assert listed_ids(notes.id) == [] and listed_ids(prefs.id) == []


# ---------------------------------------------------------------------------------------
# Our runner: /mnt/memory/<slug>/ in a cloud session's sandbox


def test_an_agent_writes_memory_and_a_later_session_reads_it(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic  # noqa: F811 - fixture
) -> None:
    client = cloud_hands.client
    store, mount = make_store(client, "Notes", "What earlier sessions learned.", **{"seed.md": "seeded"})
    environment = make_environment(client, "cloud")
    attach = {"type": "memory_store", "memory_store_id": store.id, "instructions": "Keep one file per topic."}
    first = hands_session(client, environment, attach)
    key = unique("remember")
    fake_anthropic.script(
        key,
        bash(f"cat {mount}/seed.md; echo; printf 'tea, not coffee' > {mount}/notes.md && echo saved"),
        call("write", {"file_path": f"{mount}/topics/drinks.md", "content": "green tea"}),
        say("Saved."),
    )
    events, (written, wrote) = run_turn(turns, cloud_hands, first.id, key)
    assert not written["is_error"] and result_text(written).split() == ["seeded", "saved"], written
    assert not wrote["is_error"], wrote
    assert message_texts(events) == ["Saved."]
    # Written back after each call, with the sessions token: the versions are the session's.
    assert memories(client, store.id) == {"/seed.md": "seeded", "/notes.md": "tea, not coffee", "/topics/drinks.md": "green tea"}
    made = versions(client, store.id, session_id=first.id)
    assert sorted(v.path for v in made) == ["/notes.md", "/topics/drinks.md"]
    for version in made:
        assert version.operation == "created"
        assert version.created_by is not None and version.created_by.type == "session_actor", version
        assert version.created_by.session_id == first.id  # type: ignore[union-attr]
    # The system prompt said where the memory is, and how to use it.
    system = system_prompt(fake_anthropic, key)
    assert "## Memory" in system, system
    assert f"- {mount} (read-write): {store.name} — What earlier sessions learned." in system, system
    assert "Instructions for this store: Keep one file per topic." in system, system

    # A later session of the same store finds it; its deletion is the store's too.
    second = hands_session(client, environment, {"type": "memory_store", "memory_store_id": store.id})
    key2 = unique("recall")
    fake_anthropic.script(
        key2,
        bash(f"cat {mount}/notes.md"),
        bash(f"rm {mount}/seed.md && ls -R {mount}"),
        say("Recalled."),
    )
    _, (read, removed) = run_turn(turns, cloud_hands, second.id, key2)
    assert not read["is_error"] and result_text(read) == "tea, not coffee", read
    assert not removed["is_error"] and "seed.md" not in result_text(removed), removed
    assert memories(client, store.id) == {"/notes.md": "tea, not coffee", "/topics/drinks.md": "green tea"}
    (deleted,) = versions(client, store.id, session_id=second.id)
    assert (deleted.operation, deleted.created_by.session_id) == ("deleted", second.id)  # type: ignore[union-attr]


def test_a_read_only_mount_refuses_writes(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic  # noqa: F811 - fixture
) -> None:
    client = cloud_hands.client
    store, mount = make_store(client, "Style", **{"rules.md": "be brief"})
    environment = make_environment(client, "cloud")
    session = hands_session(client, environment, {"type": "memory_store", "memory_store_id": store.id, "access": "read_only"})
    key = unique("readonly")
    fake_anthropic.script(
        key,
        bash(f"cat {mount}/rules.md; echo; echo more >> {mount}/rules.md; echo new > {mount}/new.md; rm -f {mount}/rules.md; ls {mount}"),
        call("write", {"file_path": f"{mount}/new.md", "content": "x"}),
        say("Read only."),
    )
    _, (shell, write) = run_turn(turns, cloud_hands, session.id, key)
    output = result_text(shell)
    assert output.startswith("be brief\n"), output
    refusals = [line for line in output.splitlines() if "Permission denied" in line or "Read-only file system" in line]
    assert len(refusals) == 3, output
    assert output.rstrip().endswith("rules.md"), output
    assert write["is_error"] and "read-only" in result_text(write), write
    # Nothing changed in the store, and the session wrote nothing.
    assert memories(client, store.id) == {"/rules.md": "be brief"}
    assert versions(client, store.id, session_id=session.id) == []
    system = system_prompt(fake_anthropic, key)
    assert f"- {mount} (read-only: you cannot change it): {store.name}" in system, system


def test_a_change_made_meanwhile_wins_and_the_agent_is_told(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic  # noqa: F811 - fixture
) -> None:
    """The memory changes through the API between two tool calls; the agent's edit of its
    now stale copy is not saved: its tool result says so (an error), and the file holds
    the store's version again."""
    client = cloud_hands.client
    store, mount = make_store(client, "Shared", **{"notes.md": "v1"})
    (memory,) = collect(client.beta.memory_stores.memories.list(store.id))
    environment = make_environment(client, "cloud")
    session = hands_session(client, environment, {"type": "memory_store", "memory_store_id": store.id})
    key = unique("conflict")
    gate = unique("gate")
    fake_anthropic.script(
        key,
        bash(f"cat {mount}/notes.md"),
        Reply(blocks=[tool_use("bash", {"command": f"echo mine > {mount}/notes.md && echo edited"})], stop_reason="tool_use", gate=gate),
        bash(f"cat {mount}/notes.md"),
        say("Done."),
    )
    client.beta.sessions.events.send(session.id, events=[user_message(f"edit {key}")])
    # The second model request comes after the first call's result: the store changes now.
    fake_anthropic.wait_requests(key, 2, timeout=60)
    client.beta.memory_stores.memories.update(
        memory.id, memory_store_id=store.id, content="theirs", precondition={"type": "content_sha256", "content_sha256": sha("v1")}
    )
    fake_anthropic.open_gate(gate)
    headers = turns.headers(cloud_hands.api_key)
    events = wait_idles(turns.http(), headers, session.id, timeout=60, on_timeout=lambda: runner_tail(cloud_hands))
    results = results_by_call(events, "agent.tool_result")
    before, edit, after = (results[u["id"]] for u in of_type(events, "agent.tool_use"))
    assert result_text(before) == "v1", before
    assert edit["is_error"], edit
    text = result_text(edit)
    assert text.startswith("edited\n"), text
    assert f"{mount}/notes.md was changed outside this session" in text, text
    assert not after["is_error"] and result_text(after) == "theirs", after
    assert memories(client, store.id) == {"/notes.md": "theirs"}
    assert versions(client, store.id, session_id=session.id) == []


def test_files_that_cannot_be_memories_are_reported(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic  # noqa: F811 - fixture
) -> None:
    client = cloud_hands.client
    store, mount = make_store(client, "Refusals")
    environment = make_environment(client, "cloud")
    session = hands_session(client, environment, {"type": "memory_store", "memory_store_id": store.id})
    key = unique("refused")
    fake_anthropic.script(
        key,
        bash(f"printf '\\xff\\xfe' > {mount}/binary.dat; head -c 102401 /dev/zero | tr '\\0' x > {mount}/big.md; echo ok > {mount}/fine.md"),
        bash(f"echo again > {mount}/other.md"),
        say("Done."),
    )
    _, (first, second) = run_turn(turns, cloud_hands, session.id, key)
    assert first["is_error"], first
    text = result_text(first)
    assert f"{mount}/binary.dat was not saved: a memory holds UTF-8 text" in text, text
    assert f"{mount}/big.md was not saved: it is 102401 bytes" in text, text
    # A refused file is reported once, not after every later call.
    assert not second["is_error"], second
    assert memories(client, store.id) == {"/fine.md": "ok\n", "/other.md": "again\n"}


# ---------------------------------------------------------------------------------------
# The SDK's EnvironmentWorker on a self_hosted environment


def test_sdk_environment_worker_syncs_memory(turns: Deployment, fake_anthropic: FakeAnthropic, tmp_path: Path) -> None:
    """The work item's `secret` carries a sessions token the memory routes accept (§5.3):
    the unmodified worker downloads the store into its mount path, the agent writes a file
    there with bash, and the worker's sync creates the memory as the session's."""
    client = turns.client()
    store, mount = make_store(client, "sdk-memory", "Notes of the SDK worker.", **{"seed.md": "from the store\n"})
    assert not Path(mount).exists(), f"{mount} exists on this host: the worker refuses to mount over it"
    environment_id = make_environment(client, "self_hosted")
    environment_key = turns.create_environment_key(environment_id)
    worker, _ = start_sdk_worker(turns, tmp_path, environment_id, environment_key, unique("sdk-memory"))
    try:
        key = unique("sdkmem")
        fake_anthropic.script(
            key,
            bash(f"cat {mount}/seed.md && echo remembered > {mount}/sdk.md && echo written"),
            say("Written."),
        )
        session = hands_session(client, environment_id, {"type": "memory_store", "memory_store_id": store.id})
        client.beta.sessions.events.send(session.id, events=[user_message(f"remember {key}")])
        events = wait_idles(turns.http(), turns.headers(), session.id, on_timeout=worker.output_tail)
        assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
        (use,) = of_type(events, "agent.tool_use")
        output = result_text(results_by_call(events, "user.tool_result")[use["id"]])
        assert output.split("\n")[:2] == ["from the store", "written"], output
        # The worker syncs on its cadence and once more when the item ends (1 s idle).
        deadline = time.monotonic() + 60
        while "/sdk.md" not in memories(client, store.id):
            assert time.monotonic() < deadline, f"the worker did not sync /sdk.md\n{worker.output_tail()}"
            time.sleep(0.5)
        assert memories(client, store.id) == {"/seed.md": "from the store\n", "/sdk.md": "remembered\n"}
        (created,) = versions(client, store.id, session_id=session.id)
        assert (created.operation, created.path) == ("created", "/sdk.md")
        assert created.created_by is not None and created.created_by.type == "session_actor"
        assert created.created_by.session_id == session.id  # type: ignore[union-attr]
        system = system_prompt(fake_anthropic, key)
        assert f"- {mount} (read-write): {store.name} — Notes of the SDK worker." in system, system
        assert worker.alive(), worker.output_tail()
    finally:
        worker.stop(timeout=5)
