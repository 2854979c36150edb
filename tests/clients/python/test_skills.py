"""Skills and skill versions: every method of `client.beta.skills` and `.skills.versions`,
the `GET /v1/ext/skills/{id}/versions/{version}/files/{path}` extension, the refusals of
docs/api/skills.md, and skills in agents and sessions (anthropic skills refused, custom
skills checked, `latest` pinned when a session starts).

Wire facts: managed-agents-wire.md §2.13 (routes), §2B.10 (upload shapes), §3.11 (the
`skill` and `skill_version` objects), §1.4 (no beta selector). Each test runs against
`agentd dev` and gateway+worker.
"""

from __future__ import annotations

import io
import os
import zipfile
from typing import Any, Callable

import anthropic
import pytest

from harness import Deployment, collect, error_body, unique

MODEL = "claude-sonnet-4-5"

FileTuple = tuple[str, bytes, str]


def skill_md(name: str | None, description: str | None = "Does the thing.") -> bytes:
    lines = ["---"]
    if name is not None:
        lines.append(f"name: {name}")
    if description is not None:
        lines.append(f"description: {description}")
    lines += ["---", "", f"# {name or 'skill'}", "", "Read me first.", ""]
    return "\n".join(lines).encode()


def skill_files(name: str, directory: str | None = None, extra: dict[str, bytes] | None = None) -> list[FileTuple]:
    directory = directory or name
    files: list[FileTuple] = [(f"{directory}/SKILL.md", skill_md(name), "text/markdown")]
    for path, content in (extra or {}).items():
        files.append((f"{directory}/{path}", content, "application/octet-stream"))
    return files


def slug() -> str:
    return unique("skill").lower()


def bad_request(call: Callable[[], Any], *fragments: str) -> dict[str, Any]:
    with pytest.raises(anthropic.BadRequestError) as caught:
        call()
    body = error_body(caught.value)
    assert body["error"]["type"] == "invalid_request_error", body
    for fragment in fragments:
        assert fragment in body["error"]["message"], body
    return body


