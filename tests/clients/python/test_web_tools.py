"""The built-in toolset's server-side tools, `web_fetch` and `web_search` (issue 22
item 5, docs/api/tools.md), run by the worker: a page fetched from a local HTTP server
comes back as text, the config's domain lists and the egress guard refuse what they
must (as tool errors), a search goes to a fake SearXNG endpoint, each call counts in
the session's `usage.server_tool_use` and is priced in its budget, and an agent cannot
enable `web_search` on a deployment without a search backend.

Wire facts: managed-agents-wire.md §5.4 (the tool configs, `server_tool_use`) and §4
(`agent.tool_use` / `agent.tool_result` with the tool's name). The model is the
scripted fake of fake_models.py. The deployments with a search backend are this
module's (`web`: `agentd dev` and gateway+worker, AGENTD_WEB_SEARCH_URL set); the ones
without are the suite's shared ones.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator
from urllib.parse import parse_qs, urlsplit

import anthropic
import pytest

from fake_models import FakeAnthropic, call, say
from harness import Deployment, collect, list_all, start_deployment, unique

MODEL = "claude-sonnet-4-6"
TURN_TIMEOUT = 40.0
SECRET_WORD = "pelican-7f3a"

PAGE = f"""<!doctype html>
<html><head><title>Agentd Test Page</title>
<style>body {{ color: red }}</style><script>document.write("script text")</script></head>
<body><h1>Birds</h1><p>The secret word is <b>{SECRET_WORD}</b>.</p>
<ul><li>first item</li><li>second item</li></ul>
<p>More at <a href="/more.html">the next page</a>.</p></body></html>"""


# ---------------------------------------------------------------------------------------
# The local web: an HTML page and a fake SearXNG endpoint on 127.0.0.1


class Site:
    """A web server on 127.0.0.1: `/page.html`, `/away` (a redirect to 127.0.0.2) and a
    SearXNG-compatible `/search?q=…&format=json`. Records every request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, list[str]], dict[str, str]]] = []
        self._lock = threading.Lock()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server interface
                parts = urlsplit(self.path)
                query = parse_qs(parts.query)
                with site._lock:
                    site.requests.append((parts.path, query, {k.lower(): v for k, v in self.headers.items()}))
                if parts.path == "/page.html":
                    self._send(200, "text/html; charset=utf-8", PAGE.encode())
                elif parts.path == "/away":
                    self.send_response(302)
                    self.send_header("Location", f"http://127.0.0.2:{site.port}/page.html")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                elif parts.path == "/search" and query.get("format") == ["json"]:
                    q = query.get("q", [""])[0]
                    results = [
                        {"url": "https://birds.example/pelicans", "title": f"Pelicans: {q}", "content": "Large water birds.", "engine": "fake"},
                        {"url": "https://ads.example.com/buy", "title": "Buy pelicans", "content": "An ad."},
                        {"url": "https://wiki.example/Pelican", "title": "Pelican - Wiki", "content": "A genus of birds."},
                        {"url": f"{site.url}/page.html", "title": "The local page", "content": "Where the word is."},
                    ]
                    self._send(200, "application/json", json.dumps({"query": q, "results": results}).encode())
                else:
                    self._send(404, "text/plain", b"not found")

            def _send(self, status: int, content_type: str, body: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="web-site", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def paths(self, prefix: str = "/") -> list[str]:
        with self._lock:
            return [path for path, _, _ in self.requests if path.startswith(prefix)]

    def searches(self) -> list[dict[str, list[str]]]:
        with self._lock:
            return [query for path, query, _ in self.requests if path == "/search"]

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    server = Site()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture(scope="module", params=["dev", "prod"])
def web(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    provider_env: dict[str, str],
    site: Site,
) -> Iterator[Deployment]:
    """A deployment per mode whose models are the fakes and whose search backend is
    the site's fake SearXNG. Private addresses are allowed: `agentd dev` by default,
    gateway+worker by the suite's AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE=true."""
    deployment = start_deployment(
        request.param,
        tmp_path_factory.mktemp(f"agentd-web-{request.param}"),
        extra_env={**provider_env, "AGENTD_WEB_SEARCH_URL": site.url},
    )
    try:
        yield deployment
    finally:
        deployment.close()


# ---------------------------------------------------------------------------------------
# Helpers


def web_tools(**configs: dict[str, Any]) -> list[dict[str, Any]]:
    """A toolset with only the named web tools enabled (no sandbox tool: no hands)."""
    return [
        {
            "type": "agent_toolset_20260401",
            "default_config": {"enabled": False, "permission_policy": {"type": "always_allow"}},
            "configs": [{"name": name, "enabled": True, **config} for name, config in configs.items()],
        }
    ]


_ENVIRONMENTS: dict[tuple[str, str], str] = {}


def environment(client: anthropic.Anthropic, deployment: Deployment) -> str:
    # By URL and key: a later deployment may listen on a port an earlier one had.
    which = (deployment.url, deployment.bootstrap_key)
    if which not in _ENVIRONMENTS:
        _ENVIRONMENTS[which] = client.beta.environments.create(name=unique("web-env"), config={"type": "cloud"}).id
    return _ENVIRONMENTS[which]


def run_turn(
    deployment: Deployment, tools: list[dict[str, Any]], text: str, *, budget: dict[str, Any] | None = None
) -> tuple[Any, list[dict[str, Any]]]:
    """Creates an agent and a session, sends `text`, and returns the session and its
    history (raw JSON: the SDK's union lacks `session.budget_reached`) once idle."""
    client = deployment.client()
    agent = client.beta.agents.create(name=unique("web-agent"), model=MODEL, tools=tools)
    extra = {"budget": budget} if budget else {}
    session = client.beta.sessions.create(agent=agent.id, environment_id=environment(client, deployment), **extra)
    client.beta.sessions.events.send(
        session.id, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}]
    )
    return session, wait_idle(deployment, session.id)


