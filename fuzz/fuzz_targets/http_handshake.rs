//! What a client sends on a fresh CDS connection: HTTP/1.1 request parsing (hyper, with the
//! listener's settings), the CDS router, and the WebSocket upgrade checks of a watch.
//!
//! Every answer must be a well-formed HTTP/1.1 response with a status the API can give; a 101
//! must answer a watch request that passed every handshake check, carry the RFC 6455
//! accept key of that request's key, and be the last thing on the connection; and the bytes
//! written back are bounded by what was sent.

#![no_main]

use base64::Engine;
use libfuzzer_sys::fuzz_target;
use sha1::{Digest, Sha1};
use std::sync::LazyLock;
use stunner_gateway_operator::fuzzing::CdsServer;

static SERVER: LazyLock<CdsServer> = LazyLock::new(CdsServer::new);

/// The statuses the CDS API and hyper's HTTP/1.1 server answer with.
const STATUSES: [u16; 12] = [100, 101, 200, 400, 403, 404, 405, 413, 417, 426, 431, 505];

/// The largest answer of this store (the list of every config, as JSON) with its head, and then
/// some: one request of at least 16 bytes gets at most this much.
const MAX_ANSWER: usize = 8 * 1024;

fuzz_target!(|raw: &[u8]| {
    let out = SERVER.http1_connection(raw);
    assert!(out.len() <= (raw.len() / 16 + 1) * MAX_ANSWER, "{} bytes back for {} sent", out.len(), raw.len());
    let mut rest = &out[..];
    let mut answered = 0;
    while !rest.is_empty() {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        let head = match response.parse(rest) {
            Ok(httparse::Status::Complete(n)) => n,
            other => panic!("not an HTTP response ({other:?}): {:?}", String::from_utf8_lossy(rest)),
        };
        let status = response.code.expect("a complete head has a status");
        assert!(STATUSES.contains(&status), "status {status}");
        // HTTP/1.1, or 1.0 to an HTTP/1.0 request.
        assert!(matches!(response.version, Some(0 | 1)), "{:?}", response.version);
        let header = |name: &str| response.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value);
        if status == 101 {
            assert_eq!(answered, 0, "an upgrade only answers the first request of a connection here");
            // After it, at most one Close frame: the session's answer to bytes sent right after
            // the request that are no valid frame (1002, RFC 6455 §7.1.7); never data.
            let after = &rest[head..];
            assert!(after.is_empty() || is_close_frame(after), "after the 101 only a Close frame: {after:?}");
            let accept = header("sec-websocket-accept").expect("a 101 carries Sec-WebSocket-Accept");
            assert_eq!(accept, expected_accept(raw).as_bytes(), "the accept key of the request's key");
            return;
        }
        let length: usize = match header("content-length") {
            _ if status == 100 => 0,
            Some(v) => std::str::from_utf8(v).ok().and_then(|v| v.parse().ok()).expect("a numeric Content-Length"),
            // hyper's own refusals (400, 431, ...) close the connection with no body.
            None => rest.len() - head,
        };
        let after = &rest[head..];
        // The answer to a HEAD has a Content-Length and no body: the next answer (or the end)
        // comes right after its head.
        let next_at = |n: usize| after.len() == n || after[n.min(after.len())..].starts_with(b"HTTP/1.");
        rest = if length <= after.len() && next_at(length) {
            &after[length..]
        } else if next_at(0) {
            after
        } else {
            panic!("a body of {} bytes where Content-Length says {length}", after.len())
        };
        answered += 1;
    }
});

/// The accept key of the first request in `raw`, which a 101 answered, after checking that it
/// was a watch that passes every handshake check (cds-protocol.md §2.3).
fn expected_accept(raw: &[u8]) -> String {
    let mut headers = [httparse::EMPTY_HEADER; 128];
    let mut request = httparse::Request::new(&mut headers);
    request.parse(raw).expect("hyper parsed this request");
    let path = request.path.expect("a request target");
    assert!(path.starts_with("/api/v1/configs"), "only config routes upgrade: {path}");
    let query = path.split_once('?').map_or("", |(_, q)| q);
    assert!(query.contains("watch="), "only watches upgrade: {path}");
    let values = |name: &str| {
        request.headers.iter().filter(move |h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value).collect::<Vec<_>>()
    };
    let has_token = |name: &str, token: &str| {
        values(name)
            .iter()
            .filter_map(|v| std::str::from_utf8(v).ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    assert!(has_token("connection", "upgrade") && has_token("upgrade", "websocket"));
    assert_eq!(values("sec-websocket-version").first().copied(), Some(&b"13"[..]));
    let key = values("sec-websocket-key").first().copied().expect("a key");
    // Go's base64.StdEncoding (gorilla's check) ignores the padding bits, as the server does.
    let lenient = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let decoded = lenient.decode(key).expect("a base64 key");
    assert_eq!(decoded.len(), 16, "a 16-byte key");
    let mut sha = Sha1::new();
    sha.update(key);
    sha.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(sha.finalize())
}

/// Whether `bytes` are exactly one unmasked, final Close frame from the server, with a status
/// code (a payload of 2 to 125 bytes).
fn is_close_frame(bytes: &[u8]) -> bool {
    match bytes {
        [0x88, len, payload @ ..] => *len & 0x80 == 0 && (2..=125).contains(len) && payload.len() == *len as usize,
        _ => false,
    }
}
