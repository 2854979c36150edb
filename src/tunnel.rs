//! `agentd tunnel`: the connector of an MCP tunnel (docs/api/tunnels.md). It runs inside
//! a private network, dials out to a gateway with the tunnel's token and holds the
//! connection, reconnecting with backoff. The gateway opens one HTTP/2 `CONNECT` stream
//! per connection a worker makes to an MCP server on the tunnel's domain; the connector
//! dials its upstream for each. Then, in one of two modes:
//!
//! - **Byte copy** (the default): it copies bytes both ways and never sees plaintext. TLS
//!   runs between the worker and the upstream, which must serve HTTPS with a certificate
//!   issued by one of the tunnel's CA certificates.
//! - **Terminating** (`--tls-cert`/`--tls-key`): it serves the worker's TLS itself with a
//!   certificate for the tunnel host (issued by one of the tunnel's CA certificates, so
//!   the worker verifies it as before), and opens its own connection to the upstream:
//!   TLS verified against `--upstream-ca`, presenting `--upstream-client-cert` when the
//!   upstream asks for one (mutual TLS), or plain `http://`. The plaintext is then seen
//!   by the connector, inside the upstream's network; the gateway still never sees it.
//!
//! A refused token (rotated, or the tunnel archived) ends the connector with an error;
//! any other failure is retried, waiting 0.5 s and doubling up to 30 s.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, anyhow, bail};
use bytes::Bytes;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use rustls::client::ResolvesClientCert;
use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::CertifiedKey;
use rustls::{ClientConfig, RootCertStore, ServerConfig, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio_util::either::Either;
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
    /// Where the MCP server listens: `host:port` (HTTPS), an `https://host:port` URL, or,
    /// with --tls-cert only, an `http://host:port` URL.
    #[arg(long, env = "AGENTD_TUNNEL_UPSTREAM")]
    pub upstream: String,
    /// Terminate the worker's TLS here: the PEM certificate chain served to workers for
    /// the tunnel host, issued by one of the tunnel's CA certificates. Needs --tls-key.
    #[arg(long, env = "AGENTD_TUNNEL_TLS_CERT", value_name = "PATH")]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key of --tls-cert.
    #[arg(long, env = "AGENTD_TUNNEL_TLS_KEY", value_name = "PATH")]
    pub tls_key: Option<PathBuf>,
    /// With --tls-cert and an HTTPS upstream (required then): the PEM CA certificate(s)
    /// the upstream's server certificate is verified against, and nothing else.
    #[arg(long, env = "AGENTD_TUNNEL_UPSTREAM_CA", value_name = "PATH")]
    pub upstream_ca: Option<PathBuf>,
    /// With --tls-cert: the PEM client certificate chain presented to the upstream when
    /// it asks for one (mutual TLS). Needs --upstream-client-key.
    #[arg(long, env = "AGENTD_TUNNEL_UPSTREAM_CLIENT_CERT", value_name = "PATH")]
    pub upstream_client_cert: Option<PathBuf>,
    /// The PEM private key of --upstream-client-cert.
    #[arg(long, env = "AGENTD_TUNNEL_UPSTREAM_CLIENT_KEY", value_name = "PATH")]
    pub upstream_client_key: Option<PathBuf>,
    /// With --tls-cert: the name the upstream's certificate is verified for (by default
    /// the host of --upstream).
    #[arg(long, env = "AGENTD_TUNNEL_UPSTREAM_SERVER_NAME", value_name = "NAME")]
    pub upstream_server_name: Option<String>,
}

impl std::fmt::Debug for TunnelArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TunnelArgs")
            .field("gateway", &self.gateway)
            .field("token", &"[redacted]")
            .field("upstream", &self.upstream)
            .field("tls_cert", &self.tls_cert)
            .field("tls_key", &self.tls_key)
            .field("upstream_ca", &self.upstream_ca)
            .field("upstream_client_cert", &self.upstream_client_cert)
            .field("upstream_client_key", &self.upstream_client_key)
            .field("upstream_server_name", &self.upstream_server_name)
            .finish()
    }
}

