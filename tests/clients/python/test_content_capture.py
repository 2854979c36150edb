"""Content capture (docs/api/user-profiles.md, "Content capture"; ADR 0019), both modes,
official SDK: a session's `content_capture` decision — the lowest of the deployment's
ceiling, the level asked for and the data subject's consent, with its reason — and what
the history keeps once a turn is over (`full`: everything; `structured`: the shape with
every content body replaced by a marker; `off`: types and links only), while the live
stream of the turn still carries the answer.

Consent is given the way an end user gives it: on the consent page that an enrollment
URL opens.
"""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, say
from harness import Deployment, collect, unique
from test_turns import Reader

MARKER = "[content not retained: content capture is structured]"
MODEL = "claude-sonnet-4-6"
MISSING_PROFILE = "uprof_" + "0" * 26


def setup(client: anthropic.Anthropic, model_id: str) -> tuple[str, str]:
    agent = client.beta.agents.create(name=unique("captured"), model=model_id)
    environment = client.beta.environments.create(name=unique("capture-env"), config={"type": "cloud"})
    return agent.id, environment.id


def consent(client: anthropic.Anthropic, profile_id: str, purpose: str, choice: str) -> None:
    """Opens the profile's enrollment URL as the end user would and answers one purpose."""
    link = client.beta.user_profiles.create_enrollment_url(profile_id)
    with httpx.Client(trust_env=False, timeout=30) as browser:
        page = browser.get(link.url)
        assert page.status_code == 200 and purpose in page.text, page.text[:500]
        answered = browser.post(link.url, data={"purpose": purpose, "choice": choice})
        assert answered.status_code == 200, answered.text[:500]


def create_session(client: anthropic.Anthropic, agent: str, environment: str, **extra: Any) -> Any:
    return client.beta.sessions.create(agent=agent, environment_id=environment, extra_body=extra or None)


def run_turn(agentd: Deployment, client: anthropic.Anthropic, session_id: str, text: str) -> list[dict[str, Any]]:
    """Sends `text` and reads the live stream until the turn's idle: what the caller saw."""
    reader = Reader(agentd, session_id)
    try:
        client.beta.sessions.events.send(
            session_id, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}]
        )
        reader.wait_idle()
        return [e.model_dump() for e in reader.committed()]
    finally:
        reader.close()


def history(client: anthropic.Anthropic, session_id: str) -> list[dict[str, Any]]:
    return [e.model_dump() for e in collect(client.beta.sessions.events.list(session_id))]


def texts(events: list[dict[str, Any]], kind: str) -> list[str]:
    return [b.get("text") for e in events if e["type"] == kind for b in e.get("content") or []]


def test_the_decision_is_the_lowest_bound_with_its_reason(client: anthropic.Anthropic, model_id: str) -> None:
    agent, environment = setup(client, model_id)
    plain = create_session(client, agent, environment)
    assert plain.model_dump()["content_capture"] == {
        "requested": "full", "ceiling": "full", "consent": None, "effective": "full", "reason": "ok"
    }, "a session without a data subject keeps what its operator asks for"
    asked = create_session(client, agent, environment, content_capture="structured")
    assert asked.model_dump()["content_capture"]["effective"] == "structured"
    assert asked.model_dump()["content_capture"]["reason"] == "ok"

    profile = client.beta.user_profiles.create(name=unique("subject"))
    subject = create_session(client, agent, environment, user_profile_id=profile.id)
    decision = subject.model_dump()["content_capture"]
    assert decision == {
        "requested": "full", "ceiling": "full", "consent": "structured", "effective": "structured", "reason": "no_consent"
    }, decision
    assert subject.model_dump()["user_profile_id"] == profile.id
    assert client.beta.sessions.retrieve(subject.id).model_dump()["content_capture"] == decision

    # Granting consent lets later sessions keep everything; it does not force full on a
    # caller who asks for less.
    consent(client, profile.id, "conversation_content", "grant")
    granted = create_session(client, agent, environment, user_profile_id=profile.id)
    assert granted.model_dump()["content_capture"]["effective"] == "full"
    assert granted.model_dump()["content_capture"]["consent"] == "full"
    modest = create_session(client, agent, environment, user_profile_id=profile.id, content_capture="structured")
    assert modest.model_dump()["content_capture"]["effective"] == "structured"
    assert modest.model_dump()["content_capture"]["reason"] == "ok"
    assert client.beta.sessions.retrieve(subject.id).model_dump()["content_capture"] == decision, (
        "a session keeps the decision made when it was created"
    )

    # Withdrawing the activity record turns capture off.
    consent(client, profile.id, "activity_record", "withdraw")
    off = create_session(client, agent, environment, user_profile_id=profile.id)
    assert off.model_dump()["content_capture"]["effective"] == "off"
    assert off.model_dump()["content_capture"]["reason"] == "no_consent"


