"""Agent memory: every method of `client.beta.memory_stores`, `.memories` and
`.memory_versions`, the rules and refusals of docs/api/memory.md, and the reach of a
work item's sessions token (only the stores attached to its session; writes only through
a `read_write` attachment).

Wire facts: managed-agents-wire.md §2.11 (routes and rules), §2B.9 (request bodies), §3.9
(the `memory_store`, `memory`, `memory_prefix`, `memory_version` objects and the actors),
§1.7 (the two 409 `error.type`s), §1.4 (the `agent-memory-2026-07-22` selector), §5.3
step 6 (how the SDK's EnvironmentWorker syncs memory with the sessions token). Each test
runs against `agentd dev` and gateway+worker; strict response validation is on.
"""

from __future__ import annotations

import hashlib
import threading
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import anthropic
import httpx
import pytest

from harness import Deployment, collect, error_body, unique
from test_hands import MODEL, TOOLSET, make_environment, poll_item, sessions_token

AGENT_MEMORY = "agent-memory-2026-07-22"
MISSING_STORE = "memstore_" + "0" * 26
MISSING_MEMORY = "mem_" + "0" * 26
MISSING_VERSION = "memver_" + "0" * 26
MAX_CONTENT = 102_400
CAP = 2_000


# ---------------------------------------------------------------------------------------
# Helpers


class Workspace:
    """A fresh workspace: its client, its API key and that key's id (`apikey_…`)."""

    def __init__(self, agentd: Deployment) -> None:
        self.name = unique("memory")
        self.key = agentd.create_key(self.name)
        self.client = agentd.client(self.key)
        self.key_id = next(e["id"] for e in agentd.list_keys() if e["workspace"] == self.name)
        self.agentd = agentd

    @property
    def stores(self) -> Any:
        return self.client.beta.memory_stores

    def headers(self, beta: str | None = AGENT_MEMORY) -> dict[str, str]:
        headers = {"authorization": f"Bearer {self.key}"}
        if beta:
            headers["anthropic-beta"] = beta
        return headers


@pytest.fixture
def ws(agentd: Deployment) -> Workspace:
    return Workspace(agentd)


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def refused(call: Callable[[], Any], status: int, error_type: str, *fragments: str) -> dict[str, Any]:
    """The call fails with `status` and `error.type`, and its message holds every fragment."""
    with pytest.raises(anthropic.APIStatusError) as caught:
        call()
    assert caught.value.status_code == status, (caught.value.status_code, error_body(caught.value))
    body = error_body(caught.value)
    assert body["error"]["type"] == error_type, body
    for fragment in fragments:
        assert fragment in body["error"]["message"], (fragment, body)
    return body


def bad_request(call: Callable[[], Any], *fragments: str) -> dict[str, Any]:
    return refused(call, 400, "invalid_request_error", *fragments)


def not_found(call: Callable[[], Any]) -> dict[str, Any]:
    return refused(call, 404, "not_found_error")


def paths(items: list[Any]) -> list[str]:
    return [item.path for item in items]


def versions_of(ws: Workspace, store_id: str, **filters: Any) -> list[Any]:
    return collect(ws.stores.memory_versions.list(store_id, limit=100, **filters))


# ---------------------------------------------------------------------------------------
# Stores


def test_store_lifecycle(ws: Workspace, http: httpx.Client) -> None:
    before = datetime.now(timezone.utc) - timedelta(seconds=5)
    store = ws.stores.create(name="Customer notes", description="What the customer told us.", metadata={"user": "u1"})
    assert store.type == "memory_store" and store.id.startswith("memstore_")
    assert (store.name, store.description, store.metadata) == ("Customer notes", "What the customer told us.", {"user": "u1"})
    assert store.archived_at is None and store.created_at == store.updated_at and store.created_at >= before
    raw = http.get(f"/v1/memory_stores/{store.id}", headers=ws.headers()).json()
    assert set(raw) == {"type", "id", "name", "description", "metadata", "created_at", "updated_at", "archived_at"}, raw
    assert ws.stores.retrieve(store.id).to_dict() == store.to_dict()

    plain = ws.stores.create(name="plain")
    assert (plain.description, plain.metadata) == ("", {}), "description and metadata default to empty"

    # Update: a name, a metadata patch (string sets, null removes, others stay).
    ws.stores.update(store.id, metadata={"team": "a", "tier": "gold"})
    updated = ws.stores.update(store.id, name="Renamed", metadata={"user": None, "tier": "silver"})
    assert updated.name == "Renamed"
    assert updated.metadata == {"team": "a", "tier": "silver"}
    assert updated.description == "What the customer told us.", "an absent description is unchanged"
    assert updated.updated_at >= store.updated_at
    # null leaves name, description and metadata as they are; "" clears the description.
    same = ws.stores.update(store.id, name=None, description=None, metadata=None)
    assert same.to_dict() == updated.to_dict(), "nothing changed, nothing written"
    cleared = ws.stores.update(store.id, description="")
    assert cleared.description == "" and cleared.name == "Renamed"

    # Lists: newest first, paged, archived ones only on request, created_at bounds.
    third = ws.stores.create(name="third")
    page = ws.stores.list(limit=2)
    assert [s.id for s in page.data] == [third.id, plain.id] and page.next_page
    assert [s.id for s in collect(ws.stores.list(limit=1))] == [third.id, plain.id, store.id]
    archived = ws.stores.archive(plain.id)
    assert archived.archived_at is not None and archived.updated_at >= archived.archived_at
    again = ws.stores.archive(plain.id)
    assert again.archived_at == archived.archived_at, "archive is idempotent"
    assert [s.id for s in collect(ws.stores.list())] == [third.id, store.id]
    assert [s.id for s in collect(ws.stores.list(include_archived=True))] == [third.id, plain.id, store.id]
    future = datetime.now(timezone.utc) + timedelta(hours=1)
    assert ws.stores.list(created_at_gte=future).data == []
    assert ws.stores.list(created_at_lte=before).data == []
    assert len(ws.stores.list(created_at_gte=before, created_at_lte=future).data) == 2

    # An archived store takes no update.
    bad_request(lambda: ws.stores.update(plain.id, name="again"), plain.id, "archived")
    assert ws.stores.retrieve(plain.id).name == "plain"

    # Delete: gone for good.
    deleted = ws.stores.delete(plain.id)
    assert (deleted.id, deleted.type) == (plain.id, "memory_store_deleted")
    not_found(lambda: ws.stores.retrieve(plain.id))
    not_found(lambda: ws.stores.delete(plain.id))
    not_found(lambda: ws.stores.archive(MISSING_STORE))
    not_found(lambda: ws.stores.update(MISSING_STORE, name="x"))