const BACKOFF_START: Duration = Duration::from_millis(500);
const BACKOFF_MAX: Duration = Duration::from_secs(30);
/// Dialing the upstream, and in terminating mode both TLS handshakes together.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// `--upstream`, parsed.
#[derive(Debug, PartialEq)]
struct Upstream {
    /// The `host:port` to dial.
    address: String,
    /// The host: the name the upstream's certificate is verified for by default.
    host: String,
    /// An `http://` URL: plain HTTP, allowed only when the connector terminates TLS.
    plain: bool,
}

/// Reads `--upstream`: `host:port` (HTTPS), or an `https://` or `http://` URL.
fn parse_upstream(upstream: &str) -> Result<Upstream> {
    if !upstream.contains("://") {
        // `host:port`, dialed as given; the host is what precedes the last colon.
        let host = upstream.rsplit_once(':').map_or(upstream, |(host, _)| host);
        let host = host.trim_start_matches('[').trim_end_matches(']');
        return Ok(Upstream { address: upstream.to_owned(), host: host.to_owned(), plain: false });
    }
    let url = reqwest::Url::parse(upstream).context("--upstream: not a URL")?;
    let plain = match url.scheme() {
        "https" => false,
        "http" => true,
        other => bail!("--upstream: the scheme is https or http, not {other}"),
    };
    let host = url.host_str().context("--upstream: no host")?;
    let port = url.port_or_known_default().context("--upstream: no port")?;
    let address = format!("{host}:{port}");
    let host = host.trim_start_matches('[').trim_end_matches(']').to_owned();
    Ok(Upstream { address, host, plain })
}

/// How the connector carries a stream, settled once at start.
enum Mode {
    /// Bytes both ways: the worker's TLS runs end to end to the upstream.
    Copy,
    /// The connector terminates the worker's TLS and opens its own connection upstream.
    Terminate(Terminating),
}

/// The configuration of terminating mode, loaded once at start.
struct Terminating {
    /// The tunnel host's certificate served to workers; ALPN is set per stream.
    server: Arc<ServerConfig>,
    /// TLS to the upstream, or `None` for a plain `http://` upstream.
    upstream_tls: Option<UpstreamTls>,
}

/// The connector's TLS client toward an HTTPS upstream.
struct UpstreamTls {
    /// Verifies the upstream against `--upstream-ca`; ALPN and the client certificate
    /// resolver are set per stream.
    config: Arc<ClientConfig>,
    /// `--upstream-client-cert` with its key, presented when the upstream asks.
    client_certificate: Option<Arc<CertifiedKey>>,
    server_name: ServerName<'static>,
}

/// The client certificate resolver of one upstream handshake: it answers a
/// CertificateRequest with the configured certificate, if any, and notes that the
/// upstream asked (one refusing the stream for want of a certificate may say nothing).
#[derive(Debug)]
struct ClientCertificate {
    certificate: Option<Arc<CertifiedKey>>,
    asked: AtomicBool,
}

impl ResolvesClientCert for ClientCertificate {
    fn resolve(&self, _issuers: &[&[u8]], _schemes: &[SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        self.asked.store(true, Ordering::Relaxed);
        self.certificate.clone()
    }

    fn has_certs(&self) -> bool {
        self.certificate.is_some()
    }
}

/// Checks the flags together, then loads every certificate and key they name.
fn mode(args: &TunnelArgs, upstream: &Upstream) -> Result<Mode> {
    check_flags(args, upstream)?;
    let (Some(tls_cert), Some(tls_key)) = (&args.tls_cert, &args.tls_key) else { return Ok(Mode::Copy) };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certificates(tls_cert, "--tls-cert")?, private_key(tls_key, "--tls-key")?)
        .map_err(|e| anyhow!("--tls-cert/--tls-key: {e}"))?;
    let upstream_tls = match &args.upstream_ca {
        None => None,
        Some(ca) => {
            let mut roots = RootCertStore::empty();
            for certificate in certificates(ca, "--upstream-ca")? {
                roots.add(certificate).map_err(|e| anyhow!("--upstream-ca: {}: {e}", ca.display()))?;
            }
            let client_certificate = match (&args.upstream_client_cert, &args.upstream_client_key) {
                (Some(cert), Some(key)) => Some(Arc::new(
                    CertifiedKey::from_der(
                        certificates(cert, "--upstream-client-cert")?,
                        private_key(key, "--upstream-client-key")?,
                        &provider,
                    )
                    .map_err(|e| anyhow!("--upstream-client-cert/--upstream-client-key: {e}"))?,
                )),
                _ => None,
            };
            let config = ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()?
                .with_root_certificates(roots)
                .with_no_client_auth();
            let name = args.upstream_server_name.as_deref().unwrap_or(&upstream.host);
            let server_name = ServerName::try_from(name.to_owned())
                .map_err(|_| anyhow!("--upstream-server-name: {name:?} is not a DNS name or an IP address"))?;
            Some(UpstreamTls { config: Arc::new(config), client_certificate, server_name })
        }
    };
    Ok(Mode::Terminate(Terminating { server: Arc::new(server), upstream_tls }))
}

