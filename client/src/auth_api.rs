//! A client of the operator's credential API (stunner-auth-service's API, served by the
//! operator with `--auth-bind-address`): `GET /ice`, a Gateway's ICE server config.

use crate::cds::Timeouts;
use crate::cds::http::fetch;
use hyper::StatusCode;
use stunner_gateway::turn_auth::IceConfig;
use url::Url;

/// The credential API's port in upstream's Service and ours.
pub const DEFAULT_PORT: u16 = 8088;

#[derive(Debug, thiserror::Error)]
pub enum AuthApiError {
    #[error("cannot reach the credential API at {addr}: {reason}")]
    Unreachable { addr: String, reason: String },

    #[error("the credential API at {addr} answered {status}: {body}")]
    Status { addr: String, status: String, body: String },

    #[error("the credential API at {addr} sent an ICE config that does not decode: {reason}")]
    Decode { addr: String, reason: String },
}

/// `GET /ice?service=turn&namespace=NS[&gateway=GW]` at `addr` (`HOST[:PORT]`).
pub async fn ice_config(
    addr: &str,
    namespace: &str,
    gateway: Option<&str>,
    timeouts: Timeouts,
) -> Result<IceConfig, AuthApiError> {
    let authority = if addr.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        addr.to_string()
    } else {
        format!("{addr}:{DEFAULT_PORT}")
    };
    let unreachable = |reason: String| AuthApiError::Unreachable { addr: authority.clone(), reason };
    let mut url = Url::parse(&format!("http://{authority}/ice")).map_err(|e| unreachable(e.to_string()))?;
    url.query_pairs_mut().append_pair("service", "turn").append_pair("namespace", namespace);
    if let Some(gateway) = gateway {
        url.query_pairs_mut().append_pair("gateway", gateway);
    }
    let response = fetch(&authority, &url, timeouts).await.map_err(|f| unreachable(f.reason()))?;
    if response.status != StatusCode::OK {
        let body = String::from_utf8_lossy(&response.body).trim().to_string();
        return Err(AuthApiError::Status { addr: authority, status: response.status.to_string(), body });
    }
    serde_json::from_slice(&response.body).map_err(|e| AuthApiError::Decode { addr: authority, reason: e.to_string() })
}
