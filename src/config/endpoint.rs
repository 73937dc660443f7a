//! STATIC cluster endpoints: an IP or CIDR prefix with an optional `:<LOW-HIGH>` port range.

use super::go_compat::quote;
use std::net::IpAddr;

/// A parsed STATIC cluster endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub prefix_len: u8,
    pub ports: (u32, u32),
}

impl Endpoint {
    /// Parses `ep` as stunnerd does, with the dataplane's error texts.
    pub(crate) fn parse(ep: &str) -> Result<Self, String> {
        let (cidr, ports) = match split_port_range(ep) {
            Some((cidr, low, high)) => {
                let low = parse_port(low).map_err(|e| format!("invalid port in endpoint {}: {e}", quote(ep)))?;
                let high = parse_port(high).map_err(|e| format!("invalid end-port in endpoint {}: {e}", quote(ep)))?;
                (cidr, (low, high))
            }
            None => (ep, (1, 65535)),
        };
        let invalid = || format!("invalid endpoint {}: invalid CIDR address: {cidr}", quote(ep));
        if let Ok(addr) = cidr.parse::<IpAddr>() {
            let prefix_len = if addr.is_ipv4() { 32 } else { 128 };
            return Ok(Endpoint { addr, prefix_len, ports });
        }
        let (ip, len) = cidr.split_once('/').ok_or_else(invalid)?;
        let addr: IpAddr = ip.parse().map_err(|_| invalid())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix_len = match len.parse::<u8>() {
            Ok(n) if n <= max && len.bytes().all(|b| b.is_ascii_digit()) => n,
            _ => return Err(invalid()),
        };
        Ok(Endpoint { addr, prefix_len, ports })
    }
}

/// Splits off a trailing `:<LOW-HIGH>`, where LOW and HIGH are non-empty runs of digits.
fn split_port_range(ep: &str) -> Option<(&str, &str, &str)> {
    let inner = ep.strip_suffix('>')?;
    let at = inner.rfind(":<")?;
    let (low, high) = inner[at + 2..].split_once('-')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    (digits(low) && digits(high)).then_some((&ep[..at], low, high))
}

/// Go's `strconv.Atoi` on a run of digits: only overflow can fail.
fn parse_port(s: &str) -> Result<u32, String> {
    match s.parse::<i64>() {
        Ok(n) => Ok(u32::try_from(n).unwrap_or(u32::MAX)),
        Err(_) => Err(format!("strconv.Atoi: parsing {}: value out of range", quote(s))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_spec_examples() {
        let e = Endpoint::parse("10.0.0.0/8").unwrap();
        assert_eq!((e.prefix_len, e.ports), (8, (1, 65535)));
        let e = Endpoint::parse("10.1.2.3").unwrap();
        assert_eq!(e.prefix_len, 32);
        let e = Endpoint::parse("10.1.2.3:<5000-5100>").unwrap();
        assert_eq!(e.ports, (5000, 5100));
        let e = Endpoint::parse("fd00::/64:<1-65535>").unwrap();
        assert_eq!((e.prefix_len, e.ports), (64, (1, 65535)));
        assert_eq!(Endpoint::parse("::1").unwrap().prefix_len, 128);
    }

    #[test]
    fn rejects_with_dataplane_text() {
        assert_eq!(
            Endpoint::parse("example.com").unwrap_err(),
            r#"invalid endpoint "example.com": invalid CIDR address: example.com"#
        );
        assert_eq!(
            Endpoint::parse("10.0.0.0/33:<1-2>").unwrap_err(),
            r#"invalid endpoint "10.0.0.0/33:<1-2>": invalid CIDR address: 10.0.0.0/33"#
        );
        assert!(
            Endpoint::parse("1.2.3.4:<99999999999999999999-1>").unwrap_err().starts_with("invalid port in endpoint")
        );
        // A malformed range is not a range: the whole string must then be a prefix.
        assert!(Endpoint::parse("1.2.3.4:<a-b>").is_err());
    }
}
