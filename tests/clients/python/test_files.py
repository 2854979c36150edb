"""Files: `client.beta.files` (upload, retrieve_metadata, list, delete, download) with the
official SDK, and files in sessions: mounted read-only for the agent's tools, outputs
under `/mnt/session/outputs/` turned into session-scoped files, and files named in
`user.message` content sent to the model.

Wire facts: managed-agents-wire.md §2.12 (routes, filename rule, expiry bounds,
`file_not_downloadable`, `file_expired`), §3.10 (BetaFileMetadata), §1.4 (no beta
header), §2.4 (file resources). Every test runs in both modes: ``dev`` keeps blobs in
the data directory, ``prod`` in an S3-compatible server.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

import anthropic
import pytest

from fake_models import FakeAnthropic, call, say
from harness import Deployment, assert_error_envelope, collect, psql, unique
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
    types_of,
    user_message,
    wait_idles,
)

MODEL = "claude-sonnet-4-6"
TOOLSET = {"type": "agent_toolset_20260401"}


def upload(client: anthropic.Anthropic, name: str | None, data: bytes, mime: str | None = None, **kwargs: Any) -> Any:
    part: Any = (name, data, mime) if mime else (name, data)
    return client.beta.files.upload(file=part, **kwargs)


def blob_path(deployment: Deployment, file: Any) -> Path | None:
    """Where a dev deployment keeps a file's bytes (None in prod: the S3 bucket)."""
    if deployment.mode != "dev":
        return None
    data_dir = Path(deployment.cli_env["AGENTD_DATA_DIR"])
    matches = list((data_dir / "blobs" / "files").glob(f"*/{file.id}"))
    return matches[0] if matches else data_dir / "blobs" / "files" / "?" / file.id


def set_expired(deployment: Deployment, file_id: str) -> None:
    """Moves a file's expiry into the past, as if its time had run out."""
    sql = f"UPDATE files SET expires_at_ms = 1 WHERE id = '{file_id}'"
    if deployment.mode == "dev":
        database = Path(deployment.cli_env["AGENTD_DATA_DIR"]) / "agentd.db"
        with sqlite3.connect(database, timeout=10) as connection:
            connection.execute(sql)
    else:
        psql(deployment.cli_env["AGENTD_DATABASE_URL"], sql)


# ---------------------------------------------------------------------------------------
# The files API


