"""Features the wire accepts that this agentd cannot run yet are refused, not ignored.

An agent with `multiagent` (session threads, subagents, an advisor) and a
`user.define_outcome` (rubric grading) used to be accepted with 200 and then nothing of
them happened: no thread was spawned, the outcome ran as a plain message. Until they
are real (issue 22) each is a 400 that names the field and says what to do instead,
and nothing is stored. Each test runs against `agentd dev` and gateway+worker.
"""

from __future__ import annotations

import anthropic
import pytest

from harness import unique

OUTCOME = {
    "type": "user.define_outcome",
    "description": "A haiku about the sea",
    "rubric": {"type": "text", "content": "Three lines, 5-7-5 syllables."},
}


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


def test_a_define_outcome_event_is_refused(client: anthropic.Anthropic, model_id: str) -> None:
    agent = client.beta.agents.create(name=unique("outcome"), model=model_id)
    environment = client.beta.environments.create(name=unique("outcome-env"), config={"type": "cloud"})
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.sessions.create(agent=agent.id, environment_id=environment.id, initial_events=[OUTCOME])
    assert "define_outcome" in refused.value.message
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.sessions.events.send(session.id, events=[OUTCOME])
    assert "user.define_outcome" in refused.value.message and "user.message" in refused.value.message
    assert list(client.beta.sessions.events.list(session.id)) == [], "nothing was committed"
    assert client.beta.sessions.retrieve(session.id).outcome_evaluations == []
