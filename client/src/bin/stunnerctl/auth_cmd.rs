//! `stunnerctl auth`: TURN credentials for clients of a Gateway, computed from the config the
//! operator serves (upstream asks a separate authentication service for the same answer).

use super::output::{Printer, nothing_found};
use std::error::Error;
use std::time::{Duration, SystemTime};
use stunner_gateway::config::json;
use stunner_gateway::turn_auth::{self, IceConfig, IceServer, TurnCredential};
use stunner_gateway_client::cds::{CdsClient, ConfigScope};

pub struct Request<'a> {
    pub scope: ConfigScope,
    pub user_id: &'a str,
    pub ttl: Duration,
    /// The REST API draft's plain credential instead of an ICE server config.
    pub turn_credential: bool,
    pub all_namespaces: bool,
    pub namespace: &'a str,
}

/// One ICE server config holding every Gateway of the scope, or one TURN credential per
/// Gateway; JSON in every output format but YAML and JSONPath, as upstream prints it.
pub async fn run(client: &CdsClient, req: &Request<'_>, printer: &mut Printer) -> Result<(), Box<dyn Error>> {
    let mut configs = Vec::new();
    for config in client.configs(&req.scope).await? {
        let config = config.normalized()?;
        if !config.is_deleted() {
            configs.push(config);
        }
    }
    if configs.is_empty() {
        nothing_found("Gateway configs", req.all_namespaces, req.namespace);
        return Ok(());
    }
    let now = SystemTime::now();
    let ttl = i64::try_from(req.ttl.as_secs()).unwrap_or(i64::MAX);
    let mut ice_servers = Vec::new();
    for config in &configs {
        let cred = turn_auth::credential(config, req.user_id, ttl, now)?;
        ice_servers.push(IceServer::new(turn_auth::uris(config), cred));
    }
    if req.turn_credential {
        for server in ice_servers {
            printer.document(&TurnCredential::new(server, ttl), json_line)?;
        }
        return Ok(());
    }
    printer.document(&IceConfig { ice_servers, ice_transport_policy: "all".into() }, json_line)
}

/// Upstream prints the auth service's JSON whatever `-o` says; YAML and JSONPath are ours.
fn json_line<T: serde::Serialize>(value: &T) -> String {
    json::to_string(value) + "\n"
}
