//! The server-side tools of `agent_toolset_20260401`, run by the worker (not the
//! hands): `web_fetch` (`fetch.rs`: through the egress guard, HTML reduced to text by
//! `text.rs`) and `web_search` (`search.rs`: the configured SearXNG-compatible
//! backend). The agent loop routes their calls here as remote calls
//! (`RemoteTarget::Web`) after `sources.rs` has checked that a URL to fetch appeared
//! in the conversation; `domains.rs` applies the configs' domain lists.
//! docs/api/tools.md.
//!
//! Both tools only read, so a call an earlier, dead attempt may have made is made
//! again (its result was not committed, or the call would not be open).

pub mod domains;
pub mod fetch;
pub mod search;
pub mod sources;
pub mod text;

use agentd_schema::web::{self, WebTool};
use reqwest::Url;
use serde_json::{Value, json};

use domains::DomainFilter;

/// Tokens of page text a `web_fetch` result holds when its config sets no
/// `max_content_tokens`.
pub const DEFAULT_MAX_CONTENT_TOKENS: usize = 25_000;

/// The tools' descriptions and input schemas, as offered to the model.
pub fn spec(tool: WebTool) -> (&'static str, Value) {
    match tool {
        WebTool::Fetch => (
            "Fetch a web page (http or https) and return its text. Only URLs that already appeared in the \
             conversation can be fetched: in the user's messages, in custom tool results, or in earlier \
             web_search or web_fetch results.",
            json!({
                "type": "object",
                "properties": { "url": { "type": "string", "description": "The URL to fetch." } },
                "required": ["url"],
            }),
        ),
        WebTool::Search => (
            "Search the web. Returns the title, URL and a snippet of each result.",
            json!({
                "type": "object",
                "properties": { "query": { "type": "string", "description": "What to search for." } },
                "required": ["query"],
            }),
        ),
    }
}

/// The config of `tool` in the agent's toolset (`Null` when it has none).
pub fn config(agent: &Value, tool: WebTool) -> &Value {
    agent["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["type"] == "agent_toolset_20260401")
        .flat_map(|t| t["configs"].as_array().into_iter().flatten())
        .find(|c| c["name"] == tool.name())
        .unwrap_or(&Value::Null)
}

/// Why a `web_fetch` call may not run, checked by `decide` before the call is made:
/// its input names an `http(s)` URL the conversation showed (`sources.rs`).
pub fn refuse_fetch(agent: &Value, history: &[crate::event::Event], at: usize, input: &Value) -> Option<String> {
    let url = match fetch_url(input) {
        Ok(url) => url,
        Err(why) => return Some(why),
    };
    let sources = sources::UrlSources::of(config(agent, WebTool::Fetch));
    (!sources.shown(history, at, &url)).then(|| {
        format!(
            "web_fetch: {} has not appeared in this conversation; web_fetch fetches only URLs from the user's \
             messages, custom tool results or earlier web_search and web_fetch results (url_sources)",
            agentd_schema::egress::redacted(url.as_str())
        )
    })
}

fn fetch_url(input: &Value) -> Result<Url, String> {
    let raw = input["url"].as_str().ok_or("web_fetch: the input needs a \"url\" string")?;
    let url = Url::parse(raw.trim()).map_err(|error| format!("web_fetch: {raw:?} is not a URL ({error})"))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(format!("web_fetch: only http and https URLs can be fetched, not {:?}", url.scheme()));
    }
    Ok(url)
}

/// What a call produced.
#[derive(Debug)]
pub struct Answer {
    /// The result's content blocks.
    pub content: Value,
    /// The call failed.
    pub is_error: bool,
    /// A request went out (usage counts it).
    pub made_request: bool,
}

impl Answer {
    fn text(text: impl Into<String>, is_error: bool, made_request: bool) -> Self {
        Self { content: json!([{ "type": "text", "text": text.into() }]), is_error, made_request }
    }
}

/// Makes one call of `tool` with the model's `input` under the agent's config;
/// `allow_private` is `AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`.
pub async fn run(tool: WebTool, agent: &Value, input: &Value, allow_private: bool) -> Answer {
    let config = config(agent, tool);
    match tool {
        WebTool::Fetch => run_fetch(config, input, allow_private).await,
        WebTool::Search => run_search(config, input).await,
    }
}

async fn run_fetch(config: &Value, input: &Value, allow_private: bool) -> Answer {
    let url = match fetch_url(input) {
        Ok(url) => url,
        Err(why) => return Answer::text(why, true, false),
    };
    let max_tokens = config["max_content_tokens"]
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .unwrap_or(DEFAULT_MAX_CONTENT_TOKENS);
    let page = match fetch::fetch(url, &DomainFilter::of(config), allow_private).await {
        Ok(page) => page,
        Err(failed) => return Answer::text(format!("web_fetch: {}", failed.message), true, failed.made_request),
    };
    match render_page(&page, max_tokens).await {
        Ok(text) => Answer::text(text, false, true),
        Err(why) => Answer::text(format!("web_fetch: {why}"), true, true),
    }
}

