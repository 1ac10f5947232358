//! Where a tenant's destinations may not point: the server's own machine and networks.
//!
//! A tenant admin defines push destinations (and alert webhooks) that the server calls and
//! whose answers it shows in the delivery log, so a destination on the server's side of the
//! network would let the tenant read services it cannot reach itself (SSRF, issue 30 finding
//! 9). Two checks, one rule ([`is_internal`]):
//! - **When defined**, an IP literal in the URL, in any of its spellings (`[::127.0.0.1]`,
//!   `64:ff9b::7f00:1`, `2002:7f00:1::`), and `localhost`, are refused with 403 (auth.rs).
//! - **When called**, the tenant's destinations go through a client whose resolver drops
//!   internal addresses ([`PublicOnly`]): a name that resolves to one (a hosts-file entry, a
//!   DNS record changed after the check) fails to connect, and so does an IP literal that got
//!   past the first check (a definition stored before it). Redirects are never followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Not a public unicast address: loopback, private, shared (CGNAT), link-local, unspecified,
/// broadcast, multicast, reserved (240/4), benchmarking (198.18/15), documentation and the
/// IETF's own block (192.0.0/24); in IPv6 also unique-local, site-local, and every form that
/// carries an IPv4 address (mapped, compatible, NAT64, 6to4, Teredo) judged by that address.
pub fn is_internal(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(ip) => is_internal_v4(ip),
        IpAddr::V6(ip) => is_internal_v6(ip),
    }
}

fn is_internal_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_loopback()
        || ip.is_private()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_multicast()
        || a == 0
        || a >= 240
        || (a == 100 && (b & 0xc0) == 64)
        || (a == 198 && (b & 0xfe) == 18)
        || (a == 192 && b == 0 && c == 0)
        || (a == 192 && b == 0 && c == 2)
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
}

fn is_internal_v6(ip: Ipv6Addr) -> bool {
    let segments = ip.segments();
    let embedded = |high: u16, low: u16| {
        let [a, b] = high.to_be_bytes();
        let [c, d] = low.to_be_bytes();
        is_internal_v4(Ipv4Addr::new(a, b, c, d))
    };
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_internal_v4(v4);
    }
    // `::a.b.c.d` (IPv4-compatible, deprecated but still routed by some stacks).
    if segments[..6] == [0; 6] {
        return ip.is_unspecified() || ip.is_loopback() || embedded(segments[6], segments[7]);
    }
    match segments[0] {
        // NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48): the IPv4 address is last.
        0x0064 if segments[1] == 0xff9b => embedded(segments[6], segments[7]),
        // 6to4: the IPv4 address follows the prefix.
        0x2002 => embedded(segments[1], segments[2]),
        // Teredo carries a client address obfuscated; nothing public needs it.
        0x2001 if segments[1] == 0 => true,
        // Documentation.
        0x2001 if segments[1] == 0x0db8 => true,
        first => {
            (first & 0xfe00) == 0xfc00
                || (first & 0xffc0) == 0xfe80
                || (first & 0xffc0) == 0xfec0
                || (first & 0xff00) == 0xff00
                || (first == 0x0100 && segments[1..4] == [0, 0, 0])
        }
    }
}

/// The host of a URL, if it is an IP literal (brackets removed).
pub fn literal_ip(url: &reqwest::Url) -> Option<IpAddr> {
    // The parser has put IPv4 addresses in dotted decimal (`0x7f.1` is `127.0.0.1`) and IPv6
    // ones in brackets.
    let host = url.host_str()?;
    host.strip_prefix('[')
        .and_then(|host| host.strip_suffix(']'))
        .unwrap_or(host)
        .parse()
        .ok()
}

/// True when the URL names this machine or its networks by an address or as `localhost`.
/// Other names are judged when they are resolved ([`PublicOnly`]).
pub fn names_internal_host(url: &reqwest::Url) -> bool {
    if let Some(ip) = literal_ip(url) {
        return is_internal(ip);
    }
    let domain = url
        .host_str()
        .unwrap_or_default()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    domain == "localhost" || domain.ends_with(".localhost")
}

/// A resolver that keeps only public addresses, for the client that calls tenants'
/// destinations: a name that resolves only to internal ones fails to connect.
#[derive(Debug, Default, Clone, Copy)]
pub struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        Box::pin(async move {
            let host = name.as_str().to_owned();
            let found: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<SocketAddr> = found
                .iter()
                .copied()
                .filter(|address| !is_internal(address.ip()))
                .collect();
            if public.is_empty() {
                return Err(format!(
                    "{host} resolves only to internal addresses, which a tenant's destination may not call"
                )
                .into());
            }
            let addresses: Addrs = Box::new(public.into_iter());
            Ok(addresses)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn internal(text: &str) -> bool {
        is_internal(text.parse().unwrap())
    }

    /// Issue 30, finding 9: these were accepted as a tenant's push URL, and the server called
    /// the loopback service behind them.
    #[test]
    fn every_spelling_of_an_internal_address_is_internal() {
        for text in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "198.18.0.1",
            "198.19.255.255",
            "224.0.0.1",
            "240.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "::127.0.0.1",
            "::ffff:127.0.0.1",
            "64:ff9b::7f00:1",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::",
            "2002:a00:1::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "2001:db8::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
        ] {
            assert!(internal(text), "{text} must be internal");
        }
    }

    #[test]
    fn public_addresses_are_not_internal() {
        for text in [
            "8.8.8.8",
            "1.1.1.1",
            "198.20.0.1",
            "100.128.0.1",
            "2606:4700::1111",
            "64:ff9b::808:808",
            "2002:808:808::1",
        ] {
            assert!(!internal(text), "{text} is public");
        }
    }

    #[tokio::test]
    async fn names_that_resolve_only_inside_are_refused() {
        let refused = PublicOnly.resolve("localhost".parse().unwrap()).await;
        let error = refused.err().expect("localhost is loopback").to_string();
        assert!(error.contains("internal addresses"), "{error}");
    }
}