def test_store_refusals_name_the_field(ws: Workspace, http: httpx.Client) -> None:
    bad_request(lambda: ws.stores.create(name=""), "name")
    bad_request(lambda: ws.stores.create(name="n" * 256), "name", "255")
    assert ws.stores.create(name="語" * 255).name == "語" * 255, "characters, not bytes"
    bad_request(lambda: ws.stores.create(name="two\nlines"), "name", "control")
    bad_request(lambda: ws.stores.create(name="bell\x07"), "name", "control")
    bad_request(lambda: ws.stores.create(name="x", description="d" * 1025), "description", "1024")
    assert ws.stores.create(name="x", description="d" * 1024).description == "d" * 1024
    bad_request(lambda: ws.stores.create(name="x", metadata={f"k{i}": "v" for i in range(17)}), "metadata", "16")
    bad_request(lambda: ws.stores.create(name="x", metadata={"k" * 65: "v"}), "metadata")
    bad_request(lambda: ws.stores.create(name="x", metadata={"k": "v" * 513}), "metadata", "512")
    bad_request(lambda: ws.stores.create(name="x", extra_body={"bogus": 1}), "bogus")
    missing_name = http.post("/v1/memory_stores", json={"description": "d"}, headers=ws.headers())
    assert missing_name.status_code == 400 and "name" in missing_name.json()["error"]["message"], missing_name.text
    store = ws.stores.create(name="x", metadata={f"k{i}": "v" for i in range(16)})
    bad_request(lambda: ws.stores.update(store.id, metadata={"one-more": "v"}), "metadata", "16")
    bad_request(lambda: ws.stores.update(store.id, name=""), "name")
    bad_request(lambda: ws.stores.update(store.id, description="d" * 1025), "description")
    assert len(ws.stores.retrieve(store.id).metadata) == 16, "a refused update changes nothing"
    bad_request(lambda: ws.stores.list(limit=101), "limit")
    bad_request(lambda: ws.stores.list(limit=0), "limit")
    bad_request(lambda: ws.stores.list(page="garbage"), "page")


def test_the_beta_selector(ws: Workspace, http: httpx.Client) -> None:
    none = http.get("/v1/memory_stores", headers=ws.headers(beta=None))
    assert none.status_code == 400, none.text
    assert AGENT_MEMORY in none.json()["error"]["message"]
    assert http.get("/v1/memory_stores", headers=ws.headers(beta=AGENT_MEMORY)).status_code == 200
    # The SDK documents the managed-agents selector as accepted too.
    assert http.get("/v1/memory_stores", headers=ws.headers(beta="managed-agents-2026-04-01")).status_code == 200
    both = f"some-other-beta,{AGENT_MEMORY}"
    assert http.get("/v1/memory_stores", headers=ws.headers(beta=both)).status_code == 200


# ---------------------------------------------------------------------------------------
# Memories


