//! `web_search` through the configured backend: a SearXNG-compatible JSON endpoint,
//! `GET {AGENTD_WEB_SEARCH_URL}/search?q=…&format=json`, answering
//! `{"results": [{"url", "title", "content"}, …]}`. The backend is the operator's (not
//! a tenant's target), so it does not pass the egress guard; the results do pass the
//! config's domain filter.

use std::time::Duration;

use reqwest::Url;
use serde::Deserialize;

use super::domains::DomainFilter;

/// The time a search may take.
pub const SEARCH_TIMEOUT: Duration = Duration::from_secs(15);
/// Results given to the model.
pub const MAX_RESULTS: usize = 10;
/// Bytes of the backend's answer read.
const MAX_ANSWER_BYTES: usize = 2 * 1024 * 1024;
/// Characters of one result's snippet.
const MAX_SNIPPET_CHARS: usize = 500;

/// One result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// The page's title.
    pub title: String,
    /// Its URL.
    pub url: Url,
    /// The backend's excerpt.
    pub snippet: String,
}

#[derive(Deserialize)]
struct Answer {
    #[serde(default)]
    results: Vec<RawHit>,
}

#[derive(Deserialize)]
struct RawHit {
    url: Option<String>,
    title: Option<String>,
    content: Option<String>,
}

/// Searches `query` on the backend at `base`; the results `filter` permits, at most
/// [`MAX_RESULTS`], in the backend's order.
pub async fn search(base: &str, query: &str, filter: &DomainFilter) -> Result<Vec<Hit>, String> {
    match tokio::time::timeout(SEARCH_TIMEOUT, ask(base, query)).await {
        Ok(Ok(answer)) => Ok(hits(answer, filter)),
        Ok(Err(message)) => Err(message),
        Err(_) => Err(format!("the search backend did not answer within {} s", SEARCH_TIMEOUT.as_secs())),
    }
}

async fn ask(base: &str, query: &str) -> Result<Answer, String> {
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|error| format!("could not build an HTTP client: {error}"))?;
    let mut response = client
        .get(format!("{base}/search"))
        .query(&[("q", query), ("format", "json")])
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|error| {
            tracing::warn!(%error, "web_search: the search backend is unreachable");
            "the search backend is unreachable".to_owned()
        })?;
    let status = response.status();
    if !status.is_success() {
        tracing::warn!(%status, "web_search: the search backend refused a search");
        let hint = if status == reqwest::StatusCode::FORBIDDEN {
            " (a SearXNG instance answers 403 when its settings do not list `json` under search.formats)"
        } else {
            ""
        };
        return Err(format!("the search backend answered HTTP {status}{hint}"));
    }
    let mut body = Vec::new();
    while let Some(chunk) =
        response.chunk().await.map_err(|error| format!("reading the search answer failed: {error}"))?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err(format!("the search backend's answer is larger than {MAX_ANSWER_BYTES} bytes"));
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).map_err(|error| format!("the search backend's answer is not SearXNG JSON ({error})"))
}

fn hits(answer: Answer, filter: &DomainFilter) -> Vec<Hit> {
    answer
        .results
        .into_iter()
        .filter_map(|raw| {
            let url = Url::parse(raw.url?.trim()).ok().filter(|u| matches!(u.scheme(), "http" | "https"))?;
            let title = raw.title.map(|t| one_line(&t)).filter(|t| !t.is_empty()).unwrap_or_else(|| url.to_string());
            let snippet: String =
                one_line(raw.content.as_deref().unwrap_or_default()).chars().take(MAX_SNIPPET_CHARS).collect();
            Some(Hit { title, url, snippet })
        })
        .filter(|hit| filter.permits(&hit.url))
        .take(MAX_RESULTS)
        .collect()
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The tool result's text: each result's title, URL and snippet.
pub fn render(query: &str, hits: &[Hit]) -> String {
    if hits.is_empty() {
        return format!("No results for {query:?}.");
    }
    let mut text = format!("Search results for {query:?}:\n");
    for (i, hit) in hits.iter().enumerate() {
        text.push_str(&format!("\n{}. {}\n   URL: {}\n", i + 1, hit.title, hit.url));
        if !hit.snippet.is_empty() {
            text.push_str(&format!("   {}\n", hit.snippet));
        }
    }
    text.trim_end().to_owned()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(value: serde_json::Value) -> Answer {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn results_keep_title_url_and_snippet_and_pass_the_domain_filter() {
        let raw = json!({ "query": "rust", "results": [
            { "url": "https://www.rust-lang.org/", "title": "Rust  Programming\nLanguage", "content": "A language empowering everyone.", "engine": "x" },
            { "url": "https://ads.example.com/rust", "title": "Buy", "content": "ad" },
            { "url": "javascript:alert(1)", "title": "bad" },
            { "title": "no url" },
            { "url": "https://doc.rust-lang.org/book/", "content": "" },
        ] });
        let filter = DomainFilter::of(&json!({ "blocked_domains": ["ads.example.com"] }));
        let hits = hits(answer(raw), &filter);
        assert_eq!(hits.len(), 2);
        assert_eq!(hits[0].title, "Rust Programming Language");
        assert_eq!(hits[0].snippet, "A language empowering everyone.");
        assert_eq!(hits[1].title, "https://doc.rust-lang.org/book/", "no title: the URL stands in");
        let text = render("rust", &hits);
        assert!(text.starts_with("Search results for \"rust\":"), "{text}");
        assert!(text.contains(
            "1. Rust Programming Language\n   URL: https://www.rust-lang.org/\n   A language empowering everyone."
        ));
        assert!(text.contains("2. https://doc.rust-lang.org/book/\n   URL: https://doc.rust-lang.org/book/"));
        assert_eq!(render("x", &[]), "No results for \"x\".");
    }

    #[test]
    fn at_most_ten_results_are_kept() {
        let results: Vec<_> =
            (0..30).map(|i| json!({ "url": format!("https://e{i}.example/"), "title": "t" })).collect();
        assert_eq!(hits(answer(json!({ "results": results })), &DomainFilter::Any).len(), MAX_RESULTS);
        assert!(hits(answer(json!({})), &DomainFilter::Any).is_empty());
    }
}
