//! The server-side web tools of `agent_toolset_20260401`, `web_fetch` and `web_search`
//! (docs/api/tools.md): what the gateway and the worker share. The worker makes the
//! calls (`worker/src/web/`); the gateway refuses an agent that enables `web_search`
//! without a search backend; the store counts the calls in the session's usage
//! (`server_tool_use`), and budgets price them (`budget.rs`).

use std::sync::OnceLock;

use serde_json::{Value, json};

/// One of the two server-executed tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebTool {
    /// `web_fetch`: a page's text.
    Fetch,
    /// `web_search`: results from the configured search backend.
    Search,
}

impl WebTool {
    /// Both tools.
    pub const ALL: [WebTool; 2] = [WebTool::Fetch, WebTool::Search];

    /// The tool's name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            WebTool::Fetch => "web_fetch",
            WebTool::Search => "web_search",
        }
    }

    /// The tool named `name`, if it is one of the two.
    pub fn of(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

    /// Its counter in `usage.server_tool_use`.
    pub fn usage_key(self) -> &'static str {
        match self {
            WebTool::Fetch => "web_fetch_requests",
            WebTool::Search => "web_search_requests",
        }
    }
}

/// The key of an `agent.tool_result` body that marks a web tool call that went out to
/// the network (a refusal before any request does not count). Internal: the store
/// counts it into the session's usage in the appending transaction, and `live::render`
/// leaves it out of the wire form.
pub const SERVER_TOOL_KEY: &str = "_server_tool";

/// Adds a committed result's server tool use to a cumulative `usage` object; whether
/// it counted one.
pub fn count_server_tool_use(usage: &mut Value, result: &Value) -> bool {
    let Some(tool) = result[SERVER_TOOL_KEY].as_str().and_then(WebTool::of) else { return false };
    if !usage["server_tool_use"].is_object() {
        usage["server_tool_use"] = json!({ "web_fetch_requests": 0, "web_search_requests": 0 });
    }
    let counter = &mut usage["server_tool_use"][tool.usage_key()];
    *counter = json!(counter.as_u64().unwrap_or(0) + 1);
    true
}

/// The `server_tool_use` counts of a usage object: (web fetches, web searches).
pub fn server_tool_counts(usage: &Value) -> (u64, u64) {
    let n = |tool: WebTool| usage["server_tool_use"][tool.usage_key()].as_u64().unwrap_or(0);
    (n(WebTool::Fetch), n(WebTool::Search))
}

static SEARCH_BACKEND: OnceLock<Option<String>> = OnceLock::new();

/// Checks a search backend setting: an `http(s)` base URL without query or fragment,
/// returned without its trailing `/`; `None` when blank.
pub fn search_backend_url(raw: &str) -> Result<Option<String>, String> {
    let url = raw.trim();
    if url.is_empty() {
        return Ok(None);
    }
    let parsed = reqwest::Url::parse(url).map_err(|error| format!("not a URL ({error}): {url:?}"))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(format!("expected an http(s) URL such as http://searxng:8080, got {url:?}"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(format!("{url:?}: the base URL takes no query or fragment (agentd adds /search?q=…&format=json)"));
    }
    Ok(Some(url.trim_end_matches('/').to_owned()))
}

/// Installs the process's search backend (`AGENTD_WEB_SEARCH_URL`, checked by
/// [`search_backend_url`]; once, at startup; later calls are ignored). Gateways read it
/// to accept `web_search`, workers to run it.
pub fn install_search_backend(url: Option<String>) {
    let _ = SEARCH_BACKEND.set(url);
}

/// The SearXNG-compatible base URL `web_search` queries, when one is configured.
pub fn search_backend() -> Option<&'static str> {
    SEARCH_BACKEND.get_or_init(|| None).as_deref()
}

/// Why an agent may not enable `web_search` on this deployment.
pub const NO_SEARCH_BACKEND: &str = "web_search needs a search backend and this deployment has none: set \
     AGENTD_WEB_SEARCH_URL to a SearXNG-compatible endpoint, or disable web_search \
     ({\"name\": \"web_search\", \"enabled\": false})";