def test_upload_retrieve_list_delete(agentd: Deployment, client: anthropic.Anthropic) -> None:
    data = os.urandom(300_000)
    created = upload(client, "../reports/q3 summary.bin", data, "application/x-custom", expires_in_seconds=3600)
    assert created.type == "file" and created.id.startswith("file_")
    assert created.filename == "q3 summary.bin", "only the final path component is kept"
    assert created.mime_type == "application/x-custom"
    assert created.size_bytes == len(data)
    assert created.downloadable is False
    assert created.expires_at is not None
    assert 3590 <= (created.expires_at - created.created_at).total_seconds() <= 3610
    assert created.scope is None

    fetched = client.beta.files.retrieve_metadata(created.id)
    assert fetched.model_dump() == created.model_dump()
    assert agentd.file_blob_exists(created.id), "the bytes are in the object store (bucket or directory)"
    stored = blob_path(agentd, created)
    if stored is not None:
        assert stored.read_bytes() == data, "the blob holds exactly the uploaded bytes"

    listed = [f.id for f in collect(client.beta.files.list(limit=100))]
    assert created.id in listed

    deleted = client.beta.files.delete(created.id)
    assert deleted.id == created.id and deleted.type == "file_deleted"
    assert not agentd.file_blob_exists(created.id), "deleting a file removes its object"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.files.retrieve_metadata(created.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.files.delete(created.id)
    assert created.id not in [f.id for f in collect(client.beta.files.list(limit=100))]


def test_names_and_types(client: anthropic.Anthropic) -> None:
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(64)
    sniffed = upload(client, None, png)
    assert sniffed.mime_type == "image/png", "sniffed from the bytes"
    assert sniffed.filename == "unnamed.png", "no name: unnamed plus the type's extension"
    by_name = upload(client, "C:\\Users\\me\\notes.txt", b"hello\n")
    assert by_name.filename == "notes.txt"
    assert by_name.mime_type == "text/plain"
    declared = upload(client, "data.csv", b"a,b\n1,2\n", "text/csv")
    assert declared.mime_type == "text/csv"


def test_expiry_bounds_and_expired_files(agentd: Deployment, client: anthropic.Anthropic, http: Any) -> None:
    for bad in (3599, 7_776_001, 0):
        with pytest.raises(anthropic.BadRequestError) as refused:
            upload(client, "x.txt", b"x", expires_in_seconds=bad)
        assert "expires_in_seconds" in refused.value.message
    longest = upload(client, "long.txt", b"x", expires_in_seconds=7_776_000)
    assert longest.expires_at is not None

    doomed = upload(client, "doomed.txt", b"soon gone", expires_in_seconds=3600)
    set_expired(agentd, doomed.id)
    answer = http.get(f"/v1/files/{doomed.id}", headers=agentd.headers(beta=False))
    body = assert_error_envelope(answer, 404, "not_found_error")
    assert body["error"]["details"]["error_code"] == "file_expired", body
    with pytest.raises(anthropic.NotFoundError):
        client.beta.files.retrieve_metadata(doomed.id)
    assert doomed.id not in [f.id for f in collect(client.beta.files.list(limit=1000))]
    content = http.get(f"/v1/files/{doomed.id}/content", headers=agentd.headers(beta=False))
    assert_error_envelope(content, 404, "not_found_error")


def test_list_filters_and_pages(client: anthropic.Anthropic, http: Any, agentd: Deployment) -> None:
    made = [upload(client, f"page-{i}.txt", f"file {i}".encode()) for i in range(5)]
    ids = [f.id for f in made]
    first = client.beta.files.list(limit=2)
    assert len(first.data) == 2 and first.next_page and first.next_page.startswith("page_")
    everything = [f.id for f in collect(client.beta.files.list(limit=2))]
    assert everything[:5] == list(reversed(ids)), "newest first, across pages"
    assert len(everything) == len(set(everything))

    chosen = client.beta.files.list(ids=[ids[1], ids[3]])
    assert sorted(f.id for f in chosen.data) == sorted([ids[1], ids[3]])
    assert chosen.next_page is None, "an ids list is one page"
    mixed = http.get("/v1/files", params={"ids[]": ids[0], "limit": 1}, headers=agentd.headers(beta=False))
    assert_error_envelope(mixed, 400, "invalid_request_error")
    too_many = http.get("/v1/files", params=[("ids[]", ids[0])] * 101, headers=agentd.headers(beta=False))
    assert_error_envelope(too_many, 400, "invalid_request_error")
    assert client.beta.files.list(scope_id="sesn_" + "0" * 26).data == []


def test_uploads_are_not_downloadable(agentd: Deployment, client: anthropic.Anthropic, http: Any) -> None:
    made = upload(client, "input.txt", b"an input, not an output")
    answer = http.get(f"/v1/files/{made.id}/content", headers=agentd.headers(beta=False))
    body = assert_error_envelope(answer, 400, "invalid_request_error")
    assert body["error"]["details"]["error_code"] == "file_not_downloadable", body
    with pytest.raises(anthropic.BadRequestError):
        client.beta.files.download(made.id)


def test_bad_uploads_are_refused(agentd: Deployment, http: Any, client: anthropic.Anthropic) -> None:
    headers = agentd.headers(beta=False)
    before = {f.id for f in collect(client.beta.files.list(limit=1000))}
    no_file = http.post("/v1/files", files={"expires_in_seconds": (None, "3600")}, headers=headers)
    assert_error_envelope(no_file, 400, "invalid_request_error")
    json_body = http.post("/v1/files", json={"file": "x"}, headers=headers)
    assert_error_envelope(json_body, 415, "invalid_request_error")
    late = http.post(
        "/v1/files", files=[("file", ("a.txt", b"abc")), ("expires_in_seconds", (None, "3600"))], headers=headers
    )
    assert_error_envelope(late, 400, "invalid_request_error")
    unknown = http.post("/v1/files", files=[("file", ("a.txt", b"abc")), ("colour", (None, "red"))], headers=headers)
    assert_error_envelope(unknown, 400, "invalid_request_error")
    after = {f.id for f in collect(client.beta.files.list(limit=1000))}
    assert after == before, "a refused upload leaves no file behind"


@pytest.mark.parametrize("mode", ["dev", "prod"])
def test_upload_size_limit(launch: Any, mode: str) -> None:
    small = launch(mode, extra_env={"AGENTD_MAX_FILE_BYTES": "1000000"})
    client = small.client()
    fits = upload(client, "fits.bin", os.urandom(1_000_000))
    assert fits.size_bytes == 1_000_000
    with pytest.raises(anthropic.APIStatusError) as refused:
        upload(client, "big.bin", os.urandom(1_000_001))
    assert refused.value.status_code == 413
    body = refused.value.response.json()
    assert body["type"] == "error" and body["error"]["type"] == "request_too_large", body
    assert [f.id for f in collect(client.beta.files.list(limit=100))] == [fits.id]
    objects = [key.rsplit("/", 1)[-1] for key in small.blob_keys() if key.startswith("files/")]
    assert objects == [fits.id], "the refused upload left no object"


def test_concurrent_uploads(client: anthropic.Anthropic) -> None:
    payloads = {f"c{i}.bin": os.urandom(600_000 + i) for i in range(8)}
    made: dict[str, Any] = {}
    errors: list[BaseException] = []

    def send(name: str, data: bytes) -> None:
        try:
            made[name] = upload(client, name, data)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=send, args=item) for item in payloads.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not errors, errors
    assert {name: f.size_bytes for name, f in made.items()} == {name: len(d) for name, d in payloads.items()}
    listed = client.beta.files.list(ids=[f.id for f in made.values()])
    assert len(listed.data) == 8


