"""Scoped credentials through the official SDK (docs/SECURITY.md): an environment key, a
runner key and a workspace API key each reach exactly their scope, and what is out of
reach answers the SDK's NotFoundError — the same as an id that does not exist. The full
matrix (every route × spelling × credential) runs in Rust: tests/tests/scope_matrix.rs."""

from __future__ import annotations

import anthropic
import pytest

from harness import Deployment, unique
from test_hands import MODEL, make_environment

MISSING_SESSION = "sesn_" + "0" * 26


def _session(client: anthropic.Anthropic, environment_id: str) -> str:
    agent = client.beta.agents.create(name=unique("scope-agent"), model=MODEL)
    return client.beta.sessions.create(agent=agent.id, environment_id=environment_id).id


def test_an_environment_key_reaches_only_its_environment(agentd: Deployment) -> None:
    client = agentd.client()
    env_a, env_b = make_environment(client, "self_hosted"), make_environment(client, "self_hosted")
    own, other = _session(client, env_a), _session(client, env_b)
    scoped = agentd.client(agentd.create_environment_key(env_a))

    assert scoped.beta.sessions.retrieve(own).id == own
    assert scoped.beta.environments.retrieve(env_a).id == env_a
    for session_id in (other, MISSING_SESSION, other.replace("_", "%5F"), other.upper()):
        with pytest.raises(anthropic.NotFoundError):
            scoped.beta.sessions.retrieve(session_id)
        with pytest.raises(anthropic.NotFoundError):
            scoped.beta.sessions.events.list(session_id)
        with pytest.raises(anthropic.NotFoundError):
            scoped.beta.sessions.update(session_id, title="taken")
        with pytest.raises(anthropic.NotFoundError):
            scoped.beta.sessions.delete(session_id)
    with pytest.raises(anthropic.NotFoundError):
        scoped.beta.environments.retrieve(env_b)
    with pytest.raises(anthropic.PermissionDeniedError):
        scoped.beta.agents.list()
    # Nothing out of reach changed.
    assert client.beta.sessions.retrieve(other).title is None


def test_a_runner_key_reaches_only_cloud_environments(agentd: Deployment) -> None:
    workspace = unique("scope-runner")
    client = agentd.client(agentd.create_key(workspace))
    cloud, self_hosted = make_environment(client, "cloud"), make_environment(client, "self_hosted")
    hosted_session = _session(client, self_hosted)
    runner = agentd.client(agentd.create_runner_key(workspace))

    assert runner.beta.environments.retrieve(cloud).id == cloud
    with pytest.raises(anthropic.NotFoundError):
        runner.beta.environments.retrieve(self_hosted)
    with pytest.raises(anthropic.NotFoundError):
        runner.beta.sessions.retrieve(hosted_session)


def test_a_workspace_key_never_reaches_another_workspace(agentd: Deployment) -> None:
    first = agentd.client(agentd.create_key(unique("scope-one")))
    second = agentd.client(agentd.create_key(unique("scope-two")))
    environment = make_environment(first, "self_hosted")
    session = _session(first, environment)
    for spelled in (session, session.replace("_", "%5F")):
        with pytest.raises(anthropic.NotFoundError):
            second.beta.sessions.retrieve(spelled)
    with pytest.raises(anthropic.NotFoundError):
        second.beta.environments.retrieve(environment)
    assert first.beta.sessions.retrieve(session).id == session
