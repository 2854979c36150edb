"""Reliability: turns that survive faults and stay within budget (issue 5).

Real processes on real backends, driven by the official SDK (raw httpx where the SDK's
event union has no member, e.g. ``session.budget_reached``), with the model played by
the scriptable fake of fake_models.py. Every test is bounded in time and asserts, on
the committed history, that no event id appears twice and that every accepted turn ends
with exactly one final ``session.status_idle``, plus its specific outcome:

* budgets (dev and prod): exact list cost, one ``session.budget_reached``, the 400 on
  the next ``user.message``, the update rules;
* retry exhaustion: a run whose worker dies on every attempt ends ``retries_exhausted``;
* a stale worker (SIGSTOP past its lease, SIGCONT after another finished the turn) is
  fenced out: nothing it produced after resuming is committed;
* drain: a SIGTERMed worker hands its in-flight run back without spending retry budget
  and exits 0 before its deadline;
* repeated SIGKILL mid-stream with three workers: every turn completes once;
* repeated crashes mid-commit (before and after COMMIT, of commits and settlements)
  with three workers: every turn completes once;
* Redis down: admission and readiness answer 503, a running turn still commits to
  PostgreSQL, and everything is back once Redis is;
* PostgreSQL down: input answers 503 and is not committed (nothing is acknowledged that
  was not written), readiness answers 503, and everything is back once PostgreSQL is;
* NATS restarted mid-run: the running turn completes exactly once and the next turn's
  submission recovers.

The prod-only tests start their own deployments with short leases and ack waits
(``launch``), so they do not wait out the 30 s defaults.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any, Callable

import anthropic
import httpx
import pytest

from fake_models import FakeAnthropic, Reply, Usage, say, slow, text, tool_use
from harness import (
    Deployment,
    PrivateNats,
    PrivatePostgres,
    PrivateRedis,
    Process,
    assert_error_envelope,
    list_all,
    psql,
    unique,
)

# Priced in the built-in catalog: $3 / $15 per million input / output tokens, cache
# read $0.30, cache write $3.75 (list cost is shown in whole cents, rounded down).
PRICED_MODEL = "claude-sonnet-4-5"
PRICE_MICRO_USD_PER_MTOK = {"input": 3_000_000, "output": 15_000_000, "cache_read": 300_000, "cache_write": 3_750_000}
TURN_TIMEOUT = 30.0


# ---------------------------------------------------------------------------------------
# Helpers


def cost_units(usage: Usage) -> int:
    """Exact cost in 10⁻¹² USD (tokens × micro-USD per million tokens)."""
    p = PRICE_MICRO_USD_PER_MTOK
    return (
        usage.input_tokens * p["input"]
        + usage.output_tokens * p["output"]
        + usage.cache_read_input_tokens * p["cache_read"]
        + usage.cache_creation_input_tokens * p["cache_write"]
    )


def cents(units: int) -> str:
    return str(units // 10_000_000_000)


def user_message(value: str) -> dict[str, Any]:
    return {"type": "user.message", "content": [{"type": "text", "text": value}]}


def make_session(client: anthropic.Anthropic, *, model: str = PRICED_MODEL, **fields: Any) -> Any:
    agent = client.beta.agents.create(name=unique("rel-agent"), model=model)
    environment = client.beta.environments.create(name=unique("rel-env"), config={"type": "cloud"})
    return client.beta.sessions.create(agent=agent.id, environment_id=environment.id, **fields)


def events_of(deployment: Deployment, session_id: str) -> list[dict[str, Any]]:
    """Committed history as raw JSON (the SDK's union lacks some of these event types)."""
    http = getattr(deployment, "_reliability_http", None)
    if http is None:
        http = deployment.http()  # recorded for the secret audit, closed with the deployment
        deployment._reliability_http = http  # type: ignore[attr-defined]
    return list_all(http, f"/v1/sessions/{session_id}/events", deployment.headers(), limit=1000)


def types_of(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def of_type(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type_]


def idles(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return of_type(events, "session.status_idle")


def stop_reasons(events: list[dict[str, Any]]) -> list[str]:
    return [e["stop_reason"]["type"] for e in idles(events)]


def message_texts(events: list[dict[str, Any]]) -> list[str]:
    return [
        "".join(b.get("text", "") for b in e["content"] if b.get("type") == "text")
        for e in of_type(events, "agent.message")
    ]


def wait_events(
    deployment: Deployment,
    session_id: str,
    predicate: Callable[[list[dict[str, Any]]], bool],
    timeout: float = TURN_TIMEOUT,
    what: str = "condition",
) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        events = events_of(deployment, session_id)
        if predicate(events):
            return events
        if time.monotonic() > deadline:
            pytest.fail(f"{what} not reached within {timeout:.0f} s; history: {types_of(events)}")
        time.sleep(0.1)


def wait_idles(deployment: Deployment, session_id: str, count: int = 1, timeout: float = TURN_TIMEOUT) -> list[dict[str, Any]]:
    return wait_events(
        deployment, session_id, lambda evs: len(idles(evs)) >= count, timeout, f"{count} session.status_idle event(s)"
    )


def assert_turns_well_formed(events: list[dict[str, Any]], turns: int, where: str = "history") -> None:
    """No duplicate ids; each of `turns` accepted user.messages ends with exactly one idle,
    after which nothing but session updates is committed until the next user.message."""
    ids = [e["id"] for e in events]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    assert not duplicates, f"{where}: duplicate event ids {duplicates}: {types_of(events)}"
    kinds = types_of(events)
    assert kinds.count("user.message") == turns, f"{where}: expected {turns} user.message: {kinds}"
    assert len(idles(events)) == turns, f"{where}: expected {turns} session.status_idle: {kinds}"
    # Exactly one idle between consecutive user messages, and one after the last.
    starts = [i for i, k in enumerate(kinds) if k == "user.message"] + [len(kinds)]
    for a, b in zip(starts, starts[1:]):
        segment = kinds[a:b]
        assert segment.count("session.status_idle") == 1, f"{where}: turn at {a} has {segment.count('session.status_idle')} idles: {kinds}"
        after = segment[segment.index("session.status_idle") + 1 :]
        # Between turns only session updates (not part of any turn) may be committed.
        assert set(after) <= {"session.updated"}, f"{where}: turn at {a} does not end with its idle: {kinds}"


def settle(seconds: float) -> None:
    """Lets anything that would (wrongly) still happen happen."""
    time.sleep(seconds)


def wait_streaming(fake: FakeAnthropic, key: str, index: int = 0, events: int = 4, timeout: float = TURN_TIMEOUT) -> Any:
    """Request number `index` (0-based) of `key`, once its reply has sent `events` events."""
    request = fake.wait_requests(key, index + 1, timeout)[index]
    fake.wait_for(lambda: request.events_sent >= events, timeout, f"request {index + 1} of {key} streaming")
    return request


def socket_owner(port: int, pids: list[int]) -> int | None:
    """Which of `pids` owns the local TCP socket bound to 127.0.0.1:`port` (Linux /proc)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    local_port = int(fields[1].rsplit(":", 1)[1], 16)
                    if local_port == port:
                        inodes.add(fields[9])
        except OSError:
            continue
    wanted = {f"socket:[{inode}]" for inode in inodes if inode != "0"}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in wanted:
                        return pid
                except OSError:
                    continue
        except OSError:
            continue
    return None


def kill9(process: Process) -> None:
    os.kill(process.pid, signal.SIGKILL)
    process.proc.wait(timeout=10)


def metric(process: Process, name: str) -> float:
    """Sum of a counter over its label sets, from a worker's ops /metrics."""
    assert process.ops_url, f"{process.name} announced no ops listener"
    response = httpx.get(f"{process.ops_url}/metrics", timeout=5.0, trust_env=False)
    assert response.status_code == 200, response.text[:300]
    total = 0.0
    for line in response.text.splitlines():
        if line.startswith(name) and (line[len(name)] in " {"):
            total += float(line.rsplit(" ", 1)[1])
    return total


def require_nothing_more(fake: FakeAnthropic, key: str, count: int, what: str) -> None:
    got = fake.received(key)
    assert len(got) == count, f"{what}: the model was asked {len(got)} time(s), expected {count}"


# ---------------------------------------------------------------------------------------
# 1. Session budgets (dev and prod)


def test_budget_reached_stops_the_turn_and_blocks_new_input(
    turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    client = turns.client()
    key = unique("budget")
    first = Usage(input_tokens=20_000, output_tokens=1_000, cache_read_input_tokens=10_000, cache_creation_input_tokens=4_000)
    second = Usage(input_tokens=20_000, output_tokens=500)
    after_raise = Usage(input_tokens=1_000, output_tokens=100)
    first_units, second_units = cost_units(first), cost_units(second)
    # 9.3 ¢ after the first request (below a 15 ¢ ceiling), 16.05 ¢ after the second.
    assert (cents(first_units), cents(first_units + second_units)) == ("9", "16")
    ceiling = "15"
    fake_anthropic.script(
        key,
        # Both requests call a tool the agent does not have: the loop answers with an
        # error result and wants to call the model again, every time.
        Reply(blocks=[tool_use("lookup", {"q": 1})], stop_reason="tool_use", usage=first),
        Reply(blocks=[tool_use("lookup", {"q": 2})], stop_reason="tool_use", usage=second),
        Reply(blocks=[text("never asked while the budget is reached")]),
    )
    budget = {"type": "limit", "max_list_cost": {"amount": ceiling, "currency": "USD"}}
    session = make_session(client, budget=budget)
    assert session.budget is not None and session.budget.max_list_cost.amount == ceiling

    client.beta.sessions.events.send(session.id, events=[user_message(f"spend {key}")])
    events = wait_idles(turns, session.id)
    settle(1.0)
    events = events_of(turns, session.id)
    assert_turns_well_formed(events, 1)
    require_nothing_more(fake_anthropic, key, 2, "after the budget was reached")

    kinds = types_of(events)
    assert kinds == [
        "user.message",
        "session.status_running",
        "span.model_request_start",
        "agent.tool_use",
        "agent.tool_result",
        "span.model_request_end",
        "session.usage",
        "span.model_request_start",
        "agent.tool_use",
        "agent.tool_result",
        "span.model_request_end",
        "session.usage",
        "session.budget_reached",
        "session.usage",
        "session.status_idle",
    ], kinds
    assert kinds.count("session.budget_reached") == 1
    assert stop_reasons(events) == ["budget_reached"]

    usages = of_type(events, "session.usage")
    assert [u["usage"]["list_cost"] for u in usages] == [
        {"amount": "9", "currency": "USD"},
        {"amount": "16", "currency": "USD"},
        {"amount": "16", "currency": "USD"},
    ]
    assert all(u["budget"] == budget for u in usages), usages
    assert usages[0]["usage"]["input_tokens"] == 20_000 and usages[0]["usage"]["output_tokens"] == 1_000
    assert usages[1]["usage"]["input_tokens"] == 40_000 and usages[1]["usage"]["output_tokens"] == 1_500
    assert usages[1]["usage"]["cache_read_input_tokens"] == 10_000
    (reached,) = of_type(events, "session.budget_reached")
    assert reached["budget"] == budget, reached
    assert reached["usage"]["list_cost"] == {"amount": "16", "currency": "USD"}, reached
    ends = of_type(events, "span.model_request_end")
    assert [e["model_usage"]["input_tokens"] for e in ends] == [20_000, 20_000]

    retrieved = client.beta.sessions.retrieve(session.id)
    assert retrieved.status == "idle"
    assert retrieved.usage.list_cost is not None
    assert (retrieved.usage.list_cost.amount, retrieved.usage.list_cost.currency) == ("16", "USD")
    assert retrieved.usage.input_tokens == 40_000 and retrieved.usage.output_tokens == 1_500
    assert retrieved.usage.cache_read_input_tokens == 10_000
    assert retrieved.usage.cache_creation is not None
    assert retrieved.usage.cache_creation.ephemeral_5m_input_tokens == 4_000

    # No new turn while the budget is reached.
    with pytest.raises(anthropic.BadRequestError) as caught:
        client.beta.sessions.events.send(session.id, events=[user_message(f"more {key}")])
    body = caught.value.response.json()
    assert_error_envelope(caught.value.response, 400, "invalid_request_error")
    assert body["error"].get("details", {}).get("error_code") == "budget_reached", body
    assert "budget" in body["error"]["message"], body
    settle(0.5)
    assert types_of(events_of(turns, session.id)) == kinds, "a rejected message must not be committed"
    require_nothing_more(fake_anthropic, key, 2, "after the rejected message")

    # Update rules. Collected, so one broken rule does not hide the others.
    problems: list[str] = []

    def update(session_id: str, **fields: Any) -> anthropic.BadRequestError | Any:
        try:
            return client.beta.sessions.update(session_id, **fields)
        except anthropic.BadRequestError as err:
            return err

    def expect_rejected(outcome: Any, code: str, what: str) -> None:
        if not isinstance(outcome, anthropic.BadRequestError):
            problems.append(f"{what}: accepted (budget now {getattr(outcome, 'budget', None)}), expected 400 {code}")
            return
        got = outcome.response.json()["error"].get("details", {}).get("error_code")
        if got != code:
            problems.append(f"{what}: 400 with error_code {got!r}, expected {code!r}")

    expect_rejected(
        update(session.id, budget={"type": "limit", "max_list_cost": {"amount": "10", "currency": "USD"}}),
        "budget_not_raised",
        "lowering max_list_cost to 10 (below the 16 consumed)",
    )
    expect_rejected(
        update(session.id, budget={"type": "limit", "max_list_cost": {"amount": "16", "currency": "USD"}}),
        "budget_not_raised",
        "lowering max_list_cost to 16 (the 16 consumed)",
    )
    # Raising re-admits turns; the new turn reports its spend against the new budget.
    raised = {"type": "limit", "max_list_cost": {"amount": "1000", "currency": "USD"}}
    outcome = update(session.id, budget=raised)
    assert not isinstance(outcome, anthropic.BadRequestError), f"raising the budget was rejected: {outcome}"
    assert outcome.budget is not None and outcome.budget.max_list_cost.amount == "1000"
    again = unique("raised")
    fake_anthropic.script(again, Reply(blocks=[text("within the raised budget")], usage=after_raise))
    client.beta.sessions.events.send(session.id, events=[user_message(f"continue {again}")])
    events = wait_idles(turns, session.id, count=2)
    assert_turns_well_formed(events, 2)
    assert stop_reasons(events) == ["budget_reached", "end_turn"]
    assert types_of(events).count("session.budget_reached") == 1
    spent = first_units + second_units + cost_units(after_raise)
    last_usage = of_type(events, "session.usage")[-1]
    assert last_usage["usage"]["list_cost"] == {"amount": cents(spent), "currency": "USD"}
    assert last_usage["budget"] == raised
    # Removing is allowed; a removed budget cannot come back.
    outcome = update(session.id, budget=None)
    if isinstance(outcome, anthropic.BadRequestError):
        problems.append(f"removing the budget was rejected: {outcome.response.text[:300]}")
    elif outcome.budget is not None:
        problems.append(f"removing the budget left {outcome.budget}")
    expect_rejected(update(session.id, budget=raised), "budget_create_only", "re-adding a removed budget")

    # A session created without a budget cannot get one.
    plain = make_session(client)
    assert plain.budget is None
    expect_rejected(update(plain.id, budget=budget), "budget_create_only", "adding a budget to an unbudgeted session")
    assert client.beta.sessions.retrieve(plain.id).budget is None
    assert not problems, "\n".join(problems)


def test_turn_within_budget_ends_normally_with_usage(turns: Deployment, fake_anthropic: FakeAnthropic) -> None:
    client = turns.client()
    key = unique("within")
    usage = Usage(input_tokens=50_000, output_tokens=2_000, cache_read_input_tokens=100_000, cache_creation_input_tokens=10_000)
    units = cost_units(usage)
    assert cents(units) == "24"  # 15 + 3 + 3 + 3.75 = 24.75 ¢, shown rounded down
    fake_anthropic.script(key, Reply(blocks=[text("cheap enough")], usage=usage))
    budget = {"type": "limit", "max_list_cost": {"amount": "1000", "currency": "USD"}}
    session = make_session(client, budget=budget)
    client.beta.sessions.events.send(session.id, events=[user_message(f"hello {key}")])
    events = wait_idles(turns, session.id)
    settle(0.5)
    events = events_of(turns, session.id)
    assert_turns_well_formed(events, 1)
    assert types_of(events) == [
        "user.message",
        "session.status_running",
        "span.model_request_start",
        "agent.message",
        "span.model_request_end",
        "session.usage",
        "session.status_idle",
    ], types_of(events)
    assert stop_reasons(events) == ["end_turn"]
    (snapshot,) = of_type(events, "session.usage")
    assert snapshot["usage"]["list_cost"] == {"amount": "24", "currency": "USD"}, snapshot
    assert snapshot["budget"] == budget
    assert snapshot["usage"]["input_tokens"] == 50_000 and snapshot["usage"]["output_tokens"] == 2_000
    assert snapshot["usage"]["cache_read_input_tokens"] == 100_000
    assert snapshot["usage"]["cache_creation"]["ephemeral_5m_input_tokens"] == 10_000
    retrieved = client.beta.sessions.retrieve(session.id)
    assert retrieved.usage.list_cost is not None and retrieved.usage.list_cost.amount == "24"
    # Still admits input.
    client.beta.sessions.events.send(session.id, events=[user_message("one more")])
    events = wait_idles(turns, session.id, count=2)
    assert_turns_well_formed(events, 2)
    assert stop_reasons(events) == ["end_turn", "end_turn"]


def test_a_subagents_tokens_count_in_the_budget_at_its_own_models_price(
    turns: Deployment, fake_anthropic: FakeAnthropic
) -> None:
    """ADR 0022 §7: every thread's usage is the session's, each priced at its model's list
    price from the session's price snapshot — not at the primary's."""
    client = turns.client()
    helper = client.beta.agents.create(name=unique("rel-opus"), model="claude-opus-4-6")  # $5 / MTok in
    boss = client.beta.agents.create(
        name=unique("rel-boss"), model=PRICED_MODEL, multiagent={"type": "coordinator", "agents": [helper.id]}
    )
    environment = client.beta.environments.create(name=unique("rel-env"), config={"type": "cloud"})
    budget = {"type": "limit", "max_list_cost": {"amount": "100000", "currency": "USD"}}
    session = client.beta.sessions.create(agent=boss.id, environment_id=environment.id, budget=budget)
    key, job = unique("rel-boss"), unique("rel-job")
    spent = Usage(input_tokens=100_000, output_tokens=0)
    fake_anthropic.script(
        key,
        Reply(blocks=[tool_use("spawn_thread", {"agent": helper.name, "message": job})], stop_reason="tool_use", usage=spent),
        Reply(blocks=[text("done")], usage=spent),
    )
    fake_anthropic.script(job, Reply(blocks=[text("expensive answer")], usage=Usage(input_tokens=1_000_000, output_tokens=0)))
    client.beta.sessions.events.send(session.id, events=[user_message(key)])
    wait_idles(turns, session.id)
    (request,) = fake_anthropic.received(job)
    assert request.body["model"] == "claude-opus-4-6"
    # 2 × 100k at $3 + 1M at $5 = $5.60 (at the primary's price it would be $3.60).
    usage = client.beta.sessions.retrieve(session.id).usage
    assert usage.input_tokens == 1_200_000
    assert usage.list_cost is not None and usage.list_cost.amount == "560", usage
    assert "_models" not in client.beta.sessions.retrieve(session.id).model_dump_json(), "private usage stays private"


# ---------------------------------------------------------------------------------------
# 2.–6. Distributed mode: faults on real processes


def fast_env(provider_env: dict[str, str], **settings: str) -> dict[str, str]:
    env = dict(provider_env)
    env.setdefault("AGENTD_LEASE", "1s")
    env.setdefault("AGENTD_QUEUE_ACK_WAIT", "1s")
    # Teardown SIGTERMs every role: a worker stuck with a run must not hold it for 30 s.
    env.setdefault("AGENTD_DRAIN_TIMEOUT", "3s")
    env.update(settings)
    return env


def test_retry_exhaustion_after_max_attempts(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """Every attempt's worker is SIGKILLed while the model streams: with
    AGENTD_MAX_ATTEMPTS=2 the turn ends retries_exhausted, once."""
    max_attempts = 2
    deployment = launch(
        "prod",
        worker=False,
        extra_env=fast_env(provider_env, AGENTD_MAX_ATTEMPTS=str(max_attempts), AGENTD_LEASE="1s", AGENTD_QUEUE_ACK_WAIT="1s"),
    )
    client = deployment.client()
    key = unique("exhaust")
    never = slow("this reply never ends " * 4, chunks=200, delay=0.5)
    fake_anthropic.script(key, *[never] * 6)
    session = make_session(client)
    worker = deployment.start_worker()
    client.beta.sessions.events.send(session.id, events=[user_message(f"doomed {key}")])

    deadline = time.monotonic() + 60
    kills = 0
    exhausted: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        if len(fake_anthropic.received(key)) > kills:
            wait_streaming(fake_anthropic, key, index=kills, events=3)
            kill9(worker)
            kills += 1
            worker = deployment.start_worker()
            continue
        events = events_of(deployment, session.id)
        if "retries_exhausted" in stop_reasons(events):
            exhausted = events
            break
        time.sleep(0.1)
    assert exhausted, f"no retries_exhausted within 60 s after {kills} kill(s); history: {types_of(events_of(deployment, session.id))}"
    settle(3.0)  # two lease + ack-wait periods: any further attempt would show now
    events = events_of(deployment, session.id)
    assert_turns_well_formed(events, 1)
    assert events[-1]["type"] == "session.status_idle" and events[-1]["stop_reason"]["type"] == "retries_exhausted"
    errors = of_type(events, "session.error")
    assert len(errors) == 1, f"expected one session.error: {errors}"
    assert errors[0]["error"]["type"] == "unknown_error", errors
    assert errors[0]["error"]["retry_status"] == {"type": "exhausted"}, errors
    assert types_of(events)[-2:] == ["session.error", "session.status_idle"], types_of(events)
    # The first claim plus each recovery below the budget reached the model: one request
    # per attempt, max_attempts in all; the claim that found the budget spent asked nothing.
    require_nothing_more(fake_anthropic, key, max_attempts, "after the retry budget was spent")
    assert kills == max_attempts
    assert worker.alive(), worker.output_tail()
    assert client.beta.sessions.retrieve(session.id).status == "idle"
    at_exhaustion = events

    # The settled run does not hold the thread: the next turn runs normally.
    follow = unique("after")
    fake_anthropic.script(follow, say("back in business"))
    client.beta.sessions.events.send(session.id, events=[user_message(f"again {follow}")])
    events = wait_idles(deployment, session.id, count=2)
    assert_turns_well_formed(events, 2)
    assert stop_reasons(events) == ["retries_exhausted", "end_turn"]
    assert message_texts(events) == ["back in business"]

    # Complete history: the killed attempt's model request span is closed when the turn
    # ends (the in-run recovery path does this; the exhaustion settlement must too).
    starts = {e["id"] for e in of_type(at_exhaustion, "span.model_request_start")}
    closed = {e["model_request_start_id"] for e in of_type(at_exhaustion, "span.model_request_end")}
    assert starts == closed, (
        f"the turn ended retries_exhausted with span.model_request_start {sorted(starts - closed)} never closed: "
        f"{types_of(at_exhaustion)}"
    )


def test_subagent_sigkill_mid_turn_recovers_without_duplicates(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """ADR 0022 §10: the worker running a subagent's turn is SIGKILLed while the child's model
    streams. Another worker reclaims the child's run and repeats the request; the parked
    parent is untouched. One thread, one spawn, one reply pair, one result per call."""
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env))
    client = deployment.client()
    helper = client.beta.agents.create(name=unique("rel-helper"), model=PRICED_MODEL)
    boss = client.beta.agents.create(
        name=unique("rel-boss"), model=PRICED_MODEL, multiagent={"type": "coordinator", "agents": [helper.id]}
    )
    environment = client.beta.environments.create(name=unique("rel-env"), config={"type": "cloud"})
    session = client.beta.sessions.create(agent=boss.id, environment_id=environment.id)
    key, job = unique("rel-boss"), unique("rel-job")
    spawn = Reply(blocks=[tool_use("spawn_thread", {"agent": helper.name, "message": job})], stop_reason="tool_use")
    fake_anthropic.script(key, spawn, say(f"all done {key}"))
    fake_anthropic.script(job, slow("this reply never ends " * 4, chunks=200, delay=0.5), say("the child's answer"))
    worker = deployment.start_worker()
    client.beta.sessions.events.send(session.id, events=[user_message(key)])

    wait_streaming(fake_anthropic, job, index=0, events=3)
    kill9(worker)
    replacement = deployment.start_worker()
    events = wait_idles(deployment, session.id, timeout=60)
    settle(3.0)  # two lease + ack-wait periods: any repeated commit would show now
    events = events_of(deployment, session.id)

    assert client.beta.sessions.retrieve(session.id).status == "idle"
    threads = [t for t in client.beta.sessions.threads.list(session.id) if t.parent_thread_id]
    assert len(threads) == 1, threads
    (child,) = threads
    assert [e["session_thread_id"] for e in of_type(events, "session.thread_created")] == [child.id]
    assert len(of_type(events, "agent.thread_message_sent")) == 1
    (received,) = of_type(events, "agent.thread_message_received")
    assert received["from_session_thread_id"] == child.id
    assert "the child's answer" in str(received["content"])
    (use,) = [e for e in of_type(events, "agent.tool_use") if e["name"] == "spawn_thread"]
    results = [e for e in of_type(events, "agent.tool_result") if e["tool_use_id"] == use["id"]]
    assert len(results) == 1 and not results[0].get("is_error"), results
    assert message_texts(events)[-1] == f"all done {key}"
    assert len({e["id"] for e in events}) == len(events), "no event is committed twice"

    own = list_all(deployment.http(), f"/v1/sessions/{session.id}/threads/{child.id}/events", deployment.headers(), limit=1000)
    assert [e["type"] for e in own].count("agent.thread_message_sent") == 1
    assert message_texts(own) == ["the child's answer"], "the killed attempt's partial text never committed"
    starts = {e["id"] for e in of_type(own, "span.model_request_start")}
    closed = {e["model_request_start_id"] for e in of_type(own, "span.model_request_end")}
    assert starts == closed, f"the killed attempt's span was never closed: {[e['type'] for e in own]}"
    assert len(fake_anthropic.received(job)) == 2, "the child's request was repeated once, by the reclaiming worker"
    assert replacement.alive(), replacement.output_tail()


def test_stale_worker_is_fenced_out(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """Worker A is paused (SIGSTOP) mid-stream past its lease; B finishes the turn; A is
    resumed (SIGCONT) with A's whole reply waiting in its socket: nothing A produced is
    committed."""
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env, AGENTD_LEASE="1s", AGENTD_QUEUE_ACK_WAIT="1s"))
    client = deployment.client()
    key = unique("stale")
    marker = "STALEMARK" + unique("x").split("-")[1]
    fake_anthropic.script(
        key,
        Reply(blocks=[text(f"{marker} from the paused worker", chunks=8, delay=0.3)]),
        say("fresh answer from the second worker"),
    )
    session = make_session(client)
    stale = deployment.start_worker()
    client.beta.sessions.events.send(session.id, events=[user_message(f"question {key}")])
    first = wait_streaming(fake_anthropic, key, events=4)
    os.kill(stale.pid, signal.SIGSTOP)
    try:
        paused_at = len(events_of(deployment, session.id))
        fresh = deployment.start_worker()
        events = wait_events(
            deployment,
            session.id,
            lambda evs: len(evs) > paused_at and evs[-1]["type"] == "session.status_idle",
            timeout=30,
            what="the second worker finishing the turn",
        )
        # A's reply is complete in its socket buffer before it resumes.
        fake_anthropic.wait_for(first.done.is_set, 15, "the paused worker's reply being fully sent")
        assert first.finished, "the fake could not send the whole reply to the paused worker"
        before_resume = [e["id"] for e in events]
    finally:
        os.kill(stale.pid, signal.SIGCONT)
    fake_anthropic.wait_for(lambda: metric(stale, "agentd_fencing_rejections_total") >= 1, 10, "the resumed worker being fenced")
    settle(2.0)
    events = events_of(deployment, session.id)
    assert [e["id"] for e in events] == before_resume, (
        f"the resumed stale worker changed the history: {types_of(events)}"
    )
    assert_turns_well_formed(events, 1)
    assert stop_reasons(events) == ["end_turn"]
    assert not any(marker in t for t in message_texts(events)), message_texts(events)
    assert all(marker not in str(e) for e in events), "the stale worker's output reached history"
    assert message_texts(events) == ["fresh answer from the second worker"]
    starts = {e["id"] for e in of_type(events, "span.model_request_start")}
    closed = {e["model_request_start_id"] for e in of_type(events, "span.model_request_end")}
    assert starts == closed, f"unclosed model request spans: {sorted(starts - closed)}"
    require_nothing_more(fake_anthropic, key, 2, "after the stale worker resumed")
    assert stale.alive() and fresh.alive()


def test_drain_relinquishes_without_spending_retry_budget(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """SIGTERM on a worker streaming a slow reply: it exits 0 before its 4 s deadline,
    the run is handed back and finished by another worker. With AGENTD_MAX_ATTEMPTS=1 a
    spent retry budget would end the turn retries_exhausted instead."""
    deployment = launch(
        "prod",
        worker=False,
        extra_env=fast_env(
            provider_env, AGENTD_DRAIN_TIMEOUT="4s", AGENTD_MAX_ATTEMPTS="1", AGENTD_LEASE="2s", AGENTD_QUEUE_ACK_WAIT="2s"
        ),
    )
    client = deployment.client()
    key = unique("drain")
    fake_anthropic.script(key, slow("a long answer " * 8, chunks=60, delay=0.25), say("answer after the drain"))
    session = make_session(client)
    draining = deployment.start_worker()
    client.beta.sessions.events.send(session.id, events=[user_message(f"question {key}")])
    first = wait_streaming(fake_anthropic, key, events=4)
    survivor = deployment.start_worker()

    started = time.monotonic()
    draining.proc.send_signal(signal.SIGTERM)
    try:
        code = draining.proc.wait(timeout=10)
    except Exception:  # noqa: BLE001 - reported below
        code = None
    took = time.monotonic() - started
    exited_at = time.time()
    assert code == 0, f"the draining worker exited {code} after {took:.1f} s\n{draining.output_tail()}"
    assert took < 5.0, f"the drain took {took:.1f} s, deadline 4 s"
    # It waited for the in-flight run (deadline minus margin: 3.2 s) before handing it back.
    assert took > 2.5, f"the worker exited after {took:.1f} s without waiting for its in-flight run"
    assert not first.finished, "the slow reply finished on the draining worker; the test proves nothing"

    events = wait_idles(deployment, session.id, timeout=20)
    settle(1.0)
    events = events_of(deployment, session.id)
    assert_turns_well_formed(events, 1)
    assert stop_reasons(events) == ["end_turn"], f"{types_of(events)}; errors: {of_type(events, 'session.error')}"
    assert not of_type(events, "session.error"), of_type(events, "session.error")
    assert message_texts(events) == ["answer after the drain"]
    requests = fake_anthropic.received(key)
    assert len(requests) == 2, f"expected the relinquished request and one retry, got {len(requests)}"
    handover = requests[1].at - exited_at
    # Handed back (nak without delay), not recovered after lease expiry + ack wait.
    assert handover < 2.0, f"the second worker asked the model {handover:.1f} s after the drain"
    starts = {e["id"] for e in of_type(events, "span.model_request_start")}
    closed = {e["model_request_start_id"] for e in of_type(events, "span.model_request_end")}
    assert starts == closed, f"unclosed model request spans: {sorted(starts - closed)}"
    assert survivor.alive(), survivor.output_tail()


ROUNDS = 20


def test_repeated_sigkill_mid_stream_with_three_workers(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """Twenty sessions, one turn each; the worker streaming each reply is SIGKILLed (and
    replaced) while three workers run: every turn completes exactly once."""
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env))
    client = deployment.client()
    workers = [deployment.start_worker(), deployment.start_worker(), deployment.start_worker()]
    agent = client.beta.agents.create(name=unique("rel-agent"), model=PRICED_MODEL)
    environment = client.beta.environments.create(name=unique("rel-env"), config={"type": "cloud"})
    started = time.monotonic()
    for round_ in range(ROUNDS):
        key = unique(f"kill{round_}")
        fake_anthropic.script(key, slow("interrupted by a crash " * 4, chunks=40, delay=0.25), say(f"recovered {round_}"))
        session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        client.beta.sessions.events.send(session.id, events=[user_message(f"question {key}")])
        first = wait_streaming(fake_anthropic, key, events=4)
        owner = None
        for _ in range(20):
            owner = socket_owner(first.peer[1], [w.pid for w in workers if w.alive()])
            if owner is not None:
                break
            time.sleep(0.05)
        assert owner is not None, f"round {round_}: no worker owns the model connection {first.peer}"
        victim = next(w for w in workers if w.pid == owner)
        kill9(victim)
        workers = [w for w in workers if w is not victim] + [deployment.start_worker()]

        events = wait_idles(deployment, session.id, timeout=20)
        settle(0.3)
        events = events_of(deployment, session.id)
        assert_turns_well_formed(events, 1, f"round {round_}")
        assert stop_reasons(events) == ["end_turn"], f"round {round_}: {types_of(events)}"
        assert message_texts(events) == [f"recovered {round_}"], f"round {round_}: {message_texts(events)}"
        starts = {e["id"] for e in of_type(events, "span.model_request_start")}
        closed = {e["model_request_start_id"] for e in of_type(events, "span.model_request_end")}
        assert starts == closed, f"round {round_}: unclosed spans {sorted(starts - closed)}"
        require_nothing_more(fake_anthropic, key, 2, f"round {round_}")
    assert time.monotonic() - started < 300, f"{ROUNDS} recoveries took too long"
    assert all(w.alive() for w in workers)


CRASH_POINTS = ["commit.before", "commit.after", "settle.before", "settle.after"]
MID_COMMIT_CRASHES = 20


def test_repeated_crashes_mid_commit_with_three_workers(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """Three workers, each armed to die abruptly at one of the commit crash points
    (writes done but COMMIT not sent; COMMIT done but nothing after it), replaced by a
    worker armed at the next point whenever one dies. Turns run until at least twenty
    crashes happened, at least four at each point: every turn ends once, with the
    scripted reply, and no event is committed twice."""
    deployment = launch("prod", worker=False, extra_env=fast_env(provider_env, AGENTD_MAX_ATTEMPTS="100"))
    client = deployment.client()
    rotation = iter(range(10_000))

    def armed_worker() -> Process:
        n = next(rotation)
        point = CRASH_POINTS[n % len(CRASH_POINTS)]
        return deployment.start_worker({"AGENTD_FAULT_CRASH_AT": f"{point}@{1 + n // len(CRASH_POINTS) % 2}"})

    workers = [armed_worker() for _ in range(3)]
    crashed: list[str] = []

    def replace_the_dead() -> None:
        nonlocal workers
        for worker in [w for w in workers if not w.alive()]:
            tail = worker.output_tail(200)
            point = next((p for p in CRASH_POINTS if f"crashing at {p}" in tail), None)
            assert point is not None, f"a worker died without reaching its crash point:\n{tail}"
            crashed.append(point)
            workers = [w for w in workers if w is not worker] + [armed_worker()]

    agent = client.beta.agents.create(name=unique("crash-agent"), model=PRICED_MODEL)
    environment = client.beta.environments.create(name=unique("crash-env"), config={"type": "cloud"})
    started = time.monotonic()
    rounds = 0
    while len(crashed) < MID_COMMIT_CRASHES or min(crashed.count(p) for p in CRASH_POINTS) < 4:
        assert rounds < 80 and time.monotonic() - started < 240, f"only {len(crashed)} crashes in {rounds} turns"
        key = unique(f"crash{rounds}")
        # A crash before a commit lands can make the run ask again: every answer is the same.
        fake_anthropic.script(key, *[say(f"answer {rounds}")] * 10)
        session = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
        client.beta.sessions.events.send(session.id, events=[user_message(f"question {key}")])
        deadline = time.monotonic() + TURN_TIMEOUT
        while not idles(events := events_of(deployment, session.id)):
            assert time.monotonic() < deadline, f"turn {rounds} did not end: {types_of(events)}"
            replace_the_dead()
            time.sleep(0.1)
        settle(0.3)
        replace_the_dead()
        events = events_of(deployment, session.id)
        assert_turns_well_formed(events, 1, f"turn {rounds}")
        assert stop_reasons(events) == ["end_turn"], f"turn {rounds}: {types_of(events)}"
        assert message_texts(events) == [f"answer {rounds}"], f"turn {rounds}: {message_texts(events)}"
        starts = {e["id"] for e in of_type(events, "span.model_request_start")}
        closed = {e["model_request_start_id"] for e in of_type(events, "span.model_request_end")}
        assert starts == closed, f"turn {rounds}: unclosed spans {sorted(starts - closed)}"
        rounds += 1
    print(f"{len(crashed)} crashes in {rounds} turns: " + ", ".join(f"{p} x{crashed.count(p)}" for p in CRASH_POINTS))
    assert all(w.alive() for w in workers)


def test_redis_down_admission_and_readiness_fail_closed_then_recover(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic, tmp_path: Any
) -> None:
    redis = PrivateRedis(tmp_path / "redis")
    try:
        deployment = launch("prod", worker=True, redis_url=redis.url, extra_env=fast_env(provider_env))
        client = deployment.client()
        http = deployment.http()
        assert http.get("/readyz").status_code == 200
        key = unique("redisdown")
        fake_anthropic.script(key, slow("finished while redis was away", chunks=10, delay=0.3))
        session = make_session(client)
        client.beta.sessions.events.send(session.id, events=[user_message(f"question {key}")])
        first = wait_streaming(fake_anthropic, key, events=3)

        redis.stop()
        # Admission fails closed: both metered buckets (reads, creates) answer 503.
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.beta.agents.list()
        assert caught.value.status_code == 503
        assert_error_envelope(caught.value.response, 503, "api_error")
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.beta.agents.create(name=unique("down"), model=PRICED_MODEL)
        assert caught.value.status_code == 503
        assert_error_envelope(caught.value.response, 503, "api_error")
        ready = http.get("/readyz")
        assert ready.status_code == 503, ready.text
        assert ready.json().get("status") == "unavailable", ready.text
        worker = deployment.workers()[0]
        assert worker.url
        worker_ready = httpx.get(f"{worker.url}/readyz", timeout=5.0, trust_env=False)
        assert worker_ready.status_code == 503, worker_ready.text

        # The running turn still commits to PostgreSQL.
        database = deployment.cli_env["AGENTD_DATABASE_URL"]

        def committed() -> list[str]:
            out = psql(database, f"SELECT type FROM session_events WHERE session_id = '{session.id}' ORDER BY seq")
            return [line for line in out.splitlines() if line]

        fake_anthropic.wait_for(first.done.is_set, 15, "the reply finishing")
        fake_anthropic.wait_for(
            lambda: "session.status_idle" in committed(), 15, "the turn committing while Redis is down"
        )
        assert committed().count("session.status_idle") == 1, committed()

        # Sending events draws from no rate-limit bucket (gateway admission/limiter.rs
        # `classify`), so it passes admission without Redis; a message accepted now must
        # be answered now, from PostgreSQL and NATS.
        during = unique("during")
        fake_anthropic.script(during, say("answered while redis was away"))
        try:
            client.beta.sessions.events.send(session.id, events=[user_message(f"meanwhile {during}")])
            accepted = 1
        except anthropic.APIStatusError as err:
            assert err.status_code == 503, err
            assert_error_envelope(err.response, 503, "api_error")
            accepted = 0
        problems: list[str] = []
        if accepted:
            try:
                fake_anthropic.wait_for(lambda: committed().count("session.status_idle") == 2, 15, "")
            except AssertionError:
                problems.append(
                    "a user.message accepted (200) while Redis was down was never answered: the model's "
                    f"reply was {'fully sent' if all(r.finished for r in fake_anthropic.received(during)) else 'not sent'}"
                    f" ({len(fake_anthropic.received(during))} request(s)), committed: {committed()}"
                )

        # Back: readiness and admission recover without restarting agentd.
        redis.restart()
        deadline = time.monotonic() + 20
        while http.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline, f"readiness still {http.get('/readyz').text} after Redis came back"
            time.sleep(0.2)
        # The limiter has its own Redis connection, re-opened by the first request that
        # fails on it: admission may lag readiness by one 503, not more than briefly.
        deadline = time.monotonic() + 5
        while (status := http.get("/v1/agents", headers=deployment.headers()).status_code) != 200:
            assert status == 503, status
            assert time.monotonic() < deadline, "admission still 503 five seconds after readiness came back"
            time.sleep(0.1)
        assert client.beta.agents.list().data is not None
        # Turns run again (on a fresh session: the first may be the victim of a problem above).
        other = make_session(client)
        follow = unique("redisback")
        fake_anthropic.script(follow, say("redis is back"))
        client.beta.sessions.events.send(other.id, events=[user_message(f"again {follow}")])
        events = wait_idles(deployment, other.id)
        assert_turns_well_formed(events, 1)
        assert message_texts(events) == ["redis is back"]

        events = events_of(deployment, session.id)
        if not problems:
            assert_turns_well_formed(events, 1 + accepted)
            assert stop_reasons(events) == ["end_turn"] * (1 + accepted)
            expected = ["finished while redis was away"] + ["answered while redis was away"] * accepted
            assert message_texts(events) == expected
        else:
            assert message_texts(events)[:1] == ["finished while redis was away"]
            assert stop_reasons(events)[:1] == ["end_turn"]
        assert not problems, "\n".join(problems)
    finally:
        redis.stop()



def wait_status(http: httpx.Client, path: str, status: int, timeout: float, what: str, **kwargs: Any) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            response = http.get(path, **kwargs)
            if response.status_code == status:
                return response
            last = f"{response.status_code} {response.text[:300]}"
        except httpx.HTTPError as err:
            last = repr(err)
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: GET {path} not {status} within {timeout:.0f} s (last: {last})")
        time.sleep(0.2)


def test_postgres_down_fails_closed_and_acknowledges_nothing(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic
) -> None:
    """PostgreSQL stopped (immediate shutdown, like a crash): a user.message answers 503
    api_error and /readyz 503; once it is back, readiness recovers, the refused message is
    in no history (no acknowledgement for input that was not committed) and turns run."""
    postgres = PrivatePostgres()
    try:
        database = postgres.create_database("agentd")
        deployment = launch("prod", worker=True, database_url=database, extra_env=fast_env(provider_env))
        client = deployment.client()
        http = deployment.http()
        assert http.get("/readyz").status_code == 200
        session = make_session(client)
        # A first turn, so the key, the session and every pool are warm.
        before = unique("pgbefore")
        fake_anthropic.script(before, say("before the outage"))
        client.beta.sessions.events.send(session.id, events=[user_message(f"first {before}")])
        wait_idles(deployment, session.id, count=1)

        postgres.stop("immediate")
        lost = unique("pglost")
        fake_anthropic.script(lost, say("must never be asked"))
        started = time.monotonic()
        with pytest.raises(anthropic.APIStatusError) as caught:
            client.beta.sessions.events.send(session.id, events=[user_message(f"refused {lost}")])
        took = time.monotonic() - started
        assert caught.value.status_code == 503, (
            f"events.send with PostgreSQL down answered {caught.value.status_code}: {caught.value.response.text[:500]}"
        )
        assert_error_envelope(caught.value.response, 503, "api_error")
        assert took < 20, f"the 503 took {took:.1f} s"
        ready = wait_status(http, "/readyz", 503, 15, "readiness with PostgreSQL down")
        assert ready.json().get("status") == "unavailable", ready.text
        worker = deployment.workers()[0]
        assert worker.url
        worker_ready = httpx.get(f"{worker.url}/readyz", timeout=5.0, trust_env=False)
        assert worker_ready.status_code == 503, worker_ready.text

        postgres.start()
        wait_status(http, "/readyz", 200, 30, "readiness after PostgreSQL came back")
        with httpx.Client(trust_env=False, timeout=5.0) as ops:
            wait_status(ops, f"{worker.url}/readyz", 200, 30, "worker readiness after PostgreSQL came back")
        settle(2.0)  # an outbox relay or a retry that wrongly kept the input would commit it now
        events = events_of(deployment, session.id)
        assert all(lost not in str(e) for e in events), (
            f"the user.message refused with 503 reached committed history: {types_of(events)}"
        )
        # Straight from the database too (any table the input could have been parked in).
        stored = psql(database, f"SELECT count(*) FROM session_events WHERE body LIKE '%{lost}%'").strip()
        assert stored == "0", f"{stored} committed event(s) carry the refused user.message"
        assert_turns_well_formed(events, 1)
        require_nothing_more(fake_anthropic, lost, 0, "after the refused user.message")

        # A new turn works end to end, on the same session.
        after = unique("pgafter")
        fake_anthropic.script(after, say("postgres is back"))
        client.beta.sessions.events.send(session.id, events=[user_message(f"again {after}")])
        events = wait_idles(deployment, session.id, count=2)
        settle(0.5)
        events = events_of(deployment, session.id)
        assert_turns_well_formed(events, 2)
        assert stop_reasons(events) == ["end_turn", "end_turn"]
        assert message_texts(events) == ["before the outage", "postgres is back"]
        assert all(lost not in str(e) for e in events), types_of(events)
        require_nothing_more(fake_anthropic, lost, 0, "after PostgreSQL came back")
        assert all(p.alive() for p in deployment.processes), "\n".join(p.output_tail() for p in deployment.processes)
    finally:
        postgres.close()


def test_nats_restart_mid_run(
    launch: Callable[..., Deployment], provider_env: dict[str, str], fake_anthropic: FakeAnthropic, tmp_path: Any
) -> None:
    """The private nats-server (JetStream, file store) is killed and started again while a
    model reply streams: that turn completes exactly once, and a turn submitted after the
    restart completes too."""
    nats = PrivateNats(tmp_path / "nats")
    try:
        deployment = launch("prod", worker=True, nats_url=nats.url, extra_env=fast_env(provider_env))
        client = deployment.client()
        key = unique("natsmid")
        # A redelivered run would find a second reply; the history must still hold one turn.
        fake_anthropic.script(key, slow("streamed across a NATS restart " * 2, chunks=16, delay=0.3), say("redelivered"))
        session = make_session(client)
        client.beta.sessions.events.send(session.id, events=[user_message(f"question {key}")])
        first = wait_streaming(fake_anthropic, key, events=3)
        nats.restart(down_for=1.0)
        assert not first.done.is_set(), "the slow reply ended before NATS restarted; the test proves nothing"

        events = wait_idles(deployment, session.id, count=1, timeout=40)
        settle(3.0)  # lease + ack wait: a duplicate delivery would show now
        events = events_of(deployment, session.id)
        assert_turns_well_formed(events, 1)
        assert stop_reasons(events) == ["end_turn"], f"{types_of(events)}; errors: {of_type(events, 'session.error')}"
        assert len(message_texts(events)) == 1, message_texts(events)
        starts = {e["id"] for e in of_type(events, "span.model_request_start")}
        closed = {e["model_request_start_id"] for e in of_type(events, "span.model_request_end")}
        assert starts == closed, f"unclosed model request spans: {sorted(starts - closed)}"

        # The submission path recovers: a turn sent after the restart completes.
        follow = unique("natsafter")
        fake_anthropic.script(follow, say("nats is back"))
        sent = time.monotonic()
        client.beta.sessions.events.send(session.id, events=[user_message(f"again {follow}")])
        events = wait_idles(deployment, session.id, count=2, timeout=40)
        took = time.monotonic() - sent
        settle(1.0)
        events = events_of(deployment, session.id)
        assert_turns_well_formed(events, 2)
        assert stop_reasons(events) == ["end_turn", "end_turn"]
        assert message_texts(events)[-1] == "nats is back"
        require_nothing_more(fake_anthropic, follow, 1, "the turn after the restart")
        print(f"turn after the NATS restart completed in {took:.1f} s; first turn asked the model {len(fake_anthropic.received(key))} time(s)")
        assert all(p.alive() for p in deployment.processes), "\n".join(p.output_tail() for p in deployment.processes)
    finally:
        nats.stop()
