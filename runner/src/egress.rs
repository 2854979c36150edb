//! Egress by allowlist for a `namespace` sandbox (docs/api/hands.md "Networking"): an
//! environment whose networking is `limited` with `allowed_hosts` (or package managers
//! allowed) runs its sandbox in a network namespace of its own, with only loopback. The
//! one way out is an HTTP proxy at `127.0.0.1:3128` inside the sandbox
//! (`HTTPS_PROXY`/`HTTP_PROXY` are set): a forwarder there (`agentd sandbox-forward`)
//! carries each connection over a Unix socket to this proxy, run by the runner for the
//! session, which lets `CONNECT host:port` through only to an allowed host. A program
//! that ignores the proxy variables reaches nothing.
//!
//! Only `CONNECT` is proxied (https, and anything else tunnelled by it); a plain-HTTP
//! proxy request gets 403 saying so. A name that is allowed must resolve to public
//! addresses (a DNS answer cannot lead the sandbox to the runner's loopback or a
//! metadata service); an address is reached only when listed itself. The proxy holds at
//! most [`MAX_CONNECTIONS`] connections and waits [`HEADER_TIMEOUT`] for a request.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

/// Where the forwarder listens inside the sandbox.
pub const PROXY_ADDRESS: &str = "127.0.0.1:3128";
/// Where the proxy's socket is inside the sandbox.
pub const SOCKET_INSIDE: &str = "/run/agentd/egress.sock";
/// Where the forwarder binary is inside the sandbox.
pub const FORWARDER_INSIDE: &str = "/run/agentd-forwarder";

/// Connections one session's proxy holds at once.
pub const MAX_CONNECTIONS: usize = 256;
/// How long the proxy waits for a connection's request.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// Public package registries `allow_package_managers` lets through (and their subdomains).
pub const PACKAGE_REGISTRIES: &[&str] = &[
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "registry.yarnpkg.com",
    "crates.io",
    "static.crates.io",
    "index.crates.io",
    "proxy.golang.org",
    "sum.golang.org",
    "rubygems.org",
    "repo.maven.apache.org",
    "repo1.maven.org",
    "deb.debian.org",
    "security.debian.org",
];

/// Which hosts a sandbox may reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowlist {
    /// Exact hosts (lowercase) and `*.` wildcards (as `.suffix`).
    entries: Vec<String>,
}

impl Allowlist {
    /// The environment's `allowed_hosts`, plus the registries when `package_managers`.
    pub fn new(allowed_hosts: &[String], package_managers: bool) -> Self {
        let mut entries: Vec<String> = allowed_hosts
            .iter()
            .map(|host| {
                let host = host.trim().trim_end_matches('.').to_ascii_lowercase();
                host.strip_prefix('*').map(str::to_owned).unwrap_or(host)
            })
            .filter(|host| !host.is_empty())
            .collect();
        if package_managers {
            entries.extend(PACKAGE_REGISTRIES.iter().map(|host| (*host).to_owned()));
        }
        Self { entries }
    }

    /// Whether `host` may be reached: listed exactly, or under a listed `*.` wildcard.
    /// (A name must also resolve to public addresses: [`public_addresses`].)
    pub fn allows(&self, host: &str) -> bool {
        let host = host.trim_matches(['[', ']']).trim_end_matches('.').to_ascii_lowercase();
        self.entries.iter().any(|entry| match entry.strip_prefix('.') {
            Some(suffix) => host.len() > suffix.len() + 1 && host.ends_with(&format!(".{suffix}")),
            None => host == *entry,
        })
    }
}

/// A session's egress proxy: its socket (bound into the sandbox) and the task serving it.
pub struct EgressProxy {
    dir: PathBuf,
    stop: CancellationToken,
}

