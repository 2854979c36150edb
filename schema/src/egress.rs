//! The egress guard for every outbound call a tenant can aim: A2A push targets, MCP
//! server URLs, `a2a_agent` URLs and the JSON-RPC endpoint a remote agent card names,
//! every hop of a `web_fetch`.
//!
//! [`check`] parses the URL, resolves its host once and refuses it when any address is
//! not public ([`private`]); the caller then pins its connection to the checked address
//! with [`pin`] (`resolve` + `no_proxy`: a proxy would connect wherever it likes), so a
//! second DNS answer (rebinding) cannot move the connection elsewhere.
//!
//! Refusals carry a message safe to show the tenant (no addresses); the host and the
//! addresses it resolved to are logged server-side.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// The message a tenant sees for a target that is not public.
pub const NOT_PUBLIC: &str = "url: must resolve only to public addresses";

/// How long resolving a host may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Whether an IPv4 address is one a tenant's outbound call must not reach.
fn private_v4(v4: Ipv4Addr) -> bool {
    let o = v4.octets();
    v4.is_private()
        || v4.is_loopback()
        || v4.is_link_local()
        || v4.is_multicast()
        || v4.is_broadcast()
        || v4.is_unspecified()
        || o[0] == 0 // 0.0.0.0/8 "this network"
        || (o[0] == 100 && (o[1] & 0xc0) == 64) // 100.64.0.0/10 CGNAT
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24 IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xfe) == 18) // 198.18.0.0/15 benchmarking
        || o[0] >= 240 // 240.0.0.0/4 reserved
}

/// The IPv4 address an IPv6 address embeds by a translation or tunnelling form, if any.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = v6.segments();
    let low = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (IPv4-compatible, deprecated).
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] => Some(low),
        // NAT64 well-known prefix 64:ff9b::/96 and local-use 64:ff9b:1::/48.
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low),
        [0x64, 0xff9b, 1, ..] => Some(low),
        // 6to4 2002:AABB:CCDD::/48 embeds AA.BB.CC.DD.
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new((hi >> 8) as u8, hi as u8, (lo >> 8) as u8, lo as u8)),
        _ => None,
    }
}

/// Whether an address is one a tenant's outbound call must not reach.
pub fn private(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => private_v4(v4),
        IpAddr::V6(v6) => {
            // :: and ::1 fall in the IPv4-compatible range; they are checked first.
            if v6.is_unspecified() || v6.is_loopback() {
                return true;
            }
            let first = v6.segments()[0];
            let second = v6.segments()[1];
            // Teredo 2001:0::/32 hides its IPv4 server and client (obfuscated): refused.
            if first == 0x2001 && second == 0 {
                return true;
            }
            if let Some(v4) = embedded_v4(v6) {
                return private_v4(v4);
            }
            v6.is_multicast()
                || (first & 0xfe00) == 0xfc00 // fc00::/7 unique local
                || (first & 0xffc0) == 0xfe80 // fe80::/10 link-local
                || (first & 0xffc0) == 0xfec0 // fec0::/10 site-local (deprecated)
        }
    }
}

/// Why a target was refused. `Display` is the tenant-safe message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused(pub String);

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// What a target may be.
#[derive(Debug, Clone, Copy)]
pub struct Rules {
    /// Private, loopback, link-local… addresses are allowed (and so is plain `http`
    /// when `https_only` is set).
    pub allow_private: bool,
    /// Only `https` (unless `allow_private`); otherwise `http` and `https`.
    pub https_only: bool,
}

/// A checked target: the URL and the one address its connection must go to.
#[derive(Debug, Clone)]
pub struct Target {
    /// The parsed URL.
    pub url: reqwest::Url,
    /// Its host (without IPv6 brackets).
    pub host: String,
    /// The checked address.
    pub address: SocketAddr,
}

impl Target {
    /// `builder` with the connection pinned to the checked address and no proxy.
    pub fn pin(&self, builder: reqwest::ClientBuilder) -> reqwest::ClientBuilder {
        pin(builder, self)
    }
}

/// `builder` with connections to `target`'s host pinned to its checked address, and
/// no proxy (a proxy would resolve the host itself).
pub fn pin(builder: reqwest::ClientBuilder, target: &Target) -> reqwest::ClientBuilder {
    builder.resolve(&target.host, target.address).no_proxy()
}

