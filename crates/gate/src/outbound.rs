//! Where outbound requests may go: the hosts and networks that handler
//! (executor) and subscription URLs may point at. A URL is checked when it
//! is registered, and every address it resolves to is checked again when
//! the daemon connects (the HTTP adapter's resolver), so a name that later
//! resolves somewhere else (DNS rebinding) is refused too.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// A class of addresses, named in `outbound.allowed_networks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    /// 127.0.0.0/8, ::1.
    Loopback,
    /// 10/8, 172.16/12, 192.168/16, 100.64/10 (shared), fc00::/7.
    Private,
    /// Every unicast address not in another class.
    Public,
}

/// One entry of `allowed_networks`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Network {
    Class(Class),
    Cidr(IpNet),
}

/// One entry of `allowed_hosts`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Host {
    /// Exactly this name.
    Exact(String),
    /// Any name ending in `.suffix` (`*.suffix`).
    Under(String),
}

/// The hosts and networks outbound URLs may point at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutboundPolicy {
    hosts: Vec<Host>,
    networks: Vec<Network>,
}

impl Default for OutboundPolicy {
    /// Any host; loopback, private and public addresses. Link-local
    /// addresses (169.254.0.0/16, where clouds serve instance metadata and
    /// credentials, and fe80::/10), the metadata services elsewhere
    /// ([`is_metadata`]), unspecified, multicast, broadcast and
    /// documentation addresses are refused unless a network names them.
    /// An IPv6 address that embeds an IPv4 one is judged as that one.
    fn default() -> Self {
        OutboundPolicy {
            hosts: Vec::new(),
            networks: vec![
                Network::Class(Class::Loopback),
                Network::Class(Class::Private),
                Network::Class(Class::Public),
            ],
        }
    }
}

/// The IPv4 address an IPv6 address stands for, when it embeds one that
/// a packet to it may reach: mapped (`::ffff:a.b.c.d`), compatible
/// (`::a.b.c.d`, deprecated but still routed by some stacks), NAT64
/// (`64:ff9b::a.b.c.d`, `64:ff9b:1::/48`) and 6to4 (`2002:AABB:CCDD::`).
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = v6.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = v6.segments();
    let last = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    if s[..6] == [0; 6] && !v6.is_unspecified() && !v6.is_loopback() {
        return Some(last);
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) {
        return Some(last);
    }
    // IPv4-translated (SIIT, `::ffff:0:a.b.c.d`).
    if s[..6] == [0, 0, 0, 0, 0xffff, 0] {
        return Some(last);
    }
    // Teredo (`2001:0::/32`): the client's address, inverted, last.
    if s[0] == 0x2001 && s[1] == 0 {
        return Some(Ipv4Addr::from(!u32::from(last)));
    }
    if s[0] == 0x2002 {
        return Some(Ipv4Addr::new(
            (s[1] >> 8) as u8,
            s[1] as u8,
            (s[2] >> 8) as u8,
            s[2] as u8,
        ));
    }
    None
}

/// Cloud metadata services (instance credentials) outside the link-local
/// networks: AWS's IPv6 endpoint and Alibaba Cloud's, in networks that are
/// otherwise allowed (unique local, shared address space).
fn is_metadata(ip: IpAddr) -> bool {
    const AWS_V6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254);
    const ALIBABA: Ipv4Addr = Ipv4Addr::new(100, 100, 100, 200);
    match ip {
        IpAddr::V4(v4) => v4 == ALIBABA,
        IpAddr::V6(v6) => v6 == AWS_V6,
    }
}

/// The class of `ip`, if it is in one.
fn class_of(ip: IpAddr) -> Option<Class> {
    let ip = match ip {
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(v6),
        },
        v4 => v4,
    };
    if is_metadata(ip) {
        return None;
    }
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_loopback() {
                Some(Class::Loopback)
            } else if v4.is_private() || (o[0] == 100 && (64..128).contains(&o[1])) {
                Some(Class::Private)
            } else if v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_multicast()
                || v4.is_broadcast()
                || v4.is_documentation()
                || o[0] == 0
                || o[0] >= 240
                // IETF protocol assignments (NAT64 discovery, DS-Lite).
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
            {
                None
            } else {
                Some(Class::Public)
            }
        }
        IpAddr::V6(v6) => {
            if v6.is_loopback() {
                Some(Class::Loopback)
            } else if v6.is_unique_local() {
                Some(Class::Private)
            } else if v6.is_unicast_link_local()
                || v6.is_unspecified()
                || v6.is_multicast()
                // Discard-only (`100::/64`), documentation (`2001:db8::/32`)
                // and the deprecated site-local (`fec0::/10`).
                || v6.segments()[..4] == [0x100, 0, 0, 0]
                || v6.segments()[..2] == [0x2001, 0xdb8]
                || v6.segments()[0] & 0xffc0 == 0xfec0
            {
                None
            } else {
                Some(Class::Public)
            }
        }
    }
}

