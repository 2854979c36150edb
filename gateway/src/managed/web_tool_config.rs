//! The `web_fetch` and `web_search` entries of an `agent_toolset_20260401` `configs`
//! list (docs/api/tools.md): their options checked and resolved into the response
//! shape, and the one rule that an agent cannot enable `web_search` on a deployment
//! without a search backend (`AGENTD_WEB_SEARCH_URL`).

use std::collections::HashSet;

use agentd_schema::web::{self, WebTool};
use serde_json::{Map, Value, json};

use super::body::{self, as_object, join, kind};
use crate::error::{ApiError, ApiResult};

/// Domains in `allowed_domains` / `blocked_domains` (wire: "At most 64 entries").
const MAX_DOMAINS: usize = 64;
/// Tools in an `only` / `except` URL source list (wire: "Between 1 and 128 entries").
const MAX_SOURCE_TOOLS: usize = 128;
/// A host name is at most 253 characters; a `web_search` entry may add a path.
const MAX_DOMAIN_CHARS: usize = 512;

/// The keys a toolset `configs` entry may carry.
pub(super) fn config_keys(name: &str) -> &'static [&'static str] {
    match WebTool::of(name) {
        Some(WebTool::Fetch) => &[
            "name",
            "type",
            "enabled",
            "permission_policy",
            "allowed_domains",
            "blocked_domains",
            "max_content_tokens",
            "url_sources",
        ],
        Some(WebTool::Search) => {
            &["name", "type", "enabled", "permission_policy", "allowed_domains", "blocked_domains", "user_location"]
        }
        None => &["name", "type", "enabled", "permission_policy"],
    }
}

/// Checks the options of a web tool's config `config` at `path` and writes their
/// resolved form into `out`; `enabled` is the tool's resolved switch. Other tools'
/// configs pass unchanged.
pub(super) fn resolve(
    config: &Map<String, Value>,
    enabled: bool,
    path: &str,
    out: &mut Map<String, Value>,
) -> ApiResult<()> {
    let Some(tool) = config.get("name").and_then(Value::as_str).and_then(WebTool::of) else { return Ok(()) };
    if tool == WebTool::Search && enabled && web::search_backend().is_none() {
        return Err(ApiError::invalid(format!("{path}: {}", web::NO_SEARCH_BACKEND)));
    }
    domains(config, tool, path, out)?;
    match tool {
        WebTool::Fetch => {
            match config.get("max_content_tokens") {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) if n.as_u64().is_some_and(|n| (1..=u64::from(u32::MAX)).contains(&n)) => {}
                Some(other) => {
                    return Err(ApiError::invalid(format!(
                        "{}: expected a positive integer, got {}",
                        join(path, "max_content_tokens"),
                        shown(other)
                    )));
                }
            }
            if let Some(sources) = config.get("url_sources").filter(|v| !v.is_null()) {
                out.insert("url_sources".into(), url_sources(sources, &join(path, "url_sources"))?);
            }
        }
        WebTool::Search => {
            // SearXNG localizes by language, not by a user's location: accepting one and
            // searching without it would be a feature accepted and silently ignored.
            if config.get("user_location").is_some_and(|v| !v.is_null()) {
                return Err(ApiError::invalid(format!(
                    "{}: not supported: agentd's search backend (AGENTD_WEB_SEARCH_URL, SearXNG-compatible) \
                     does not localize results by location; omit it",
                    join(path, "user_location")
                )));
            }
        }
    }
    Ok(())
}

/// `allowed_domains` / `blocked_domains`: 1 to 64 host names each, never both.
fn domains(config: &Map<String, Value>, tool: WebTool, path: &str, out: &mut Map<String, Value>) -> ApiResult<()> {
    let present = |key: &str| config.get(key).is_some_and(|v| !v.is_null());
    if present("allowed_domains") && present("blocked_domains") {
        return Err(ApiError::invalid(format!(
            "{path}: allowed_domains and blocked_domains cannot be combined; use one of them"
        )));
    }
    for key in ["allowed_domains", "blocked_domains"] {
        let field = join(path, key);
        let Some(value) = config.get(key).filter(|v| !v.is_null()) else { continue };
        let entries = body::array(Some(value), &field, MAX_DOMAINS)?;
        if entries.is_empty() {
            return Err(ApiError::invalid(format!("{field}: an empty list is rejected; omit the field instead")));
        }
        let mut resolved = Vec::with_capacity(entries.len());
        for (i, entry) in entries.iter().enumerate() {
            let entry_path = format!("{field}[{i}]");
            let domain = body::string(Some(entry), &entry_path, 1, MAX_DOMAIN_CHARS)?;
            check_domain(&domain, tool).map_err(|why| ApiError::invalid(format!("{entry_path}: {why}")))?;
            resolved.push(json!(domain));
        }
        out.insert(key.into(), Value::Array(resolved));
    }
    Ok(())
}

