"""Features the wire accepts that this agentd cannot run yet are refused, not ignored.

An agent with `multiagent` (session threads, subagents, an advisor) used to be accepted
with 200 and then nothing of it happened: no thread was spawned. Until it is real
(issue 22) it is a 400 that names the field and says what to do instead, and nothing is
stored. (`user.define_outcome` is graded now: test_outcomes.py.) Each test runs against
`agentd dev` and gateway+worker.
"""

from __future__ import annotations

import anthropic
import pytest

from harness import unique

@pytest.mark.parametrize(
    "multiagent",
    [
        {"type": "coordinator", "agents": []},
        {"type": "multiagent_20261001", "subagents": {"type": "enabled"}},
    ],
)
def test_an_agent_with_multiagent_is_refused(client: anthropic.Anthropic, model_id: str, multiagent: dict) -> None:
    name = unique("multi")
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.agents.create(name=name, model=model_id, multiagent=multiagent)
    assert "multiagent" in refused.value.message and "not available" in refused.value.message
    assert not [a for a in client.beta.agents.list(limit=100) if a.name == name], "nothing was stored"
    # Updating an agent to add it is refused the same way; the agent is unchanged.
    agent = client.beta.agents.create(name=name, model=model_id)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.agents.update(agent.id, version=agent.version, multiagent=multiagent)
    after = client.beta.agents.retrieve(agent.id)
    assert (after.version, after.multiagent) == (agent.version, None)
