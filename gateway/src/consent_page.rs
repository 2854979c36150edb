//! The consent page (docs/api/user-profiles.md, "The consent page"): where the end user a
//! user profile represents grants or withdraws consent per purpose. Served outside `/v1`
//! with no API key: the signed token in the path is the only credential
//! (`domain::consent_links`), issued by the profile's enrollment and action URLs.
//!
//! `GET /consent/{token}` lists the purposes (`agentd_schema::capture::Purpose`) with
//! their current answer and a form per purpose; `POST /consent/{token}` (a form with
//! `purpose` and `choice` = `grant` | `withdraw`) records the answer and shows the page
//! again. An altered or foreign token is a 400 page, an expired one a 410 page, a deleted
//! profile a 404 page; none of them changes anything.
//!
//! The page is small and server-rendered: every value is HTML-escaped, no script runs
//! (the CSP allows only its own inline style, by hash, and forms posting to itself), it
//! cannot be framed, and the token in its URL is sent to no one else (`no-referrer`).

use std::sync::OnceLock;

use agentd_schema::capture::Purpose;
use agentd_schema::store::UserProfileRow;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;
use crate::domain::DomainError;
use crate::domain::consent_links::{LinkClaims, LinkKind};
use crate::domain::user_profiles;
use crate::managed::query::rfc3339;

const STYLE: &str = "body{font-family:system-ui,sans-serif;max-width:40rem;margin:2rem auto;padding:0 1rem;\
line-height:1.5;color:#1f2328}section{border:1px solid #d0d7de;border-radius:8px;padding:0 1rem 1rem;\
margin:1rem 0}.state{color:#57606a}.notice{background:#ddf4ff;padding:.5rem 1rem;border-radius:6px}\
.error{background:#ffebe9;padding:.5rem 1rem;border-radius:6px}button{margin-right:.5rem;padding:.4rem .9rem}";

/// The consent page's routes (outside `/v1`, unauthenticated: the token authorizes).
pub fn router() -> Router<AppState> {
    Router::new().route("/consent/{token}", get(show).post(answer))
}

/// The page's path for a token (the URL is the gateway's public base URL and this).
pub fn path(token: &str) -> String {
    format!("/consent/{token}")
}

/// `Content-Security-Policy`: nothing but the page's own style (by its hash) and forms
/// posting back to the page.
fn csp() -> &'static str {
    static CSP: OnceLock<String> = OnceLock::new();
    CSP.get_or_init(|| {
        use base64::Engine;
        use sha2::Digest;
        let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(STYLE.as_bytes()));
        format!(
            "default-src 'none'; style-src 'sha256-{hash}'; form-action 'self'; frame-ancestors 'none'; \
             base-uri 'none'"
        )
    })
}

/// Escapes text for HTML content and attribute values.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page with the page's headers.
fn page(status: StatusCode, title: &str, body: &str) -> Response {
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <meta name=\"referrer\" content=\"no-referrer\"><title>{title}</title><style>{STYLE}</style></head>\
         <body><main>{body}</main></body></html>\n",
        title = escape(title),
    );
    let mut response = (status, html).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if let Ok(value) = HeaderValue::from_str(csp()) {
        headers.insert(header::CONTENT_SECURITY_POLICY, value);
    }
    response
}

/// What a purpose is called on the page and what each answer means.
fn describe(purpose: Purpose) -> (&'static str, &'static str) {
    match purpose {
        Purpose::ConversationContent => (
            "Keep the content of my conversations",
            "If you allow this, sessions about you may keep their full content: your messages, the answers, and \
             what tools were given and returned. If you do not allow it (or have not answered), at most a \
             structured record is kept: which steps happened, when, and how much they used, with the content \
             itself replaced by a marker.",
        ),
        Purpose::ActivityRecord => (
            "Keep a record of my activity",
            "If you allow this (or have not answered), a structured record of sessions about you may be kept. If \
             you do not allow it, nothing of those sessions' content is kept once each step is over.",
        ),
    }
}

/// The page of a profile: each purpose, its answer and its form.
fn profile_page(claims: &LinkClaims, profile: &UserProfileRow, notice: Option<&str>) -> Response {
    let heading = match claims.kind {
        LinkKind::Enrollment => "Your data choices",
        LinkKind::EnrollEndUser => "Enroll: your data choices",
    };
    let mut body = format!(
        "<h1>{}</h1><p>Choose what may be kept about your conversations. You can change your answers here until \
         this link expires.</p>",
        escape(heading)
    );
    if let Some(notice) = notice {
        body.push_str(&format!("<p class=\"notice\" role=\"status\">{}</p>", escape(notice)));
    }
    for purpose in Purpose::ALL {
        let (title, meaning) = describe(purpose);
        let state = match (profile.consent.get(purpose), profile.consent_at_ms.get(purpose)) {
            (Some(granted), at) => format!(
                "Your answer: <strong>{}</strong>{}",
                if granted { "allowed" } else { "not allowed" },
                at.map(|at| format!(" (since {})", escape(&rfc3339(at)))).unwrap_or_default()
            ),
            (None, _) => "Your answer: <strong>not answered yet</strong>".to_owned(),
        };
        body.push_str(&format!(
            "<section id=\"{id}\" data-purpose=\"{id}\" data-status=\"{status}\"><h2>{title}</h2><p>{meaning}</p>\
             <p class=\"state\">{state}</p><form method=\"post\"><input type=\"hidden\" name=\"purpose\" \
             value=\"{id}\"><button type=\"submit\" name=\"choice\" value=\"grant\">Allow</button>\
             <button type=\"submit\" name=\"choice\" value=\"withdraw\">Do not allow</button></form></section>",
            id = escape(purpose.as_str()),
            status = match profile.consent.get(purpose) {
                Some(true) => "granted",
                Some(false) => "withdrawn",
                None => "unanswered",
            },
            title = escape(title),
            meaning = escape(meaning),
        ));
    }
    body.push_str(&format!("<p class=\"state\">This link works until {}.</p>", escape(&rfc3339(claims.expires_at_ms))));
    page(StatusCode::OK, heading, &body)
}