def test_create_retrieve_download_round_trip(agentd: Deployment, workspace_client: Callable[[], anthropic.Anthropic]) -> None:
    client = workspace_client()
    name = slug()
    binary = os.urandom(200_000)
    files = skill_files(
        name,
        directory="upload-dir",
        extra={"scripts/run.py": b"print('hi')\n", "data/blob.bin": binary, "docs/deep/nested/notes.md": b"# notes"},
    )
    skill = client.beta.skills.create(files=files)
    assert skill.type == "skill" and skill.id.startswith("skill_")
    assert skill.display_name == name, "display_name defaults to the front matter name"
    assert skill.source.type == "custom"
    assert skill.latest_version_id.isdigit() and len(skill.latest_version_id) >= 16
    assert skill.created_at and skill.updated_at

    again = client.beta.skills.retrieve(skill.id)
    assert again.to_dict() == skill.to_dict()

    version = client.beta.skills.versions.retrieve("latest", skill_id=skill.id)
    assert version.type == "skill_version"
    assert (version.id, version.skill_id, version.name) == (skill.latest_version_id, skill.id, name)
    assert version.description == "Does the thing."
    assert client.beta.skills.versions.retrieve(version.id, skill_id=skill.id).to_dict() == version.to_dict()

    # The archive: every file under one directory named after the skill, byte for byte.
    download = client.beta.skills.versions.download(version.id, skill_id=skill.id)
    assert download.http_response.headers["content-type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(download.read()))
    expected = {f"{name}/{path.split('/', 1)[1]}": content for path, content, _ in files}
    assert sorted(archive.namelist()) == sorted(expected)
    for entry, content in expected.items():
        assert archive.read(entry) == content, entry
    latest = client.beta.skills.versions.download("latest", skill_id=skill.id)
    assert latest.read() == download.read()

    # The extension: one file of a version.
    http = agentd.http()
    headers = {"authorization": f"Bearer {client.api_key}"}
    for path, content in (("scripts/run.py", b"print('hi')\n"), ("data/blob.bin", binary), ("SKILL.md", files[0][1])):
        got = http.get(f"/v1/ext/skills/{skill.id}/versions/{version.id}/files/{path}", headers=headers)
        assert got.status_code == 200, got.text
        assert got.content == content, path
    assert http.get(f"/v1/ext/skills/{skill.id}/versions/latest/files/SKILL.md", headers=headers).status_code == 200
    missing = http.get(f"/v1/ext/skills/{skill.id}/versions/{version.id}/files/nope.txt", headers=headers)
    assert missing.status_code == 404 and "nope.txt" in missing.json()["error"]["message"]

    # No beta selector is needed on any skills route.
    assert http.get("/v1/skills", headers=headers).status_code == 200
    assert http.get(f"/v1/skills/{skill.id}/versions", headers=headers).status_code == 200

    named = client.beta.skills.create(files=skill_files(slug()), display_name="Quarterly reports")
    assert named.display_name == "Quarterly reports"


def test_versions_lifecycle(workspace_client: Callable[[], anthropic.Anthropic]) -> None:
    client = workspace_client()
    name = slug()
    skill = client.beta.skills.create(files=skill_files(name))
    first = skill.latest_version_id
    second = client.beta.skills.versions.create(skill.id, files=skill_files(name, extra={"v2.txt": b"two"}))
    third = client.beta.skills.versions.create(skill.id, files=skill_files(name, directory="renamed-dir"))
    assert int(first) < int(second.id) < int(third.id), "version ids increase"
    assert client.beta.skills.retrieve(skill.id).latest_version_id == third.id
    assert client.beta.skills.versions.retrieve("latest", skill_id=skill.id).id == third.id

    page = client.beta.skills.versions.list(skill.id, limit=2)
    assert [v.id for v in page.data] == [third.id, second.id] and page.next_page
    assert [v.id for v in collect(client.beta.skills.versions.list(skill.id, limit=1))] == [third.id, second.id, first]

    # A version keeps the skill's name.
    bad_request(
        lambda: client.beta.skills.versions.create(skill.id, files=skill_files("another-name")),
        '"another-name"',
        name,
    )
    # `latest` names a version only when reading.
    bad_request(lambda: client.beta.skills.versions.delete("latest", skill_id=skill.id), "latest")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.versions.retrieve("123", skill_id=skill.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.versions.retrieve("not-a-version", skill_id=skill.id)

    deleted = client.beta.skills.versions.delete(third.id, skill_id=skill.id)
    assert (deleted.id, deleted.type) == (third.id, "skill_version_deleted")
    assert client.beta.skills.retrieve(skill.id).latest_version_id == second.id
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.versions.download(third.id, skill_id=skill.id)
    client.beta.skills.versions.delete(first, skill_id=skill.id)
    # The only version left cannot go: a skill holds at least one.
    with pytest.raises(anthropic.ConflictError) as caught:
        client.beta.skills.versions.delete(second.id, skill_id=skill.id)
    assert "only version" in error_body(caught.value)["error"]["message"]

    gone = client.beta.skills.delete(skill.id)
    assert (gone.id, gone.type) == (skill.id, "skill_deleted")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.retrieve(skill.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.versions.list(skill.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.delete(skill.id)
    # The name is free again.
    assert client.beta.skills.create(files=skill_files(name)).id != skill.id


def test_list_pages_and_source_filter(workspace_client: Callable[[], anthropic.Anthropic]) -> None:
    client = workspace_client()
    created = [client.beta.skills.create(files=skill_files(slug())).id for _ in range(3)]
    page = client.beta.skills.list(limit=2)
    assert len(page.data) == 2 and page.next_page
    listed = [s.id for s in collect(client.beta.skills.list(limit=2))]
    assert listed == sorted(created, reverse=True), "newest first, every skill once"
    assert [s.id for s in collect(client.beta.skills.list(source="custom"))] == listed
    assert client.beta.skills.list(source="anthropic").data == []
    assert client.beta.skills.list(source="anthropic").next_page is None
    bad_request(lambda: client.beta.skills.list(source="bogus"), "source", "bogus")
    bad_request(lambda: client.beta.skills.list(limit=1001), "limit")


def zip_bytes(entries: dict[str, bytes], symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, content in entries.items():
            archive.writestr(name, content)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16) | 0x20
            archive.writestr(info, target)
    return buffer.getvalue()


def test_a_zip_upload_is_the_skills_files(workspace_client: Callable[[], anthropic.Anthropic]) -> None:
    client = workspace_client()
    name = slug()
    packed = zip_bytes({f"{name}/SKILL.md": skill_md(name), f"{name}/a/b.txt": b"b"})
    skill = client.beta.skills.create(files=[(f"{name}.zip", packed, "application/zip")])
    archive = zipfile.ZipFile(io.BytesIO(client.beta.skills.versions.download("latest", skill_id=skill.id).read()))
    assert archive.read(f"{name}/a/b.txt") == b"b"
    linked = zip_bytes({f"{name}/SKILL.md": skill_md(name)}, symlinks={f"{name}/passwd": "/etc/passwd"})
    bad_request(
        lambda: client.beta.skills.versions.create(skill.id, files=[("x.zip", linked, "application/zip")]),
        "symlinks are refused",
        "passwd",
    )
    # A zip bomb: 60 MB of zeros deflates to a few tens of kilobytes.
    bomb = zip_bytes({f"{name}/SKILL.md": skill_md(name), f"{name}/zeros": bytes(60_000_000)})
    assert len(bomb) < 1_000_000
    bad_request(
        lambda: client.beta.skills.versions.create(skill.id, files=[("bomb.zip", bomb, "application/zip")]),
        "at most 50000000 bytes",
    )


REFUSALS: list[tuple[str, Callable[[str], list[FileTuple]], tuple[str, ...]]] = [
    ("no SKILL.md", lambda n: [(f"{n}/README.md", b"x", "text/plain")], ("SKILL.md is missing",)),
    (
        "two top directories",
        lambda n: skill_files(n) + [("elsewhere/x.txt", b"x", "text/plain")],
        ("elsewhere/x.txt", "outside the top-level directory"),
    ),
    ("a file at the root", lambda n: [("SKILL.md", skill_md(n), "text/markdown")], ("one top-level directory",)),
    ("an absolute path", lambda n: [(f"/{n}/SKILL.md", skill_md(n), "text/markdown")], ("absolute",)),
    ("a .. segment", lambda n: skill_files(n) + [(f"{n}/../escape.txt", b"x", "text/plain")], ("`..`", "escape.txt")),
    ("an empty segment", lambda n: skill_files(n) + [(f"{n}//x.txt", b"x", "text/plain")], ("empty",)),
    ("a backslash", lambda n: skill_files(n) + [(f"{n}/a\\b.txt", b"x", "text/plain")], ("backslash",)),
    ("a duplicate path", lambda n: skill_files(n) + skill_files(n), ("uploaded twice", "SKILL.md")),
    ("no description", lambda n: [(f"{n}/SKILL.md", skill_md(n, None), "text/markdown")], ("description",)),
    ("a bad name", lambda n: [(f"{n}/SKILL.md", skill_md("Not_A_Slug"), "text/markdown")], ("kebab-case",)),
    ("no front matter", lambda n: [(f"{n}/SKILL.md", b"# just markdown", "text/markdown")], ("front matter",)),
    (
        "too many files",
        lambda n: skill_files(n) + [(f"{n}/f{i}.txt", b"", "text/plain") for i in range(1000)],
        ("at most 1000 files",),
    ),
    (
        "too many bytes",
        lambda n: skill_files(n, extra={"big.bin": bytes(50_000_001)}),
        ("at most 50000000 bytes",),
    ),
]


@pytest.mark.parametrize("case", REFUSALS, ids=[case[0] for case in REFUSALS])
def test_uploads_are_refused_with_their_cause(
    workspace_client: Callable[[], anthropic.Anthropic], case: tuple[str, Callable[[str], list[FileTuple]], tuple[str, ...]]
) -> None:
    client = workspace_client()
    _, build, fragments = case
    bad_request(lambda: client.beta.skills.create(files=build(slug())), *fragments)
    assert client.beta.skills.list().data == [], "nothing of a refused upload stays"


def test_names_and_display_names(workspace_client: Callable[[], anthropic.Anthropic]) -> None:
    client = workspace_client()
    name = slug()
    client.beta.skills.create(files=skill_files(name))
    with pytest.raises(anthropic.ConflictError) as caught:
        client.beta.skills.create(files=skill_files(name, directory="other-dir"))
    body = error_body(caught.value)
    assert body["error"]["details"]["error_code"] == "skill_name_taken", body
    assert caught.value.error_code == "skill_name_taken"
    assert name in body["error"]["message"]
    # Without a front matter name, the directory names the skill.
    directory = slug()
    fallback = client.beta.skills.create(files=[(f"{directory}/SKILL.md", skill_md(None), "text/markdown")])
    assert fallback.display_name == directory
    assert client.beta.skills.versions.retrieve("latest", skill_id=fallback.id).name == directory
    bad_request(lambda: client.beta.skills.create(files=skill_files(slug()), display_name="x" * 256), "display_name", "255")
    bad_request(lambda: client.beta.skills.create(files=skill_files(slug()), display_name="two\nlines"), "single line")
    assert len(client.beta.skills.list().data) == 2


def test_agents_and_sessions_use_custom_skills(workspace_client: Callable[[], anthropic.Anthropic]) -> None:
    client = workspace_client()
    name = slug()
    skill = client.beta.skills.create(files=skill_files(name))
    first = skill.latest_version_id

    bad_request(
        lambda: client.beta.agents.create(
            name="a", model=MODEL, skills=[{"type": "anthropic", "skill_id": "xlsx"}]
        ),
        'skills[0]: anthropic skill "xlsx" cannot be served by a self-hosted agentd',
    )
    missing = "skill_01missingmissingmissing"
    bad_request(
        lambda: client.beta.agents.create(name="a", model=MODEL, skills=[{"type": "custom", "skill_id": missing}]),
        "skills[0].skill_id",
        missing,
    )
    bad_request(
        lambda: client.beta.agents.create(
            name="a", model=MODEL, skills=[{"type": "custom", "skill_id": skill.id, "version": "42"}]
        ),
        "skills[0].version",
        skill.id,
    )

    agent = client.beta.agents.create(name="a", model=MODEL, skills=[{"type": "custom", "skill_id": skill.id}])
    assert [(s.type, s.skill_id, s.version) for s in agent.skills] == [("custom", skill.id, "latest")]
    pinned_agent = client.beta.agents.create(
        name="b", model=MODEL, skills=[{"type": "custom", "skill_id": skill.id, "version": first}]
    )
    assert pinned_agent.skills[0].version == first
    bad_request(
        lambda: client.beta.agents.update(
            agent.id, version=agent.version, skills=[{"type": "anthropic", "skill_id": "pptx"}]
        ),
        'skills[0]: anthropic skill "pptx"',
    )

    second = client.beta.skills.versions.create(skill.id, files=skill_files(name, extra={"x.txt": b"x"}))
    environment = client.beta.environments.create(name=unique("skills-env"), config={"type": "self_hosted"})
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    assert [(s.skill_id, s.version) for s in session.agent.skills] == [(skill.id, second.id)], "latest is pinned"
    client.beta.skills.versions.create(skill.id, files=skill_files(name, extra={"y.txt": b"y"}))
    assert client.beta.sessions.retrieve(session.id).agent.skills[0].version == second.id, "the pin holds"
    assert client.beta.agents.retrieve(agent.id).skills[0].version == "latest", "the agent keeps `latest`"
    pinned = client.beta.sessions.create(agent=pinned_agent.id, environment_id=environment.id)
    assert pinned.agent.skills[0].version == first

    bad_request(
        lambda: client.beta.sessions.create(
            agent={"type": "agent_with_overrides", "id": agent.id, "skills": [{"type": "anthropic", "skill_id": "xlsx"}]},  # type: ignore[typeddict-item]
            environment_id=environment.id,
        ),
        'agent.skills[0]: anthropic skill "xlsx"',
    )
    # A skill deleted after the agent was made: the session refuses to start without it.
    client.beta.skills.delete(skill.id)
    bad_request(
        lambda: client.beta.sessions.create(agent=agent.id, environment_id=environment.id),
        "agent.skills[0].skill_id",
        skill.id,
    )


def test_another_workspace_gets_404_everywhere(
    agentd: Deployment, workspace_client: Callable[[], anthropic.Anthropic]
) -> None:
    owner, other = workspace_client(), workspace_client()
    name = slug()
    skill = owner.beta.skills.create(files=skill_files(name))
    version = skill.latest_version_id
    calls: list[Callable[[], Any]] = [
        lambda: other.beta.skills.retrieve(skill.id),
        lambda: other.beta.skills.delete(skill.id),
        lambda: other.beta.skills.versions.list(skill.id),
        lambda: other.beta.skills.versions.create(skill.id, files=skill_files(name)),
        lambda: other.beta.skills.versions.retrieve("latest", skill_id=skill.id),
        lambda: other.beta.skills.versions.retrieve(version, skill_id=skill.id),
        lambda: other.beta.skills.versions.delete(version, skill_id=skill.id),
        lambda: other.beta.skills.versions.download(version, skill_id=skill.id),
    ]
    for call in calls:
        with pytest.raises(anthropic.NotFoundError):
            call()
    http = agentd.http()
    got = http.get(
        f"/v1/ext/skills/{skill.id}/versions/{version}/files/SKILL.md",
        headers={"authorization": f"Bearer {other.api_key}"},
    )
    assert got.status_code == 404, got.text
    assert other.beta.skills.list().data == []
    bad_request(
        lambda: other.beta.agents.create(name="a", model=MODEL, skills=[{"type": "custom", "skill_id": skill.id}]),
        "skills[0].skill_id",
    )
    # The owner's skill is untouched, and its name is free in the other workspace.
    assert owner.beta.skills.retrieve(skill.id).latest_version_id == version
    assert other.beta.skills.create(files=skill_files(name)).id != skill.id
