//! `agentd tunnel`: the connector of an MCP tunnel (docs/api/tunnels.md). It runs inside
//! a private network, dials out to a gateway with the tunnel's token and holds the
//! connection, reconnecting with backoff. The gateway opens one HTTP/2 `CONNECT` stream
//! per connection a worker makes to an MCP server on the tunnel's domain; the connector
//! dials its upstream for each and copies bytes both ways. It never sees plaintext: TLS
//! runs between the worker and the upstream, which must serve HTTPS with a certificate
//! issued by one of the tunnel's CA certificates.
//!
//! A refused token (rotated, or the tunnel archived) ends the connector with an error;
//! any other failure is retried, waiting 0.5 s and doubling up to 30 s.

use std::time::Duration;

use anyhow::{Context, Result, bail};
use bytes::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio_util::sync::CancellationToken;

/// `agentd tunnel` settings (`Debug` leaves the token out).
#[derive(Clone, clap::Args)]
pub struct TunnelArgs {
    /// The gateway to dial, e.g. `https://agents.example.com`.
    #[arg(long, env = "AGENTD_TUNNEL_GATEWAY_URL")]
    pub gateway: String,
    /// The tunnel's token (`tunnels.reveal_token`). Treat as a credential: prefer the
    /// environment variable, which `ps` does not show.
    #[arg(long, env = "AGENTD_TUNNEL_TOKEN", hide_env_values = true)]
    pub token: String,
    /// Where the MCP server listens: `host:port`, or an `https://host:port` URL.
    #[arg(long, env = "AGENTD_TUNNEL_UPSTREAM")]
    pub upstream: String,
}

impl std::fmt::Debug for TunnelArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelArgs")
            .field("gateway", &self.gateway)
            .field("token", &"[redacted]")
            .field("upstream", &self.upstream)
            .finish()
    }
}

const BACKOFF_START: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);

/// The upstream's `host:port`.
fn upstream_address(upstream: &str) -> Result<String> {
    if !upstream.contains("://") {
        return Ok(upstream.to_owned());
    }
    let url = reqwest::Url::parse(upstream).context("--upstream: not a URL")?;
    if url.scheme() != "https" {
        bail!("--upstream: the MCP server behind a tunnel serves HTTPS (TLS runs end to end from the worker)");
    }
    let host = url.host_str().context("--upstream: no host")?;
    let port = url.port_or_known_default().context("--upstream: no port")?;
    Ok(format!("{host}:{port}"))
}

/// Serves the tunnel until `stop` fires or the gateway refuses the token.
pub async fn run(args: TunnelArgs, stop: CancellationToken) -> Result<()> {
    let upstream = upstream_address(&args.upstream)?;
    let connect = format!("{}/tunnel/connect", args.gateway.trim_end_matches('/'));
    let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build()?;
    let mut backoff = BACKOFF_START;
    loop {
        let held = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            held = hold(&http, &connect, &args.token, &upstream, &stop) => held,
        };
        match held {
            Ok(Held::Served) => backoff = BACKOFF_START,
            Ok(Held::Refused(why)) => bail!("the gateway refused the tunnel token: {why}"),
            Err(error) => tracing::warn!(error = format!("{error:#}"), "tunnel connection failed; retrying"),
        }
        tokio::select! {
            () = stop.cancelled() => return Ok(()),
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(BACKOFF_MAX);
    }
}

enum Held {
    /// The connection was up and ended.
    Served,
    /// The gateway refused the token.
    Refused(String),
}

/// One connection: upgrade, then serve the gateway's streams until it ends.
async fn hold(
    http: &reqwest::Client,
    connect: &str,
    token: &str,
    upstream: &str,
    stop: &CancellationToken,
) -> Result<Held> {
    let response = http
        .get(connect)
        .bearer_auth(token)
        .header(reqwest::header::CONNECTION, "upgrade")
        .header(reqwest::header::UPGRADE, agentd_gateway::tunnel::UPGRADE)
        .send()
        .await
        .context("dialing the gateway")?;
    let status = response.status();
    if status == reqwest::StatusCode::UNAUTHORIZED {
        let body = response.text().await.unwrap_or_default();
        return Ok(Held::Refused(body));
    }
    if status != reqwest::StatusCode::SWITCHING_PROTOCOLS {
        bail!("the gateway answered {status}: {}", response.text().await.unwrap_or_default());
    }
    let upgraded = response.upgrade().await.context("upgrading the connection")?;
    tracing::info!(upstream, "tunnel connected");
    let upstream = upstream.to_owned();
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let upstream = upstream.clone();
        async move { Ok::<_, std::convert::Infallible>(open_stream(request, upstream).await) }
    });
    let mut builder = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
    builder.timer(TokioTimer::new()).keep_alive_interval(Duration::from_secs(20));
    let serving = builder.serve_connection(TokioIo::new(upgraded), service);
    tokio::select! {
        () = stop.cancelled() => {}
        served = serving => if let Err(error) = served {
            tracing::info!(%error, "tunnel connection ended");
        },
    }
    Ok(Held::Served)
}

type Empty = http_body_util::Empty<Bytes>;

/// One stream from the gateway: dial the upstream, answer 200, then copy both ways.
async fn open_stream(mut request: hyper::Request<hyper::body::Incoming>, upstream: String) -> hyper::Response<Empty> {
    let status = |code: hyper::StatusCode| {
        let mut response = hyper::Response::new(Empty::new());
        *response.status_mut() = code;
        response
    };
    if request.method() != hyper::Method::CONNECT {
        return status(hyper::StatusCode::METHOD_NOT_ALLOWED);
    }
    let dialed = match tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(&upstream)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(error)) => {
            tracing::warn!(%error, %upstream, "cannot reach the tunnel's upstream");
            return status(hyper::StatusCode::BAD_GATEWAY);
        }
        Err(_) => return status(hyper::StatusCode::GATEWAY_TIMEOUT),
    };
    let _ = dialed.set_nodelay(true);
    let on_upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let Ok(stream) = on_upgrade.await else { return };
        let (mut stream, mut dialed) = (TokioIo::new(stream), dialed);
        if let Err(error) = tokio::io::copy_bidirectional(&mut stream, &mut dialed).await {
            tracing::debug!(%error, "a tunnel stream ended");
        }
    });
    status(hyper::StatusCode::OK)
}

#[cfg(test)]
mod tests {
    use super::upstream_address;

    #[test]
    fn the_upstream_is_a_tls_servers_address() {
        assert_eq!(upstream_address("127.0.0.1:8443").unwrap(), "127.0.0.1:8443");
        assert_eq!(upstream_address("https://mcp.internal:9443/mcp").unwrap(), "mcp.internal:9443");
        assert_eq!(upstream_address("https://mcp.internal").unwrap(), "mcp.internal:443");
        assert!(upstream_address("http://127.0.0.1:80").is_err());
    }
}
