"""Environments: every method of `client.beta.environments` (not `.work`).

Wire facts: managed-agents-wire.md §2.6 (routes, rules), §2B.5 (request shapes), §3.5
(the `environment` object). Each test runs against `agentd dev` and gateway+worker.
"""

from __future__ import annotations

from typing import Any, Callable

import anthropic
import pytest
from anthropic.types.beta import BetaEnvironment

from harness import assert_error_envelope, collect, error_body, unique

PACKAGE_MANAGERS = ("apt", "cargo", "gem", "go", "npm", "pip")
UNKNOWN_ENVIRONMENT = "env_pytest_does_not_exist"

LIMITED_WITH_PACKAGES = {
    "type": "cloud",
    "networking": {
        "type": "limited",
        "allowed_hosts": ["api.example.com", "*.example.org"],
        "allow_package_managers": True,
        "allow_mcp_servers": True,
    },
    "packages": {
        "type": "packages",
        "apt": ["jq"],
        "cargo": ["ripgrep@14.1.0"],
        "gem": ["rake"],
        "go": ["golang.org/x/tools/gopls@latest"],
        "npm": ["left-pad@1.3.0"],
        "pip": ["requests==2.32.3", "rich"],
    },
}


def create_environment(client: anthropic.Anthropic, **fields: Any) -> BetaEnvironment:
    fields.setdefault("name", unique("env"))
    return client.beta.environments.create(**fields)


def dumped_config(environment: BetaEnvironment) -> dict[str, Any]:
    return environment.model_dump(mode="json")["config"]


def assert_full_packages(packages: dict[str, Any], expected: dict[str, list[str]] | None = None) -> None:
    """§3.5 BetaPackages: all six lists are always present (required) in responses."""
    for manager in PACKAGE_MANAGERS:
        assert manager in packages, f"packages lacks {manager!r}: {packages}"
        assert isinstance(packages[manager], list), packages
        assert packages[manager] == (expected or {}).get(manager, []), (manager, packages)
    assert packages.get("type") in ("packages", None), packages


def error_code(err: anthropic.APIStatusError) -> Any:
    details = error_body(err)["error"].get("details") or {}
    return details.get("error_code")


# ---------------------------------------------------------------------------------------
# create


def test_create_cloud_default_config(client: anthropic.Anthropic) -> None:
    name = unique("cloud")
    raw = client.beta.environments.with_raw_response.create(
        name=name, config={"type": "cloud"}, description="default cloud", metadata={"team": "qa"}
    )
    environment = raw.parse()
    body = raw.json()
    assert isinstance(body, dict)
    missing = {"id", "type", "name", "config", "metadata", "created_at", "updated_at"} - set(body)
    assert not missing, f"environment JSON lacks {sorted(missing)}: {body}"

    assert environment.type == "environment"
    assert environment.id.startswith("env_"), environment.id
    assert environment.name == name
    assert environment.description == "default cloud"
    assert environment.metadata == {"team": "qa"}
    assert environment.archived_at is None
    assert environment.scope in ("organization", None)
    assert environment.created_at and environment.updated_at >= environment.created_at

    config = body["config"]
    assert config["type"] == "cloud"
    assert config["networking"] == {"type": "unrestricted"}
    assert_full_packages(config["packages"])

    fetched = client.beta.environments.retrieve(environment.id)
    assert fetched.model_dump() == environment.model_dump()


def test_create_without_config_is_a_full_cloud_config(client: anthropic.Anthropic) -> None:
    environment = create_environment(client)
    config = dumped_config(environment)
    assert config["type"] == "cloud", config
    assert config["networking"]["type"] == "unrestricted"
    assert_full_packages(config["packages"])
    assert environment.description is None
    assert environment.metadata == {}