impl OutboundPolicy {
    /// Parses `hosts` (names, or `*.example.com`; empty: any name) and
    /// `networks` (`loopback`, `private`, `public`, or CIDR networks like
    /// `10.1.0.0/16`). The error names the entry at fault.
    pub fn new(hosts: &[String], networks: &[String]) -> Result<OutboundPolicy, String> {
        let hosts = hosts
            .iter()
            .map(|h| {
                let h = h.trim().to_ascii_lowercase();
                let ok = |s: &str| {
                    !s.is_empty()
                        && s.split('.').all(|l| {
                            !l.is_empty()
                                && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                        })
                };
                match h.strip_prefix("*.") {
                    Some(rest) if ok(rest) => Ok(Host::Under(rest.to_owned())),
                    None if ok(&h) => Ok(Host::Exact(h)),
                    _ => Err(format!(
                        "allowed_hosts: '{h}' is not a host name or *.domain"
                    )),
                }
            })
            .collect::<Result<_, _>>()?;
        let networks = networks
            .iter()
            .map(|n| match n.trim() {
                "loopback" => Ok(Network::Class(Class::Loopback)),
                "private" => Ok(Network::Class(Class::Private)),
                "public" => Ok(Network::Class(Class::Public)),
                cidr => cidr
                    .parse::<IpNet>()
                    .or_else(|_| cidr.parse::<IpAddr>().map(IpNet::from))
                    .map(Network::Cidr)
                    .map_err(|_| {
                        format!(
                            "allowed_networks: '{cidr}' is not loopback, private, public or a network like 10.0.0.0/8"
                        )
                    }),
            })
            .collect::<Result<_, _>>()?;
        Ok(OutboundPolicy { hosts, networks })
    }

    /// Whether the daemon may connect to `ip`.
    pub fn allows_ip(&self, ip: IpAddr) -> bool {
        let class = class_of(ip);
        self.networks.iter().any(|n| match n {
            Network::Class(c) => class == Some(*c),
            Network::Cidr(net) => {
                net.contains(&ip)
                    || match ip {
                        IpAddr::V6(v6) => v6
                            .to_ipv4_mapped()
                            .is_some_and(|v4| net.contains(&IpAddr::V4(v4))),
                        IpAddr::V4(_) => false,
                    }
            }
        })
    }

    /// Whether a URL may name host `name` (a DNS name, not an address).
    pub fn allows_name(&self, name: &str) -> bool {
        if self.hosts.is_empty() {
            return true;
        }
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        self.hosts.iter().any(|h| match h {
            Host::Exact(e) => *e == name,
            Host::Under(s) => name
                .strip_suffix(s.as_str())
                .is_some_and(|head| head.ends_with('.') && head.len() > 1),
        })
    }

    /// Checks an `http://` or `https://` URL's host: an address must be in
    /// an allowed network; a name must be an allowed host (its addresses
    /// are checked when the daemon connects). The error says why.
    pub fn check_url(&self, url: &str) -> Result<(), String> {
        let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
        if !matches!(parsed.scheme(), "http" | "https") {
            return Err("an http:// or https:// URL".to_owned());
        }
        match parsed.host() {
            Some(url::Host::Ipv4(v4)) => self.check_ip(IpAddr::V4(v4)),
            Some(url::Host::Ipv6(v6)) => self.check_ip(IpAddr::V6(v6)),
            Some(url::Host::Domain(name)) => {
                if self.allows_name(name) {
                    Ok(())
                } else {
                    Err(format!("host '{name}' is not in outbound.allowed_hosts"))
                }
            }
            None => Err("the URL names no host".to_owned()),
        }
    }

    fn check_ip(&self, ip: IpAddr) -> Result<(), String> {
        if !self.hosts.is_empty() {
            return Err(format!(
                "an address ({ip}) where outbound.allowed_hosts names hosts"
            ));
        }
        if self.allows_ip(ip) {
            Ok(())
        } else {
            Err(format!("address {ip} is not in outbound.allowed_networks"))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_default_allows_loopback_private_and_public_but_not_link_local() {
        let p = OutboundPolicy::default();
        for ok in [
            "127.0.0.1",
            "::1",
            "10.1.2.3",
            "192.168.0.9",
            "8.8.8.8",
            "2001:4860::1",
        ] {
            assert!(p.allows_ip(ip(ok)), "{ok}");
        }
        for no in [
            "169.254.169.254",
            "fe80::1",
            "0.0.0.0",
            "::",
            "224.0.0.1",
            "255.255.255.255",
            "::ffff:169.254.169.254",
            "::169.254.169.254",
            "64:ff9b::169.254.169.254",
            "64:ff9b:1::a9fe:a9fe",
            "2002:a9fe:a9fe::1",
            "::ffff:0:a9fe:a9fe",
            "2001:0:4136:e378:8000:63bf:5601:5601",
            "100::1",
            "fec0::1",
            "192.0.0.170",
            "fd00:ec2::254",
            "100.100.100.200",
        ] {
            assert!(!p.allows_ip(ip(no)), "{no}");
        }
        // Embedded addresses are judged as what they embed.
        assert!(p.allows_ip(ip("64:ff9b::8.8.8.8")));
        assert!(p.allows_ip(ip("::ffff:10.0.0.1")));
        assert!(p.check_url("http://169.254.169.254/latest").is_err());
        assert!(p.check_url("http://127.0.0.1:9/hook").is_ok());
        assert!(p.check_url("https://exec.example.com/hook").is_ok());
    }

    #[test]
    fn networks_and_hosts_restrict() {
        let p = OutboundPolicy::new(
            &["exec.internal".into(), "*.example.com".into()],
            &["10.1.0.0/16".into()],
        )
        .unwrap();
        assert!(p.allows_ip(ip("10.1.9.9")));
        assert!(!p.allows_ip(ip("10.2.0.1")));
        assert!(!p.allows_ip(ip("127.0.0.1")));
        assert!(p.allows_name("exec.internal"));
        assert!(p.allows_name("a.example.com"));
        assert!(!p.allows_name("example.com"));
        assert!(!p.allows_name("badexample.com"));
        assert!(
            p.check_url("http://10.1.0.5/hook").is_err(),
            "hosts are named"
        );
        assert!(p.check_url("http://other.internal/hook").is_err());
        assert!(OutboundPolicy::new(&[], &["10.0.0.0/33".into()]).is_err());
        assert!(OutboundPolicy::new(&["bad host".into()], &[]).is_err());
    }
}
