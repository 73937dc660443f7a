//! WebSocket handshake checks with the Go server's statuses and texts (cds-protocol.md §2.3).
//!
//! The checks run in gorilla/websocket's order before the upgrade, so a malformed watch
//! request gets the same answer from either implementation. The Origin rule is upstream's:
//! stunnerd sends an Origin that carries the query string, and the host inside it must
//! equal the Host header.

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use sha1::{Digest, Sha1};

/// Why an upgrade was refused: the status and gorilla's message.
#[derive(Debug, PartialEq, Eq)]
pub struct Refusal {
    pub(crate) status: StatusCode,
    pub(crate) message: &'static str,
}

pub fn check(headers: &HeaderMap) -> Result<(), Refusal> {
    let refuse = |status, message| Err(Refusal { status, message });
    if !has_token(headers, header::CONNECTION, "upgrade") {
        return refuse(
            StatusCode::BAD_REQUEST,
            "websocket: the client is not using the websocket protocol: 'upgrade' token not found in 'Connection' header",
        );
    }
    if !has_token(headers, header::UPGRADE, "websocket") {
        return refuse(
            StatusCode::UPGRADE_REQUIRED,
            "websocket: the client is not using the websocket protocol: 'websocket' token not found in 'Upgrade' header",
        );
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION).is_none_or(|v| v != "13") {
        return refuse(
            StatusCode::BAD_REQUEST,
            "websocket: unsupported version: 13 not found in 'Sec-Websocket-Version' header",
        );
    }
    if !origin_allowed(headers) {
        return refuse(StatusCode::FORBIDDEN, "websocket: request origin not allowed by Upgrader.CheckOrigin");
    }
    if !headers.get(header::SEC_WEBSOCKET_KEY).is_some_and(|k| is_base64_of_16_bytes(k.as_bytes())) {
        return refuse(
            StatusCode::BAD_REQUEST,
            "websocket: not a websocket handshake: 'Sec-WebSocket-Key' header must be Base64 encoded value of 16-byte length",
        );
    }
    Ok(())
}

/// The 101 answer to a handshake that passed [`check`].
pub fn switching_protocols(headers: &HeaderMap) -> Response {
    let key = headers.get(header::SEC_WEBSOCKET_KEY).map_or(&b""[..], |k| k.as_bytes());
    let accept = HeaderValue::from_str(&accept_key(key)).expect("base64 is a valid header value");
    let mut resp = Response::new(Body::empty());
    *resp.status_mut() = StatusCode::SWITCHING_PROTOCOLS;
    let h = resp.headers_mut();
    h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    h.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    resp
}

/// RFC 6455 §4.2.2: base64 of the SHA-1 of the client's key and the protocol's GUID.
fn accept_key(key: &[u8]) -> String {
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(sha.finalize())
}

/// Whether any value of `name` lists `token` among its comma-separated tokens.
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// No Origin, or an Origin URL whose host[:port] equals the Host header, ignoring case.
fn origin_allowed(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else { return true };
    let (Ok(origin), Some(host)) = (origin.to_str(), headers.get(header::HOST).and_then(|h| h.to_str().ok())) else {
        return false;
    };
    let Some((_, rest)) = origin.split_once("://") else { return false };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let origin_host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    origin_host.eq_ignore_ascii_case(host)
}

/// Go's `base64.StdEncoding.DecodeString(key)` yields exactly 16 bytes.
fn is_base64_of_16_bytes(key: &[u8]) -> bool {
    let alphabet = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    key.len() == 24 && key.ends_with(b"==") && key[..22].iter().all(alphabet)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn stunnerd_headers() -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::HOST, HeaderValue::from_static("10.0.1.23:13478"));
        h.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
        h.insert(header::ORIGIN, HeaderValue::from_static("http://10.0.1.23:13478?node=gke-pool-1-x7k2&watch=true"));
        h.insert(header::SEC_WEBSOCKET_KEY, HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="));
        h.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h
    }

    #[test]
    fn accepts_what_stunnerd_sends() {
        assert_eq!(check(&stunnerd_headers()), Ok(()));
        let mut h = stunnerd_headers();
        h.remove(header::ORIGIN);
        assert_eq!(check(&h), Ok(()));
        h.insert(header::CONNECTION, HeaderValue::from_static("keep-alive, UPGRADE"));
        assert_eq!(check(&h), Ok(()));
    }

    #[test]
    fn accepts_with_the_rfc_key() {
        // The example of RFC 6455 §1.3.
        let resp = switching_protocols(&stunnerd_headers());
        assert_eq!(resp.status(), StatusCode::SWITCHING_PROTOCOLS);
        assert_eq!(resp.headers()[header::SEC_WEBSOCKET_ACCEPT], "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_eq!(resp.headers()[header::UPGRADE], "websocket");
    }

    #[test]
    fn refuses_in_gorilla_order() {
        let status = |f: &dyn Fn(&mut HeaderMap)| {
            let mut h = stunnerd_headers();
            f(&mut h);
            check(&h).unwrap_err().status
        };
        assert_eq!(status(&|h| drop(h.remove(header::CONNECTION))), StatusCode::BAD_REQUEST);
        assert_eq!(status(&|h| drop(h.remove(header::UPGRADE))), StatusCode::UPGRADE_REQUIRED);
        assert_eq!(
            status(&|h| drop(h.insert(header::SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8")))),
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            status(&|h| drop(h.insert(header::ORIGIN, HeaderValue::from_static("http://evil.example")))),
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            status(&|h| drop(h.insert(header::SEC_WEBSOCKET_KEY, HeaderValue::from_static("c2hvcnQ=")))),
            StatusCode::BAD_REQUEST
        );
        // Both Upgrade and the key are wrong: the earlier check decides.
        assert_eq!(
            status(&|h| {
                h.remove(header::UPGRADE);
                h.remove(header::SEC_WEBSOCKET_KEY);
            }),
            StatusCode::UPGRADE_REQUIRED
        );
    }
}
