//! Every response carries `request-id`; error bodies repeat it as `request_id`.

use axum::extract::Request;
use axum::http::HeaderValue;
use axum::middleware::Next;
use axum::response::Response;

tokio::task_local! {
    static REQUEST_ID: String;
}

/// The id of the request being handled on this task, if any.
pub fn current() -> Option<String> {
    REQUEST_ID.try_with(Clone::clone).ok()
}

/// Assigns `req_…`, makes it visible to [`current`] and the trace span, and echoes
/// it as the `request-id` response header.
pub async fn layer(request: Request, next: Next) -> Response {
    let id = agentd_schema::ids::new_id("req");
    let path = loggable_path(request.uri().path());
    let span = tracing::info_span!("request", request_id = %id, method = %request.method(), path = %path);
    let mut response = tracing::Instrument::instrument(REQUEST_ID.scope(id.clone(), next.run(request)), span).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert("request-id", value);
    }
    response
}

/// A request path as logs and traces may show it: a consent page's token
/// (`/consent/{token}`, docs/api/user-profiles.md) is a bearer credential for 15
/// minutes, so it is replaced by `…`.
pub fn loggable_path(path: &str) -> std::borrow::Cow<'_, str> {
    match path.strip_prefix("/consent/") {
        Some(rest) if !rest.is_empty() => std::borrow::Cow::Borrowed("/consent/…"),
        _ => std::borrow::Cow::Borrowed(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_consent_token_never_reaches_the_logs() {
        assert_eq!(loggable_path("/consent/abc.def"), "/consent/…");
        assert_eq!(loggable_path("/v1/sessions"), "/v1/sessions");
        assert_eq!(loggable_path("/consent/"), "/consent/");
    }
}
