//! The request messages' ids, scopes and versions as the store's types, or the
//! INVALID_ARGUMENT that says what is wrong with them.

// tonic's `Status` is the natural error here, large as it is.
#![allow(clippy::result_large_err)]

use crate::store::Scope;
use crate::version::Version;
use crate::watch::Held;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::proto;
use tonic::Status;

/// No scope means every config; a scope of a kind this server does not know is an error.
pub(super) fn scope(scope: Option<proto::Scope>) -> Result<Scope, Status> {
    use proto::scope::Kind;
    match scope.map(|s| s.kind) {
        None | Some(Some(Kind::All(_))) => Ok(Scope::All),
        Some(Some(Kind::Namespace(ns))) if !ns.is_empty() => Ok(Scope::Namespace(ns)),
        Some(Some(Kind::Namespace(_))) => Err(Status::invalid_argument("empty namespace in scope")),
        Some(Some(Kind::Config(id))) => Ok(Scope::Config(config_id(Some(id), "scope.config")?)),
        Some(None) => Err(Status::invalid_argument("unknown or empty scope")),
    }
}

pub(super) fn config_id(id: Option<proto::ConfigId>, field: &str) -> Result<ConfigId, Status> {
    match id {
        Some(proto::ConfigId { namespace, name }) if !namespace.is_empty() && !name.is_empty() => {
            Ok(ConfigId::new(namespace, name))
        }
        _ => Err(Status::invalid_argument(format!("`{field}` needs a namespace and a name"))),
    }
}

pub(super) fn version(v: &str) -> Result<Version, Status> {
    Version::parse(v).ok_or_else(|| Status::invalid_argument(format!("invalid version {v:?} (16 hex digits)")))
}

pub(super) fn held(resume: Vec<proto::Held>) -> Result<Held, Status> {
    resume.into_iter().map(|h| Ok((config_id(h.id, "resume.id")?, version(&h.version)?))).collect()
}

pub(super) fn ack_id(id: Option<proto::ConfigId>) -> Result<ConfigId, Status> {
    config_id(id, "ack.id")
}