/// A plain host name like `docs.example.com`: no scheme, port or path (`web_search`
/// entries may end with a path, `example.com/docs`).
pub(crate) fn check_domain(entry: &str, tool: WebTool) -> Result<(), String> {
    let (host, path) = match entry.split_once('/') {
        Some((host, path)) if tool == WebTool::Search => (host, Some(path)),
        Some(_) => {
            return Err(format!(
                "{entry:?} must be a plain host name like \"docs.example.com\" (no scheme, port or path)"
            ));
        }
        None => (entry, None),
    };
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if host.len() > 253 || !host.split('.').all(label_ok) {
        let form =
            if tool == WebTool::Search { "no scheme or port; a path may follow" } else { "no scheme, port or path" };
        return Err(format!("{entry:?} must be a plain host name like \"docs.example.com\" ({form})"));
    }
    if path.is_some_and(|path| path.chars().any(|c| c.is_whitespace() || "?#".contains(c))) {
        return Err(format!("{entry:?}: the path suffix takes no query, fragment or spaces"));
    }
    Ok(())
}

/// `url_sources`, resolved to the object form of every key (null keys stay null: not
/// set, which allows every URL from that source).
fn url_sources(value: &Value, path: &str) -> ApiResult<Value> {
    let map = as_object(value, path)?;
    body::only_known(map, &["client_tool_results", "server_tool_results", "user_input"], path)?;
    let mut out = Map::new();
    let mut none = 0;
    for key in ["client_tool_results", "server_tool_results", "user_input"] {
        let source = source(map.get(key), key, &join(path, key))?;
        none += usize::from(source["type"] == "none");
        out.insert(key.into(), source);
    }
    if none == 3 {
        return Err(ApiError::invalid(format!(
            "{path}: setting all three sources to \"none\" is rejected (web_fetch could fetch nothing); disable web_fetch instead"
        )));
    }
    Ok(Value::Object(out))
}

/// One URL source: `"all"`, `"none"`, or (tool results only) an `only` / `except` list.
fn source(value: Option<&Value>, key: &str, path: &str) -> ApiResult<Value> {
    let lists = key != "user_input";
    let expected = if lists { "\"all\", \"none\", or an only or except list" } else { "\"all\" or \"none\"" };
    let (kind_name, map) = match value {
        None | Some(Value::Null) => return Ok(Value::Null),
        Some(Value::String(name)) => (name.as_str(), None),
        Some(Value::Object(map)) => (body::tag(map, path)?, Some(map)),
        Some(other) => return Err(ApiError::invalid(format!("{path}: expected {expected}, got {}", kind(other)))),
    };
    match (kind_name, map) {
        ("all" | "none", map) => {
            if let Some(map) = map {
                body::only_known(map, &["type"], path)?;
            }
            Ok(json!({ "type": kind_name }))
        }
        ("only" | "except", Some(map)) if lists => {
            body::only_known(map, &["type", "tools"], path)?;
            let tools_path = join(path, "tools");
            let tools = body::array(map.get("tools"), &tools_path, MAX_SOURCE_TOOLS)?;
            if tools.is_empty() {
                let instead = if kind_name == "only" { "none" } else { "all" };
                return Err(ApiError::invalid(format!(
                    "{tools_path}: between 1 and {MAX_SOURCE_TOOLS} tools; an empty list is rejected (use \"{instead}\")"
                )));
            }
            let mut seen = HashSet::new();
            let mut resolved = Vec::with_capacity(tools.len());
            for (i, tool) in tools.iter().enumerate() {
                let tool_path = format!("{tools_path}[{i}]");
                let tool_map = as_object(tool, &tool_path)?;
                body::only_known(tool_map, &["type", "name"], &tool_path)?;
                if body::tag(tool_map, &tool_path)? != "tool_reference" {
                    return Err(ApiError::invalid(format!("{tool_path}.type: must be \"tool_reference\"")));
                }
                let name = body::string(tool_map.get("name"), &join(&tool_path, "name"), 1, 128)?;
                if key == "server_tool_results" && WebTool::of(&name).is_none() {
                    return Err(ApiError::invalid(format!(
                        "{tool_path}.name: must be \"web_search\" or \"web_fetch\", got {name:?}"
                    )));
                }
                if !seen.insert(name.clone()) {
                    return Err(ApiError::invalid(format!("{tool_path}.name: {name:?} is listed twice")));
                }
                resolved.push(json!({ "type": "tool_reference", "name": name }));
            }
            Ok(json!({ "type": kind_name, "tools": resolved }))
        }
        _ => Err(ApiError::invalid(format!("{path}: expected {expected}, got {}", shown_kind(kind_name)))),
    }
}

