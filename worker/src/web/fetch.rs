//! `web_fetch`: one page over HTTP(S), every hop through the egress guard.
//!
//! Redirects are followed by hand (at most [`MAX_REDIRECTS`]), so each hop's URL is
//! checked like the first: the config's domain filter, then the egress guard (public
//! addresses only unless `AGENTD_REMOTE_TOOLS_ALLOW_PRIVATE`), the connection pinned
//! to the checked address. The whole fetch — hops and body — has [`FETCH_TIMEOUT`];
//! at most [`MAX_READ_BYTES`] of the body are read.

use std::time::Duration;

use agentd_schema::egress;
use reqwest::{StatusCode, Url, header};

use super::domains::DomainFilter;

/// The time a fetch may take, redirects and body included.
pub const FETCH_TIMEOUT: Duration = Duration::from_secs(20);
/// Bytes of a response body read; the rest is left unread.
pub const MAX_READ_BYTES: usize = 1024 * 1024;
/// Redirects followed.
pub const MAX_REDIRECTS: usize = 5;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const USER_AGENT: &str = concat!("agentd/", env!("CARGO_PKG_VERSION"), " (web_fetch)");
const ACCEPT: &str = "text/html,application/xhtml+xml,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5";

/// A fetched response body.
#[derive(Debug)]
pub struct Page {
    /// The URL that answered (after redirects).
    pub url: Url,
    /// Its media type, lowercased, without parameters (empty when not sent).
    pub media_type: String,
    /// The bytes read.
    pub body: Vec<u8>,
    /// The body was longer than [`MAX_READ_BYTES`].
    pub cut: bool,
}

/// Why a fetch failed, and whether a request went out before it did (usage counts
/// the fetches that reached the network, refused or not).
#[derive(Debug)]
pub struct Failed {
    /// The message for the tool result.
    pub message: String,
    /// A request was sent.
    pub made_request: bool,
}

/// Fetches `url` under `filter`; `allow_private` lifts the guard's public-only rule.
pub async fn fetch(url: Url, filter: &DomainFilter, allow_private: bool) -> Result<Page, Failed> {
    let mut made_request = false;
    let fetched = tokio::time::timeout(FETCH_TIMEOUT, follow(url, filter, allow_private, &mut made_request)).await;
    match fetched {
        Ok(Ok(page)) => Ok(page),
        Ok(Err(message)) => Err(Failed { message, made_request }),
        Err(_) => Err(Failed { message: format!("timed out after {} s", FETCH_TIMEOUT.as_secs()), made_request }),
    }
}

async fn follow(
    mut url: Url,
    filter: &DomainFilter,
    allow_private: bool,
    made_request: &mut bool,
) -> Result<Page, String> {
    for _ in 0..=MAX_REDIRECTS {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{url}: only http and https URLs can be fetched"));
        }
        if !filter.permits(&url) {
            return Err(format!("{}: {}", egress::redacted(url.as_str()), filter.refusal(&url)));
        }
        let rules = egress::Rules { allow_private, https_only: false };
        let target = egress::check(url.as_str(), rules)
            .await
            .map_err(|refused| format!("{}: {refused}", egress::redacted(url.as_str())))?;
        let client = target
            .pin(
                reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).connect_timeout(CONNECT_TIMEOUT),
            )
            .build()
            .map_err(|error| format!("could not build an HTTP client: {error}"))?;
        *made_request = true;
        let mut response = client
            .get(url.clone())
            .header(header::USER_AGENT, USER_AGENT)
            .header(header::ACCEPT, ACCEPT)
            .send()
            .await
            .map_err(|error| format!("{}: the request failed: {}", egress::redacted(url.as_str()), plain(error)))?;
        let status = response.status();
        if status.is_redirection() && status != StatusCode::NOT_MODIFIED {
            let location = response
                .headers()
                .get(header::LOCATION)
                .and_then(|value| value.to_str().ok())
                .ok_or_else(|| format!("{}: HTTP {status} without a Location", egress::redacted(url.as_str())))?;
            url = url.join(location).map_err(|error| format!("a redirect to an invalid URL ({error})"))?;
            url.set_fragment(None);
            continue;
        }
        if !status.is_success() {
            return Err(format!("{}: the server answered HTTP {status}", egress::redacted(url.as_str())));
        }
        let media_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase())
            .unwrap_or_default();
        let mut body = Vec::new();
        let mut cut = false;
        while let Some(chunk) =
            response.chunk().await.map_err(|error| format!("reading the page failed: {}", plain(error)))?
        {
            let room = MAX_READ_BYTES - body.len();
            if chunk.len() > room {
                body.extend_from_slice(&chunk[..room]);
                cut = true;
                break;
            }
            body.extend_from_slice(&chunk);
        }
        return Ok(Page { url, media_type, body, cut });
    }
    Err(format!("more than {MAX_REDIRECTS} redirects"))
}