impl EgressProxy {
    /// Serves `allowlist` on a socket in a directory of its own under the system's
    /// temporary directory (a socket path must be short), reachable by `owner` only.
    pub fn start(root: &Path, session: &str, owner: Option<(u32, u32)>, allowlist: Allowlist) -> std::io::Result<Self> {
        use sha2::Digest;
        use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
        let name = sha2::Sha256::digest(format!("{}\0{session}", root.display()));
        let parent = std::env::temp_dir().join("agentd-egress");
        match std::fs::DirBuilder::new().mode(0o711).create(&parent) {
            Err(error) if error.kind() != std::io::ErrorKind::AlreadyExists => return Err(error),
            _ => {}
        }
        // Someone else's directory (or a symlink) there is never used: a root runner would
        // otherwise change files through it.
        let meta = std::fs::symlink_metadata(&parent)?;
        if !meta.is_dir() || meta.uid() != nix::unistd::geteuid().as_raw() || meta.mode() & 0o022 != 0 {
            return Err(std::io::Error::other(format!(
                "{} is not a directory of the runner's own: the egress proxy is not started",
                parent.display()
            )));
        }
        let dir = parent.join(hex::encode(&name[..12]));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let socket = dir.join("egress.sock");
        let listener = UnixListener::bind(&socket)?;
        // Only the session's uid may connect: the directory is its own, the socket 0600.
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
        if let Some((uid, gid)) = owner {
            std::os::unix::fs::chown(&socket, Some(uid), Some(gid))?;
            std::os::unix::fs::chown(&dir, Some(uid), Some(gid))?;
        }
        let stop = CancellationToken::new();
        tokio::spawn(serve(listener, Arc::new(allowlist), stop.clone()));
        Ok(Self { dir, stop })
    }

    /// The directory holding the socket (bound at `/run/agentd` inside the sandbox).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for EgressProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn serve(listener: UnixListener, allowlist: Arc<Allowlist>, stop: CancellationToken) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let accepted = tokio::select! {
            () = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                // Out of file descriptors, say: wait instead of spinning.
                tracing::warn!(%error, "the sandbox egress proxy cannot accept");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        let allowlist = allowlist.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let allowlist = allowlist.clone();
                async move { Ok::<_, std::convert::Infallible>(handle(request, &allowlist).await) }
            });
            let serving = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::select! {
                () = stop.cancelled() => {}
                _ = serving => {}
            }
            drop(slot);
        });
    }
}

/// Whether `ip` is not on the public internet (loopback, private, link-local, …).
fn private(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.octets()[0] == 0
                || (v4.octets()[0] == 100 && (v4.octets()[1] & 0xc0) == 64)
        }
        std::net::IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return private(v4.into());
            }
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (v6.segments()[0] & 0xfe00) == 0xfc00
                || (v6.segments()[0] & 0xffc0) == 0xfe80
        }
    }
}

/// The addresses to dial for `host:port`: a listed address as is; a name only if every
/// address it resolves to is public.
async fn public_addresses(host: &str, port: u16) -> Result<Vec<std::net::SocketAddr>, &'static str> {
    if let Ok(ip) = host.parse::<std::net::IpAddr>() {
        return Ok(vec![std::net::SocketAddr::new(ip, port)]);
    }
    let resolved = tokio::time::timeout(Duration::from_secs(5), tokio::net::lookup_host((host, port)))
        .await
        .map_err(|_| "resolving the host timed out")?
        .map_err(|_| "the host does not resolve")?;
    let addresses: Vec<std::net::SocketAddr> = resolved.collect();
    if addresses.is_empty() {
        return Err("the host does not resolve");
    }
    if addresses.iter().any(|a| private(a.ip())) {
        return Err("the host resolves to an address that is not public");
    }
    Ok(addresses)
}

fn answer(status: StatusCode, why: &str) -> Response<Empty<Bytes>> {
    let mut response = Response::new(Empty::new());
    *response.status_mut() = status;
    if let Ok(value) = why.parse() {
        response.headers_mut().insert("x-agentd-egress", value);
    }
    response
}