/// The names of custom tools a resolved toolset's `url_sources.client_tool_results`
/// lists must be custom tools of the same agent (they may follow the toolset in
/// `tools`, so this runs once every tool is resolved).
pub(super) fn check_client_tools(toolset: &Value, path: &str, custom: &HashSet<String>) -> ApiResult<()> {
    for (j, config) in toolset["configs"].as_array().into_iter().flatten().enumerate() {
        let listed = &config["url_sources"]["client_tool_results"]["tools"];
        for (i, tool) in listed.as_array().into_iter().flatten().enumerate() {
            let name = tool["name"].as_str().unwrap_or_default();
            if !custom.contains(name) {
                return Err(ApiError::invalid(format!(
                    "{path}.configs[{j}].url_sources.client_tool_results.tools[{i}].name: {name:?} is not a custom tool of this agent"
                )));
            }
        }
    }
    Ok(())
}

fn shown(value: &Value) -> String {
    match value {
        Value::Number(n) => n.to_string(),
        other => kind(other).to_owned(),
    }
}

fn shown_kind(name: &str) -> String {
    format!("{name:?}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolved(config: Value) -> ApiResult<Map<String, Value>> {
        let map = config.as_object().unwrap().clone();
        let mut out = map.clone();
        resolve(&map, false, "tools[0].configs[0]", &mut out)?;
        Ok(out)
    }

    fn message(result: ApiResult<Map<String, Value>>) -> String {
        format!("{:?}", result.unwrap_err())
    }

    #[test]
    fn domains_are_plain_host_names_and_search_entries_may_carry_a_path() {
        assert!(check_domain("docs.example.com", WebTool::Fetch).is_ok());
        assert!(check_domain("localhost", WebTool::Fetch).is_ok());
        assert!(check_domain("example.com/docs/api", WebTool::Search).is_ok());
        for bad in ["https://example.com", "example.com:443", "example.com/docs", "-x.com", "a..b", "", "ex ample.com"]
        {
            assert!(check_domain(bad, WebTool::Fetch).is_err(), "{bad:?}");
        }
        assert!(check_domain("example.com/a?b", WebTool::Search).is_err());
        assert!(check_domain("example.com:8080/docs", WebTool::Search).is_err());
    }

    #[test]
    fn domain_lists_are_bounded_non_empty_and_exclusive() {
        let both = json!({ "name": "web_fetch", "allowed_domains": ["a.com"], "blocked_domains": ["b.com"] });
        assert!(message(resolved(both)).contains("cannot be combined"));
        let empty = json!({ "name": "web_fetch", "allowed_domains": [] });
        assert!(message(resolved(empty)).contains("empty list"));
        let many: Vec<String> = (0..65).map(|i| format!("d{i}.com")).collect();
        assert!(message(resolved(json!({ "name": "web_fetch", "blocked_domains": many }))).contains("at most 64"));
        let bad = json!({ "name": "web_fetch", "allowed_domains": ["a.com", "http://b.com"] });
        assert!(message(resolved(bad)).contains("allowed_domains[1]"));
        let fine = resolved(json!({ "name": "web_search", "blocked_domains": ["ads.example.com/x"] })).unwrap();
        assert_eq!(fine["blocked_domains"], json!(["ads.example.com/x"]));
    }

    #[test]
    fn url_sources_resolve_to_the_object_form() {
        let out = resolved(json!({
            "name": "web_fetch",
            "url_sources": {
                "user_input": "none",
                "server_tool_results": { "type": "only", "tools": [{ "type": "tool_reference", "name": "web_search" }] },
            },
        }))
        .unwrap();
        assert_eq!(
            out["url_sources"],
            json!({
                "client_tool_results": null,
                "server_tool_results": { "type": "only", "tools": [{ "type": "tool_reference", "name": "web_search" }] },
                "user_input": { "type": "none" },
            })
        );
        let all_none = json!({ "name": "web_fetch", "url_sources": { "user_input": "none", "client_tool_results": "none", "server_tool_results": { "type": "none" } } });
        assert!(message(resolved(all_none)).contains("all three"));
        let not_server = json!({ "name": "web_fetch", "url_sources": { "server_tool_results": { "type": "except", "tools": [{ "type": "tool_reference", "name": "bash" }] } } });
        assert!(message(resolved(not_server)).contains("web_search"));
        let empty =
            json!({ "name": "web_fetch", "url_sources": { "client_tool_results": { "type": "only", "tools": [] } } });
        assert!(message(resolved(empty)).contains("use \\\"none\\\""));
        let list_for_user =
            json!({ "name": "web_fetch", "url_sources": { "user_input": { "type": "only", "tools": [] } } });
        assert!(message(resolved(list_for_user)).contains("user_input"));
    }

    #[test]
    fn fetch_limits_and_search_location_are_checked() {
        assert!(resolved(json!({ "name": "web_fetch", "max_content_tokens": 2000 })).is_ok());
        assert!(
            message(resolved(json!({ "name": "web_fetch", "max_content_tokens": 0 }))).contains("positive integer")
        );
        assert!(
            message(resolved(json!({ "name": "web_fetch", "max_content_tokens": "9" }))).contains("positive integer")
        );
        let located = json!({ "name": "web_search", "user_location": { "type": "approximate", "city": "Paris" } });
        assert!(message(resolved(located)).contains("user_location"));
    }

    fn agent(tools: Value) -> ApiResult<Map<String, Value>> {
        let config = json!({ "name": "a", "model": "claude-sonnet-4-6", "tools": tools });
        super::super::agent_config::normalize_in(config.as_object().unwrap(), agentd_schema::catalog::current())
    }

    /// No test process installs a search backend: these are the rules without one.
    #[test]
    fn without_a_search_backend_web_search_is_refused_or_resolved_disabled() {
        let explicit = agent(json!([{ "type": "agent_toolset_20260401", "configs": [{ "name": "web_search" }] }]));
        let message = message(explicit);
        assert!(message.contains("tools[0].configs[0]") && message.contains("AGENTD_WEB_SEARCH_URL"), "{message}");
        let by_default = agent(json!([{ "type": "agent_toolset_20260401" }])).unwrap();
        let configs = &by_default["tools"][0]["configs"];
        assert_eq!(
            configs,
            &json!([{ "name": "web_search", "type": "web_search", "enabled": false, "permission_policy": { "type": "always_allow" } }]),
            "the resolved toolset says web_search is off"
        );
        let off = agent(
            json!([{ "type": "agent_toolset_20260401", "configs": [{ "name": "web_search", "enabled": false }] }]),
        );
        assert!(off.is_ok());
        let fetch = agent(
            json!([{ "type": "agent_toolset_20260401", "configs": [{ "name": "web_fetch", "allowed_domains": ["docs.rs"] }] }]),
        );
        assert_eq!(fetch.unwrap()["tools"][0]["configs"][0]["allowed_domains"], json!(["docs.rs"]));
    }

    #[test]
    fn options_the_wire_does_not_define_are_refused_not_ignored() {
        for (config, field) in [
            (json!({ "name": "web_fetch", "max_uses": 3 }), "max_uses"),
            (json!({ "name": "bash", "allowed_domains": ["a.com"] }), "allowed_domains"),
            (json!({ "name": "web_search", "enabled": false, "max_content_tokens": 5 }), "max_content_tokens"),
        ] {
            let message = message(agent(json!([{ "type": "agent_toolset_20260401", "configs": [config] }])));
            assert!(message.contains(&format!("tools[0].configs[0].{field}: unknown field")), "{message}");
        }
        let twice = agent(
            json!([{ "type": "agent_toolset_20260401", "configs": [{ "name": "web_fetch" }, { "name": "web_fetch" }] }]),
        );
        assert!(message(twice).contains("configured twice"));
        let custom = agent(json!([
            { "type": "agent_toolset_20260401", "configs": [{ "name": "web_fetch", "url_sources": { "client_tool_results": { "type": "only", "tools": [{ "type": "tool_reference", "name": "lookup" }] } } }] },
            { "type": "custom", "name": "lookup", "description": "d", "input_schema": { "type": "object" } },
        ]));
        assert!(custom.is_ok(), "a custom tool listed before it is defined: {custom:?}");
    }

    #[test]
    fn client_tool_lists_must_name_custom_tools_of_the_agent() {
        let toolset = json!({ "configs": [{ "name": "web_fetch", "url_sources": { "client_tool_results": { "type": "only", "tools": [{ "type": "tool_reference", "name": "lookup" }] } } }] });
        let custom: HashSet<String> = ["lookup".to_owned()].into();
        assert!(check_client_tools(&toolset, "tools[0]", &custom).is_ok());
        let err = check_client_tools(&toolset, "tools[0]", &HashSet::new()).unwrap_err();
        assert!(format!("{err:?}").contains("not a custom tool"));
    }
}