/// A reqwest error without the URL it carries (the message names the URL once).
fn plain(error: reqwest::Error) -> String {
    let error = error.without_url();
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use serde_json::json;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    /// A one-shot HTTP server on 127.0.0.1 answering each connection with the next
    /// canned response (the request path is echoed into `{path}`).
    async fn serve(responses: Vec<String>) -> SocketAddr {
        // reqwest clients need a crypto provider (main.rs installs it).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move {
            for response in responses {
                let Ok((mut socket, _)) = listener.accept().await else { return };
                let mut request = vec![0u8; 4096];
                let n = socket.read(&mut request).await.unwrap_or(0);
                let request = String::from_utf8_lossy(&request[..n]);
                let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
                let _ = socket.write_all(response.replace("{path}", &path).as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        address
    }

    fn ok(content_type: &str, body: &str) -> String {
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    }

    fn redirect(location: &str) -> String {
        format!("HTTP/1.1 302 Found\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
    }

    #[tokio::test]
    async fn a_page_is_fetched_through_redirects_each_hop_checked() {
        let address = serve(vec![redirect("/final"), ok("text/html; charset=utf-8", "<p>at {path}</p>")]).await;
        let url = Url::parse(&format!("http://{address}/start")).unwrap();
        let page = fetch(url, &DomainFilter::Any, true).await.unwrap();
        assert_eq!(page.url.path(), "/final");
        assert_eq!(page.media_type, "text/html");
        assert_eq!(String::from_utf8(page.body).unwrap(), "<p>at /final</p>");
        assert!(!page.cut);
    }

    #[tokio::test]
    async fn the_guard_refuses_private_addresses_unless_allowed_before_any_request() {
        let address = serve(vec![ok("text/plain", "secret")]).await;
        let url = Url::parse(&format!("http://{address}/")).unwrap();
        let refused = fetch(url, &DomainFilter::Any, false).await.unwrap_err();
        assert!(refused.message.contains(egress::NOT_PUBLIC), "{}", refused.message);
        assert!(!refused.made_request);
    }

    #[tokio::test]
    async fn a_redirect_to_a_refused_domain_or_a_private_address_is_not_followed() {
        let address = serve(vec![redirect("http://blocked.example/x")]).await;
        let filter = DomainFilter::of(&json!({ "blocked_domains": ["blocked.example"] }));
        let url = Url::parse(&format!("http://{address}/")).unwrap();
        let refused = fetch(url, &filter, true).await.unwrap_err();
        assert!(refused.message.contains("blocked_domains"), "{}", refused.message);
        assert!(refused.made_request, "the first hop went out");
        let address = serve(vec![
            redirect("/again"),
            redirect("/again"),
            redirect("/again"),
            redirect("/again"),
            redirect("/again"),
            redirect("/again"),
        ])
        .await;
        let url = Url::parse(&format!("http://{address}/")).unwrap();
        let looped = fetch(url, &DomainFilter::Any, true).await.unwrap_err();
        assert!(looped.message.contains("more than 5 redirects"), "{}", looped.message);
    }

    #[tokio::test]
    async fn bodies_are_capped_and_errors_are_messages() {
        let big = "x".repeat(MAX_READ_BYTES + 10);
        let address = serve(vec![
            ok("text/plain", &big),
            "HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n".into(),
        ])
        .await;
        let url = Url::parse(&format!("http://{address}/big")).unwrap();
        let page = fetch(url.clone(), &DomainFilter::Any, true).await.unwrap();
        assert_eq!(page.body.len(), MAX_READ_BYTES);
        assert!(page.cut);
        let missing = fetch(url, &DomainFilter::Any, true).await.unwrap_err();
        assert!(missing.message.contains("HTTP 404"), "{}", missing.message);
    }
}