def test_another_workspace_sees_nothing(agentd: Deployment, client: anthropic.Anthropic, http: Any) -> None:
    made = upload(client, "private.txt", b"mine")
    other_key = agentd.key_for(unique("files-other"))
    other = agentd.client(other_key)
    with pytest.raises(anthropic.NotFoundError):
        other.beta.files.retrieve_metadata(made.id)
    with pytest.raises(anthropic.NotFoundError):
        other.beta.files.delete(made.id)
    content = http.get(f"/v1/files/{made.id}/content", headers=agentd.headers(other_key, beta=False))
    assert_error_envelope(content, 404, "not_found_error")
    assert made.id not in [f.id for f in collect(other.beta.files.list(limit=1000))]
    assert client.beta.files.retrieve_metadata(made.id).id == made.id, "still there for its owner"


def test_sessions_mount_only_live_files_of_their_workspace(agentd: Deployment, client: anthropic.Anthropic) -> None:
    environment = client.beta.environments.create(name=unique("files-env"), config={"type": "cloud"})
    agent = client.beta.agents.create(name=unique("files-agent"), model=agentd_model(client))
    missing = "file_" + "0" * 26
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.sessions.create(
            agent=agent.id, environment_id=environment.id, resources=[{"type": "file", "file_id": missing}]
        )
    assert missing in refused.value.message
    made = upload(client, "m.txt", b"mounted")
    for bad in ("/etc/passwd", "/mnt/../etc/x", "/mnt/session/outputs/x", "relative/path"):
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.beta.sessions.create(
                agent=agent.id,
                environment_id=environment.id,
                resources=[{"type": "file", "file_id": made.id, "mount_path": bad}],
            )
        assert "mount_path" in refused.value.message
    session = client.beta.sessions.create(
        agent=agent.id, environment_id=environment.id, resources=[{"type": "file", "file_id": made.id}]
    )
    resource = session.resources[0]
    assert resource.mount_path == f"/mnt/session/uploads/{made.id}"
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.resources.add(session.id, type="file", file_id=missing)
    other = upload(client, "o.txt", b"other")
    added = client.beta.sessions.resources.add(session.id, type="file", file_id=other.id, mount_path="/mnt/data/o.txt")
    assert added.mount_path == "/mnt/data/o.txt"
    # A deleted file does not block changes to the session's other resources.
    client.beta.files.delete(made.id)
    client.beta.sessions.resources.delete(added.id, session_id=session.id)


def agentd_model(client: anthropic.Anthropic) -> str:
    from harness import pick_model

    return pick_model(client)


# ---------------------------------------------------------------------------------------
# Files in running sessions (the runner's sandbox and the model)


