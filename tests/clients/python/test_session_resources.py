"""Session resources (issue 7 §3): the managed `sessions.resources` routes through the
official SDK, and the manifest replace `PUT /v1/ext/sessions/{id}/resources` with its
`If-Match` revision and `Idempotency-Key` replay — both over the same stored list."""

from __future__ import annotations

import anthropic
import pytest

from harness import RECORDER, Deployment, unique


def session_with_repo(client: anthropic.Anthropic, token: str) -> str:
    agent = client.beta.agents.create(name=unique("res-agent"), model="claude-sonnet-4-5")
    environment = client.beta.environments.create(name=unique("res-env"), config={"type": "cloud"})
    session = client.beta.sessions.create(
        agent=agent.id,
        environment_id=environment.id,
        resources=[{"type": "github_repository", "url": "https://github.com/acme/app", "authorization_token": token}],
    )
    return session.id


def test_managed_resource_routes(agentd: Deployment) -> None:
    client = agentd.client()
    token = RECORDER.secret(f"ghp_{unique('tok')}")
    session = session_with_repo(client, token)
    (repo,) = client.beta.sessions.resources.list(session).data
    assert repo.type == "github_repository" and repo.url == "https://github.com/acme/app"
    assert client.beta.sessions.resources.retrieve(repo.id, session_id=session).id == repo.id
    file_id = client.beta.files.upload(file=("abc.txt", b"abc")).id
    added = client.beta.sessions.resources.add(session, type="file", file_id=file_id)
    assert (added.type, added.file_id, added.mount_path) == ("file", file_id, f"/mnt/session/uploads/{file_id}")
    assert [r.id for r in client.beta.sessions.resources.list(session).data] == [repo.id, added.id]
    new_token = RECORDER.secret(f"ghp_{unique('rotated')}")
    rotated = client.beta.sessions.resources.update(repo.id, session_id=session, authorization_token=new_token)
    assert rotated.id == repo.id and "authorization_token" not in rotated.to_dict()
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.resources.update(added.id, session_id=session, authorization_token="x")
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.resources.add(session, type="github_repository", file_id="f")  # type: ignore[arg-type]
    deleted = client.beta.sessions.resources.delete(added.id, session_id=session)
    assert (deleted.id, deleted.type) == (added.id, "session_resource_deleted")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.resources.retrieve(added.id, session_id=session)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.resources.delete(added.id, session_id=session)


def test_manifest_replace_with_revision_and_idempotency(agentd: Deployment) -> None:
    client = agentd.client()
    http = agentd.http()
    token = RECORDER.secret(f"ghp_{unique('tok')}")
    session = session_with_repo(client, token)
    path = f"/v1/ext/sessions/{session}/resources"
    current = http.get(path, headers=agentd.headers())
    assert current.status_code == 200, current.text
    manifest = current.json()
    revision = manifest["desired_revision"]
    assert current.headers["etag"] == f'"{revision}"'
    assert manifest["phase"] == "active" and manifest["applied_revision"] == revision
    assert [r["type"] for r in manifest["resources"]] == ["github_repository"]

    one, two = (client.beta.files.upload(file=(f"{n}.txt", n.encode())).id for n in ("one", "two"))
    body = {"resources": [{"type": "file", "file_id": one}, {"type": "file", "file_id": two, "mount_path": "/mnt/data/two"}]}
    stale = http.put(path, json=body, headers=agentd.headers(**{"If-Match": f'"{revision + 5}"'}))
    assert stale.status_code == 409 and stale.headers.get("x-should-retry") == "false", stale.text
    assert http.get(path, headers=agentd.headers()).json()["desired_revision"] == revision, "a refused replace changes nothing"

    key = unique("idem")
    first = http.put(path, json=body, headers=agentd.headers(**{"If-Match": f'"{revision}"', "Idempotency-Key": key}))
    assert first.status_code == 200, first.text
    replaced = first.json()
    assert replaced["desired_revision"] == revision + 1
    assert [(r["type"], r["file_id"]) for r in replaced["resources"]] == [("file", one), ("file", two)]
    assert replaced["resources"][1]["mount_path"] == "/mnt/data/two"
    # The same key and body replays the first answer (no second change); another body is refused.
    again = http.put(path, json=body, headers=agentd.headers(**{"If-Match": f'"{revision}"', "Idempotency-Key": key}))
    assert again.status_code == 200 and again.json() == replaced
    other = http.put(path, json={"resources": []}, headers=agentd.headers(**{"Idempotency-Key": key}))
    assert other.status_code == 409, other.text
    # Both surfaces see one list.
    assert [r.file_id for r in client.beta.sessions.resources.list(session).data] == [one, two]
    # Bad input is refused before any change.
    for bad in ({"resources": [{"type": "nope"}]}, {"resources": [], "extra": 1}, {}):
        response = http.put(path, json=bad, headers=agentd.headers())
        assert response.status_code == 400, (bad, response.text)
    assert http.get(path, headers=agentd.headers()).json()["desired_revision"] == revision + 1
    # An archived session's resources are final.
    client.beta.sessions.archive(session)
    final = http.put(path, json={"resources": []}, headers=agentd.headers())
    assert final.status_code == 409, final.text
    assert http.get("/v1/ext/sessions/sesn_nope/resources", headers=agentd.headers()).status_code == 404
