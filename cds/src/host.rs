//! DNS rebinding guards (docs/security.md): the checks every port that trusts loopback, or
//! hands out configs or credentials, makes on a request before reading anything for it.
//!
//! `kubectl port-forward` and `stunnerctl console` put the CDS, the console and the credential
//! API on the user's 127.0.0.1, and a connection from there is trusted ([`crate::authz`]). Any
//! web page the user has open can reach that address too, by resolving its own name to
//! 127.0.0.1 (DNS rebinding); the browser then sends the page's name in `Host`. So a request
//! that arrives over loopback is served only when its `Host` (HTTP/2: `:authority`) names a
//! loopback address, `localhost`, or a name the operator answers to ([`LocalNames`]: its CDS
//! Service's names); anything else is misdirected ([`check_host`]). This holds whatever
//! `--cds-authorization` says: a rebinding page reaches a port-forward in every mode.
//!
//! What reveals credentials in a browser (the console's `?reveal=1` and its event stream)
//! also refuses a cross-site request, whatever its address ([`check_same_origin`]).

use axum::http::{HeaderMap, StatusCode, Uri, header};
use axum::response::Response;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

/// The names, besides loopback addresses and `localhost`, that a request over loopback may
/// carry in its `Host`: the operator's own (its CDS Service's names, an advertised host, the
/// operator's `--loopback-allowed-hosts`). Lower case, without a port.
#[derive(Debug, Clone, Default)]
pub struct LocalNames(Arc<[String]>);

impl LocalNames {
    /// `names`, each a host name or address without a port; case does not matter.
    pub fn new(names: impl IntoIterator<Item = String>) -> Self {
        let mut names: Vec<String> =
            names.into_iter().map(|n| n.trim().trim_end_matches('.').to_ascii_lowercase()).collect();
        names.retain(|n| !n.is_empty());
        names.sort();
        names.dedup();
        LocalNames(names.into())
    }

    /// The names a client inside the cluster uses for Service `service` in `namespace`:
    /// `<service>`, `<service>.<namespace>`, `<service>.<namespace>.svc` and
    /// `<service>.<namespace>.svc.<cluster_domain>`.
    pub fn service(service: &str, namespace: &str, cluster_domain: &str) -> impl Iterator<Item = String> {
        [
            service.to_string(),
            format!("{service}.{namespace}"),
            format!("{service}.{namespace}.svc"),
            format!("{service}.{namespace}.svc.{cluster_domain}"),
        ]
        .into_iter()
    }

    pub fn names(&self) -> &[String] {
        &self.0
    }

    fn allows(&self, host: &str) -> bool {
        if host == "localhost" {
            return true;
        }
        if let Ok(ip) = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>() {
            return ip.to_canonical().is_loopback();
        }
        self.0.iter().any(|n| n == host)
    }
}

/// Why a request was not served: said to the client, logged, never anything of a config.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Misdirected {
    #[error(
        "a request over loopback must name its host (localhost, a loopback address or the operator's Service) in \
         Host: it has none"
    )]
    NoHost,
    #[error(
        "a request over loopback is served for localhost, a loopback address or the operator's Service only, not \
         for host {0:?} (DNS rebinding guard: docs/security.md)"
    )]
    ForeignHost(String),
    #[error("credentials are not shown to a cross-site request: {0} (docs/security.md)")]
    CrossSite(String),
}

impl Misdirected {
    /// The HTTP answer: 421 for a host we do not answer to, 403 for a cross-site request;
    /// the reason in a plain-text line.
    pub fn into_response(self) -> Response {
        let status = match self {
            Misdirected::NoHost | Misdirected::ForeignHost(_) => StatusCode::MISDIRECTED_REQUEST,
            Misdirected::CrossSite(_) => StatusCode::FORBIDDEN,
        };
        crate::api::text_error(status, &self.to_string())
    }

    /// The gRPC answer: PERMISSION_DENIED with the reason.
    pub fn into_grpc_response(self) -> Response {
        tonic::Status::permission_denied(self.to_string()).into_http()
    }
}

/// Whether a request from `peer` with this target and these headers may be served: always
/// when it did not come over loopback; else only when every host it names (the target's
/// authority, each `Host`) is one `names` allows, and it names one at all.
pub fn check_host(
    peer: Option<SocketAddr>,
    uri: &Uri,
    headers: &HeaderMap,
    names: &LocalNames,
) -> Result<(), Misdirected> {
    if !peer.is_some_and(|p| p.ip().to_canonical().is_loopback()) {
        return Ok(());
    }
    let authority = uri.authority().map(|a| a.as_str().to_string());
    let hosts = headers.get_all(header::HOST).iter().map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    let mut named = false;
    for value in authority.into_iter().chain(hosts) {
        named = true;
        if !names.allows(&host_of(&value)) {
            return Err(Misdirected::ForeignHost(cut(&value)));
        }
    }
    if named { Ok(()) } else { Err(Misdirected::NoHost) }
}

