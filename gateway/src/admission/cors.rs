//! CORS for browser front ends (the AI SDK and AG-UI adapters). Off by default: with no
//! configured origin no CORS header is sent and browsers on other origins are refused.
//! `*` allows any origin without credentials; listed origins are allowed exactly, with
//! credentials. A wildcard is never combined with credentials.

use axum::http::{HeaderName, HeaderValue, Method};
use tower_http::cors::{AllowOrigin, CorsLayer};

const REQUEST_HEADERS: &[&str] = &[
    "authorization",
    "content-type",
    "x-api-key",
    "anthropic-beta",
    "anthropic-version",
    "x-agentd-agent",
    "idempotency-key",
    "if-match",
    "last-event-id",
    "accept",
];
const EXPOSED_HEADERS: &[&str] = &["request-id", "etag", "x-vercel-ai-ui-message-stream", "retry-after"];

/// The layer for `origins` (`AGENTD_CORS_ORIGINS`); `None` when none is configured.
pub fn layer(origins: &[String]) -> Result<Option<CorsLayer>, String> {
    if origins.is_empty() {
        return Ok(None);
    }
    let headers = |names: &'static [&'static str]| names.iter().map(|n| HeaderName::from_static(n)).collect::<Vec<_>>();
    let base = CorsLayer::new()
        .allow_methods([Method::GET, Method::POST, Method::PUT, Method::DELETE, Method::OPTIONS])
        .allow_headers(headers(REQUEST_HEADERS))
        .expose_headers(headers(EXPOSED_HEADERS))
        .max_age(std::time::Duration::from_secs(600));
    if origins.iter().any(|o| o == "*") {
        if origins.len() > 1 {
            return Err("AGENTD_CORS_ORIGINS: `*` cannot be combined with listed origins".into());
        }
        return Ok(Some(base.allow_origin(AllowOrigin::any())));
    }
    let mut allowed = Vec::with_capacity(origins.len());
    for origin in origins {
        origin
            .parse::<axum::http::Uri>()
            .ok()
            .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some() && u.path() == "/")
            .ok_or_else(|| format!("AGENTD_CORS_ORIGINS: {origin:?} is not an origin like https://app.example.com"))?;
        allowed.push(HeaderValue::from_str(origin.trim_end_matches('/')).map_err(|e| e.to_string())?);
    }
    Ok(Some(base.allow_origin(AllowOrigin::list(allowed)).allow_credentials(true)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_parse_and_the_wildcard_stays_alone() {
        assert!(layer(&[]).unwrap().is_none());
        assert!(layer(&["*".into()]).unwrap().is_some());
        assert!(layer(&["https://app.example.com".into(), "http://127.0.0.1:5173".into()]).unwrap().is_some());
        assert!(layer(&["*".into(), "https://a.example".into()]).is_err());
        assert!(layer(&["app.example.com".into()]).is_err());
        assert!(layer(&["https://a.example/path".into()]).is_err());
    }
}