def test_a_session_reads_its_mounted_file_and_its_output_is_downloadable(
    turns: Deployment, cloud_hands: CloudHands, fake_anthropic: FakeAnthropic  # noqa: F811 - fixture
) -> None:
    """50 MB of random bytes uploaded, mounted read-only, checked and copied by `bash` to
    the outputs directory; the copy becomes a session-scoped file that downloads
    byte-exact. Deleting the input meanwhile does not break the session."""
    client = cloud_hands.client
    data = os.urandom(50 * 1024 * 1024)
    digest = hashlib.sha256(data).hexdigest()
    made = upload(client, "big-input.bin", data)
    environment_id = make_environment(client, "cloud")
    agent = client.beta.agents.create(name=unique("files-agent"), model=MODEL, tools=[TOOLSET])
    session = client.beta.sessions.create(
        agent=agent.id, environment_id=environment_id, resources=[{"type": "file", "file_id": made.id}]
    )
    mounted = f"/mnt/session/uploads/{made.id}"
    key = unique("mounted")
    fake_anthropic.script(
        key,
        call("bash", {"command": f"sha256sum {mounted} | cut -d' ' -f1; {{ echo overwrite > {mounted}; }} 2>/dev/null || echo read-only"}),
        call("bash", {"command": f"cp {mounted} /mnt/session/outputs/copy.bin && echo copied"}),
        call("read", {"file_path": f"/mnt/session/uploads/{made.id}", "limit": 1}),
        say("Copied."),
    )
    client.beta.sessions.events.send(session.id, events=[user_message(f"copy it {key}")])
    http = turns.http()
    headers = turns.headers(cloud_hands.api_key)
    events = wait_idles(http, headers, session.id, timeout=120, on_timeout=lambda: runner_tail(cloud_hands))
    assert [i["stop_reason"]["type"] for i in idles(events)] == ["end_turn"], types_of(events)
    uses = of_type(events, "agent.tool_use")
    results = results_by_call(events, "agent.tool_result")
    check, copy, read = (results[u["id"]] for u in uses)
    assert result_text(check).split() == [digest, "read-only"], result_text(check)
    assert result_text(copy).strip() == "copied", result_text(copy)
    # The file tools see /mnt too: the read tool finds the file (and declines its bytes).
    assert "binary" in result_text(read), read
    assert message_texts(events) == ["Copied."]

    outputs = collect(client.beta.files.list(scope_id=session.id))
    assert [f.filename for f in outputs] == ["copy.bin"], outputs
    output = outputs[0]
    assert output.downloadable is True
    assert output.scope is not None and output.scope.type == "session" and output.scope.id == session.id
    assert output.size_bytes == len(data)
    downloaded = client.beta.files.download(output.id).read()
    assert hashlib.sha256(downloaded).hexdigest() == digest, "the output downloads byte-exact"

    # The input goes away; the running session keeps its copy and its next call works.
    client.beta.files.delete(made.id)
    key2 = unique("after-delete")
    fake_anthropic.script(key2, call("bash", {"command": f"sha256sum {mounted} | cut -d' ' -f1"}), say("Still there."))
    client.beta.sessions.events.send(session.id, events=[user_message(f"again {key2}")])
    events = wait_idles(http, headers, session.id, count=2, timeout=60, on_timeout=lambda: runner_tail(cloud_hands))
    last = results_by_call(events, "agent.tool_result")[of_type(events, "agent.tool_use")[-1]["id"]]
    assert result_text(last).strip() == digest


def test_files_in_messages_reach_the_model(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    png = b"\x89PNG\r\n\x1a\n" + os.urandom(200)
    image = upload(client, "pic.png", png)
    notes = upload(client, "notes.txt", b"the secret word is artichoke\n")
    archive = upload(client, "bundle.zip", b"PK\x03\x04" + os.urandom(100))
    environment_id = make_environment(client, "cloud")
    agent = client.beta.agents.create(name=unique("files-model"), model=MODEL)
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment_id)
    key = unique("attached")
    fake_anthropic.script(key, say("I see a picture and your notes."))
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.message",
                "content": [
                    {"type": "text", "text": f"look {key}"},
                    {"type": "image", "source": {"type": "file", "file_id": image.id}},
                    {"type": "document", "source": {"type": "file", "file_id": notes.id}},
                ],
            }
        ],
    )
    http = turns.http()
    headers = turns.headers()
    events = wait_idles(http, headers, session.id)
    assert message_texts(events) == ["I see a picture and your notes."]
    request = fake_anthropic.received(key)[-1]
    images = request.blocks("image")
    assert images and images[0]["source"]["type"] == "base64", images
    assert images[0]["source"]["media_type"] == "image/png"
    import base64

    assert base64.b64decode(images[0]["source"]["data"]) == png
    documents = request.blocks("document")
    assert documents and documents[0]["source"] == {
        "type": "text",
        "media_type": "text/plain",
        "data": "the secret word is artichoke\n",
    }, documents

    missing = "file_" + "0" * 26
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.sessions.events.send(
            session.id,
            events=[
                {
                    "type": "user.message",
                    "content": [{"type": "image", "source": {"type": "file", "file_id": missing}}],
                }
            ],
        )
    assert "events[0].content[0].source.file_id" in refused.value.message and missing in refused.value.message

    key2 = unique("unsupported")
    fake_anthropic.script(key2, say("must not be asked"))
    client.beta.sessions.events.send(
        session.id,
        events=[
            {
                "type": "user.message",
                "content": [
                    {"type": "text", "text": f"and this {key2}"},
                    {"type": "document", "source": {"type": "file", "file_id": archive.id}},
                ],
            }
        ],
    )
    events = wait_idles(http, headers, session.id, count=2)
    errors = of_type(events, "session.error")
    assert errors and archive.id in errors[-1]["error"]["message"], errors
    assert fake_anthropic.pending(key2) == 1, "the model was not asked with a file it cannot read"
