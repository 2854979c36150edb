//! Which URLs `web_fetch` may fetch: only URLs the conversation has already shown the
//! model (Managed Agents `url_sources`, managed-agents-wire.md §5.4) — in the text of
//! a user message, a custom tool's result, or an earlier `web_search` / `web_fetch`
//! result — each source narrowed by the tool config's `url_sources` (null or absent:
//! every URL of that source). A model cannot make up a URL (say one that carries the
//! conversation to a server of someone's choosing) and have the worker fetch it.
//!
//! Pure: a function of committed history, called by `agent_loop::decide`.

use std::collections::HashMap;

use agentd_schema::EventType;
use agentd_schema::web::WebTool;
use reqwest::Url;
use serde_json::Value;

use crate::event::Event;

/// One source's rule.
#[derive(Debug, Clone, PartialEq)]
enum Source {
    All,
    None,
    Only(Vec<String>),
    Except(Vec<String>),
}

impl Source {
    fn of(value: &Value) -> Self {
        let names = || {
            value["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        };
        match value["type"].as_str().or(value.as_str()) {
            Some("none") => Self::None,
            Some("only") => Self::Only(names()),
            Some("except") => Self::Except(names()),
            _ => Self::All,
        }
    }

    fn admits(&self, tool: &str) -> bool {
        match self {
            Self::All => true,
            Self::None => false,
            Self::Only(names) => names.iter().any(|n| n == tool),
            Self::Except(names) => !names.iter().any(|n| n == tool),
        }
    }
}

/// The `url_sources` of a `web_fetch` config.
#[derive(Debug, Clone, PartialEq)]
pub struct UrlSources {
    user_input: Source,
    client_tool_results: Source,
    server_tool_results: Source,
}

impl UrlSources {
    /// From a `web_fetch` config (`Null`: every source).
    pub fn of(config: &Value) -> Self {
        let sources = &config["url_sources"];
        Self {
            user_input: Source::of(&sources["user_input"]),
            client_tool_results: Source::of(&sources["client_tool_results"]),
            server_tool_results: Source::of(&sources["server_tool_results"]),
        }
    }

    /// Whether `url` appeared in a source these rules admit among `history[..before]`.
    pub fn shown(&self, history: &[Event], before: usize, url: &Url) -> bool {
        let wanted = comparable(url);
        // The bodies, parsed again where they are packed (a fetch is rare; a history long).
        let history: Vec<_> = history[..before.min(history.len())].iter().map(Event::stored).collect();
        // Tool names by call id, to know whose result a result is.
        let mut names: HashMap<&str, &str> = HashMap::new();
        for event in &history {
            let Some(kind) = event.event_type() else { continue };
            let body = &event.body;
            let admitted = match kind {
                EventType::AgentToolUse | EventType::AgentCustomToolUse => {
                    names.insert(event.event_id.as_str(), body["name"].as_str().unwrap_or_default());
                    false
                }
                EventType::UserMessage => self.user_input == Source::All,
                EventType::UserCustomToolResult => body["custom_tool_use_id"]
                    .as_str()
                    .and_then(|id| names.get(id))
                    .is_some_and(|name| self.client_tool_results.admits(name)),
                EventType::AgentToolResult => body["tool_use_id"]
                    .as_str()
                    .and_then(|id| names.get(id))
                    .is_some_and(|name| WebTool::of(name).is_some() && self.server_tool_results.admits(name)),
                _ => false,
            };
            if admitted && texts(&body["content"]).any(|text| urls_in(text).any(|found| comparable(&found) == wanted)) {
                return true;
            }
        }
        false
    }
}

/// The text of a content array's text blocks.
fn texts(content: &Value) -> impl Iterator<Item = &str> {
    content.as_array().into_iter().flatten().filter(|b| b["type"] == "text").filter_map(|b| b["text"].as_str())
}

/// A URL as compared: without its fragment and a trailing `/`.
fn comparable(url: &Url) -> String {
    let mut url = url.clone();
    url.set_fragment(None);
    url.as_str().trim_end_matches('/').to_owned()
}

/// The `http(s)` URLs in a text: runs of URL characters after `http://` or
/// `https://`, without trailing punctuation (a sentence's period, a closing bracket
/// that opened before the URL).
pub fn urls_in(text: &str) -> impl Iterator<Item = Url> + '_ {
    let mut rest = text;
    std::iter::from_fn(move || {
        loop {
            let at = ["http://", "https://"].iter().filter_map(|scheme| find_ascii_ci(rest, scheme)).min()?;
            let tail = &rest[at..];
            let end = tail
                .find(|c: char| c.is_whitespace() || c.is_control() || "<>\"`{}|\\^".contains(c))
                .unwrap_or(tail.len());
            let mut candidate = &tail[..end];
            rest = &tail[end..];
            loop {
                let trimmed = candidate.trim_end_matches(['.', ',', ';', ':', '!', '?', '\'', '*']);
                let trimmed = match trimmed.chars().last() {
                    Some(close @ (')' | ']')) => {
                        let open = if close == ')' { '(' } else { '[' };
                        if trimmed.matches(open).count() < trimmed.matches(close).count() {
                            &trimmed[..trimmed.len() - 1]
                        } else {
                            trimmed
                        }
                    }
                    _ => trimmed,
                };
                if trimmed == candidate {
                    break;
                }
                candidate = trimmed;
            }
            if let Ok(url) = Url::parse(candidate) {
                return Some(url);
            }
        }
    })
}

/// The byte offset of `needle` (ASCII) in `haystack`, ignoring ASCII case.
fn find_ascii_ci(haystack: &str, needle: &str) -> Option<usize> {
    haystack.as_bytes().windows(needle.len()).position(|window| window.eq_ignore_ascii_case(needle.as_bytes()))
}

#[cfg(test)]
mod tests {
    use agentd_schema::StoredEvent;
    use serde_json::json;