/// A toolset (`agent_toolset_20260401`, resolved) that leaves `web_search` enabled only
/// through its `default_config` gets an explicit disabled `web_search` config when no
/// search backend is configured, so the resolved configuration says what the agent
/// has. An explicit `web_search` config is left alone (the gateway refuses an enabled
/// one; the worker reports a call it cannot make).
pub fn disable_implicit_search(toolset: &mut Value, search_configured: bool) {
    if search_configured || toolset["type"] != "agent_toolset_20260401" {
        return;
    }
    let configs = toolset["configs"].as_array().map(Vec::as_slice).unwrap_or_default();
    if configs.iter().any(|config| config["name"] == WebTool::Search.name()) {
        return;
    }
    if toolset["default_config"]["enabled"] == false {
        return;
    }
    let policy = toolset["default_config"]["permission_policy"].clone();
    let disabled = json!({ "name": "web_search", "type": "web_search", "enabled": false, "permission_policy": policy });
    match toolset["configs"].as_array_mut() {
        Some(configs) => configs.push(disabled),
        None => toolset["configs"] = json!([disabled]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marked_results_count_once_each_and_unmarked_ones_not_at_all() {
        let mut usage = json!({ "input_tokens": 3 });
        assert!(!count_server_tool_use(&mut usage, &json!({ "tool_use_id": "t", "content": [] })));
        assert!(usage.get("server_tool_use").is_none());
        assert!(count_server_tool_use(&mut usage, &json!({ SERVER_TOOL_KEY: "web_fetch" })));
        assert!(count_server_tool_use(&mut usage, &json!({ SERVER_TOOL_KEY: "web_search" })));
        assert!(count_server_tool_use(&mut usage, &json!({ SERVER_TOOL_KEY: "web_search" })));
        assert!(!count_server_tool_use(&mut usage, &json!({ SERVER_TOOL_KEY: "bash" })));
        assert_eq!(usage["server_tool_use"], json!({ "web_fetch_requests": 1, "web_search_requests": 2 }));
        assert_eq!(server_tool_counts(&usage), (1, 2));
        assert_eq!(usage["input_tokens"], 3);
    }

    #[test]
    fn the_search_backend_setting_is_an_http_base_url() {
        assert_eq!(search_backend_url(" http://searx:8080/ ").unwrap().as_deref(), Some("http://searx:8080"));
        assert_eq!(
            search_backend_url("https://s.example/searxng").unwrap().as_deref(),
            Some("https://s.example/searxng")
        );
        assert_eq!(search_backend_url("  ").unwrap(), None);
        assert!(search_backend_url("searx:8080").is_err());
        assert!(search_backend_url("ftp://searx/").is_err());
        assert!(search_backend_url("http://searx/search?q=x").is_err());
    }

    #[test]
    fn search_enabled_only_by_default_is_disabled_without_a_backend() {
        let policy = json!({ "type": "always_ask" });
        let toolset = json!({
            "type": "agent_toolset_20260401",
            "default_config": { "enabled": true, "permission_policy": policy },
            "configs": [{ "name": "bash", "type": "bash", "enabled": false, "permission_policy": policy }],
        });
        let mut configured = toolset.clone();
        disable_implicit_search(&mut configured, true);
        assert_eq!(configured, toolset, "a backend leaves the default alone");
        let mut without = toolset.clone();
        disable_implicit_search(&mut without, false);
        assert_eq!(
            without["configs"][1],
            json!({ "name": "web_search", "type": "web_search", "enabled": false, "permission_policy": policy })
        );
        let mut explicit = toolset;
        explicit["configs"] = json!([{ "name": "web_search", "enabled": true }]);
        let before = explicit.clone();
        disable_implicit_search(&mut explicit, false);
        assert_eq!(explicit, before, "an explicit config is the caller's to refuse");
        let mut off =
            json!({ "type": "agent_toolset_20260401", "default_config": { "enabled": false }, "configs": [] });
        disable_implicit_search(&mut off, false);
        assert_eq!(off["configs"], json!([]), "nothing is enabled by default");
    }
}