/// The rules between the flags, before any file is read.
fn check_flags(args: &TunnelArgs, upstream: &Upstream) -> Result<()> {
    match (&args.tls_cert, &args.tls_key) {
        (Some(_), None) => bail!("--tls-cert needs --tls-key"),
        (None, Some(_)) => bail!("--tls-key needs --tls-cert"),
        _ => {}
    }
    match (&args.upstream_client_cert, &args.upstream_client_key) {
        (Some(_), None) => bail!("--upstream-client-cert needs --upstream-client-key"),
        (None, Some(_)) => bail!("--upstream-client-key needs --upstream-client-cert"),
        _ => {}
    }
    let upstream_flags = [
        ("--upstream-ca", args.upstream_ca.is_some()),
        ("--upstream-client-cert", args.upstream_client_cert.is_some()),
        ("--upstream-server-name", args.upstream_server_name.is_some()),
    ];
    let given = upstream_flags.iter().find(|(_, given)| *given).map(|(flag, _)| *flag);
    if args.tls_cert.is_none() {
        if let Some(flag) = given {
            bail!("{flag} needs --tls-cert: without it the worker's TLS runs end to end to the upstream");
        }
        if upstream.plain {
            bail!(
                "--upstream: a plain http:// upstream needs --tls-cert (the connector terminating TLS); \
                 without it the MCP server serves HTTPS (TLS runs end to end from the worker)"
            );
        }
    } else if upstream.plain {
        if let Some(flag) = given {
            bail!("{flag}: the upstream is plain http://, which has no TLS to configure");
        }
    } else if args.upstream_ca.is_none() {
        bail!("--upstream-ca is required with --tls-cert and an https upstream (the CA certificates to verify it)");
    }
    Ok(())
}

/// Every PEM certificate in `path` (at least one), for the error naming `flag`.
fn certificates(path: &Path, flag: &str) -> Result<Vec<CertificateDer<'static>>> {
    let certificates = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow!("{flag}: cannot read {}: {e}", path.display()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| anyhow!("{flag}: {} is not PEM: {e}", path.display()))?;
    if certificates.is_empty() {
        bail!("{flag}: no PEM certificate in {}", path.display());
    }
    Ok(certificates)
}

/// The first PEM private key in `path` (PKCS#8, PKCS#1 or SEC1).
fn private_key(path: &Path, flag: &str) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| match e {
        pem::Error::NoItemsFound => anyhow!("{flag}: no PEM private key in {}", path.display()),
        other => anyhow!("{flag}: cannot read a private key from {}: {other}", path.display()),
    })
}