def history(deployment: Deployment, session_id: str) -> list[dict[str, Any]]:
    http = getattr(deployment, "_web_http", None)
    if http is None:
        http = deployment.http()
        deployment._web_http = http  # type: ignore[attr-defined]
    return list_all(http, f"/v1/sessions/{session_id}/events", deployment.headers(), limit=1000)


def wait_idle(deployment: Deployment, session_id: str) -> list[dict[str, Any]]:
    deadline = time.monotonic() + TURN_TIMEOUT
    while True:
        events = history(deployment, session_id)
        if any(e["type"] == "session.status_idle" for e in events):
            return events
        if time.monotonic() > deadline:
            pytest.fail(f"no session.status_idle within {TURN_TIMEOUT:.0f} s: {[e['type'] for e in events]}")
        time.sleep(0.05)


def of_type(events: list[dict[str, Any]], type_: str) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == type_]


def result_text(event: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in event.get("content") or [] if b.get("type") == "text")


def the_call(events: list[dict[str, Any]], name: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The one call of `name` and its result."""
    (use,) = [e for e in of_type(events, "agent.tool_use") if e["name"] == name]
    (result,) = [e for e in of_type(events, "agent.tool_result") if e["tool_use_id"] == use["id"]]
    return use, result


def server_tool_use(deployment: Deployment, session_id: str) -> Any:
    usage = deployment.client().beta.sessions.retrieve(session_id).usage
    return usage.server_tool_use if usage is not None else None


def tool_result_sent_to_model(fake: FakeAnthropic, key: str, use_id: str) -> str:
    """The text of the tool result the model was given for `use_id` (the second request)."""
    request = fake.received(key)[1]
    for message in request.body["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == use_id:
                content = block["content"]
                return content if isinstance(content, str) else "".join(b.get("text", "") for b in content)
    raise AssertionError(f"no tool_result for {use_id} in {request.body['messages']}")


# ---------------------------------------------------------------------------------------
# web_fetch


def test_web_fetch_returns_the_page_as_text(web: Deployment, fake_anthropic: FakeAnthropic, site: Site) -> None:
    key = unique("fetch")
    page = f"{site.url}/page.html"
    fake_anthropic.script(key, call("web_fetch", {"url": page}), say("The word is known."))
    before = len(site.paths("/page.html"))
    session, events = run_turn(web, web_tools(web_fetch={}), f"What does {page} say? {key}")

    use, result = the_call(events, "web_fetch")
    assert use["input"] == {"url": page}
    assert use["evaluated_permission"] == "allow" and use["evaluation"] == {"type": "always_allow"}
    assert result["is_error"] is False, result
    text = result_text(result)
    assert f"The secret word is **{SECRET_WORD}**." in text, text
    assert "Title: Agentd Test Page" in text and "first item" in text and "second item" in text, text
    assert f"{site.url}/more.html" in text, "links are listed, so the model can fetch them next"
    for markup in ("<p>", "<b>", "color: red", "script text"):
        assert markup not in text, f"{markup!r} left in {text!r}"
    assert "_server_tool" not in result, "the store's mark stays internal"
    assert of_type(events, "session.status_idle")[-1]["stop_reason"]["type"] == "end_turn"

    # The model got the text; the site got one request from agentd.
    assert SECRET_WORD in tool_result_sent_to_model(fake_anthropic, key, use["id"])
    assert len(site.paths("/page.html")) == before + 1
    user_agents = [h.get("user-agent", "") for p, _, h in site.requests if p == "/page.html"]
    assert user_agents[-1].startswith("agentd/"), user_agents

    usage = server_tool_use(web, session.id)
    assert usage is not None and (usage.web_fetch_requests, usage.web_search_requests) == (1, 0), usage
    # The SDK sees the call in its own event types too.
    listed = collect(web.client().beta.sessions.events.list(session.id, limit=1000))
    assert [e.name for e in listed if e.type == "agent.tool_use"] == ["web_fetch"]


def test_web_fetch_truncates_to_max_content_tokens(web: Deployment, fake_anthropic: FakeAnthropic, site: Site) -> None:
    key = unique("fetch-cut")
    page = f"{site.url}/page.html"
    fake_anthropic.script(key, call("web_fetch", {"url": page}), say("ok"))
    _, events = run_turn(web, web_tools(web_fetch={"max_content_tokens": 3}), f"read {page} {key}")
    _, result = the_call(events, "web_fetch")
    text = result_text(result)
    assert result["is_error"] is False
    assert "[The text was cut at about 3 tokens (max_content_tokens).]" in text, text
    assert SECRET_WORD not in text


def test_web_fetch_refuses_blocked_domains_and_refused_redirect_hops(
    web: Deployment, fake_anthropic: FakeAnthropic, site: Site
) -> None:
    # A blocked domain: refused before anything goes out.
    key = unique("fetch-blocked")
    page = f"{site.url}/page.html"
    fake_anthropic.script(key, call("web_fetch", {"url": page}), say("could not"))
    before = len(site.paths())
    session, events = run_turn(web, web_tools(web_fetch={"blocked_domains": ["127.0.0.1"]}), f"read {page} {key}")
    _, result = the_call(events, "web_fetch")
    assert result["is_error"] is True
    assert "127.0.0.1 is among this tool's blocked_domains" in result_text(result), result
    assert len(site.paths()) == before, "nothing reached the site"
    usage = server_tool_use(web, session.id)
    assert usage is None or not usage.web_fetch_requests, "a refusal is not a request"
    assert len(fake_anthropic.received(key)) == 2, "the model is told and finishes the turn"

    # Allowed domains: the first hop is allowed, its redirect to another host is not.
    key = unique("fetch-hop")
    away = f"{site.url}/away"
    fake_anthropic.script(key, call("web_fetch", {"url": away}), say("could not"))
    session, events = run_turn(web, web_tools(web_fetch={"allowed_domains": ["127.0.0.1"]}), f"read {away} {key}")
    _, result = the_call(events, "web_fetch")
    assert result["is_error"] is True
    assert "127.0.0.2 is not among this tool's allowed_domains" in result_text(result), result
    usage = server_tool_use(web, session.id)
    assert usage is not None and usage.web_fetch_requests == 1, "the first hop went out"


def test_web_fetch_only_fetches_urls_the_conversation_showed(
    web: Deployment, fake_anthropic: FakeAnthropic, site: Site
) -> None:
    key = unique("fetch-unseen")
    made_up = f"{site.url}/page.html?exfiltrate=the-conversation"
    fake_anthropic.script(key, call("web_fetch", {"url": made_up}), say("could not"))
    before = len(site.paths())
    _, events = run_turn(web, web_tools(web_fetch={}), f"read {site.url}/page.html {key}")
    _, result = the_call(events, "web_fetch")
    assert result["is_error"] is True
    assert "has not appeared in this conversation" in result_text(result), result
    assert "exfiltrate" not in result_text(result), "the query is not echoed"
    assert len(site.paths()) == before

    # `url_sources.user_input: none`: the user's URLs do not count either.
    key = unique("fetch-no-user")
    page = f"{site.url}/page.html"
    fake_anthropic.script(key, call("web_fetch", {"url": page}), say("could not"))
    tools = web_tools(web_fetch={"url_sources": {"user_input": "none"}})
    _, events = run_turn(web, tools, f"read {page} {key}")
    _, result = the_call(events, "web_fetch")
    assert result["is_error"] is True and "has not appeared" in result_text(result)
    assert len(site.paths()) == before


def test_web_fetch_of_a_private_address_is_refused_by_production_roles_by_default(
    web: Deployment,
    launch: Callable[..., Deployment],
    provider_env: dict[str, str],
    fake_anthropic: FakeAnthropic,
    site: Site,
) -> None:
    """A `worker` refuses private and loopback addresses unless
    AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE=true (set on the `web` deployments, where the
    fetches above reach 127.0.0.1)."""
    if web.mode != "prod":
        pytest.skip("the worker role's default; `agentd dev` allows private targets")
    deployment = launch("prod", extra_env={**provider_env, "AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE": "false"})
    key = unique("fetch-private")
    page = f"{site.url}/page.html"
    fake_anthropic.script(key, call("web_fetch", {"url": page}), say("could not"))
    before = len(site.paths())
    session, events = run_turn(deployment, web_tools(web_fetch={}), f"read {page} {key}")
    _, result = the_call(events, "web_fetch")
    assert result["is_error"] is True
    text = result_text(result)
    assert "must resolve only to public addresses" in text, text
    assert len(site.paths()) == before, "nothing reached the site"
    usage = server_tool_use(deployment, session.id)
    assert usage is None or not usage.web_fetch_requests


# ---------------------------------------------------------------------------------------
# web_search


def test_web_search_returns_the_backends_results(web: Deployment, fake_anthropic: FakeAnthropic, site: Site) -> None:
    key = unique("search")
    fake_anthropic.script(key, call("web_search", {"query": "pelican facts"}), say("Pelicans are birds."))
    before = len(site.searches())
    tools = web_tools(web_search={"blocked_domains": ["ads.example.com"]})
    session, events = run_turn(web, tools, f"search pelicans {key}")

    use, result = the_call(events, "web_search")
    assert use["input"] == {"query": "pelican facts"}
    assert result["is_error"] is False, result
    text = result_text(result)
    assert "1. Pelicans: pelican facts\n   URL: https://birds.example/pelicans\n   Large water birds." in text, text
    assert "2. Pelican - Wiki\n   URL: https://wiki.example/Pelican\n   A genus of birds." in text, text
    assert "ads.example.com" not in text, "blocked_domains filter the results"
    searches = site.searches()[before:]
    assert searches == [{"q": ["pelican facts"], "format": ["json"]}], searches
    assert "wiki.example/Pelican" in tool_result_sent_to_model(fake_anthropic, key, use["id"])

    usage = server_tool_use(web, session.id)
    assert usage is not None and (usage.web_fetch_requests, usage.web_search_requests) == (0, 1), usage


def test_a_search_result_url_may_then_be_fetched(web: Deployment, fake_anthropic: FakeAnthropic, site: Site) -> None:
    """`server_tool_results`: a URL from an earlier web_search result is one the
    conversation showed, though the user never wrote it."""
    key = unique("search-then-fetch")
    fake_anthropic.script(
        key,
        call("web_search", {"query": "pelicans"}),
        call("web_fetch", {"url": f"{site.url}/page.html"}),
        say("done"),
    )
    session, events = run_turn(web, web_tools(web_search={}, web_fetch={}), f"find out {key}")
    _, fetched = the_call(events, "web_fetch")
    assert fetched["is_error"] is False, fetched
    assert SECRET_WORD in result_text(fetched)
    usage = server_tool_use(web, session.id)
    assert usage is not None and (usage.web_fetch_requests, usage.web_search_requests) == (1, 1), usage

    # Without web_search among the sources, the same URL is refused.
    key = unique("search-not-a-source")
    fake_anthropic.script(
        key,
        call("web_search", {"query": "pelicans"}),
        call("web_fetch", {"url": f"{site.url}/page.html"}),
        say("done"),
    )
    tools = web_tools(web_search={}, web_fetch={"url_sources": {"server_tool_results": {"type": "except", "tools": [{"type": "tool_reference", "name": "web_search"}]}}})
    _, events = run_turn(web, tools, f"find out {key}")
    _, fetched = the_call(events, "web_fetch")
    assert fetched["is_error"] is True and "has not appeared" in result_text(fetched), fetched


def test_search_prices_in_the_session_budget(web: Deployment, fake_anthropic: FakeAnthropic) -> None:
    """A search is $10 per 1,000 (1¢ each, `catalog.rs`): with a 1¢ budget, the turn
    stops after the search instead of asking the model again."""
    key = unique("search-budget")
    fake_anthropic.script(key, call("web_search", {"query": "pelicans"}), say("never asked"))
    budget = {"type": "limit", "max_list_cost": {"amount": "1", "currency": "USD"}}
    session, events = run_turn(web, web_tools(web_search={}), f"search {key}", budget=budget)
    kinds = [e["type"] for e in events]
    assert kinds[-4:] == ["agent.tool_result", "session.budget_reached", "session.usage", "session.status_idle"], kinds
    assert events[-1]["stop_reason"]["type"] == "budget_reached"
    assert len(fake_anthropic.received(key)) == 1, "the model is not asked past the budget"
    usage = web.client().beta.sessions.retrieve(session.id).usage
    assert usage.server_tool_use is not None and usage.server_tool_use.web_search_requests == 1
    assert usage.list_cost is not None and usage.list_cost.amount == "1", usage


# ---------------------------------------------------------------------------------------
# No search backend


def test_web_search_without_a_backend_is_refused(client: anthropic.Anthropic, model_id: str) -> None:
    """The suite's shared deployments have no AGENTD_WEB_SEARCH_URL."""
    enabled = [{"type": "agent_toolset_20260401", "configs": [{"name": "web_search", "enabled": True}]}]
    name = unique("no-search")
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.agents.create(name=name, model=model_id, tools=enabled)
    message = refused.value.message
    assert "web_search" in message and "AGENTD_WEB_SEARCH_URL" in message, message
    assert "tools[0].configs[0]" in message, message
    assert not [a for a in client.beta.agents.list(limit=100) if a.name == name], "nothing was stored"

    # The default toolset resolves web_search disabled, and says so.
    agent = client.beta.agents.create(name=name, model=model_id, tools=[{"type": "agent_toolset_20260401"}])
    (toolset,) = agent.tools
    (search,) = [c for c in toolset.configs if c.name == "web_search"]
    assert search.enabled is False and search.type == "web_search"

    # Enabling it later is refused the same way; the agent is unchanged.
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.agents.update(agent.id, version=agent.version, tools=enabled)
    assert "AGENTD_WEB_SEARCH_URL" in refused.value.message
    assert client.beta.agents.retrieve(agent.id).version == agent.version

    # So is a session that enables it through agent_with_overrides.
    environment_id = client.beta.environments.create(name=unique("no-search-env"), config={"type": "cloud"}).id
    with pytest.raises(anthropic.BadRequestError) as refused:
        client.beta.sessions.create(
            agent={"type": "agent_with_overrides", "id": agent.id, "tools": enabled},  # type: ignore[typeddict-item]
            environment_id=environment_id,
        )
    assert "AGENTD_WEB_SEARCH_URL" in refused.value.message


def test_web_tool_options_are_checked(client: anthropic.Anthropic, model_id: str) -> None:
    """Options the wire defines are validated; options it does not define (or that
    agentd cannot honour) are refused, never accepted and ignored."""
    for config, needle in [
        ({"name": "web_fetch", "allowed_domains": ["a.example"], "blocked_domains": ["b.example"]}, "cannot be combined"),
        ({"name": "web_fetch", "allowed_domains": []}, "empty list"),
        ({"name": "web_fetch", "blocked_domains": ["https://a.example/x"]}, "plain host name"),
        ({"name": "web_fetch", "max_content_tokens": 0}, "positive integer"),
        ({"name": "web_fetch", "max_uses": 5}, "max_uses: unknown field"),
        ({"name": "web_fetch", "url_sources": {"user_input": "none", "client_tool_results": "none", "server_tool_results": "none"}}, "all three"),
        ({"name": "web_search", "enabled": False, "user_location": {"type": "approximate", "city": "Paris"}}, "user_location"),
    ]:
        with pytest.raises(anthropic.BadRequestError) as refused:
            client.beta.agents.create(
                name=unique("web-opts"), model=model_id, tools=[{"type": "agent_toolset_20260401", "configs": [config]}]
            )
        assert needle in refused.value.message, (config, refused.value.message)

    agent = client.beta.agents.create(
        name=unique("web-opts"),
        model=model_id,
        tools=[
            {
                "type": "agent_toolset_20260401",
                "configs": [
                    {
                        "name": "web_fetch",
                        "allowed_domains": ["docs.example.com"],
                        "max_content_tokens": 2000,
                        "url_sources": {"user_input": "none", "server_tool_results": {"type": "only", "tools": [{"type": "tool_reference", "name": "web_search"}]}},
                    }
                ],
            }
        ],
    )
    (fetch,) = [c for c in agent.tools[0].configs if c.name == "web_fetch"]
    assert fetch.allowed_domains == ["docs.example.com"] and fetch.max_content_tokens == 2000
    assert fetch.url_sources is not None
    assert fetch.url_sources.user_input is not None and fetch.url_sources.user_input.type == "none"
    assert fetch.url_sources.client_tool_results is None, "not set: every custom tool's results"
    assert fetch.url_sources.server_tool_results.type == "only"
