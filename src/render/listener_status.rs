//! A listener's status: its conditions (Accepted, Conflicted, ResolvedRefs, Programmed), the
//! route kinds it supports and the routes attached to it. Built from what the render made of the
//! listener and the conditions it had, not from the object holding it: a Gateway's listeners
//! and a ListenerSet's (`listener_set`) take the same pieces into their own status types.

use super::conditions::{build, keep_times};
use super::error::{Reason, RenderError};
use super::listener::RouteKinds;
use crate::index::group_kind;
use gateway_api::gateways::{Gateway, GatewayStatusListeners, GatewayStatusListenersSupportedKinds};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// How a listener fared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ListenerOutcome {
    /// Its protocol and certificate resolved: it is in the config unless conflicted.
    Accepted,
    InvalidProtocol,
    InvalidCertificate,
    /// A certificate Secret in another namespace that no ReferenceGrant opens to the
    /// Gateway; the error's text, which names the reference.
    CertificateNotPermitted(String),
    /// The Gateway was invalidated.
    Pending,
}

impl ListenerOutcome {
    pub(crate) fn of_error(e: &RenderError) -> Self {
        match e.reason {
            Reason::InvalidProtocol => ListenerOutcome::InvalidProtocol,
            Reason::InvalidCertificateRef => ListenerOutcome::InvalidCertificate,
            Reason::RefNotPermitted => ListenerOutcome::CertificateNotPermitted(e.to_string()),
            _ => ListenerOutcome::Pending,
        }
    }
}

/// What a render made of one listener.
#[derive(Debug, Clone)]
pub(crate) struct ListenerReport {
    pub(crate) outcome: ListenerOutcome,
    /// Shares its port with another listener of its port space (`listener::conflicts`).
    pub(crate) conflicted: bool,
    /// Gives way to a listener of an earlier object holding its port or its name (a
    /// ListenerSet's listener, see `listener_set`): the Conflicted reason.
    pub(crate) outranked: Option<&'static str>,
    pub(crate) kinds: RouteKinds,
    /// The routes accepted on it, each counted once.
    pub(crate) attached: usize,
}

impl ListenerReport {
    /// Whether the listener is in the dataplane config.
    pub(crate) fn programmed(&self) -> bool {
        self.outcome == ListenerOutcome::Accepted && !self.conflicted && self.outranked.is_none()
    }

    /// The listener's conditions, in upstream's order (Accepted, Conflicted, ResolvedRefs) and
    /// then Programmed; those equal to one of `old` keep its transition time.
    pub(crate) fn conditions(&self, generation: Option<i64>, old: &[Condition], now: &Time) -> Vec<Condition> {
        use ListenerOutcome::*;
        let g = generation;
        let accepted = match (&self.outcome, self.outranked) {
            (_, Some(reason)) => {
                build("Accepted", "False", reason, "an earlier listener holds its port or its name", g, now)
            }
            (InvalidProtocol, None) => {
                build("Accepted", "False", "UnsupportedProtocol", "unsupported protocol", g, now)
            }
            (Pending, None) => build("Accepted", "Unknown", "Pending", "pending", g, now),
            (Accepted | InvalidCertificate | CertificateNotPermitted(_), None) => {
                build("Accepted", "True", "Accepted", "listener accepted", g, now)
            }
        };
        let conflicted = if let Some(reason) = self.outranked {
            let message = "an earlier listener (the Gateway's, or an older ListenerSet's) holds its port or its name: this one is not served";
            build("Conflicted", "True", reason, message, g, now)
        } else if self.conflicted {
            let message = "another listener of the same transport uses the port: neither is served";
            build("Conflicted", "True", "ProtocolConflict", message, g, now)
        } else {
            build("Conflicted", "False", "NoConflicts", "listener protocol-port available", g, now)
        };
        let resolved = match &self.outcome {
            InvalidCertificate => build(
                "ResolvedRefs",
                "False",
                "InvalidCertificateRef",
                "at least one certificate reference failed to be successfully resolved",
                g,
                now,
            ),
            CertificateNotPermitted(message) => build("ResolvedRefs", "False", "RefNotPermitted", message, g, now),
            _ if !self.kinds.invalid.is_empty() => {
                let message = format!("route kinds not supported: {}", self.kinds.invalid.join(", "));
                build("ResolvedRefs", "False", "InvalidRouteKinds", message, g, now)
            }
            _ => {
                build("ResolvedRefs", "True", "ResolvedRefs", "listener object references sucessfully resolved", g, now)
            }
        };
        let programmed = match (&self.outcome, self.outranked) {
            (Pending, _) => build("Programmed", "Unknown", "Pending", "pending", g, now),
            (_, Some(reason)) => {
                build("Programmed", "False", reason, "listener left out of the dataplane configuration", g, now)
            }
            _ if self.programmed() => build("Programmed", "True", "Programmed", "listener programmed", g, now),
            _ => build("Programmed", "False", "Invalid", "listener left out of the dataplane configuration", g, now),
        };
        let mut conditions = vec![accepted, conflicted, resolved, programmed];
        keep_times(old, &mut conditions);
        conditions
    }

    /// The route kinds it supports, as `supportedKinds` lists them.
    pub(crate) fn supported_kinds(&self) -> impl Iterator<Item = (&'static str, &'static str)> + '_ {
        self.kinds.supported.iter().filter_map(|k| group_kind(*k))
    }
}

/// A Gateway listener's status.
pub(crate) fn gateway_listener(
    gw: &Gateway,
    name: &str,
    report: &ListenerReport,
    now: &Time,
) -> GatewayStatusListeners {
    let old = gw.status.as_ref().and_then(|s| s.listeners.as_ref()).and_then(|ls| ls.iter().find(|l| l.name == name));
    let kinds = report.supported_kinds();
    GatewayStatusListeners {
        name: name.into(),
        attached_routes: report.attached as i32,
        conditions: report.conditions(
            gw.metadata.generation,
            old.map(|l| l.conditions.as_slice()).unwrap_or_default(),
            now,
        ),
        supported_kinds: Some(
            kinds
                .map(|(g, k)| GatewayStatusListenersSupportedKinds { group: Some(g.into()), kind: k.into() })
                .collect(),
        ),
    }
}

/// Says in an accepted listener's `Accepted` condition which Service (`namespace/service`)
/// its public address and port come from.
pub(crate) fn address_source(listener: &mut GatewayStatusListeners, namespace: &str, service: &str) {
    if let Some(accepted) = listener.conditions.iter_mut().find(|c| c.type_ == "Accepted" && c.status == "True") {
        accepted.message = format!("{}; public address from Service {namespace}/{service}", accepted.message);
    }
}
