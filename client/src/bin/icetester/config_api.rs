//! `/config`, upstream's icetester's: `GET` returns the config, `POST` replaces its ICE servers
//! and transport policy (and the bearer token, when one is given). Both want
//! `Content-Type: application/json` as upstream's do. A config this tester cannot relay with is
//! refused with `400` and the reason, and the one in force stays.

use super::{Reply, Server, reply};
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::CONTENT_TYPE;
use hyper::{Method, Request, Response, StatusCode};
use stunner_gateway_client::ice::tester_config::TesterConfig;
use stunner_gateway_client::ice::whip::JSON_CONTENT_TYPE;

/// The largest config read: a few ICE servers are a few hundred bytes.
const MAX_CONFIG: usize = 64 * 1024;

pub(super) async fn handle(server: &Server, req: Request<Incoming>) -> Reply {
    let content_type = req.headers().get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    if content_type != Some(JSON_CONTENT_TYPE) {
        return reply(
            StatusCode::BAD_REQUEST,
            &format!("expected Content-Type:application/json, got {content_type:?}"),
        );
    }
    match *req.method() {
        Method::GET => {
            let body = serde_json::to_vec(&server.config()).expect("a config serializes");
            let mut r = Response::new(Full::new(Bytes::from(body)));
            r.headers_mut().insert(CONTENT_TYPE, JSON_CONTENT_TYPE.parse().expect("a valid header value"));
            r
        }
        Method::POST => {
            let body = match Limited::new(req.into_body(), MAX_CONFIG).collect().await {
                Ok(body) => body.to_bytes(),
                Err(_) => return reply(StatusCode::PAYLOAD_TOO_LARGE, "the config is too large or was cut off"),
            };
            let posted: TesterConfig = match serde_json::from_slice(&body) {
                Ok(posted) => posted,
                Err(e) => return reply(StatusCode::BAD_REQUEST, &format!("invalid config: {e}")),
            };
            let mut config = server.config.lock().unwrap_or_else(|e| e.into_inner());
            match config.update(posted) {
                Ok(()) => {
                    // The URIs and the policy, never the credentials.
                    let urls: Vec<&str> =
                        config.ice_servers.iter().flat_map(|s| s.urls.iter().map(String::as_str)).collect();
                    eprintln!(
                        "icetester: config set: ICETransportPolicy {:?}, ICE servers {urls:?}",
                        config.ice_transport_policy
                    );
                    reply(StatusCode::OK, "")
                }
                Err(e) => reply(StatusCode::BAD_REQUEST, &format!("invalid config: {e}")),
            }
        }
        _ => reply(StatusCode::METHOD_NOT_ALLOWED, "only GET and POST"),
    }
}