    use super::*;

    /// Packed, as the history cache keeps events: the rules read the bodies' text.
    fn history(events: &[(&str, Value)]) -> Vec<Event> {
        events
            .iter()
            .enumerate()
            .map(|(i, (id, body))| StoredEvent {
                session_id: "sesn_1".into(),
                seq: i as i64 + 1,
                event_id: (*id).to_owned(),
                thread_id: "sesn_1".into(),
                kind: body["type"].as_str().unwrap_or_default().to_owned(),
                body: body.clone(),
                processed_at_ms: 0,
            })
            .map(Event::packed)
            .collect()
    }

    fn text(value: &str) -> Value {
        json!([{ "type": "text", "text": value }])
    }

    fn url(raw: &str) -> Url {
        Url::parse(raw).unwrap()
    }

    #[test]
    fn urls_are_found_in_prose_and_markup() {
        let found: Vec<String> = urls_in(
            "See https://example.com/a. Or (https://example.com/b), [x](https://example.com/c) and \
             https://en.wikipedia.org/wiki/Rust_(language)! HTTPS://UPPER.example/x \"https://q.example/?a=1&b=2\"",
        )
        .map(|u| u.to_string())
        .collect();
        assert_eq!(
            found,
            [
                "https://example.com/a",
                "https://example.com/b",
                "https://example.com/c",
                "https://en.wikipedia.org/wiki/Rust_(language)",
                "https://upper.example/x",
                "https://q.example/?a=1&b=2",
            ]
        );
        assert_eq!(urls_in("no links, ftp://x.example/, http:// nothing").count(), 0);
    }

    #[test]
    fn only_urls_shown_before_the_call_by_an_admitted_source_may_be_fetched() {
        let events = history(&[
            ("e1", json!({ "type": "user.message", "content": text("read https://user.example/page") })),
            ("e2", json!({ "type": "agent.custom_tool_use", "name": "lookup", "input": {} })),
            (
                "e3",
                json!({ "type": "user.custom_tool_result", "custom_tool_use_id": "e2", "content": text("https://custom.example/") }),
            ),
            ("e4", json!({ "type": "agent.tool_use", "name": "web_search", "input": {} })),
            (
                "e5",
                json!({ "type": "agent.tool_result", "tool_use_id": "e4", "content": text("1. T\n   URL: https://found.example/r") }),
            ),
            ("e6", json!({ "type": "agent.tool_use", "name": "bash", "input": {} })),
            (
                "e7",
                json!({ "type": "user.tool_result", "tool_use_id": "e6", "content": text("https://bash.example/") }),
            ),
            ("e8", json!({ "type": "agent.message", "content": text("https://model.example/") })),
            ("e9", json!({ "type": "agent.tool_use", "name": "web_fetch", "input": {} })),
            ("e10", json!({ "type": "user.message", "content": text("later https://later.example/") })),
        ]);
        let all = UrlSources::of(&Value::Null);
        for shown in [
            "https://user.example/page",
            "https://user.example/page/#top",
            "https://custom.example",
            "https://found.example/r",
        ] {
            assert!(all.shown(&events, 8, &url(shown)), "{shown}");
        }
        for hidden in
            ["https://bash.example/", "https://model.example/", "https://later.example/", "https://user.example/page2"]
        {
            assert!(!all.shown(&events, 8, &url(hidden)), "{hidden}");
        }

        let narrow = UrlSources::of(&json!({ "url_sources": {
            "user_input": { "type": "none" },
            "client_tool_results": { "type": "except", "tools": [{ "type": "tool_reference", "name": "lookup" }] },
            "server_tool_results": { "type": "only", "tools": [{ "type": "tool_reference", "name": "web_search" }] },
        } }));
        assert!(!narrow.shown(&events, 8, &url("https://user.example/page")));
        assert!(!narrow.shown(&events, 8, &url("https://custom.example/")));
        assert!(narrow.shown(&events, 8, &url("https://found.example/r")));
        let no_server = UrlSources::of(&json!({ "url_sources": { "server_tool_results": "none" } }));
        assert!(!no_server.shown(&events, 8, &url("https://found.example/r")));
        assert!(no_server.shown(&events, 8, &url("https://user.example/page")));
    }
}
