//! `allowed_domains` / `blocked_domains` of a web tool's config: which hosts (and, for
//! `web_search`, which paths under them) a fetch may reach or a search may return.
//! A domain covers itself and its subdomains; host names compare case-insensitively.

use reqwest::Url;
use serde_json::Value;

/// One entry: a host and, for `web_search`, an optional path prefix.
#[derive(Debug, Clone, PartialEq)]
pub struct Domain {
    host: String,
    path: Option<String>,
}

impl Domain {
    fn parse(entry: &str) -> Self {
        let (host, path) = match entry.split_once('/') {
            Some((host, path)) => (host, Some(path.trim_matches('/').to_owned()).filter(|p| !p.is_empty())),
            None => (entry, None),
        };
        Self { host: host.trim_end_matches('.').to_ascii_lowercase(), path }
    }

    fn covers(&self, host: &str, path: &str) -> bool {
        let host_ok =
            host == self.host || host.strip_suffix(self.host.as_str()).is_some_and(|prefix| prefix.ends_with('.'));
        host_ok
            && self.path.as_deref().is_none_or(|prefix| {
                let path = path.trim_start_matches('/');
                path.strip_prefix(prefix).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
            })
    }
}

/// The domain rule of one tool's config.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum DomainFilter {
    /// No list: every host.
    #[default]
    Any,
    /// Only these domains.
    Allowed(Vec<Domain>),
    /// Every host but these domains.
    Blocked(Vec<Domain>),
}

impl DomainFilter {
    /// The filter of a tool config (`allowed_domains` or `blocked_domains`; the gateway
    /// never stores both).
    pub fn of(config: &Value) -> Self {
        let list = |key: &str| {
            config[key].as_array().map(|entries| entries.iter().filter_map(Value::as_str).map(Domain::parse).collect())
        };
        if let Some(allowed) = list("allowed_domains") {
            return Self::Allowed(allowed);
        }
        list("blocked_domains").map_or(Self::Any, Self::Blocked)
    }

    /// Whether `url` may be fetched or returned.
    pub fn permits(&self, url: &Url) -> bool {
        let host =
            url.host_str().unwrap_or_default().trim_matches(['[', ']']).trim_end_matches('.').to_ascii_lowercase();
        let path = url.path();
        match self {
            Self::Any => true,
            Self::Allowed(domains) => domains.iter().any(|d| d.covers(&host, path)),
            Self::Blocked(domains) => !domains.iter().any(|d| d.covers(&host, path)),
        }
    }

    /// Why a URL was refused, for the tool result.
    pub fn refusal(&self, url: &Url) -> String {
        let host = url.host_str().unwrap_or_default();
        match self {
            Self::Allowed(_) => format!("{host} is not among this tool's allowed_domains"),
            _ => format!("{host} is among this tool's blocked_domains"),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn url(raw: &str) -> Url {
        Url::parse(raw).unwrap()
    }

    #[test]
    fn a_domain_covers_itself_and_its_subdomains_only() {
        let allowed = DomainFilter::of(&json!({ "allowed_domains": ["Example.com", "docs.rs"] }));
        for ok in ["https://example.com/", "http://a.b.EXAMPLE.com/x", "https://docs.rs/serde", "https://example.com./"]
        {
            assert!(allowed.permits(&url(ok)), "{ok}");
        }
        for refused in ["https://notexample.com/", "https://example.com.evil.net/", "https://rs/", "http://127.0.0.1/"]
        {
            assert!(!allowed.permits(&url(refused)), "{refused}");
        }
        assert!(allowed.refusal(&url("https://x.net/")).contains("allowed_domains"));
    }

    #[test]
    fn blocked_domains_refuse_only_what_they_name() {
        let blocked = DomainFilter::of(&json!({ "blocked_domains": ["ads.example.com"] }));
        assert!(!blocked.permits(&url("https://ads.example.com/a")));
        assert!(!blocked.permits(&url("https://x.ads.example.com/a")));
        assert!(blocked.permits(&url("https://example.com/a")));
        assert!(blocked.permits(&url("https://badads.example.com/a")));
        assert!(blocked.refusal(&url("https://ads.example.com/")).contains("blocked_domains"));
        assert_eq!(DomainFilter::of(&json!({})), DomainFilter::Any);
        assert!(DomainFilter::Any.permits(&url("https://anything.example/")));
    }

    #[test]
    fn search_entries_with_a_path_cover_that_path_and_below() {
        let allowed = DomainFilter::of(&json!({ "allowed_domains": ["example.com/docs/"] }));
        assert!(allowed.permits(&url("https://example.com/docs")));
        assert!(allowed.permits(&url("https://www.example.com/docs/api?x=1")));
        assert!(!allowed.permits(&url("https://example.com/docsearch")));
        assert!(!allowed.permits(&url("https://example.com/")));
    }
}
