//! TURN URIs (RFC 7065, `turn:HOST[:PORT][?transport=udp|tcp]`) as the credential API hands
//! them out and as a tester config carries them: parsed once, for `stunnerctl icetest` (which
//! dials the Gateway's public address, an IP literal) and for the `icetester` (which may be
//! given a DNS name, upstream's `<gateway>.<namespace>.svc.cluster.local`, and resolves it).

use super::error::TurnUriError;
use super::relay::ServerTransport;
use std::fmt;
use std::net::{IpAddr, SocketAddr};

/// RFC 7065's default port for `turn:`.
const DEFAULT_PORT: u16 = 3478;

/// One `turn:` URI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnUri {
    /// A DNS name or an IP literal (without the brackets of an IPv6 one).
    pub host: String,
    pub port: u16,
    pub transport: ServerTransport,
}

impl TurnUri {
    pub fn parse(uri: &str) -> Result<TurnUri, TurnUriError> {
        let invalid = |reason: &str| TurnUriError::Invalid { uri: uri.into(), reason: reason.into() };
        let lower = uri.to_ascii_lowercase();
        if lower.starts_with("turns:") {
            return Err(TurnUriError::Tls(uri.into()));
        }
        let rest = uri.get(..5).filter(|s| s.eq_ignore_ascii_case("turn:")).map(|_| &uri[5..]);
        let rest = rest.ok_or_else(|| TurnUriError::NotTurn(uri.into()))?;
        let (hostport, query) = rest.split_once('?').unwrap_or((rest, ""));
        let mut transport = ServerTransport::Udp;
        for kv in query.split('&').filter(|kv| !kv.is_empty()) {
            match kv.split_once('=') {
                Some((k, v)) if k.eq_ignore_ascii_case("transport") => {
                    transport = match v.to_ascii_lowercase().as_str() {
                        "udp" => ServerTransport::Udp,
                        "tcp" => ServerTransport::Tcp,
                        _ => return Err(invalid("transport must be udp or tcp")),
                    }
                }
                _ => return Err(invalid("the only parameter is transport=udp|tcp")),
            }
        }
        let (host, port) = if let Some(v6) = hostport.strip_prefix('[') {
            let (host, after) = v6.split_once(']').ok_or_else(|| invalid("an unclosed '['"))?;
            (host, after.strip_prefix(':'))
        } else {
            match hostport.rsplit_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (hostport, None),
            }
        };
        if host.is_empty() || host.contains(['/', '@', ' ']) || (host.contains(':') && host.parse::<IpAddr>().is_err())
        {
            return Err(invalid("no valid host"));
        }
        let port = match port {
            None => DEFAULT_PORT,
            Some(p) => p.parse().ok().filter(|p| *p != 0).ok_or_else(|| invalid("no valid port"))?,
        };
        Ok(TurnUri { host: host.to_string(), port, transport })
    }

    /// The server's address when the host is an IP literal (the credential API's URIs).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        self.host.parse().ok().map(|ip| SocketAddr::new(ip, self.port))
    }

    /// The server's address: the IP literal, else the first address the name resolves to.
    pub async fn resolve(&self) -> std::io::Result<SocketAddr> {
        if let Some(addr) = self.socket_addr() {
            return Ok(addr);
        }
        tokio::net::lookup_host((self.host.as_str(), self.port)).await?.next().ok_or_else(|| {
            std::io::Error::new(std::io::ErrorKind::NotFound, format!("{} resolves to no address", self.host))
        })
    }
}

/// As the credential API writes it: `turn:HOST:PORT?transport=udp|tcp`, an IPv6 host bracketed.
impl fmt::Display for TurnUri {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let transport = self.transport.as_str();
        if self.host.contains(':') {
            write!(f, "turn:[{}]:{}?transport={transport}", self.host, self.port)
        } else {
            write!(f, "turn:{}:{}?transport={transport}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn turn_uris_parse_with_rfc7065_defaults() {
        let uri = TurnUri::parse("turn:127.0.0.1:3479?transport=tcp").unwrap();
        assert_eq!(uri.socket_addr(), Some("127.0.0.1:3479".parse().unwrap()));
        assert_eq!(uri.transport, ServerTransport::Tcp);
        let uri = TurnUri::parse("turn:udp-gateway.icetest.svc.cluster.local").unwrap();
        assert_eq!(
            (uri.host.as_str(), uri.port, uri.transport),
            ("udp-gateway.icetest.svc.cluster.local", 3478, ServerTransport::Udp)
        );
        assert_eq!(uri.socket_addr(), None, "a name is resolved, not parsed");
        let uri = TurnUri::parse("TURN:[::1]:30478?transport=UDP").unwrap();
        assert_eq!(uri.socket_addr(), Some("[::1]:30478".parse().unwrap()));
        for text in ["turn:[::1]:3478?transport=tcp", "turn:udp-gateway.icetest.svc.cluster.local:3478?transport=udp"] {
            assert_eq!(TurnUri::parse(text).unwrap().to_string(), text, "written back as read");
        }
    }

    #[test]
    fn what_is_not_a_usable_turn_uri_says_why() {
        assert_eq!(
            TurnUri::parse("turns:1.2.3.4:443?transport=tcp"),
            Err(TurnUriError::Tls("turns:1.2.3.4:443?transport=tcp".into()))
        );
        assert!(matches!(TurnUri::parse("stun:1.2.3.4:3478"), Err(TurnUriError::NotTurn(_))));
        for bad in
            ["turn:1.2.3.4:x", "turn:1.2.3.4:0", "turn::3478", "turn:1.2.3.4?transport=sctp", "turn:[::1", "turn:a:b:c"]
        {
            assert!(matches!(TurnUri::parse(bad), Err(TurnUriError::Invalid { .. })), "{bad}");
        }
    }
}
