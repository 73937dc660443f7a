//! The credential API's answers, computed from the configs the operator serves: which
//! listeners a request selects, each Gateway's credential, and the status and body upstream's
//! service (l7mp/stunner-auth-service v1.x) gives for it, error texts included.

use super::params::{Endpoint, Params};
use std::time::SystemTime;
use stunner_gateway::config::{StunnerConfig, go_compat, json};
use stunner_gateway::turn_auth::{self, AuthError, Credential, DEFAULT_TTL_SECS, IceConfig, IceServer, TurnCredential};

/// An answer: a status and a body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Body,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    /// `application/json; charset=UTF-8`, with Go's escaping and trailing newline.
    Json(Vec<u8>),
    /// `text/plain; charset=utf-8`, as Go's `http.Error` writes it (the newline added there).
    Text(String),
}

/// What the service itself adds to a request: its environment's public address
/// (`STUNNER_PUBLIC_ADDR`), used where a request names none, and the time.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    pub public_addr: Option<&'a str>,
    pub now: SystemTime,
}

fn text(status: u16, text: impl Into<String>) -> Answer {
    Answer { status, body: Body::Text(text.into()) }
}

/// The answer to `params` at `endpoint` from `configs` (the served Gateway configs, in a
/// fixed order: the TURN answer takes the first Gateway's).
pub fn answer(endpoint: Endpoint, params: &Params, configs: &[&StunnerConfig], cx: Context<'_>) -> Answer {
    if configs.is_empty() {
        return text(500, "no STUNner configuration available");
    }
    let failed = match endpoint {
        Endpoint::Turn => "could not generate TURN auth token",
        Endpoint::Ice => "could not generate ICE auth token",
    };
    if params.service.as_deref() != Some("turn") {
        return text(400, format!("{failed}: {}", go_compat::quote(r#""service" must be "turn""#)));
    }
    let ttl = params.ttl.unwrap_or(DEFAULT_TTL_SECS);
    let mut servers = configs.iter().filter_map(|c| ice_server(c, params, ttl, cx));
    match endpoint {
        Endpoint::Turn => match servers.next() {
            Some(first) => {
                Answer { status: 200, body: Body::Json(json::to_vec_line(&TurnCredential::new(first, ttl))) }
            }
            None => text(404, "could not generate TURN auth token: no valid listener found"),
        },
        Endpoint::Ice => {
            let ice_servers: Vec<_> = servers.collect();
            if ice_servers.is_empty() {
                return text(404, "could not generate ICE config: no valid listener found");
            }
            let policy = params.ice_transport_policy.clone().unwrap_or_else(|| "all".into());
            let config = IceConfig { ice_servers, ice_transport_policy: policy };
            Answer { status: 200, body: Body::Json(json::to_vec_line(&config)) }
        }
    }
}

/// A Gateway's ICE server: the URIs of its listeners the request selects, with its credential;
/// `None` when no listener is selected or its auth has no usable credential (logged).
fn ice_server(config: &StunnerConfig, params: &Params, ttl: i64, cx: Context<'_>) -> Option<IceServer> {
    let public_addr = params.public_addr.as_deref().or(cx.public_addr.filter(|a| !a.is_empty()));
    let urls: Vec<_> = config
        .listeners
        .iter()
        .filter(|l| selected(&l.name, params))
        .flat_map(|l| turn_auth::listener_uris(l, public_addr))
        .collect();
    if urls.is_empty() {
        return None;
    }
    let user_id = params.username.as_deref().unwrap_or_default();
    let cred = match turn_auth::credential(config, user_id, ttl, cx.now) {
        Ok(cred) => cred,
        // Upstream hands out empty credentials for a TURN server that checks none.
        Err(AuthError::NoCredentials { .. }) => Credential { username: String::new(), password: String::new() },
        Err(e @ AuthError::Invalid { .. }) => {
            tracing::warn!(error = %e, "credential API: Gateway left out of the answer");
            return None;
        }
    };
    Some(IceServer::new(urls, cred))
}

/// Whether a listener (named `namespace/gateway/listener`) passes the request's filters, as
/// upstream reads them: `gateway` counts only with `namespace`, `listener` only with both.
fn selected(name: &str, p: &Params) -> bool {
    let mut parts = name.split('/');
    let (Some(namespace), Some(gateway), Some(listener), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    match (p.namespace.as_deref(), p.gateway.as_deref(), p.listener.as_deref()) {
        (None, _, _) => true,
        (Some(ns), None, _) => ns == namespace,
        (Some(ns), Some(gw), None) => ns == namespace && gw == gateway,
        (Some(ns), Some(gw), Some(l)) => ns == namespace && gw == gateway && l == listener,
    }
}

#[cfg(test)]
mod tests;
