//! Client errors, worded for the person at the terminal: each names the server it tried.

use std::io;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("invalid config discovery server address {address:?}: {reason}")]
    InvalidAddress { address: String, reason: String },

    /// Nothing answered at the TCP level (refused, unresolvable, unroutable).
    #[error("cannot reach the config discovery server at {server}: {}", io_reason(source))]
    Unreachable { server: String, source: io::Error },

    #[error("the config discovery server at {server} did not answer within {after:?}")]
    Timeout { server: String, after: Duration },

    /// The single-config route answered 404: that Gateway has no config (yet).
    #[error("gateway {id} not found on the config discovery server at {server}")]
    GatewayNotFound { id: String, server: String },

    /// The server does not serve this path: usually an older operator.
    #[error("the config discovery server at {server} does not serve {path} (404 Not Found)")]
    NotServed { server: String, path: String },

    #[error("GET {url} failed: {status}: {message}")]
    Status { url: String, status: String, message: String },

    #[error("unexpected answer to GET {url}: {reason}")]
    Decode { url: String, reason: String },

    /// The connection broke mid-exchange or the peer did not speak the protocol.
    #[error("connection to the config discovery server at {server} failed: {reason}")]
    Protocol { server: String, reason: String },

    /// A watch went quiet: no data and no answer to our Pings.
    #[error("the config discovery server at {server} stopped answering (nothing for {after:?})")]
    Silent { server: String, after: Duration },

    #[error("the config discovery server at {server} closed the watch")]
    Closed { server: String },
}

/// The OS error without Rust's `(os error N)` suffix, lower-cased like Go's messages:
/// "connection refused" rather than "Connection refused (os error 111)".
pub(crate) fn io_reason(e: &io::Error) -> String {
    let text = e.to_string();
    let text = match text.rfind(" (os error ") {
        Some(i) if text.ends_with(')') => text[..i].to_string(),
        _ => text,
    };
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => format!("{:?}", e.kind()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_reads_like_a_sentence() {
        let e = ClientError::Unreachable {
            server: "http://127.0.0.1:13478".into(),
            source: io::Error::from_raw_os_error(111),
        };
        #[cfg(target_os = "linux")]
        assert_eq!(
            e.to_string(),
            "cannot reach the config discovery server at http://127.0.0.1:13478: connection refused"
        );
        let custom = io::Error::other("failed to lookup address information: Name or service not known");
        assert_eq!(io_reason(&custom), "failed to lookup address information: Name or service not known");
    }
}
