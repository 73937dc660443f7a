//! Flag values in the forms Go's flag package and controller-runtime accept: single-dash long
//! flags, Go durations and booleans, Go listen addresses.

use std::net::{IpAddr, Ipv6Addr, SocketAddr};
use std::time::Duration;

/// Rewrites `-long-flag` to `--long-flag`, as Go's flag package accepts both.
pub fn normalize_go_flags(args: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut after_separator = false;
    for (i, a) in args.into_iter().enumerate() {
        after_separator |= a == "--";
        let single_dash_long = a.starts_with('-') && !a.starts_with("--") && a.len() > 2;
        if i > 0 && !after_separator && single_dash_long {
            out.push(format!("-{a}"));
        } else {
            out.push(a);
        }
    }
    out
}

/// A flag value that does not parse; clap shows it after `invalid value '...' for '--flag'`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidValue {
    #[error("invalid duration {0:?} (examples: 250ms, 1s, 1m30s)")]
    Duration(String),
    #[error("invalid count {0:?} (a whole number, at least 1)")]
    Count(String),
    #[error("invalid boolean {0:?}")]
    Bool(String),
    #[error("invalid address {0:?} (want host:port or :port)")]
    Address(String),
}

/// Go's `time.ParseDuration` for the units that make sense here.
pub fn parse_go_duration(s: &str) -> Result<Duration, InvalidValue> {
    let bad = || InvalidValue::Duration(s.into());
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut total = 0f64;
    let mut rest = s;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let num_end = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).ok_or_else(bad)?;
        let value: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// A count that must be at least 1 (a limit of 0 would refuse everything).
pub fn parse_positive(s: &str) -> Result<usize, InvalidValue> {
    match s.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(InvalidValue::Count(s.into())),
    }
}

/// Go's `strconv.ParseBool`, as Go's boolean flags use it.
pub fn parse_go_bool(s: &str) -> Result<bool, InvalidValue> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(InvalidValue::Bool(s.into())),
    }
}

/// A Go listen address: `host:port`, `:port` (every interface) or `[v6]:port`.
pub fn parse_bind_address(s: &str) -> Result<SocketAddr, InvalidValue> {
    let bad = || InvalidValue::Address(s.into());
    let (host, port) = s.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let ip: IpAddr = match host.trim_start_matches('[').trim_end_matches(']') {
        "" => IpAddr::V6(Ipv6Addr::UNSPECIFIED),
        "localhost" => IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
        h => h.parse().map_err(|_| bad())?,
    };
    Ok(SocketAddr::new(ip, port))
}

/// A listen address that `0` (controller-runtime's convention) turns off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BindAddress(pub Option<SocketAddr>);

/// Like [`parse_bind_address`], with `0` for disabled.
pub fn parse_optional_bind_address(s: &str) -> Result<BindAddress, InvalidValue> {
    if s == "0" || s.is_empty() { Ok(BindAddress(None)) } else { parse_bind_address(s).map(|a| BindAddress(Some(a))) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_go_duration("250ms").unwrap(), Duration::from_millis(250));
        assert_eq!(parse_go_duration("1.5s").unwrap(), Duration::from_millis(1500));
        assert_eq!(parse_go_duration("0").unwrap(), Duration::ZERO);
        assert!(parse_go_duration("10").is_err());
        assert!(parse_go_duration("").is_err());
    }
}
