"""Features the wire accepts that this agentd cannot run yet are refused, not ignored.

Workflow runs (`multiagent_20261001.workflows`, issue 22 item 3) are not built: an agent
whose multiagent configuration enables them — and omitting `workflows`, or sending it as
null, enables them by default — is a 400 that names the field and says what to send
instead, and nothing is stored. (Session threads, subagents and the advisor are real:
test_multiagent.py, test_session_threads.py. `user.define_outcome` is graded:
test_outcomes.py.) Each test runs against `agentd dev` and gateway+worker.
"""

from __future__ import annotations

import anthropic
import pytest

from harness import unique


@pytest.mark.parametrize(
    "multiagent",
    [
        {"type": "multiagent_20261001", "subagents": {"type": "enabled"}},
        {"type": "multiagent_20261001", "workflows": None},
        {"type": "multiagent_20261001", "workflows": {"type": "enabled", "inline_agents": {"type": "enabled"}}},
    ],
)
def test_an_agent_with_workflows_is_refused(client: anthropic.Anthropic, model_id: str, multiagent: dict) -> None:
    name = unique("multi")
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.agents.create(name=name, model=model_id, multiagent=multiagent)
    message = refused.value.message
    assert "multiagent.workflows" in message and "not available" in message and '{"type":"disabled"}' in message
    assert not [a for a in client.beta.agents.list(limit=100) if a.name == name], "nothing was stored"
    # Updating an agent to add it is refused the same way; the agent is unchanged.
    agent = client.beta.agents.create(name=name, model=model_id)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.agents.update(agent.id, version=agent.version, multiagent=multiagent)
    after = client.beta.agents.retrieve(agent.id)
    assert (after.version, after.multiagent) == (agent.version, None)
    # With workflows disabled the same configuration is accepted.
    accepted = {**multiagent, "workflows": {"type": "disabled"}}
    assert client.beta.agents.update(agent.id, multiagent=accepted).multiagent is not None