def test_memories_round_trip_with_view_defaults(ws: Workspace, http: httpx.Client) -> None:
    store = ws.stores.create(name="notes")
    memories = ws.stores.memories
    made = memories.create(store.id, path="/projects/foo/notes.md", content="first draft")
    assert made.type == "memory" and made.id.startswith("mem_") and made.memory_version_id.startswith("memver_")
    assert made.memory_store_id == store.id and made.path == "/projects/foo/notes.md"
    assert made.content is None, "create defaults to view=basic"
    assert (made.content_sha256, made.content_size_bytes) == (sha("first draft"), len("first draft"))
    full = memories.create(store.id, path="/full.md", content="héllo", view="full")
    assert full.content == "héllo" and full.content_size_bytes == 6, "UTF-8 bytes"

    # Retrieve defaults to full; basic still sends the key, as null.
    got = memories.retrieve(made.id, memory_store_id=store.id)
    assert got.content == "first draft" and got.memory_version_id == made.memory_version_id
    basic = memories.retrieve(made.id, memory_store_id=store.id, view="basic")
    assert basic.content is None
    raw = http.get(f"/v1/memory_stores/{store.id}/memories/{made.id}", params={"view": "basic"}, headers=ws.headers())
    assert "content" in raw.json() and raw.json()["content"] is None, raw.json()

    # Update: content (update defaults to basic), then a rename that keeps the id.
    changed = memories.update(made.id, memory_store_id=store.id, content="second draft")
    assert changed.content is None and changed.content_sha256 == sha("second draft")
    assert changed.memory_version_id != made.memory_version_id and changed.updated_at >= made.updated_at
    moved = memories.update(made.id, memory_store_id=store.id, path="/projects/bar/notes.md", view="full")
    assert (moved.id, moved.path, moved.content) == (made.id, "/projects/bar/notes.md", "second draft")
    # The old path is free again; the memory answers at its id.
    memories.create(store.id, path="/projects/foo/notes.md", content="")
    assert memories.retrieve(made.id, memory_store_id=store.id).path == "/projects/bar/notes.md"
    both = memories.update(made.id, memory_store_id=store.id, path="/final.md", content="final", view="full")
    assert (both.path, both.content) == ("/final.md", "final")
    # Omitted or null content is unchanged; an update that changes nothing writes nothing.
    unchanged = memories.update(made.id, memory_store_id=store.id, content=None, path=None)
    assert unchanged.memory_version_id == both.memory_version_id
    assert memories.retrieve(made.id, memory_store_id=store.id).content == "final"

    # `content: null` on create is the empty memory; `""` too.
    empty = memories.create(store.id, path="/empty.md", content=None, view="full")
    assert (empty.content, empty.content_size_bytes, empty.content_sha256) == ("", 0, sha(""))
    # Paths are case-sensitive: two memories.
    upper = memories.create(store.id, path="/Final.md", content="other")
    assert upper.id != made.id

    # Delete: the memory is gone, its id answers 404.
    deleted = memories.delete(made.id, memory_store_id=store.id)
    assert (deleted.id, deleted.type) == (made.id, "memory_deleted")
    not_found(lambda: memories.retrieve(made.id, memory_store_id=store.id))
    not_found(lambda: memories.delete(made.id, memory_store_id=store.id))
    not_found(lambda: memories.update(made.id, memory_store_id=store.id, content="x"))
    not_found(lambda: memories.retrieve(MISSING_MEMORY, memory_store_id=store.id))
    not_found(lambda: memories.list(MISSING_STORE))
    not_found(lambda: memories.create(MISSING_STORE, path="/x", content="x"))


BAD_PATHS = [
    ("notes.md", "start with `/`"),
    ("", "start with `/`"),
    ("/", "empty segments"),
    ("/a/", "empty segments"),
    ("/a//b", "empty segments"),
    ("/a/./b", "`.` segments"),
    ("/a/../b", "`..` segments"),
    ("/..", "`..` segments"),
    ("/s" * 21, "20 segments"),
    ("/" + "x" * 1024, "1024 bytes"),
    ("/a\x00b", "control"),
    ("/a\nb", "control"),
    ("/a\u200bb", "format"),
    ("/a\u202etxt", "format"),
    ("/a\u2028b", "line separator"),
    ("/a\u2029b", "paragraph separator"),
    ("/cafe\u0301.md", "NFC"),
]