/// Whether a request comes from a page of the origin it is addressed to, or from no page at
/// all (a tool, a typed URL): refused when `Sec-Fetch-Site` says `cross-site` or `same-site`
/// (another port of the same host is same-site), or `Origin` names another origin than `Host`.
pub fn check_same_origin(uri: &Uri, headers: &HeaderMap) -> Result<(), Misdirected> {
    if let Some(site) = headers.get("sec-fetch-site") {
        let site = String::from_utf8_lossy(site.as_bytes()).to_ascii_lowercase();
        if site == "cross-site" || site == "same-site" {
            return Err(Misdirected::CrossSite(format!("Sec-Fetch-Site is {site}")));
        }
    }
    let Some(origin) = headers.get(header::ORIGIN) else { return Ok(()) };
    let origin = String::from_utf8_lossy(origin.as_bytes());
    let target = uri
        .authority()
        .map(|a| a.as_str().to_string())
        .or_else(|| headers.get(header::HOST).map(|h| String::from_utf8_lossy(h.as_bytes()).into_owned()));
    let origin_authority = origin.split_once("://").map(|(_, rest)| rest.trim_end_matches('/'));
    match (origin_authority, target) {
        (Some(o), Some(t)) if o.eq_ignore_ascii_case(&t) => Ok(()),
        _ => Err(Misdirected::CrossSite(format!("Origin {:?} is not this server's", cut(&origin)))),
    }
}

/// The host of a `Host` value (`name`, `name:port`, `[v6]:port`, `v4:port`), lower case,
/// without a trailing dot.
fn host_of(value: &str) -> String {
    let value = value.trim();
    let host = if let Some(rest) = value.strip_prefix('[') {
        rest.split_once(']').map_or(value, |(h, _)| h)
    } else {
        value.rsplit_once(':').filter(|(h, _)| !h.contains(':')).map_or(value, |(h, _)| h)
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// At most 100 characters of what a client sent, for a message.
fn cut(value: &str) -> String {
    value.chars().take(100).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn names() -> LocalNames {
        LocalNames::new(LocalNames::service("stunner-config-discovery", "stunner-system", "cluster.local"))
    }

    fn host(peer: &str, host: Option<&str>) -> Result<(), Misdirected> {
        let mut headers = HeaderMap::new();
        if let Some(h) = host {
            headers.insert(header::HOST, HeaderValue::from_str(h).unwrap());
        }
        check_host(Some(peer.parse().unwrap()), &Uri::from_static("/api/v1/configs"), &headers, &names())
    }

    #[test]
    fn loopback_requests_must_name_a_local_host() {
        for ok in [
            "127.0.0.1:13478",
            "127.0.0.1",
            "[::1]:13478",
            "localhost:8080",
            "LocalHost",
            "localhost.:1",
            "stunner-config-discovery.stunner-system.svc:13478",
            "stunner-config-discovery.stunner-system.svc.cluster.local:13478",
            "stunner-config-discovery.stunner-system",
            "stunner-config-discovery:13478",
        ] {
            assert_eq!(host("127.0.0.1:5000", Some(ok)), Ok(()), "{ok}");
            assert_eq!(host("[::1]:5000", Some(ok)), Ok(()), "{ok}");
        }
        for foreign in ["attacker.example:13478", "attacker.example", "10.0.0.1:13478", "localhost.attacker.example"] {
            assert_eq!(
                host("127.0.0.1:5000", Some(foreign)),
                Err(Misdirected::ForeignHost(foreign.into())),
                "{foreign}"
            );
        }
        assert_eq!(host("127.0.0.2:5000", Some("attacker.example")).unwrap_err().into_response().status(), 421);
        assert_eq!(host("[::ffff:127.0.0.1]:5000", Some("attacker.example")).map_err(drop), Err(()));
        assert_eq!(host("127.0.0.1:5000", None), Err(Misdirected::NoHost));
        // Not over loopback: stunnerd in its pod, whatever it names.
        assert_eq!(host("10.0.0.7:5000", Some("attacker.example")), Ok(()));
        assert_eq!(host("10.0.0.7:5000", None), Ok(()));
    }

    #[test]
    fn an_http2_authority_is_checked_too() {
        let headers = HeaderMap::new();
        let peer = Some("127.0.0.1:5000".parse().unwrap());
        let uri = Uri::from_static("http://attacker.example:13478/stunner.v1.ConfigDiscovery/List");
        assert!(check_host(peer, &uri, &headers, &names()).is_err());
        let uri = Uri::from_static("http://localhost:13478/stunner.v1.ConfigDiscovery/List");
        assert_eq!(check_host(peer, &uri, &headers, &names()), Ok(()));
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, HeaderValue::from_static("attacker.example"));
        assert!(check_host(peer, &uri, &headers, &names()).is_err(), "every host named must be local");
    }

    #[test]
    fn cross_site_requests_are_refused() {
        let uri = Uri::from_static("/ui/gateways/a/b?reveal=1");
        let check = |pairs: &[(&'static str, &'static str)]| {
            let mut headers = HeaderMap::new();
            headers.insert(header::HOST, HeaderValue::from_static("127.0.0.1:13478"));
            for (k, v) in pairs {
                headers.insert(*k, HeaderValue::from_static(v));
            }
            check_same_origin(&uri, &headers)
        };
        assert_eq!(check(&[]), Ok(()));
        assert_eq!(check(&[("sec-fetch-site", "same-origin")]), Ok(()));
        assert_eq!(check(&[("sec-fetch-site", "none")]), Ok(()));
        assert_eq!(check(&[("origin", "http://127.0.0.1:13478")]), Ok(()));
        assert!(check(&[("sec-fetch-site", "cross-site")]).is_err());
        assert!(check(&[("sec-fetch-site", "same-site")]).is_err());
        assert!(check(&[("origin", "http://127.0.0.1:8080")]).is_err());
        assert!(check(&[("origin", "http://attacker.example")]).is_err());
        assert!(check(&[("origin", "null")]).is_err());
        let refused = check(&[("origin", "http://attacker.example")]).unwrap_err().into_response();
        assert_eq!(refused.status(), 403);
    }
}