/// The result text of a fetched page: where it came from, its title, its text (cut to
/// `max_tokens`), and notes on what was left out.
async fn render_page(page: &fetch::Page, max_tokens: usize) -> Result<String, String> {
    let media = page.media_type.as_str();
    let decoded = String::from_utf8_lossy(&page.body).into_owned();
    let html =
        matches!(media, "text/html" | "application/xhtml+xml") || (media.is_empty() && looks_like_html(&decoded));
    let textual = media.starts_with("text/")
        || matches!(
            media,
            "application/json"
                | "application/xml"
                | "application/javascript"
                | "application/x-yaml"
                | "application/yaml"
        )
        || media.ends_with("+json")
        || media.ends_with("+xml")
        || (media.is_empty() && std::str::from_utf8(&page.body).is_ok());
    let (title, body) = if html {
        // html5ever on a large page takes a while: off the async threads.
        let base = page.url.clone();
        let rendered =
            tokio::task::spawn_blocking(move || (text::title(&decoded), text::html_to_text(&decoded, &base))).await;
        rendered.map_err(|error| format!("the page could not be rendered: {error}"))?
    } else if textual {
        (None, decoded)
    } else {
        return Err(format!(
            "{}: the content type {media:?} is not supported; web_fetch returns web pages and text",
            agentd_schema::egress::redacted(page.url.as_str())
        ));
    };
    let (kept, cut) = text::truncate(body.trim(), max_tokens);
    let mut out = format!("Fetched {}", page.url);
    if let Some(title) = title {
        out.push_str(&format!("\nTitle: {title}"));
    }
    out.push_str("\n\n");
    out.push_str(if kept.is_empty() { "(the page has no text)" } else { kept });
    if cut {
        out.push_str(&format!("\n\n[The text was cut at about {max_tokens} tokens (max_content_tokens).]"));
    }
    if page.cut {
        out.push_str(&format!("\n\n[Only the first {} bytes of the page were read.]", fetch::MAX_READ_BYTES));
    }
    Ok(out)
}

fn looks_like_html(text: &str) -> bool {
    let head: String = text.trim_start().chars().take(512).collect::<String>().to_ascii_lowercase();
    head.starts_with("<!doctype html") || head.starts_with("<html") || head.contains("<head") || head.contains("<body")
}

async fn run_search(config: &Value, input: &Value) -> Answer {
    let Some(base) = web::search_backend() else {
        return Answer::text(
            "web_search is not available: this worker has no search backend (AGENTD_WEB_SEARCH_URL)",
            true,
            false,
        );
    };
    let Some(query) = input["query"].as_str().map(str::trim).filter(|q| !q.is_empty()) else {
        return Answer::text("web_search: the input needs a non-empty \"query\" string", true, false);
    };
    match search::search(base, query, &DomainFilter::of(config)).await {
        Ok(hits) => Answer::text(search::render(query, &hits), false, true),
        Err(why) => Answer::text(format!("web_search: {why}"), true, true),
    }
}

/// Adjusts an agent snapshot taken before web_search needed a backend: a toolset that
/// enables it only by default does not offer it from a worker without one.
pub fn arm(agent: &mut Value) {
    let configured = web::search_backend().is_some();
    for toolset in agent["tools"].as_array_mut().into_iter().flatten() {
        web::disable_implicit_search(toolset, configured);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn page(media: &str, body: &str) -> fetch::Page {
        fetch::Page {
            url: Url::parse("https://example.com/p").unwrap(),
            media_type: media.into(),
            body: body.as_bytes().to_vec(),
            cut: false,
        }
    }

    #[tokio::test]
    async fn pages_render_by_content_type_and_are_cut_to_the_token_budget() {
        let html = "<html><head><title>T</title></head><body><p>Hello <b>there</b></p></body></html>";
        let text = render_page(&page("text/html", html), 100).await.unwrap();
        assert_eq!(text, "Fetched https://example.com/p\nTitle: T\n\nHello **there**");
        let sniffed = render_page(&page("", html), 100).await.unwrap();
        assert!(sniffed.contains("Hello **there**"), "{sniffed}");
        let plain = render_page(&page("text/plain", "just <b>text</b>"), 100).await.unwrap();
        assert!(plain.ends_with("just <b>text</b>"), "{plain}");
        let cut = render_page(&page("application/json", &"x".repeat(100)), 5).await.unwrap();
        assert!(cut.contains(&format!("\n\n{}\n\n[The text was cut at about 5 tokens", "x".repeat(20))), "{cut}");
        let binary = render_page(&page("image/png", "\u{89}PNG"), 100).await.unwrap_err();
        assert!(binary.contains("image/png") && binary.contains("not supported"), "{binary}");
    }

    #[tokio::test]
    async fn fetch_inputs_are_checked_before_anything_goes_out() {
        for input in
            [json!({}), json!({ "url": 3 }), json!({ "url": "not a url" }), json!({ "url": "file:///etc/passwd" })]
        {
            let answer = run(WebTool::Fetch, &Value::Null, &input, true).await;
            assert!(answer.is_error && !answer.made_request, "{input}: {answer:?}");
        }
        let blocked = json!({ "tools": [{ "type": "agent_toolset_20260401", "configs": [{ "name": "web_fetch", "blocked_domains": ["blocked.example"] }] }] });
        let answer = run(WebTool::Fetch, &blocked, &json!({ "url": "https://www.blocked.example/" }), true).await;
        assert!(answer.is_error && !answer.made_request);
        assert!(answer.content[0]["text"].as_str().unwrap().contains("blocked_domains"), "{answer:?}");
    }
}