/// Serves the tunnel until `stop` fires or the gateway refuses the token.
pub async fn run(args: TunnelArgs, stop: CancellationToken) -> Result<()> {
    let upstream = parse_upstream(&args.upstream)?;
    let mode = Arc::new(mode(&args, &upstream)?);
    let upstream = Arc::new(upstream);
    let connect = format!("{}/tunnel/connect", args.gateway.trim_end_matches('/'));
    let http = reqwest::Client::builder().connect_timeout(Duration::from_secs(10)).build()?;
    let mut backoff = BACKOFF_START;
    loop {
        let held = tokio::select! {
            () = stop.cancelled() => return Ok(()),
            held = hold(&http, &connect, &args.token, &upstream, &mode, &stop) => held,
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
    upstream: &Arc<Upstream>,
    mode: &Arc<Mode>,
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
    let terminating = matches!(**mode, Mode::Terminate(_));
    tracing::info!(upstream = upstream.address, terminating, "tunnel connected");
    let (upstream, mode) = (upstream.clone(), mode.clone());
    let service = service_fn(move |request: hyper::Request<hyper::body::Incoming>| {
        let (upstream, mode) = (upstream.clone(), mode.clone());
        async move { Ok::<_, std::convert::Infallible>(open_stream(request, upstream, mode).await) }
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

/// One stream from the gateway: dial the upstream, answer 200, then carry the stream
/// (a byte copy, or in terminating mode both TLS handshakes first).
async fn open_stream(
    mut request: hyper::Request<hyper::body::Incoming>,
    upstream: Arc<Upstream>,
    mode: Arc<Mode>,
) -> hyper::Response<Empty> {
    let status = |code: hyper::StatusCode| {
        let mut response = hyper::Response::new(Empty::new());
        *response.status_mut() = code;
        response
    };
    if request.method() != hyper::Method::CONNECT {
        return status(hyper::StatusCode::METHOD_NOT_ALLOWED);
    }
    let upstream = &upstream.address;
    let dialed = match tokio::time::timeout(HANDSHAKE_TIMEOUT, TcpStream::connect(upstream)).await {
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
        let mut stream = TokioIo::new(stream);
        match &*mode {
            Mode::Copy => {
                let mut dialed = dialed;
                if let Err(error) = tokio::io::copy_bidirectional(&mut stream, &mut dialed).await {
                    tracing::debug!(%error, "a tunnel stream ended");
                }
            }
            Mode::Terminate(terminating) => terminating.carry(stream, dialed).await,
        }
    });
    status(hyper::StatusCode::OK)
}

impl Terminating {
    /// Both handshakes, then a copy between the two plaintext sides. A failure is logged
    /// and closes the stream, which the worker sees as a failed connection.
    async fn carry<W>(&self, worker: W, dialed: TcpStream)
    where
        W: AsyncRead + AsyncWrite + Unpin,
    {
        let opened = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.open(worker, dialed)).await;
        let (mut worker, mut upstream) = match opened {
            Ok(Ok(opened)) => opened,
            Ok(Err(error)) => return tracing::warn!(error = format!("{error:#}"), "a tunnel stream's TLS failed"),
            Err(_) => return tracing::warn!("a tunnel stream's TLS handshakes timed out"),
        };
        if let Err(error) = tokio::io::copy_bidirectional(&mut worker, &mut upstream).await {
            // A TLS alert (the upstream refusing a missing client certificate arrives as
            // one after the handshake, in TLS 1.3) is worth a warning; a reset is not.
            if error.get_ref().is_some_and(|inner| inner.is::<rustls::Error>()) {
                tracing::warn!(%error, "a tunnel stream's TLS failed");
            } else {
                tracing::debug!(%error, "a tunnel stream ended");
            }
        }
    }

    /// Reads the worker's ClientHello, connects to the upstream offering the worker's
    /// ALPN protocols, and finishes the worker's handshake with the one the upstream
    /// chose: after TLS the two sides are copied byte for byte, so they must agree.
    async fn open<W>(
        &self,
        worker: W,
        dialed: TcpStream,
    ) -> Result<(tokio_rustls::server::TlsStream<W>, Either<tokio_rustls::client::TlsStream<TcpStream>, TcpStream>)>
    where
        W: AsyncRead + AsyncWrite + Unpin,
    {
        let hello = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), worker)
            .await
            .context("reading the worker's TLS ClientHello")?;
        let offered: Vec<Vec<u8>> =
            hello.client_hello().alpn().map(|protocols| protocols.map(<[u8]>::to_vec).collect()).unwrap_or_default();
        let (upstream, protocol) = match &self.upstream_tls {
            Some(tls) => {
                let resolver = Arc::new(ClientCertificate {
                    certificate: tls.client_certificate.clone(),
                    asked: AtomicBool::new(false),
                });
                // A clone per stream, for its ALPN and its resolver; the roots, the
                // certificate and the session cache are shared.
                let mut config = (*tls.config).clone();
                config.alpn_protocols = offered;
                config.client_auth_cert_resolver = resolver.clone();
                let stream = tokio_rustls::TlsConnector::from(Arc::new(config))
                    .connect(tls.server_name.clone(), dialed)
                    .await
                    .context("TLS to the upstream")?;
                if resolver.asked.load(Ordering::Relaxed) && resolver.certificate.is_none() {
                    tracing::warn!(
                        "the upstream asked for a client certificate and the connector has none \
                         (--upstream-client-cert): an upstream requiring one refuses the stream"
                    );
                }
                let protocol = stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
                (Either::Left(stream), protocol)
            }
            // Plain HTTP upstream: HTTP/1.1, the protocol a plain server is sure to speak.
            None => (Either::Right(dialed), offered.iter().any(|p| p == b"http/1.1").then(|| b"http/1.1".to_vec())),
        };
        // A clone per stream only to set its ALPN; certificates and keys are shared.
        let mut server = (*self.server).clone();
        server.alpn_protocols = protocol.into_iter().collect();
        let worker = hello.into_stream(Arc::new(server)).await.context("TLS with the worker")?;
        Ok((worker, upstream))
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::{Mode, TunnelArgs, Upstream, check_flags, mode, parse_upstream};

    // A self-signed certificate (CA:TRUE, so it also loads as a CA) and its key, and a key
    // of another pair. Loading checks parsing and that key and certificate match, not trust.
    const CERTIFICATE: &str = "-----BEGIN CERTIFICATE-----
MIIB5DCCAYugAwIBAgIUJ+OWwaCiBJdI0jEw+pNiKyqjyvgwCgYIKoZIzj0EAwIw
LjEsMCoGA1UEAwwjbWNwLnRubC10ZXN0LnR1bm5lbHMuYWdlbnRkLmludmFsaWQw
IBcNMjYxMjAxMTk1NzUxWhgPMjEyNjExMDcxOTU3NTFaMC4xLDAqBgNVBAMMI21j
cC50bmwtdGVzdC50dW5uZWxzLmFnZW50ZC5pbnZhbGlkMFkwEwYHKoZIzj0CAQYI
KoZIzj0DAQcDQgAEQcH0dWeqphAJjm37eIwwC35+nfTt2ACXI/6Sd0wmDwgSwml8
vlufuN83bb272EES6fvl3c6Eca5KFBnnqR1y+6OBhDCBgTAdBgNVHQ4EFgQUYzMO
mOIipVHSTrpUa2Mbg2AbURowHwYDVR0jBBgwFoAUYzMOmOIipVHSTrpUa2Mbg2Ab
URowDwYDVR0TAQH/BAUwAwEB/zAuBgNVHREEJzAlgiNtY3AudG5sLXRlc3QudHVu
bmVscy5hZ2VudGQuaW52YWxpZDAKBggqhkjOPQQDAgNHADBEAiAmlyS2iTffVWxO
570XedvaSqfdlmXgL4bgFneUJKHZUAIgVaKkSmfRXjj8bVNjaMFje6PBxBAMWCn0
nDHvzJU0OiE=
-----END CERTIFICATE-----
";
    const KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg4kXLjbYan/wHe5Rd
DNGqXDafZ8/inKHktx9Vq9Z8ma+hRANCAARBwfR1Z6qmEAmObft4jDALfn6d9O3Y
AJcj/pJ3TCYPCBLCaXy+W5+43zdtvbvYQRLp++XdzoRxrkoUGeepHXL7
-----END PRIVATE KEY-----
";
    const OTHER_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgGMtdGcZiSJ+BiH9I
uvLbMXyFsirY17WeQF/u404xu0ShRANCAARoEfaoSnpQC+doTBFIWt+5u9badps+
2fF1GY2IPejFbyIGqgsUl6dqFC7FCqTDQvvT54aLV5RhsDdGcGeEgrB0
-----END PRIVATE KEY-----
";

    fn args(upstream: &str) -> TunnelArgs {
        TunnelArgs {
            gateway: "http://127.0.0.1:1".into(),
            token: "sk-agentd-tun-x".into(),
            upstream: upstream.into(),
            tls_cert: None,
            tls_key: None,
            upstream_ca: None,
            upstream_client_cert: None,
            upstream_client_key: None,
            upstream_server_name: None,
        }
    }

    fn path(name: &str) -> Option<PathBuf> {
        Some(PathBuf::from(name))
    }

    /// `args` in terminating mode, every flag naming a file.
    fn terminating(upstream: &str) -> TunnelArgs {
        TunnelArgs {
            tls_cert: path("cert.pem"),
            tls_key: path("key.pem"),
            upstream_ca: path("ca.pem"),
            upstream_client_cert: path("client.pem"),
            upstream_client_key: path("client.key"),
            ..args(upstream)
        }
    }

    fn refusal(args: &TunnelArgs) -> String {
        let upstream = parse_upstream(&args.upstream).unwrap();
        format!("{:#}", check_flags(args, &upstream).expect_err("refused"))
    }

    #[test]
    fn the_upstream_is_a_host_port_or_an_https_or_http_url() {
        let upstream =
            |address: &str, host: &str, plain| Upstream { address: address.into(), host: host.into(), plain };
        assert_eq!(parse_upstream("127.0.0.1:8443").unwrap(), upstream("127.0.0.1:8443", "127.0.0.1", false));
        assert_eq!(parse_upstream("[::1]:8443").unwrap(), upstream("[::1]:8443", "::1", false));
        assert_eq!(
            parse_upstream("https://mcp.internal:9443/mcp").unwrap(),
            upstream("mcp.internal:9443", "mcp.internal", false)
        );
        assert_eq!(
            parse_upstream("https://mcp.internal").unwrap(),
            upstream("mcp.internal:443", "mcp.internal", false)
        );
        assert_eq!(parse_upstream("https://[::1]:9443").unwrap(), upstream("[::1]:9443", "::1", false));
        assert_eq!(parse_upstream("http://10.0.0.5").unwrap(), upstream("10.0.0.5:80", "10.0.0.5", true));
        assert!(format!("{:#}", parse_upstream("ftp://10.0.0.5").unwrap_err()).contains("not ftp"));
        assert!(parse_upstream("https://").is_err());
    }

    #[test]
    fn the_flags_are_checked_together() {
        // Byte copy: TLS is the worker's, so a plain upstream and every upstream TLS flag
        // are refused.
        let upstream = parse_upstream("10.0.0.5:8443").unwrap();
        assert!(check_flags(&args("10.0.0.5:8443"), &upstream).is_ok());
        assert!(
            refusal(&args("http://10.0.0.5:8080")).contains("--upstream: a plain http:// upstream needs --tls-cert")
        );
        for (flag, set) in [
            ("--upstream-ca", (|a: &mut TunnelArgs| a.upstream_ca = path("ca.pem")) as fn(&mut TunnelArgs)),
            ("--upstream-client-cert", |a| {
                a.upstream_client_cert = path("c.pem");
                a.upstream_client_key = path("c.key");
            }),
            ("--upstream-server-name", |a| a.upstream_server_name = Some("mcp.internal".into())),
        ] {
            let mut copying = args("10.0.0.5:8443");
            set(&mut copying);
            assert_eq!(
                refusal(&copying),
                format!("{flag} needs --tls-cert: without it the worker's TLS runs end to end to the upstream")
            );
        }

        // Pairs.
        assert_eq!(
            refusal(&TunnelArgs { tls_key: None, ..terminating("10.0.0.5:8443") }),
            "--tls-cert needs --tls-key"
        );
        assert_eq!(refusal(&TunnelArgs { tls_key: path("k"), ..args("10.0.0.5:8443") }), "--tls-key needs --tls-cert");
        assert_eq!(
            refusal(&TunnelArgs { upstream_client_key: None, ..terminating("10.0.0.5:8443") }),
            "--upstream-client-cert needs --upstream-client-key"
        );
        assert_eq!(
            refusal(&TunnelArgs { upstream_client_cert: None, ..terminating("10.0.0.5:8443") }),
            "--upstream-client-key needs --upstream-client-cert"
        );

        // Terminating: an https upstream (with or without the scheme) needs its CA; a plain
        // one takes no upstream TLS flag.
        let full = terminating("https://10.0.0.5:8443");
        assert!(check_flags(&full, &parse_upstream(&full.upstream).unwrap()).is_ok());
        for upstream in ["10.0.0.5:8443", "https://10.0.0.5:8443"] {
            assert!(
                refusal(&TunnelArgs { upstream_ca: None, ..terminating(upstream) })
                    .starts_with("--upstream-ca is required")
            );
        }
        let plain = TunnelArgs { tls_cert: path("cert.pem"), tls_key: path("key.pem"), ..args("http://10.0.0.5:8080") };
        assert!(check_flags(&plain, &parse_upstream(&plain.upstream).unwrap()).is_ok());
        assert_eq!(
            refusal(&TunnelArgs { upstream_ca: path("ca.pem"), ..plain.clone() }),
            "--upstream-ca: the upstream is plain http://, which has no TLS to configure"
        );
        assert_eq!(
            refusal(&TunnelArgs { upstream_server_name: Some("x".into()), ..plain }),
            "--upstream-server-name: the upstream is plain http://, which has no TLS to configure"
        );
    }

    #[test]
    fn certificates_and_keys_are_loaded_once_at_start() {
        let directory = tempfile::tempdir().unwrap();
        let file = |name: &str, text: &str| {
            let path = directory.path().join(name);
            std::fs::write(&path, text).unwrap();
            Some(path)
        };
        let (cert, key, other_key) =
            (file("cert.pem", CERTIFICATE), file("key.pem", KEY), file("other.key", OTHER_KEY));
        let not_pem = file("notes.txt", "not a certificate\n");
        let loaded = |args: &TunnelArgs| mode(args, &parse_upstream(&args.upstream).unwrap());
        let refused = |args: &TunnelArgs| match loaded(args) {
            Ok(_) => panic!("loaded {args:?}"),
            Err(error) => format!("{error:#}"),
        };
        let full = TunnelArgs {
            tls_cert: cert.clone(),
            tls_key: key.clone(),
            upstream_ca: cert.clone(),
            upstream_client_cert: cert.clone(),
            upstream_client_key: key.clone(),
            ..args("https://mcp.internal:8443")
        };

        assert!(matches!(loaded(&args("10.0.0.5:8443")).unwrap(), Mode::Copy));
        let Mode::Terminate(terminating) = loaded(&full).unwrap() else { panic!("terminating") };
        let tls = terminating.upstream_tls.expect("TLS to the upstream");
        assert_eq!(tls.server_name.to_str(), "mcp.internal");
        assert!(tls.client_certificate.is_some(), "--upstream-client-cert loaded");
        assert!(terminating.server.alpn_protocols.is_empty(), "ALPN is chosen per stream");
        let named = TunnelArgs {
            upstream_server_name: Some("10.0.0.9".into()),
            upstream_client_cert: None,
            upstream_client_key: None,
            ..full.clone()
        };
        let named = loaded(&named).unwrap();
        let Mode::Terminate(named) = named else { panic!("terminating") };
        let named = named.upstream_tls.unwrap();
        assert_eq!(named.server_name.to_str(), "10.0.0.9");
        assert!(named.client_certificate.is_none(), "no client certificate without the flags");
        let plain = TunnelArgs { tls_cert: cert.clone(), tls_key: key.clone(), ..args("http://10.0.0.5:8080") };
        let Mode::Terminate(plain) = loaded(&plain).unwrap() else { panic!("terminating") };
        assert!(plain.upstream_tls.is_none());

        let not_pem_name = not_pem.as_ref().unwrap().display().to_string();
        assert_eq!(
            refused(&TunnelArgs { tls_cert: not_pem.clone(), ..full.clone() }),
            format!("--tls-cert: no PEM certificate in {not_pem_name}")
        );
        assert_eq!(
            refused(&TunnelArgs { tls_key: cert.clone(), ..full.clone() }),
            format!("--tls-key: no PEM private key in {}", cert.as_ref().unwrap().display())
        );
        assert!(
            refused(&TunnelArgs { tls_key: other_key.clone(), ..full.clone() }).starts_with("--tls-cert/--tls-key: ")
        );
        assert!(
            refused(&TunnelArgs { tls_cert: directory.path().join("missing.pem").into(), ..full.clone() })
                .starts_with("--tls-cert: cannot read ")
        );
        assert_eq!(
            refused(&TunnelArgs { upstream_ca: not_pem.clone(), ..full.clone() }),
            format!("--upstream-ca: no PEM certificate in {not_pem_name}")
        );
        assert_eq!(
            refused(&TunnelArgs { upstream_client_cert: not_pem, ..full.clone() }),
            format!("--upstream-client-cert: no PEM certificate in {not_pem_name}")
        );
        assert!(
            refused(&TunnelArgs { upstream_client_key: other_key, ..full.clone() })
                .starts_with("--upstream-client-cert/--upstream-client-key: ")
        );
        assert!(
            refused(&TunnelArgs { upstream_server_name: Some("not a name".into()), ..full })
                .starts_with("--upstream-server-name: ")
        );
    }
}