/// The page of a refusal; every domain error maps to one status and one explanation.
fn refusal(error: DomainError) -> Response {
    let (status, title, text) = match &error {
        DomainError::Invalid { .. } => (
            StatusCode::BAD_REQUEST,
            "This link is not valid",
            "This link is incomplete or has been altered. Ask for a new link.",
        ),
        DomainError::Gone(_) | DomainError::Expired(_) => {
            (StatusCode::GONE, "This link has expired", "Links to this page work for 15 minutes. Ask for a new link.")
        }
        DomainError::NotFound(_) | DomainError::Deleted(_) => {
            (StatusCode::NOT_FOUND, "This link no longer works", "The profile this link was for no longer exists.")
        }
        DomainError::Unavailable(_) => {
            (StatusCode::SERVICE_UNAVAILABLE, "Please try again", "The service is busy right now. Try again shortly.")
        }
        DomainError::Archived(_)
        | DomainError::Terminated(_)
        | DomainError::BudgetReached(_)
        | DomainError::AgentDisabled(_)
        | DomainError::AgentArchived(_)
        | DomainError::EnvironmentArchived(_)
        | DomainError::Conflict(_)
        | DomainError::TooLarge(_)
        | DomainError::NameTaken(_)
        | DomainError::MemoryPreconditionFailed(_)
        | DomainError::MemoryPathConflict(_)
        | DomainError::Internal(_) => {
            tracing::error!(%error, cause = ?error, "consent page failed");
            (StatusCode::INTERNAL_SERVER_ERROR, "Something went wrong", "Nothing was changed. Try again later.")
        }
    };
    page(status, title, &format!("<h1 class=\"error\">{}</h1><p>{}</p>", escape(title), escape(text)))
}

/// `GET /consent/{token}`.
async fn show(State(state): State<AppState>, Path(token): Path<String>) -> Response {
    match user_profiles::open_link(&state, &token).await {
        Ok((claims, profile)) => profile_page(&claims, &profile, None),
        Err(error) => refusal(error),
    }
}

/// The form's fields: `purpose` and `choice` (`grant` or `withdraw`).
fn form(bytes: &Bytes) -> Option<(Purpose, bool)> {
    let (mut purpose, mut choice) = (None, None);
    for (key, value) in form_urlencoded::parse(bytes) {
        match key.as_ref() {
            "purpose" => purpose = Purpose::parse(&value),
            "choice" => {
                choice = match value.as_ref() {
                    "grant" => Some(true),
                    "withdraw" => Some(false),
                    _ => None,
                }
            }
            _ => {}
        }
    }
    Some((purpose?, choice?))
}

/// `POST /consent/{token}`.
async fn answer(State(state): State<AppState>, Path(token): Path<String>, bytes: Bytes) -> Response {
    let Some((purpose, granted)) = form(&bytes) else {
        let text = "The form was not understood: choose to allow or not allow one of the listed purposes.";
        return page(
            StatusCode::BAD_REQUEST,
            "Nothing was changed",
            &format!("<h1 class=\"error\">Nothing was changed</h1><p>{}</p>", escape(text)),
        );
    };
    match user_profiles::answer_link(&state, &token, purpose, granted).await {
        Ok((claims, profile)) => {
            let (title, _) = describe(purpose);
            let notice = format!("Saved: “{title}” is now {}.", if granted { "allowed" } else { "not allowed" });
            profile_page(&claims, &profile, Some(&notice))
        }
        Err(error) => refusal(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped_for_content_and_attributes() {
        assert_eq!(escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
    }

    #[test]
    fn the_form_names_a_purpose_and_a_choice() {
        assert_eq!(
            form(&Bytes::from("purpose=conversation_content&choice=grant")),
            Some((Purpose::ConversationContent, true))
        );
        assert_eq!(
            form(&Bytes::from("choice=withdraw&purpose=activity_record")),
            Some((Purpose::ActivityRecord, false))
        );
        for bad in [
            "",
            "purpose=conversation_content",
            "purpose=telemetry&choice=grant",
            "purpose=activity_record&choice=maybe",
        ] {
            assert_eq!(form(&Bytes::from(bad)), None, "{bad}");
        }
    }

    #[test]
    fn the_policy_allows_only_the_page_s_own_style() {
        let csp = csp();
        assert!(csp.starts_with("default-src 'none'; style-src 'sha256-"), "{csp}");
        assert!(!csp.contains("unsafe") && !csp.contains("script"), "{csp}");
    }
}
