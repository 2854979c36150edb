//! The address of the client behind a request, for what is keyed by client rather than
//! by credential (the anonymous rate-limit buckets): the TCP peer, or — when the peer is
//! one of the operator's proxies (`AGENTD_TRUSTED_PROXIES`) — the nearest address of its
//! `X-Forwarded-For` chain that is not a trusted proxy. A header from anyone else is
//! never believed: a client cannot pick its own bucket.

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use axum::http::Request;
use ipnet::IpNet;

/// The proxies whose `X-Forwarded-For` is believed.
#[derive(Debug, Clone, Default)]
pub struct TrustedProxies(Vec<IpNet>);

impl TrustedProxies {
    /// Parses a comma-separated list of addresses and CIDR blocks (`10.0.0.0/8, ::1`).
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut nets = Vec::new();
        for item in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let net = match item.parse::<IpNet>() {
                Ok(net) => net,
                Err(_) => item.parse::<IpAddr>().map(IpNet::from).map_err(|_| {
                    format!("{item:?} is not an IP address or CIDR block (e.g. 10.0.0.0/8, 192.0.2.7, ::1)")
                })?,
            };
            nets.push(net);
        }
        Ok(Self(nets))
    }

    fn trusts(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client's address: `None` when the request came in without a peer (in-process
    /// tests).
    pub fn client<B>(&self, request: &Request<B>) -> Option<IpAddr> {
        let ConnectInfo(peer) = request.extensions().get::<ConnectInfo<SocketAddr>>()?;
        let mut client = canonical(peer.ip());
        if !self.trusts(client) {
            return Some(client);
        }
        // Right to left: each hop was added by the one after it; stop at the first that
        // is not ours.
        let hops = request.headers().get_all("x-forwarded-for").iter().filter_map(|v| v.to_str().ok());
        let chain: Vec<&str> = hops.flat_map(|v| v.split(',')).map(str::trim).collect();
        for hop in chain.iter().rev() {
            let Ok(ip) = hop.parse::<IpAddr>() else { break };
            client = canonical(ip);
            if !self.trusts(client) {
                break;
            }
        }
        Some(client)
    }
}

/// IPv4-mapped IPv6 addresses as IPv4.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(peer: &str, forwarded: &[&str]) -> Request<()> {
        let mut builder = Request::builder();
        for value in forwarded {
            builder = builder.header("x-forwarded-for", *value);
        }
        let mut request = builder.body(()).unwrap();
        request.extensions_mut().insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        request
    }

    #[test]
    fn only_trusted_proxies_are_believed() {
        let none = TrustedProxies::default();
        let spoofed = request("203.0.113.9:5000", &["198.51.100.1"]);
        assert_eq!(none.client(&spoofed), Some("203.0.113.9".parse().unwrap()), "an untrusted peer is the client");

        let lb = TrustedProxies::parse("10.0.0.0/8, ::1").unwrap();
        let via_lb = request("10.1.2.3:5000", &["198.51.100.1, 10.9.9.9"]);
        assert_eq!(lb.client(&via_lb), Some("198.51.100.1".parse().unwrap()), "the nearest untrusted hop");
        // A client that sends its own header cannot hide behind it: the hop the proxy
        // appended (the client's real address) comes first from the right.
        let forged = request("10.1.2.3:5000", &["1.1.1.1", "203.0.113.9"]);
        assert_eq!(lb.client(&forged), Some("203.0.113.9".parse().unwrap()));
        let mapped = request("[::ffff:203.0.113.9]:5000", &[]);
        assert_eq!(lb.client(&mapped), Some("203.0.113.9".parse().unwrap()));
        assert!(TrustedProxies::parse("10.0.0.0/33").is_err() && TrustedProxies::parse("lb.local").is_err());
        assert_eq!(lb.client(&Request::new(())), None);
    }
}
