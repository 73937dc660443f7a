//! Where the config discovery server is, parsed from what a person types on the command line.

use super::ClientError;
use url::Url;

/// The CDS port the operator binds by default (`DefaultConfigDiscoveryPort`).
pub const DEFAULT_PORT: u16 = 13478;

/// The base URL of a config discovery server: `http://host:port[/prefix]`.
///
/// Accepts `host:port`, `:port` (this host, like the Go dialer's empty host), `http://host:port`
/// and `ws://host:port`; a missing port means 13478. A path is kept as a prefix of every API
/// path, for servers behind a path-routing proxy. TLS is refused: the operator serves plain
/// HTTP only, and silently downgrading an `https://` the user asked for would be worse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerAddress {
    base: Url,
}

impl ServerAddress {
    pub fn parse(raw: &str) -> Result<Self, ClientError> {
        Self::parse_with_port(raw, None)
    }

    /// Like [`ServerAddress::parse`], with the port given apart (upstream's `--cds-server-address
    /// IP --cds-server-port N`); an address that carries a port of its own too is refused, as
    /// the two could disagree.
    pub fn parse_with_port(raw: &str, port: Option<u16>) -> Result<Self, ClientError> {
        let invalid = |why: &str| ClientError::InvalidAddress { address: raw.to_string(), reason: why.to_string() };
        let raw_trimmed = raw.trim();
        if raw_trimmed.is_empty() {
            return Err(invalid("it is empty"));
        }
        // A bare IPv6 address, as upstream joins it with the port: `::1` is `[::1]`.
        let bracketed;
        let raw_trimmed = if raw_trimmed.parse::<std::net::Ipv6Addr>().is_ok() {
            bracketed = format!("[{raw_trimmed}]");
            bracketed.as_str()
        } else {
            raw_trimmed
        };
        let rest = match raw_trimmed.split_once("://") {
            None => raw_trimmed,
            Some((scheme, rest)) => match scheme.to_ascii_lowercase().as_str() {
                "http" | "ws" => rest,
                "https" | "wss" => {
                    return Err(invalid("TLS is not supported: the config discovery server speaks plain HTTP"));
                }
                _ => return Err(invalid("the scheme must be http:// (or ws://)")),
            },
        };
        let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(authority_end);
        if authority.contains('@') {
            return Err(invalid("credentials in the address are not supported"));
        }
        // An empty host means this host, as the Go dialer does for `:13478`.
        let authority = if authority.is_empty() || authority.starts_with(':') {
            format!("127.0.0.1{authority}")
        } else {
            authority.to_string()
        };
        let has_port = match authority.rfind(']') {
            Some(end) => authority[end..].contains(':'),
            None => authority.contains(':'),
        };
        let mut base = Url::parse(&format!("http://{authority}{path}")).map_err(|e| invalid(&e.to_string()))?;
        if base.query().is_some() || base.fragment().is_some() {
            return Err(invalid("it must not carry a query or a fragment"));
        }
        match (has_port, port) {
            (true, Some(_)) => return Err(invalid("it has a port already: give the port once")),
            (true, None) => {}
            (false, port) => {
                base.set_port(Some(port.unwrap_or(DEFAULT_PORT))).map_err(|()| invalid("it cannot carry a port"))?
            }
        }
        Ok(ServerAddress { base })
    }

    /// The URL of an API path given as segments (each percent-encoded as needed).
    pub(super) fn http_url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut().expect("http URLs have a path").pop_if_empty().extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        url
    }

    /// The WebSocket URL of a watch: the same path with scheme `ws`.
    pub(super) fn ws_url(&self, segments: &[&str], query: &[(&str, &str)]) -> Url {
        let mut url = self.http_url(segments, query);
        url.set_scheme("ws").expect("http and ws are both special schemes");
        url
    }

    /// Host and port to connect to, in the form `ToSocketAddrs` and `Host:` headers take.
    pub fn authority(&self) -> String {
        let host = self.base.host_str().expect("http URLs have a host");
        format!("{host}:{}", self.base.port_or_known_default().unwrap_or(DEFAULT_PORT))
    }
}

/// The base URL without a trailing slash, as people write it: `http://127.0.0.1:13478`.
impl std::fmt::Display for ServerAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "http://{}{}", self.authority(), self.base.path().trim_end_matches('/'))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(raw: &str) -> String {
        ServerAddress::parse(raw).unwrap().to_string()
    }

    #[test]
    fn accepts_the_forms_people_type() {
        assert_eq!(parsed("127.0.0.1:13478"), "http://127.0.0.1:13478");
        assert_eq!(parsed(":63478"), "http://127.0.0.1:63478");
        assert_eq!(parsed("http://cds.stunner:1234"), "http://cds.stunner:1234");
        assert_eq!(parsed("ws://10.0.0.1:1234/"), "http://10.0.0.1:1234");
        assert_eq!(parsed("HTTP://example.com"), "http://example.com:13478");
        assert_eq!(parsed("example.com"), "http://example.com:13478");
        assert_eq!(parsed("http://example.com:80"), "http://example.com:80");
        assert_eq!(parsed("[::1]:99"), "http://[::1]:99");
        assert_eq!(parsed("[::1]"), "http://[::1]:13478");
        assert_eq!(parsed("localhost:1/cds/"), "http://localhost:1/cds");
    }

    #[test]
    fn takes_the_port_apart_like_upstream() {
        let with = |raw, port| ServerAddress::parse_with_port(raw, Some(port)).map(|a| a.to_string());
        assert_eq!(with("10.0.0.1", 1234).unwrap(), "http://10.0.0.1:1234");
        assert_eq!(with("::1", 99).unwrap(), "http://[::1]:99");
        assert_eq!(parsed("::1"), "http://[::1]:13478");
        assert_eq!(with("http://cds.stunner/", 5).unwrap(), "http://cds.stunner:5");
        let err = with("10.0.0.1:1", 2).unwrap_err().to_string();
        assert!(err.contains("give the port once"), "{err}");
    }

    #[test]
    fn refuses_what_it_cannot_serve() {
        for bad in ["", "https://x:1", "wss://x:1", "ftp://x", "x:1?a=b", "u:p@x:1", "x:notaport"] {
            let err = ServerAddress::parse(bad).unwrap_err().to_string();
            assert!(err.starts_with("invalid config discovery server address"), "{bad}: {err}");
        }
    }

    #[test]
    fn builds_api_urls_with_encoded_segments() {
        let a = ServerAddress::parse("localhost:1/cds").unwrap();
        assert_eq!(
            a.http_url(&["api", "v1", "configs", "ns", "a/b"], &[("node", "n 1")]).as_str(),
            "http://localhost:1/cds/api/v1/configs/ns/a%2Fb?node=n+1"
        );
        assert_eq!(
            a.ws_url(&["api", "v1", "configs"], &[("watch", "true")]).as_str(),
            "ws://localhost:1/cds/api/v1/configs?watch=true"
        );
        assert_eq!(a.authority(), "localhost:1");
    }
}