/// `url` without its query string and fragment, for logs.
pub fn redacted(raw: &str) -> String {
    match reqwest::Url::parse(raw) {
        Ok(mut url) => {
            url.set_query(None);
            url.set_fragment(None);
            let _ = url.set_password(None);
            let _ = url.set_username("");
            url.to_string()
        }
        Err(_) => raw.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

/// Checks `raw` against `rules`: a valid `http(s)` URL without credentials whose host
/// resolves, only to public addresses unless private ones are allowed.
pub async fn check(raw: &str, rules: Rules) -> Result<Target, Refused> {
    let url = reqwest::Url::parse(raw).map_err(|e| Refused(format!("url: not a valid URL ({e})")))?;
    match url.scheme() {
        "https" => {}
        "http" if rules.allow_private || !rules.https_only => {}
        _ if rules.https_only => return Err(Refused("url: must use https".into())),
        _ => return Err(Refused("url: must use http or https".into())),
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Refused("url: must not carry credentials".into()));
    }
    let host = url.host_str().ok_or_else(|| Refused("url: a host is required".into()))?;
    let host = host.trim_matches(['[', ']']).to_owned();
    let port = url.port_or_known_default().ok_or_else(|| Refused("url: no port".into()))?;
    let addresses: Vec<SocketAddr> =
        match tokio::time::timeout(RESOLVE_TIMEOUT, tokio::net::lookup_host((host.as_str(), port))).await {
            Ok(Ok(found)) => found.collect(),
            Ok(Err(error)) => {
                tracing::info!(%host, %error, "egress: the host does not resolve");
                return Err(Refused("url: the host does not resolve".into()));
            }
            Err(_) => {
                tracing::info!(%host, "egress: resolving the host timed out");
                return Err(Refused("url: resolving the host timed out".into()));
            }
        };
    let Some(first) = addresses.first().copied() else {
        return Err(Refused("url: the host does not resolve".into()));
    };
    if !rules.allow_private && addresses.iter().any(|a| private(a.ip())) {
        let list: Vec<String> = addresses.iter().map(|a| a.ip().to_string()).collect();
        tracing::warn!(%host, addresses = %list.join(","), "egress: refused a target that is not public");
        return Err(Refused(NOT_PUBLIC.into()));
    }
    Ok(Target { url, host, address: first })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(ip: &str) -> bool {
        private(ip.parse().unwrap())
    }

    #[test]
    fn private_ipv4_ranges_are_refused() {
        for ip in [
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.0.1",
            "127.0.0.1",
            "127.255.0.9",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "224.0.0.1",
            "239.255.255.250",
            "255.255.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "192.0.0.8",
            "198.18.0.1",
            "198.19.255.255",
            "240.0.0.1",
            "250.1.2.3",
        ] {
            assert!(refused(ip), "{ip} must be refused");
        }
        for ip in ["8.8.8.8", "1.1.1.1", "100.63.255.255", "100.128.0.0", "172.32.0.1", "198.20.0.1", "192.0.1.1"] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn private_ipv6_ranges_are_refused() {
        for ip in ["::1", "::", "fd00::1", "fc00::1", "fe80::1", "febf::1", "fec0::1", "feff::1", "ff02::1", "ff0e::1"]
        {
            assert!(refused(ip), "{ip} must be refused");
        }
        for ip in ["2606:4700::1111", "2001:4860:4860::8888"] {
            assert!(!refused(ip), "{ip} is public");
        }
    }

    #[test]
    fn ipv6_forms_embedding_ipv4_are_checked_by_the_embedded_address() {
        // Mapped ::ffff:a.b.c.d.
        assert!(refused("::ffff:127.0.0.1"));
        assert!(refused("::ffff:10.0.0.1"));
        assert!(!refused("::ffff:8.8.8.8"));
        // IPv4-compatible ::a.b.c.d.
        assert!(refused("::127.0.0.1"));
        assert!(refused("::169.254.169.254"));
        assert!(!refused("::8.8.8.8"));
        // NAT64 64:ff9b::/96 and 64:ff9b:1::/48.
        assert!(refused("64:ff9b::7f00:1"));
        assert!(refused("64:ff9b::a9fe:a9fe"));
        assert!(!refused("64:ff9b::808:808"));
        assert!(refused("64:ff9b:1::c0a8:1"));
        assert!(!refused("64:ff9b:1::808:808"));
        // 6to4 2002:AABB:CCDD::/48.
        assert!(refused("2002:7f00:1::1"));
        assert!(refused("2002:a9fe:a9fe::1"));
        assert!(refused("2002:c0a8:101::"));
        assert!(!refused("2002:808:808::1"));
        // Teredo 2001:0::/32: refused whatever it embeds.
        assert!(refused("2001:0:4136:e378:8000:63bf:3fff:fdd2"));
        assert!(refused("2001::1"));
    }

    #[tokio::test]
    async fn checks_refuse_private_targets_unless_allowed() {
        let strict = Rules { allow_private: false, https_only: false };
        let refusal = check("http://127.0.0.1:9/mcp", strict).await.unwrap_err();
        assert_eq!(refusal.0, NOT_PUBLIC);
        assert!(!refusal.0.contains("127.0.0.1"), "the address is not echoed to the tenant");
        assert_eq!(check("http://[::ffff:127.0.0.1]/", strict).await.unwrap_err().0, NOT_PUBLIC);
        assert_eq!(check("http://localhost:9/", strict).await.unwrap_err().0, NOT_PUBLIC);
        assert!(check("ftp://8.8.8.8/", strict).await.is_err());
        assert!(check("http://user:pw@8.8.8.8/", strict).await.is_err());
        let https = Rules { allow_private: false, https_only: true };
        assert_eq!(check("http://8.8.8.8/", https).await.unwrap_err().0, "url: must use https");
        let target = check("https://8.8.8.8/hook?x=1", https).await.unwrap();
        assert_eq!(target.address, "8.8.8.8:443".parse().unwrap());
        let open = Rules { allow_private: true, https_only: true };
        let target = check("http://127.0.0.1:9/mcp", open).await.unwrap();
        assert_eq!((target.host.as_str(), target.address.port()), ("127.0.0.1", 9));
        let target = check("http://[::1]:9/", open).await.unwrap();
        assert_eq!(target.host, "::1");
    }

    #[test]
    fn redaction_drops_query_fragment_and_credentials() {
        assert_eq!(redacted("https://u:p@h.example/hook?token=s#f"), "https://h.example/hook");
        assert_eq!(redacted("not a url?secret"), "not a url");
    }
}