def test_refusals_name_the_field(client: anthropic.Anthropic, model_id: str) -> None:
    agent, environment = setup(client, model_id)
    for extra, fragment in [
        ({"content_capture": "everything"}, "content_capture"),
        ({"content_capture": 3}, "content_capture"),
        ({"user_profile_id": "nope"}, "user_profile_id"),
        ({"user_profile_id": MISSING_PROFILE}, "user_profile_id"),
    ]:
        with pytest.raises(anthropic.BadRequestError) as refused:
            create_session(client, agent, environment, **extra)
        assert fragment in refused.value.message, (extra, refused.value.message)
    deleted = client.beta.user_profiles.create(name=unique("gone"))
    client.beta.user_profiles.delete(deleted.id)
    with pytest.raises(anthropic.BadRequestError):
        create_session(client, agent, environment, user_profile_id=deleted.id)


@pytest.mark.parametrize("level", ["structured", "off"])
def test_a_settled_turn_keeps_what_its_level_keeps(turns: Deployment, fake_anthropic: FakeAnthropic, level: str) -> None:
    client = turns.client()
    agent, environment = setup(client, MODEL)
    session = create_session(client, agent, environment, content_capture=level)
    canary = unique("CANARY")
    fake_anthropic.script(canary, say(f"Noted {canary}."))
    seen = run_turn(turns, client, session.id, f"remember {canary}")
    assert any(canary in t for t in texts(seen, "agent.message")), ("the live stream carries the answer", [(e["type"], e.get("error")) for e in seen])

    kept = history(client, session.id)
    assert canary not in str(kept), kept
    assert [e["type"] for e in kept if e["type"] in ("user.message", "agent.message", "session.status_idle")] == [
        "user.message", "agent.message", "session.status_idle"
    ], "every event is still there"
    if level == "structured":
        assert texts(kept, "user.message") == [MARKER] and texts(kept, "agent.message") == [MARKER]
    else:
        assert texts(kept, "user.message") == [] and texts(kept, "agent.message") == []

    # The next turn does not see the first one's content; it too is rewritten once over.
    second = unique("CANARY")
    fake_anthropic.script(second, say(f"Noted {second}."))
    run_turn(turns, client, session.id, f"and {second}")
    request = fake_anthropic.received(second)[-1]
    assert canary not in str(request.body["messages"]), "the model was not given what the store did not keep"
    assert second not in str(history(client, session.id))


def test_a_full_session_keeps_everything(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    agent, environment = setup(client, MODEL)
    profile = client.beta.user_profiles.create(name=unique("consenting"))
    consent(client, profile.id, "conversation_content", "grant")
    session = create_session(client, agent, environment, user_profile_id=profile.id)
    canary = unique("CANARY")
    fake_anthropic.script(canary, say(f"Noted {canary}."))
    run_turn(turns, client, session.id, f"remember {canary}")
    kept = history(client, session.id)
    assert any(canary in t for t in texts(kept, "user.message")) and any(canary in t for t in texts(kept, "agent.message"))


def test_a_deployments_ceiling_and_data_subject_reach_its_sessions(client: anthropic.Anthropic, model_id: str) -> None:
    agent, environment = setup(client, model_id)
    profile = client.beta.user_profiles.create(name=unique("deployed-subject"))
    consent(client, profile.id, "conversation_content", "grant")
    created = client.beta.deployments.create(
        name=unique("captured"),
        agent=agent,
        environment_id=environment,
        initial_events=[{"type": "user.message", "content": [{"type": "text", "text": "hello"}]}],
        extra_body={"user_profile_id": profile.id, "content_capture_ceiling": "structured"},
    )
    assert created.model_dump()["content_capture_ceiling"] == "structured"
    assert created.model_dump()["user_profile_id"] == profile.id
    run = client.beta.deployments.run(created.id)
    assert run.session_id is not None, run
    session = client.beta.sessions.retrieve(run.session_id)
    assert session.model_dump()["user_profile_id"] == profile.id
    assert session.model_dump()["content_capture"] == {
        "requested": "full", "ceiling": "structured", "consent": "full", "effective": "structured",
        "reason": "clamped_by_ceiling",
    }

    # Cleared: the ceiling goes back to full; no data subject.
    updated = client.beta.deployments.update(
        created.id, extra_body={"content_capture_ceiling": None, "user_profile_id": None}
    )
    assert updated.model_dump()["content_capture_ceiling"] == "full" and updated.model_dump()["user_profile_id"] is None
    session = client.beta.sessions.retrieve(client.beta.deployments.run(created.id).session_id)
    assert session.model_dump()["content_capture"]["effective"] == "full"

    for extra, fragment in [
        ({"content_capture_ceiling": "most"}, "content_capture_ceiling"),
        ({"user_profile_id": MISSING_PROFILE}, "user_profile_id"),
    ]:
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.beta.deployments.update(created.id, extra_body=extra)
        assert fragment in refused.value.message, refused.value.message