def test_create_limited_networking_with_packages(client: anthropic.Anthropic) -> None:
    environment = create_environment(client, config=LIMITED_WITH_PACKAGES)
    for current in (environment, client.beta.environments.retrieve(environment.id)):
        config = dumped_config(current)
        assert config["type"] == "cloud"
        assert config["networking"] == LIMITED_WITH_PACKAGES["networking"]
        expected = {k: v for k, v in LIMITED_WITH_PACKAGES["packages"].items() if k != "type"}
        assert_full_packages(config["packages"], expected)


def test_create_limited_networking_defaults(client: anthropic.Anthropic) -> None:
    environment = create_environment(
        client, config={"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["api.example.com"]}}
    )
    networking = dumped_config(environment)["networking"]
    assert networking == {
        "type": "limited",
        "allowed_hosts": ["api.example.com"],
        "allow_mcp_servers": False,  # "Defaults to `false`."
        "allow_package_managers": False,  # "Defaults to `false` on creation."
    }
    assert_full_packages(dumped_config(environment)["packages"])


def test_packages_under_limited_networking_need_package_managers(workspace_client: Any) -> None:
    client = workspace_client()
    for flag in (None, False):
        networking: dict[str, Any] = {"type": "limited", "allowed_hosts": ["api.example.com"]}
        if flag is not None:
            networking["allow_package_managers"] = flag
        with pytest.raises(anthropic.BadRequestError) as caught:
            create_environment(client, config={"type": "cloud", "networking": networking, "packages": {"pip": ["rich"]}})
        body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
        assert "package" in body["error"]["message"].lower(), body
    assert collect(client.beta.environments.list(include_archived=True)) == [], "a rejected create stored something"

    # Empty package lists under limited networking are not "packages specified".
    fine = create_environment(
        client, config={"type": "cloud", "networking": {"type": "limited"}, "packages": {"pip": []}}
    )
    assert dumped_config(fine)["networking"]["allow_package_managers"] is False


def test_create_self_hosted(client: anthropic.Anthropic) -> None:
    environment = create_environment(client, config={"type": "self_hosted"})
    assert environment.config.type == "self_hosted"
    assert dumped_config(environment) == {"type": "self_hosted"}
    fetched = client.beta.environments.retrieve(environment.id)
    assert fetched.config.type == "self_hosted"
    assert fetched.model_dump() == environment.model_dump()


def test_scope_account_is_rejected(workspace_client: Any) -> None:
    client = workspace_client()
    with pytest.raises(anthropic.BadRequestError) as caught:
        create_environment(client, scope="account")
    body = assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert "scope" in body["error"]["message"].lower(), body
    assert collect(client.beta.environments.list(include_archived=True)) == []

    environment = create_environment(client, scope="organization")
    assert environment.scope == "organization"
    with pytest.raises(anthropic.BadRequestError):
        client.beta.environments.update(environment.id, scope="account")
    assert client.beta.environments.retrieve(environment.id).scope == "organization"


@pytest.mark.parametrize(
    "config",
    [
        {"type": "kubernetes"},
        {"type": "cloud", "networking": {"type": "firewalled"}},
        {"type": "cloud", "packages": {"pip": "rich"}},
    ],
    ids=["unknown-type", "unknown-networking", "packages-not-a-list"],
)
def test_create_invalid_config_is_rejected(client: anthropic.Anthropic, config: dict[str, Any]) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        create_environment(client, config=config)
    assert_error_envelope(caught.value.response, 400, "invalid_request_error")


# ---------------------------------------------------------------------------------------
# retrieve


def test_retrieve_unknown_environment_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as caught:
        client.beta.environments.retrieve(UNKNOWN_ENVIRONMENT)
    assert_error_envelope(caught.value.response, 404, "not_found_error")


def test_other_workspace_cannot_reach_the_environment(
    client: anthropic.Anthropic, workspace_client: Callable[[], anthropic.Anthropic]
) -> None:
    ours = create_environment(client, description="mine")
    other = workspace_client()

    with pytest.raises(anthropic.NotFoundError) as caught:
        other.beta.environments.retrieve(ours.id)
    assert_error_envelope(caught.value.response, 404, "not_found_error")
    with pytest.raises(anthropic.NotFoundError):
        other.beta.environments.update(ours.id, description="hijacked")
    with pytest.raises(anthropic.NotFoundError):
        other.beta.environments.archive(ours.id)
    with pytest.raises(anthropic.NotFoundError):
        other.beta.environments.delete(ours.id)
    assert collect(other.beta.environments.list(include_archived=True)) == []

    unchanged = client.beta.environments.retrieve(ours.id)
    assert unchanged.model_dump() == ours.model_dump()


# ---------------------------------------------------------------------------------------
# update


def test_update_config_type_cannot_change(client: anthropic.Anthropic) -> None:
    for original, other in (("cloud", "self_hosted"), ("self_hosted", "cloud")):
        environment = create_environment(client, config={"type": original})
        with pytest.raises(anthropic.BadRequestError) as caught:
            client.beta.environments.update(environment.id, config={"type": other})
        assert_error_envelope(caught.value.response, 400, "invalid_request_error")
        assert error_code(caught.value) == "invalid_config_type_change", error_body(caught.value)
        after = client.beta.environments.retrieve(environment.id)
        assert after.config.type == original
        assert after.model_dump() == environment.model_dump()


def test_update_archived_environment_is_rejected(client: anthropic.Anthropic) -> None:
    environment = create_environment(client, description="frozen")
    archived = client.beta.environments.archive(environment.id)
    assert archived.id == environment.id
    assert archived.archived_at is not None
    assert archived.archived_at >= environment.created_at

    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.environments.update(environment.id, description="thawed")
    assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert error_code(caught.value) == "environment_archived", error_body(caught.value)

    after = client.beta.environments.retrieve(environment.id)
    assert after.description == "frozen"
    assert after.archived_at == archived.archived_at


def test_update_tri_state_semantics(client: anthropic.Anthropic) -> None:
    name = unique("tri")
    environment = create_environment(
        client,
        name=name,
        description="describes",
        metadata={"a": "1", "b": "2", "c": "3"},
        config=LIMITED_WITH_PACKAGES,
    )
    original_config = dumped_config(environment)

    # Omitted fields are preserved.
    renamed = client.beta.environments.update(environment.id, name=name + "-renamed")
    assert renamed.name == name + "-renamed"
    assert renamed.description == "describes"
    assert renamed.metadata == {"a": "1", "b": "2", "c": "3"}
    assert dumped_config(renamed) == original_config
    assert renamed.created_at == environment.created_at
    assert renamed.updated_at >= environment.updated_at

    # "an empty string is stored as an empty string"
    emptied = client.beta.environments.update(environment.id, description="")
    assert emptied.description == ""
    assert client.beta.environments.retrieve(environment.id).description == ""

    # "null clears to null" (sent as JSON null)
    cleared = client.beta.environments.update(environment.id, description=None)
    assert cleared.description is None
    assert client.beta.environments.retrieve(environment.id).description is None

    # Metadata: "Set a value to null or empty string to delete the key"; others upsert.
    patched = client.beta.environments.update(environment.id, metadata={"a": None, "b": "", "d": "4"})
    assert patched.metadata == {"c": "3", "d": "4"}
    assert patched.name == name + "-renamed"
    assert dumped_config(patched) == original_config

    # "cloud-config fields omitted on update preserve existing values"
    same = client.beta.environments.update(environment.id, config={"type": "cloud"})
    assert dumped_config(same) == original_config

    # Replacing packages keeps the networking; omitted limited-network fields are kept too.
    repackaged = client.beta.environments.update(
        environment.id, config={"type": "cloud", "packages": {"pip": ["httpx==0.28.1"]}}
    )
    config = dumped_config(repackaged)
    assert config["networking"] == original_config["networking"]
    assert_full_packages(config["packages"], {"pip": ["httpx==0.28.1"]})

    rehosted = client.beta.environments.update(
        environment.id,
        config={"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["mirror.example.net"]}},
    )
    networking = dumped_config(rehosted)["networking"]
    assert networking["allowed_hosts"] == ["mirror.example.net"]
    assert networking["allow_package_managers"] is True
    assert networking["allow_mcp_servers"] is True
    assert_full_packages(dumped_config(rehosted)["packages"], {"pip": ["httpx==0.28.1"]})

    # Turning package managers off while packages remain violates the limited-network rule.
    with pytest.raises(anthropic.BadRequestError):
        client.beta.environments.update(
            environment.id,
            config={"type": "cloud", "networking": {"type": "limited", "allow_package_managers": False}},
        )

    opened = client.beta.environments.update(
        environment.id, config={"type": "cloud", "networking": {"type": "unrestricted"}}
    )
    assert dumped_config(opened)["networking"] == {"type": "unrestricted"}
    assert_full_packages(dumped_config(opened)["packages"], {"pip": ["httpx==0.28.1"]})

    latest = client.beta.environments.retrieve(environment.id)
    assert latest.model_dump() == opened.model_dump()
    assert latest.metadata == {"c": "3", "d": "4"}
    assert latest.description is None


def test_update_unknown_environment_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError):
        client.beta.environments.update(UNKNOWN_ENVIRONMENT, description="x")


# ---------------------------------------------------------------------------------------
# list


def test_list_paginates_and_include_archived(workspace_client: Any) -> None:
    client = workspace_client()  # an empty workspace: the listing is exactly ours
    kept = [create_environment(client).id for _ in range(3)]
    archived = create_environment(client).id
    client.beta.environments.archive(archived)

    first = client.beta.environments.list(limit=1)
    assert len(first.data) == 1
    assert first.next_page, "a first page of 1 out of 3 must name the next page"
    pages = list(first.iter_pages())
    assert [len(p.data) for p in pages] == [1, 1, 1]
    assert not pages[-1].next_page, "the last page must have next_page null"

    listed = [e.id for e in collect(client.beta.environments.list(limit=1))]
    assert len(listed) == len(set(listed)), f"duplicates across pages: {listed}"
    assert set(listed) == set(kept)
    assert set(e.id for e in collect(client.beta.environments.list(page=None))) == set(kept)
    assert {e.id for e in collect(client.beta.environments.list(include_archived=False))} == set(kept)

    everything = {e.id: e for e in collect(client.beta.environments.list(include_archived=True, limit=1))}
    assert set(everything) == {*kept, archived}
    assert everything[archived].archived_at is not None
    assert all(everything[i].archived_at is None for i in kept)


@pytest.mark.parametrize("limit", [0, 101])
def test_list_limit_out_of_range_is_rejected(client: anthropic.Anthropic, limit: int) -> None:
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.environments.list(limit=limit)
    assert_error_envelope(caught.value.response, 400, "invalid_request_error")


# ---------------------------------------------------------------------------------------
# archive and delete


def test_archive_unknown_environment_is_not_found(client: anthropic.Anthropic) -> None:
    with pytest.raises(anthropic.NotFoundError):
        client.beta.environments.archive(UNKNOWN_ENVIRONMENT)


def test_delete(client: anthropic.Anthropic) -> None:
    environment = create_environment(client)
    deleted = client.beta.environments.delete(environment.id)
    assert deleted.id == environment.id
    assert deleted.type == "environment_deleted"

    with pytest.raises(anthropic.NotFoundError) as caught:
        client.beta.environments.retrieve(environment.id)
    assert_error_envelope(caught.value.response, 404, "not_found_error")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.environments.delete(environment.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.environments.update(environment.id, description="gone")
    listed = {e.id for e in collect(client.beta.environments.list(include_archived=True, limit=100))}
    assert environment.id not in listed


def test_delete_archived_environment(client: anthropic.Anthropic) -> None:
    environment = create_environment(client, config={"type": "self_hosted"})
    client.beta.environments.archive(environment.id)
    assert client.beta.environments.delete(environment.id).type == "environment_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.environments.retrieve(environment.id)