async fn handle(mut request: Request<hyper::body::Incoming>, allowlist: &Allowlist) -> Response<Empty<Bytes>> {
    if request.method() != Method::CONNECT {
        return answer(StatusCode::FORBIDDEN, "only CONNECT (https) goes through the sandbox's egress proxy");
    }
    let Some(authority) = request.uri().authority().cloned() else {
        return answer(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
    };
    if !allowlist.allows(authority.host()) {
        tracing::info!(host = authority.host(), "sandbox egress refused: not in allowed_hosts");
        return answer(StatusCode::FORBIDDEN, "the host is not in the environment's allowed_hosts");
    }
    let port = authority.port_u16().unwrap_or(443);
    let host = authority.host().trim_matches(['[', ']']);
    let addresses = match public_addresses(host, port).await {
        Ok(addresses) => addresses,
        Err(why) => {
            tracing::info!(host, why, "sandbox egress refused");
            return answer(StatusCode::FORBIDDEN, why);
        }
    };
    let dialed = tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(&addresses[..])).await;
    let mut upstream = match dialed {
        Ok(Ok(stream)) => stream,
        Ok(Err(_)) => return answer(StatusCode::BAD_GATEWAY, "the host cannot be reached"),
        Err(_) => return answer(StatusCode::GATEWAY_TIMEOUT, "the host did not answer"),
    };
    let on_upgrade = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        if let Ok(client) = on_upgrade.await {
            let _ = tokio::io::copy_bidirectional(&mut TokioIo::new(client), &mut upstream).await;
        }
    });
    answer(StatusCode::OK, "open")
}

/// `agentd sandbox-forward`: inside the sandbox, listens on [`PROXY_ADDRESS`] and carries
/// each connection to the proxy's socket. Runs until killed with the sandbox.
pub async fn forward() -> std::io::Result<()> {
    // It runs as the session's uid before the shell's limits: keep the session's
    // processes from attaching to it (ptrace) to escape them.
    nix::sys::prctl::set_dumpable(false).map_err(std::io::Error::from)?;
    let listener = tokio::net::TcpListener::bind(PROXY_ADDRESS).await?;
    loop {
        let (mut inside, _) = listener.accept().await?;
        tokio::spawn(async move {
            if let Ok(mut proxy) = tokio::net::UnixStream::connect(SOCKET_INSIDE).await {
                let _ = tokio::io::copy_bidirectional(&mut inside, &mut proxy).await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_allowed_exactly_or_under_a_wildcard() {
        let list = Allowlist::new(&["api.example.com".into(), "*.corp.example".into(), "192.0.2.1".into()], false);
        assert!(list.allows("api.example.com") && list.allows("API.Example.com."));
        assert!(!list.allows("example.com") && !list.allows("x.api.example.com"));
        assert!(list.allows("a.corp.example") && list.allows("a.b.corp.example"));
        assert!(!list.allows("corp.example"), "a wildcard names subdomains only");
        assert!(!list.allows("evilcorp.example"));
        assert!(list.allows("192.0.2.1") && !list.allows("192.0.2.10"));
        assert!(!list.allows("pypi.org"));
        assert!(Allowlist::new(&[], true).allows("pypi.org"));
    }

    #[tokio::test]
    async fn names_must_resolve_to_public_addresses_and_listed_addresses_are_dialled_as_is() {
        assert_eq!(public_addresses("localhost", 80).await, Err("the host resolves to an address that is not public"));
        let listed = public_addresses("127.0.0.1", 8080).await.unwrap();
        assert_eq!(listed, vec!["127.0.0.1:8080".parse().unwrap()], "an address listed in allowed_hosts is meant");
        for ip in ["10.0.0.1", "169.254.169.254", "::1", "fd00::1", "100.64.0.1", "::ffff:127.0.0.1"] {
            assert!(private(ip.parse().unwrap()), "{ip}");
        }
        assert!(!private("93.184.216.34".parse().unwrap()));
    }
}
