//! The offer/answer exchange with a WHIP server (RFC 9725's POST only): the offer's SDP in, the
//! answer's SDP out, `201 Created` (or `200 OK`). No resource URL is kept: the tester ends a
//! session when its peer goes away. And the tester's `/config` (upstream's icetester's, beside
//! its WHIP endpoint): POSTed before each test, read back with a GET.

use super::error::WhipError;
use super::tester_config::TesterConfig;
use crate::cds::Timeouts;
use crate::cds::http::{fetch_as, post};
use url::Url;

pub const SDP_CONTENT_TYPE: &str = "application/sdp";
pub const JSON_CONTENT_TYPE: &str = "application/json";
/// Where upstream's tester serves its config, whatever its WHIP path.
pub const CONFIG_PATH: &str = "/config";

/// `endpoint` parsed, and the `host:port` to connect to.
fn authority(endpoint: &str) -> Result<(Url, String), WhipError> {
    let url = Url::parse(endpoint).map_err(|e| WhipError::Url { url: endpoint.into(), reason: e.to_string() })?;
    match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) if url.scheme() == "http" => {
            let authority = format!("{host}:{port}");
            Ok((url, authority))
        }
        _ => Err(WhipError::Url { url: endpoint.into(), reason: "expected http://HOST[:PORT]/PATH".into() }),
    }
}

/// POSTs `offer` to `endpoint` and returns the answer.
pub async fn exchange(endpoint: &str, offer: String, timeouts: Timeouts) -> Result<String, WhipError> {
    let (url, authority) = authority(endpoint)?;
    let response = post(&authority, &url, SDP_CONTENT_TYPE, offer, timeouts)
        .await
        .map_err(|f| WhipError::Unreachable { url: endpoint.into(), reason: f.reason() })?;
    let body = String::from_utf8_lossy(&response.body).into_owned();
    if !response.status.is_success() {
        return Err(WhipError::Status { url: endpoint.into(), status: response.status.to_string(), body });
    }
    Ok(body)
}

/// Sets the config of the tester whose WHIP endpoint is `endpoint` and returns the config it
/// reports back.
pub async fn configure(endpoint: &str, config: &TesterConfig, timeouts: Timeouts) -> Result<TesterConfig, WhipError> {
    let (mut url, authority) = authority(endpoint)?;
    url.set_path(CONFIG_PATH);
    url.set_query(None);
    let at = url.to_string();
    let unreachable = |f: crate::cds::http::Failure| WhipError::Unreachable { url: at.clone(), reason: f.reason() };
    let body = serde_json::to_string(config).expect("a config serializes");
    let response = post(&authority, &url, JSON_CONTENT_TYPE, body, timeouts).await.map_err(unreachable)?;
    let refused = |response: &crate::cds::http::Response| WhipError::Config {
        url: at.clone(),
        reason: format!("{}: {}", response.status, String::from_utf8_lossy(&response.body).trim()),
    };
    if !response.status.is_success() {
        return Err(refused(&response));
    }
    let response = fetch_as(&authority, &url, JSON_CONTENT_TYPE, timeouts).await.map_err(unreachable)?;
    if !response.status.is_success() {
        return Err(refused(&response));
    }
    serde_json::from_slice(&response.body)
        .map_err(|e| WhipError::Config { url: at.clone(), reason: format!("a config that does not read: {e}") })
}
