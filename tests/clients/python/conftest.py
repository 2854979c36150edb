"""Fixtures of the official-client suite (the machinery lives in harness.py).

`agentd` is parametrized over the two modes, ``dev`` and ``prod``, and started once per
session; `launch` starts extra deployments for a single test. See harness.py.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from typing import TYPE_CHECKING, Any, Callable, Iterator

import anthropic
import httpx
import pytest

from harness import RECORDER, Deployment, Recorder, pick_model, start_deployment, unique

if TYPE_CHECKING:
    from fake_models import FakeAnthropic, FakeOpenAI

# ---------------------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def recorder() -> Recorder:
    return RECORDER


@pytest.fixture(scope="session", autouse=True)
def secret_audit() -> Iterator[None]:
    """At the end of the session: no written secret in any recorded response."""
    yield
    if not RECORDER.exchanges:
        return
    assert RECORDER.secrets, "the suite registered no secret: the audit would prove nothing"
    leaks = RECORDER.leaks()
    assert not leaks, "secret values appeared in responses:\n" + "\n".join(leaks[:50])


@pytest.fixture(scope="session", autouse=True)
def sandbox_mounts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """A root runner puts each session's workdir on a tmpfs that outlives the runner by
    design (the next runner finds the files); at the end, unmount those under this
    session's temporary directories so pytest can remove them."""
    yield
    base = f"{tmp_path_factory.getbasetemp()}/"
    with open("/proc/self/mountinfo") as mountinfo:
        mounts = [line.split()[4] for line in mountinfo]
    for mount in reversed(mounts):
        if mount.startswith(base):
            subprocess.run(["umount", "--lazy", mount], check=False)


@pytest.fixture(scope="session", params=["dev", "prod"])
def agentd(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """The shared server of one mode, for the whole session."""
    deployment = start_deployment(request.param, tmp_path_factory.mktemp(f"agentd-{request.param}"))
    try:
        yield deployment
    finally:
        deployment.close()


@pytest.fixture
def launch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., Deployment]]:
    """Starts extra deployments for one test: launch("dev"|"prod", create_limit=…, …)."""
    started: list[Deployment] = []

    def _launch(mode: str, **options: Any) -> Deployment:
        deployment = start_deployment(mode, tmp_path_factory.mktemp(f"agentd-{mode}-extra"), **options)
        started.append(deployment)
        return deployment

    try:
        yield _launch
    finally:
        for deployment in reversed(started):
            deployment.close()


@pytest.fixture
def client(agentd: Deployment) -> anthropic.Anthropic:
    """The SDK on the shared server with the bootstrap key (workspace "default")."""
    return agentd.client()


@pytest.fixture
def http(agentd: Deployment) -> httpx.Client:
    return agentd.http()


@pytest.fixture(scope="session")
def model_id(agentd: Deployment) -> str:
    """A model of the server's catalog (agents are created with it)."""
    return pick_model(agentd.client())


@pytest.fixture
def workspace_client(agentd: Deployment) -> Callable[[], anthropic.Anthropic]:
    """A client for a brand-new, empty workspace of organization "default"."""

    def _make() -> anthropic.Anthropic:
        return agentd.client(agentd.create_key(unique("ws")))

    return _make


# ---------------------------------------------------------------------------------------
# Turns: fake model providers and the deployments that use them (test_turns.py)


@pytest.fixture(scope="session")
def fake_anthropic() -> Iterator["FakeAnthropic"]:
    """A scriptable Anthropic Messages API (see fake_models.py), shared by the session."""
    from fake_models import FakeAnthropic

    fake = FakeAnthropic(api_key=RECORDER.secret(f"sk-ant-fake-{uuid.uuid4().hex}{uuid.uuid4().hex}"))
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture(scope="session")
def fake_openai() -> Iterator["FakeOpenAI"]:
    """A scriptable OpenAI Chat Completions server (see fake_models.py)."""
    from fake_models import FakeOpenAI

    fake = FakeOpenAI(api_key=RECORDER.secret(f"sk-oai-fake-{uuid.uuid4().hex}{uuid.uuid4().hex}"))
    try:
        yield fake
    finally:
        fake.close()


@pytest.fixture(scope="session")
def provider_env(fake_anthropic: "FakeAnthropic", fake_openai: "FakeOpenAI") -> dict[str, str]:
    """The environment that points agentd's model providers at the fakes."""
    return {
        "ANTHROPIC_BASE_URL": fake_anthropic.url,
        "ANTHROPIC_API_KEY": fake_anthropic.api_key,
        "OPENAI_BASE_URL": fake_openai.url + "/v1",
        "OPENAI_API_KEY": fake_openai.api_key,
    }


@pytest.fixture(scope="session", params=["dev", "prod"])
def turns(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, provider_env: dict[str, str]
) -> Iterator[Deployment]:
    """A dedicated deployment per mode whose model providers are the fakes, for the turn
    tests (the shared `agentd` deployments keep their offline configuration)."""
    deployment = start_deployment(
        request.param, tmp_path_factory.mktemp(f"agentd-turns-{request.param}"), extra_env=provider_env
    )
    try:
        yield deployment
    finally:
        deployment.close()


# The conformance test agent's model: the offline `scripted` model under an id of its own
# (README "The test model's scripts"), in both modes.
SCRIPT_MODEL = "agentd-script"
# The custom tool a script's `ask` step calls.
ASK_TOOL = {
    "type": "custom",
    "name": "ask",
    "description": "Ask the user a question",
    "input_schema": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]},
}


def conformance_agent(client: anthropic.Anthropic) -> Any:
    """The conformance test agent: the scripted model and the custom tool `ask`. Its name
    is its own MCP tool name (lowercase letters, digits and `-`)."""
    return client.beta.agents.create(name=unique("conformance"), model=SCRIPT_MODEL, tools=[ASK_TOOL])


# Module scope: each prod deployment holds PostgreSQL connections while it lives; kept
# for the whole session this one pushed the suite past the server's max_connections.
@pytest.fixture(scope="module", params=["dev", "prod"])
def scripted(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    """A deployment per mode whose catalog routes `SCRIPT_MODEL` to the scripted model, for
    the adapter suites' conformance test agent (cancel mid-run, input, chunked answers)."""
    workdir = tmp_path_factory.mktemp(f"agentd-scripted-{request.param}")
    catalog = workdir / "catalog.json"
    catalog.write_text(json.dumps([{"id": SCRIPT_MODEL, "provider": "scripted"}]))
    deployment = start_deployment(request.param, workdir, extra_env={"AGENTD_MODEL_CATALOG": str(catalog)})
    try:
        yield deployment
    finally:
        deployment.close()
