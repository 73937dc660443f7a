//! The offer/answer exchange with a WHIP server (RFC 9725's POST only): the offer's SDP in, the
//! answer's SDP out, `201 Created` (or `200 OK`). No resource URL is kept: the tester ends a
//! session when its peer goes away.

use super::error::WhipError;
use crate::cds::Timeouts;
use crate::cds::http::post;
use url::Url;

pub const SDP_CONTENT_TYPE: &str = "application/sdp";

/// POSTs `offer` to `endpoint` and returns the answer.
pub async fn exchange(endpoint: &str, offer: String, timeouts: Timeouts) -> Result<String, WhipError> {
    let url = Url::parse(endpoint).map_err(|e| WhipError::Url { url: endpoint.into(), reason: e.to_string() })?;
    let authority = match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) if url.scheme() == "http" => format!("{host}:{port}"),
        _ => return Err(WhipError::Url { url: endpoint.into(), reason: "expected http://HOST[:PORT]/PATH".into() }),
    };
    let response = post(&authority, &url, SDP_CONTENT_TYPE, offer, timeouts)
        .await
        .map_err(|f| WhipError::Unreachable { url: endpoint.into(), reason: f.reason() })?;
    let body = String::from_utf8_lossy(&response.body).into_owned();
    if !response.status.is_success() {
        return Err(WhipError::Status { url: endpoint.into(), status: response.status.to_string(), body });
    }
    Ok(body)
}