def test_memory_refusals_name_the_field(ws: Workspace, http: httpx.Client) -> None:
    store = ws.stores.create(name="rules")
    memories = ws.stores.memories
    for path, why in BAD_PATHS:
        body = bad_request(lambda: memories.create(store.id, path=path, content="x"), "path", why)
        assert body["error"]["message"].startswith("path: "), body
    nfc = unicodedata.normalize("NFC", "/cafe\u0301.md")
    assert memories.create(store.id, path=nfc, content="x").path == nfc, "the NFC spelling is accepted as sent"
    assert memories.create(store.id, path="/s" * 20, content="x").path == "/s" * 20
    assert memories.create(store.id, path="/" + "x" * 1023, content="x")

    # Content: at most 102,400 bytes of UTF-8.
    assert memories.create(store.id, path="/big.md", content="x" * MAX_CONTENT).content_size_bytes == MAX_CONTENT
    bad_request(lambda: memories.create(store.id, path="/too-big.md", content="x" * (MAX_CONTENT + 1)), "content", "102400")
    bad_request(lambda: memories.create(store.id, path="/too-big.md", content="é" * (MAX_CONTENT // 2 + 1)), "content")
    # `path` and `content` are required (raw: the SDK will not omit them).
    for body, field in (({"path": "/x.md"}, "content"), ({"content": "x"}, "path"), ({"path": 5, "content": "x"}, "path")):
        answer = http.post(f"/v1/memory_stores/{store.id}/memories", json=body, headers=ws.headers())
        assert answer.status_code == 400 and answer.json()["error"]["message"].startswith(field), answer.text
    bad_request(lambda: memories.create(store.id, path="/x.md", content="x", extra_body={"mode": "append"}), "mode")
    bad_request(lambda: memories.create(store.id, path="/x.md", content="x", view="everything"), "view")

    # The same path twice: 409 memory_path_conflict_error, on create and on rename.
    first = memories.create(store.id, path="/taken.md", content="one")
    refused(lambda: memories.create(store.id, path="/taken.md", content="two"), 409, "memory_path_conflict_error", "/taken.md")
    other = memories.create(store.id, path="/other.md", content="other")
    refused(
        lambda: memories.update(other.id, memory_store_id=store.id, path="/taken.md"),
        409,
        "memory_path_conflict_error",
        "path",
    )
    assert memories.retrieve(other.id, memory_store_id=store.id).path == "/other.md"
    for path, why in BAD_PATHS[:4]:
        bad_request(lambda: memories.update(other.id, memory_store_id=store.id, path=path), "path", why)
    bad_request(lambda: memories.update(other.id, memory_store_id=store.id, content="x" * (MAX_CONTENT + 1)), "content")

    # Preconditions: a wrong digest is 409 memory_precondition_failed_error, nothing changes.
    precondition = {"type": "content_sha256", "content_sha256": sha("not what it holds")}
    refused(
        lambda: memories.update(first.id, memory_store_id=store.id, content="two", precondition=precondition),
        409,
        "memory_precondition_failed_error",
        "precondition",
    )
    assert memories.retrieve(first.id, memory_store_id=store.id).content == "one"
    # A rename's precondition refers to the current content, not the destination.
    renamed = memories.update(
        first.id,
        memory_store_id=store.id,
        path="/renamed.md",
        precondition={"type": "content_sha256", "content_sha256": sha("one")},
    )
    assert renamed.path == "/renamed.md"
    for bad in (
        {"type": "content_sha256", "content_sha256": sha("one").upper()},
        {"type": "content_sha256", "content_sha256": sha("one")[:63]},
        {"type": "content_sha256", "content_sha256": "z" * 64},
        {"type": "content_sha256"},
        {"type": "etag", "content_sha256": sha("one")},
    ):
        bad_request(lambda: memories.update(first.id, memory_store_id=store.id, content="x", precondition=bad), "precondition")  # type: ignore[arg-type]

    # A conditional delete: a wrong digest is 409 and deletes nothing; a malformed one 400.
    refused(
        lambda: memories.delete(first.id, memory_store_id=store.id, expected_content_sha256=sha("nope")),
        409,
        "memory_precondition_failed_error",
    )
    assert memories.retrieve(first.id, memory_store_id=store.id).content == "one"
    bad_request(
        lambda: memories.delete(first.id, memory_store_id=store.id, expected_content_sha256="ABC"),
        "expected_content_sha256",
    )
    memories.delete(first.id, memory_store_id=store.id, expected_content_sha256=sha("one"))
    not_found(lambda: memories.retrieve(first.id, memory_store_id=store.id))

    # Deterministic 409s tell the SDK not to replay them.
    conflict = http.post(f"/v1/memory_stores/{store.id}/memories", json={"path": "/other.md", "content": "x"}, headers=ws.headers())
    assert conflict.status_code == 409 and conflict.headers.get("x-should-retry") == "false", conflict.headers
    assert conflict.json()["error"]["type"] == "memory_path_conflict_error"


def test_list_by_prefix_and_depth_pages_across_prefixes(ws: Workspace) -> None:
    store = ws.stores.create(name="tree")
    memories = ws.stores.memories
    tree = [
        "/a.md",
        "/b/one.md",
        "/b/two.md",
        "/b/deep/x.md",
        "/b/deep/y.md",
        "/c/z/w.md",
        "/notes/todo.md",
        "/notes-archive/todo.md",
    ]
    ids = {path: memories.create(store.id, path=path, content=f"content of {path}").id for path in tree}

    everything = collect(memories.list(store.id))
    assert paths(everything) == sorted(tree), "path order, bytewise"
    assert all(m.type == "memory" and m.content is None for m in everything), "lists default to view=basic"
    assert {m.path: m.id for m in everything} == ids

    # Whole segments: /notes/ is not /notes-archive/.
    assert paths(collect(memories.list(store.id, path_prefix="/notes/"))) == ["/notes/todo.md"]
    assert paths(collect(memories.list(store.id, path_prefix="/b/"))) == sorted(p for p in tree if p.startswith("/b/"))
    assert collect(memories.list(store.id, path_prefix="/nothing/")) == []

    # depth=1: direct children, deeper paths rolled into memory_prefix items.
    top = collect(memories.list(store.id, depth=1))
    assert [(i.type, i.path) for i in top] == [
        ("memory", "/a.md"),
        ("memory_prefix", "/b/"),
        ("memory_prefix", "/c/"),
        ("memory_prefix", "/notes-archive/"),
        ("memory_prefix", "/notes/"),
    ]
    below_b = collect(memories.list(store.id, path_prefix="/b/", depth=1))
    assert [(i.type, i.path) for i in below_b] == [
        ("memory_prefix", "/b/deep/"),
        ("memory", "/b/one.md"),
        ("memory", "/b/two.md"),
    ]
    two = collect(memories.list(store.id, depth=2))
    assert [(i.type, i.path) for i in two] == [
        ("memory", "/a.md"),
        ("memory_prefix", "/b/deep/"),
        ("memory", "/b/one.md"),
        ("memory", "/b/two.md"),
        ("memory_prefix", "/c/z/"),
        ("memory", "/notes-archive/todo.md"),
        ("memory", "/notes/todo.md"),
    ]

    # Prefixes count toward limit, and pages continue after a prefix without repeating it.
    first = memories.list(store.id, depth=1, limit=2)
    assert [i.path for i in first.data] == ["/a.md", "/b/"] and first.next_page
    second = memories.list(store.id, depth=1, limit=2, page=first.next_page)
    assert [i.path for i in second.data] == ["/c/", "/notes-archive/"] and second.next_page
    last = memories.list(store.id, depth=1, limit=2, page=second.next_page)
    assert [i.path for i in last.data] == ["/notes/"] and last.next_page is None
    assert [i.path for i in collect(memories.list(store.id, depth=1, limit=1))] == [i.path for i in top]
    assert paths(collect(memories.list(store.id, limit=3))) == sorted(tree)
    assert [i.path for i in collect(memories.list(store.id, depth=2, limit=2))] == [i.path for i in two]

    # view=full: content, and at most 20 items a page however large the limit.
    for n in range(25):
        memories.create(store.id, path=f"/many/{n:02d}.md", content=f"n={n}")
    page = memories.list(store.id, path_prefix="/many/", view="full", limit=100)
    assert len(page.data) == 20 and page.next_page
    assert [m.content for m in page.data] == [f"n={n}" for n in range(20)]
    rest = memories.list(store.id, path_prefix="/many/", view="full", limit=100, page=page.next_page)
    assert [m.path for m in rest.data] == [f"/many/{n:02d}.md" for n in range(20, 25)] and rest.next_page is None
    assert len(memories.list(store.id, path_prefix="/many/", limit=100).data) == 25, "basic pages hold up to 100"

    # Refusals.
    bad_request(lambda: memories.list(store.id, path_prefix="notes/"), "path_prefix")
    bad_request(lambda: memories.list(store.id, path_prefix="/notes"), "path_prefix")
    bad_request(lambda: memories.list(store.id, path_prefix="/a//"), "path_prefix")
    bad_request(lambda: memories.list(store.id, depth=-1), "depth")
    bad_request(lambda: memories.list(store.id, limit=101), "limit")
    bad_request(lambda: memories.list(store.id, limit=0), "limit")
    bad_request(lambda: memories.list(store.id, view="all"), "view")


# ---------------------------------------------------------------------------------------
# Versions


def test_versions_record_every_change_and_who_made_it(ws: Workspace) -> None:
    start = datetime.now(timezone.utc) - timedelta(seconds=5)
    store = ws.stores.create(name="history")
    memories, versions = ws.stores.memories, ws.stores.memory_versions
    made = memories.create(store.id, path="/doc.md", content="v1")
    memories.update(made.id, memory_store_id=store.id, content="v2")
    memories.update(made.id, memory_store_id=store.id, path="/moved.md")
    bystander = memories.create(store.id, path="/other.md", content="other")
    memories.delete(made.id, memory_store_id=store.id)

    lineage = versions_of(ws, store.id, memory_id=made.id)
    assert [v.operation for v in lineage] == ["deleted", "modified", "modified", "created"], "newest first"
    assert [v.path for v in lineage] == ["/moved.md", "/moved.md", "/doc.md", "/doc.md"]
    assert all(v.type == "memory_version" and v.id.startswith("memver_") for v in lineage)
    assert all(v.memory_id == made.id and v.memory_store_id == store.id for v in lineage)
    assert all(v.created_by.type == "api_actor" and v.created_by.api_key_id == ws.key_id for v in lineage)
    assert all(v.redacted_at is None and v.redacted_by is None for v in lineage)
    assert all(v.content is None for v in lineage), "lists default to view=basic"
    deleted, renamed, modified, created = lineage
    assert (deleted.content_sha256, deleted.content_size_bytes) == (None, None)
    assert (created.content_sha256, created.content_size_bytes) == (sha("v1"), 2)
    assert (modified.content_sha256, renamed.content_sha256) == (sha("v2"), sha("v2"))
    assert created.id == made.memory_version_id

    full = versions_of(ws, store.id, memory_id=made.id, view="full")
    assert [v.content for v in full] == [None, "v2", "v2", "v1"], "a deleted version has no content"
    one = versions.retrieve(created.id, memory_store_id=store.id)
    assert one.content == "v1", "retrieve defaults to view=full"
    assert versions.retrieve(created.id, memory_store_id=store.id, view="basic").content is None

    # Filters.
    everything = versions_of(ws, store.id)
    assert len(everything) == 5 and bystander.memory_version_id in [v.id for v in everything]
    assert [v.id for v in versions_of(ws, store.id, operation="modified")] == [renamed.id, modified.id]
    assert {v.memory_id for v in versions_of(ws, store.id, operation="created")} == {made.id, bystander.id}
    assert [v.id for v in versions_of(ws, store.id, operation="deleted")] == [deleted.id]
    assert len(versions_of(ws, store.id, api_key_id=ws.key_id)) == 5
    assert versions_of(ws, store.id, api_key_id="apikey_" + "0" * 26) == []
    assert versions_of(ws, store.id, session_id="sesn_" + "0" * 26) == []
    page = ws.stores.memory_versions.list(store.id, service_account_id="svac_0123")
    assert page.data == [] and page.next_page is None, "no version is written by a service account"
    future = datetime.now(timezone.utc) + timedelta(hours=1)
    assert len(versions_of(ws, store.id, created_at_gte=start, created_at_lte=future)) == 5
    assert versions_of(ws, store.id, created_at_gte=future) == []
    assert versions_of(ws, store.id, created_at_lte=start) == []
    cut = created.created_at
    assert {v.id for v in versions_of(ws, store.id, created_at_lte=cut)} >= {created.id}
    assert all(v.created_at >= cut for v in versions_of(ws, store.id, created_at_gte=cut))

    # Pages of one, newest first, every version once.
    assert [v.id for v in collect(versions.list(store.id, limit=1))] == [v.id for v in everything]
    assert len(versions.list(store.id, view="full", limit=100).data) == 5
    bad_request(lambda: versions.list(store.id, operation="renamed"), "operation")  # type: ignore[arg-type]
    bad_request(lambda: versions.list(store.id, memory_id="not-a-memory"), "memory_id")
    bad_request(lambda: versions.list(store.id, api_key_id="key"), "api_key_id")
    bad_request(lambda: versions.list(store.id, limit=101), "limit")
    bad_request(lambda: versions.list(store.id, service_account_id="acct"), "service_account_id")
    not_found(lambda: versions.retrieve(MISSING_VERSION, memory_store_id=store.id))
    not_found(lambda: versions.list(MISSING_STORE))


def test_redaction(ws: Workspace) -> None:
    store = ws.stores.create(name="secrets")
    memories, versions = ws.stores.memories, ws.stores.memory_versions
    made = memories.create(store.id, path="/token.txt", content="hunter2")
    current = memories.update(made.id, memory_store_id=store.id, content="[removed]")

    # The version holding the live content cannot be redacted.
    bad_request(
        lambda: versions.redact(current.memory_version_id, memory_store_id=store.id),
        current.memory_version_id,
        "update or delete the memory first",
    )
    assert versions.retrieve(current.memory_version_id, memory_store_id=store.id).content == "[removed]"

    redacted = versions.redact(made.memory_version_id, memory_store_id=store.id)
    assert redacted.redacted_at is not None
    assert redacted.redacted_by is not None and redacted.redacted_by.type == "api_actor"
    assert redacted.redacted_by.api_key_id == ws.key_id
    assert (redacted.content, redacted.path, redacted.content_sha256, redacted.content_size_bytes) == (None, None, None, None)
    assert redacted.created_by.type == "api_actor" and redacted.operation == "created", "the rest is kept"
    again = versions.retrieve(made.memory_version_id, memory_store_id=store.id, view="full")
    assert again.content is None and again.redacted_at == redacted.redacted_at
    assert versions.redact(made.memory_version_id, memory_store_id=store.id).redacted_at == redacted.redacted_at
    listed = versions_of(ws, store.id, memory_id=made.id, view="full")
    assert [v.content for v in listed] == ["[removed]", None]
    assert memories.retrieve(made.id, memory_store_id=store.id).content == "[removed]", "the memory is untouched"

    # Once the memory is deleted, its last content version can go too.
    memories.delete(made.id, memory_store_id=store.id)
    gone = versions.redact(current.memory_version_id, memory_store_id=store.id)
    assert gone.redacted_at is not None and gone.content_sha256 is None
    not_found(lambda: versions.redact(MISSING_VERSION, memory_store_id=store.id))


# ---------------------------------------------------------------------------------------
# Archive, delete, cap, races


def test_an_archived_store_is_read_only(ws: Workspace) -> None:
    store = ws.stores.create(name="frozen")
    memories, versions = ws.stores.memories, ws.stores.memory_versions
    kept = memories.create(store.id, path="/kept.md", content="one")
    changed = memories.update(kept.id, memory_store_id=store.id, content="two")
    doomed = memories.create(store.id, path="/doomed.md", content="bye")
    ws.stores.archive(store.id)

    bad_request(lambda: memories.create(store.id, path="/new.md", content="x"), "archived")
    bad_request(lambda: memories.update(kept.id, memory_store_id=store.id, content="three"), "archived")
    bad_request(lambda: memories.update(kept.id, memory_store_id=store.id, path="/renamed.md"), "archived")
    bad_request(lambda: ws.stores.update(store.id, description="x"), "archived")
    # Reads, deletes and redactions still work.
    assert memories.retrieve(kept.id, memory_store_id=store.id).content == "two"
    assert paths(collect(memories.list(store.id))) == ["/doomed.md", "/kept.md"]
    assert versions.redact(kept.memory_version_id, memory_store_id=store.id).redacted_at is not None
    assert changed.memory_version_id != kept.memory_version_id
    memories.delete(doomed.id, memory_store_id=store.id)
    assert paths(collect(memories.list(store.id))) == ["/kept.md"]
    assert [v.operation for v in versions_of(ws, store.id, memory_id=doomed.id)] == ["deleted", "created"]
    ws.stores.delete(store.id)
    not_found(lambda: ws.stores.retrieve(store.id))


def test_deleting_a_store_deletes_its_memories_and_versions(ws: Workspace) -> None:
    store = ws.stores.create(name="doomed")
    keep = ws.stores.create(name="kept")
    memories, versions = ws.stores.memories, ws.stores.memory_versions
    made = memories.create(store.id, path="/a.md", content="a")
    memories.update(made.id, memory_store_id=store.id, content="b")
    survivor = memories.create(keep.id, path="/a.md", content="a")
    assert len(versions_of(ws, store.id)) == 2
    ws.stores.delete(store.id)
    not_found(lambda: memories.retrieve(made.id, memory_store_id=store.id))
    not_found(lambda: memories.list(store.id))
    not_found(lambda: versions.list(store.id))
    not_found(lambda: versions.retrieve(made.memory_version_id, memory_store_id=store.id))
    # Another store (with a memory at the same path) is untouched.
    assert memories.retrieve(survivor.id, memory_store_id=keep.id).content == "a"
    assert len(versions_of(ws, keep.id)) == 1


def test_a_store_holds_at_most_2000_memories(ws: Workspace) -> None:
    store = ws.stores.create(name="full")
    memories = ws.stores.memories

    def create(n: int) -> str:
        return memories.create(store.id, path=f"/batch-{n // 100:02d}/m{n:04d}.md", content=str(n)).id

    with ThreadPoolExecutor(max_workers=16) as pool:
        made = list(pool.map(create, range(CAP)))
    assert len(set(made)) == CAP
    body = bad_request(lambda: memories.create(store.id, path="/one-too-many.md", content="x"), "2000")
    assert store.id in body["error"]["message"]
    # A rename is not a new memory; a deletion makes room.
    memories.update(made[0], memory_store_id=store.id, path="/renamed.md")
    memories.delete(made[1], memory_store_id=store.id)
    assert memories.create(store.id, path="/one-too-many.md", content="x").path == "/one-too-many.md"
    bad_request(lambda: memories.create(store.id, path="/and-another.md", content="x"), "2000")
    listed = collect(memories.list(store.id, limit=100), cap=CAP + 10)
    assert len(listed) == CAP and len({m.id for m in listed}) == CAP


def test_racing_precondition_updates_have_one_winner(ws: Workspace) -> None:
    store = ws.stores.create(name="race")
    memories = ws.stores.memories
    made = memories.create(store.id, path="/counter.txt", content="0")
    writers = 8
    barrier = threading.Barrier(writers)
    precondition = {"type": "content_sha256", "content_sha256": sha("0")}

    def write(n: int) -> tuple[str, Any]:
        barrier.wait()
        try:
            memories.update(made.id, memory_store_id=store.id, content=f"writer {n}", precondition=precondition)
            return ("won", n)
        except anthropic.APIStatusError as err:
            return ("lost", (err.status_code, error_body(err)["error"]["type"]))

    with ThreadPoolExecutor(max_workers=writers) as pool:
        outcomes = list(pool.map(write, range(writers)))
    winners = [n for outcome, n in outcomes if outcome == "won"]
    losers = [detail for outcome, detail in outcomes if outcome == "lost"]
    assert len(winners) == 1, outcomes
    assert losers == [(409, "memory_precondition_failed_error")] * (writers - 1), outcomes
    assert memories.retrieve(made.id, memory_store_id=store.id).content == f"writer {winners[0]}"
    modified = versions_of(ws, store.id, memory_id=made.id, operation="modified")
    assert len(modified) == 1, "exactly one change was recorded"
    assert modified[0].content_sha256 == sha(f"writer {winners[0]}")


# ---------------------------------------------------------------------------------------
# Reach


def test_another_workspace_gets_404_everywhere(agentd: Deployment, ws: Workspace) -> None:
    store = ws.stores.create(name="private")
    made = ws.stores.memories.create(store.id, path="/mine.md", content="mine")
    version = made.memory_version_id
    other = Workspace(agentd).stores
    calls: list[Callable[[], Any]] = [
        lambda: other.retrieve(store.id),
        lambda: other.update(store.id, name="taken"),
        lambda: other.archive(store.id),
        lambda: other.delete(store.id),
        lambda: other.memories.list(store.id),
        lambda: other.memories.create(store.id, path="/theirs.md", content="x"),
        lambda: other.memories.retrieve(made.id, memory_store_id=store.id),
        lambda: other.memories.update(made.id, memory_store_id=store.id, content="x"),
        lambda: other.memories.delete(made.id, memory_store_id=store.id),
        lambda: other.memory_versions.list(store.id),
        lambda: other.memory_versions.retrieve(version, memory_store_id=store.id),
        lambda: other.memory_versions.redact(version, memory_store_id=store.id),
    ]
    for call in calls:
        not_found(call)
    assert store.id not in [s.id for s in collect(other.list(include_archived=True))]
    # Untouched for its owner.
    mine = ws.stores.retrieve(store.id)
    assert mine.name == "private" and mine.archived_at is None
    assert ws.stores.memories.retrieve(made.id, memory_store_id=store.id).content == "mine"
    assert versions_of(ws, store.id)[0].redacted_at is None


def test_a_sessions_token_reaches_only_its_sessions_stores(agentd: Deployment, ws: Workspace) -> None:
    """The hands sync memory with the work item's sessions token (§5.3 step 6): it reads
    the stores attached to its session, writes only through a read_write attachment, and
    its writes are the session's. Another store is a 404; the stores themselves, 403."""
    stores = ws.stores
    writable = stores.create(name="agent notes")
    readable = stores.create(name="reference")
    elsewhere = stores.create(name="not attached")
    seeds = {s.id: stores.memories.create(s.id, path="/seed.md", content="seed") for s in (writable, readable, elsewhere)}
    environment = make_environment(ws.client, "self_hosted")
    agent = ws.client.beta.agents.create(name=unique("memory-agent"), model=MODEL, tools=[TOOLSET])
    session = ws.client.beta.sessions.create(
        agent=agent.id,
        environment_id=environment,
        resources=[
            {"type": "memory_store", "memory_store_id": writable.id},
            {"type": "memory_store", "memory_store_id": readable.id, "access": "read_only"},
        ],
    )
    env_key = agentd.create_environment_key(environment, workspace=ws.name)
    http = agentd.http()
    item = poll_item(http, environment, env_key)
    assert item["data"]["id"] == session.id
    hands = agentd.client(sessions_token(item)).beta.memory_stores

    # What the SDK's worker does: list with view=full, create, conditional update and delete.
    listed = collect(hands.memories.list(writable.id, view="full", limit=20))
    assert [(m.path, m.content) for m in listed] == [("/seed.md", "seed")]
    made = hands.memories.create(writable.id, path="/learned.md", content="the user likes tea")
    changed = hands.memories.update(
        made.id,
        memory_store_id=writable.id,
        content="the user likes green tea",
        precondition={"type": "content_sha256", "content_sha256": made.content_sha256},
    )
    hands.memories.delete(seeds[writable.id].id, memory_store_id=writable.id, expected_content_sha256=sha("seed"))
    by_session = versions_of(ws, writable.id, session_id=session.id)
    assert [v.operation for v in by_session] == ["deleted", "modified", "created"]
    assert all(v.created_by.type == "session_actor" and v.created_by.session_id == session.id for v in by_session)
    assert changed.memory_version_id == by_session[1].id
    assert [v.operation for v in versions_of(ws, writable.id, api_key_id=ws.key_id)] == ["created"]
    assert hands.memory_versions.retrieve(changed.memory_version_id, memory_store_id=writable.id).content == (
        "the user likes green tea"
    )
    assert len(collect(hands.memory_versions.list(writable.id))) == 4

    # Read-only attachment: reads yes, writes 403, nothing changes.
    seed = seeds[readable.id]
    assert hands.memories.retrieve(seed.id, memory_store_id=readable.id).content == "seed"
    assert paths(collect(hands.memories.list(readable.id))) == ["/seed.md"]
    for write in (
        lambda: hands.memories.create(readable.id, path="/nope.md", content="x"),
        lambda: hands.memories.update(seed.id, memory_store_id=readable.id, content="changed"),
        lambda: hands.memories.delete(seed.id, memory_store_id=readable.id),
    ):
        refused(write, 403, "permission_error", "read-only")
    assert stores.memories.retrieve(seed.id, memory_store_id=readable.id).content == "seed"

    # A store not attached to the session is a 404, exactly like a missing one.
    for store_id in (elsewhere.id, MISSING_STORE):
        body = not_found(lambda: hands.memories.list(store_id))
        assert body["error"]["message"].startswith("memory store not found")
        not_found(lambda: hands.memories.create(store_id, path="/x.md", content="x"))
        not_found(lambda: hands.memories.retrieve(seeds[elsewhere.id].id, memory_store_id=store_id))
        not_found(lambda: hands.memory_versions.list(store_id))

    # The stores themselves, and redaction, take an API key.
    for call in (
        lambda: hands.list(),
        lambda: hands.create(name="mine"),
        lambda: hands.retrieve(writable.id),
        lambda: hands.update(writable.id, name="mine"),
        lambda: hands.archive(writable.id),
        lambda: hands.delete(writable.id),
        lambda: hands.memory_versions.redact(by_session[-1].id, memory_store_id=writable.id),
    ):
        refused(call, 403, "permission_error")
    # The environment key reaches no memory route.
    env_client = agentd.client(env_key).beta.memory_stores
    refused(lambda: env_client.memories.list(writable.id), 403, "permission_error")
    refused(lambda: env_client.list(), 403, "permission_error")
    assert stores.retrieve(writable.id).archived_at is None and stores.retrieve(writable.id).name == "agent notes"
