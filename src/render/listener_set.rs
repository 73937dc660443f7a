//! ListenerSets (GEP-1713) on a Gateway: which of them the Gateway takes (its
//! `spec.allowedListeners`: none by default, `Same`, `Selector`, `All`), their listeners merged
//! after the Gateway's own in the spec's order (ListenerSets by creation time, then namespace
//! and name), the name each of their listeners is rendered under, and their statuses.
//!
//! A ListenerSet's listener is a listener of its parent Gateway's dataplane: it goes into the
//! Gateway's STUNner config and Service under [`port_name`], the name its Service port, its
//! config listener (`<gateway namespace>/<gateway>/<port name>`) and the keys of the Gateway's
//! node-port and target-port annotations share. Across objects, the earlier listener wins: a
//! ListenerSet's listener on a port (of its port space) or under a name an earlier one holds
//! is conflicted and left out, the earlier one served (within one object, both are, as
//! `listener::conflicts` says).

use super::attach::namespace_selected;
use super::conditions::{build, keep_times, set};
use super::infrastructure::short_digest;
use super::listener::port_space;
use super::listener_status::ListenerReport;
use crate::index::{Index, Kind, ObjRefView, ObjectKey};
use crate::resources::{ListenerSet, ListenerSetStatus};
use gateway_api::gateways::{Gateway, GatewayAllowedListenersNamespacesFrom as From, GatewayListeners};
use gateway_api::listenersets::{
    ListenerSetListeners, ListenerSetStatusListeners, ListenerSetStatusListenersSupportedKinds,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::borrow::Cow;

/// The longest Service port name (a DNS label).
const MAX_PORT_NAME: usize = 63;

/// A ListenerSet naming a Gateway as its parent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Candidate<'a> {
    pub(crate) key: &'a ObjectKey,
    pub(crate) ls: &'a ListenerSet,
    /// Whether the Gateway's `allowedListeners` admits it.
    pub(crate) allowed: bool,
}

/// The ListenerSets naming Gateway `key` as parent, in merge order: oldest first, then by
/// namespace and name.
pub(crate) fn of_gateway<'a>(index: &'a Index, key: &ObjectKey, gw: &Gateway) -> Vec<Candidate<'a>> {
    let referrers = index.referrers(ObjRefView::new(Kind::Gateway, key), Kind::ListenerSet);
    let mut candidates: Vec<Candidate<'a>> = referrers
        .filter_map(|k| index.listener_sets().lookup_key_value(k.view()))
        .map(|(key, ls)| Candidate { key, ls, allowed: allowed(index, gw, &key.namespace) })
        .collect();
    candidates.sort_by(|a, b| {
        let created = |c: &Candidate<'_>| c.ls.metadata.creation_timestamp.as_ref().map(|t| t.0);
        created(a).cmp(&created(b)).then_with(|| a.key.cmp(b.key))
    });
    candidates
}

/// Whether Gateway `gw` admits ListenerSets of namespace `ns` (`spec.allowedListeners`; none
/// when unset, as the Gateway API's default `from: None`).
pub(crate) fn allowed(index: &Index, gw: &Gateway, ns: &str) -> bool {
    let namespaces = gw.spec.allowed_listeners.as_ref().and_then(|a| a.namespaces.as_ref());
    match namespaces.and_then(|n| n.from.as_ref()) {
        Some(From::All) => true,
        Some(From::Same) => gw.metadata.namespace.as_deref() == Some(ns),
        Some(From::Selector) => {
            namespaces.and_then(|n| n.selector.as_ref()).is_some_and(|s| namespace_selected(index, &same_shape(s), ns))
        }
        Some(From::None) | None => false,
    }
}

/// A value of one generated type as another generated from the same schema (a ListenerSet's
/// listener and the Gateway's allowedListeners selector are the Gateway's listener and
/// allowedRoutes selector under other names), through the JSON both read and write alike.
fn same_shape<A: Serialize, B: DeserializeOwned>(a: &A) -> B {
    serde_json::to_value(a).and_then(serde_json::from_value).expect("both types are generated from one schema")
}

/// A ListenerSet's listener as a Gateway's (under its own name).
pub(crate) fn as_gateway_listener(l: &ListenerSetListeners) -> GatewayListeners {
    same_shape(l)
}

/// The name a ListenerSet's listener is rendered under: its Service port name, the last part
/// of its config listener's name and its key in the Gateway's node-port and target-port
/// annotations. The listener's name (dots made dashes, at most 54 characters), a `-` and the
/// first 8 hex digits of the SHA-256 of `<namespace>/<listenerset>/<listener>`: a DNS label,
/// the same on every render, and apart from those of every other ListenerSet's listener.
pub(crate) fn port_name(ls: &ObjectKey, listener: &str) -> String {
    let digest = short_digest(&format!("{}/{}/{listener}", ls.namespace, ls.name));
    let head: String =
        listener.chars().take(MAX_PORT_NAME - digest.len() - 1).map(|c| if c == '.' { '-' } else { c }).collect();
    format!("{head}-{digest}")
}

/// One listener of a Gateway's merged list.
#[derive(Debug, Clone)]
pub(crate) struct Merged<'a> {
    /// The ListenerSet it comes from; `None` for the Gateway's own.
    pub(crate) origin: Option<Candidate<'a>>,
    /// Its name in the object declaring it: what a route's `sectionName` and its status say.
    pub(crate) section: &'a str,
    /// The listener, named as the Service and the config know it (see [`port_name`]).
    pub(crate) listener: Cow<'a, GatewayListeners>,
    /// Shares its port with another listener of its object (both are conflicted).
    pub(crate) conflicted: bool,
    /// Why it gives way to a listener of an earlier object (a Conflicted reason), if it does.
    pub(crate) outranked: Option<&'static str>,
}

/// The Gateway's listeners, then those of each ListenerSet it admits, in that order.
pub(crate) fn merge<'a>(gw: &'a Gateway, candidates: &[Candidate<'a>]) -> Vec<Merged<'a>> {
    let own_conflicts = super::listener::conflicts(&gw.spec.listeners);
    let mut merged: Vec<Merged<'a>> = gw
        .spec
        .listeners
        .iter()
        .zip(own_conflicts)
        .map(|(l, conflicted)| Merged {
            origin: None,
            section: &l.name,
            listener: Cow::Borrowed(l),
            conflicted,
            outranked: None,
        })
        .collect();
    for c in candidates.iter().filter(|c| c.allowed) {
        let listeners: Vec<GatewayListeners> =
            c.ls.spec
                .listeners
                .iter()
                .map(|l| GatewayListeners { name: port_name(c.key, &l.name), ..as_gateway_listener(l) })
                .collect();
        let conflicts = super::listener::conflicts(&listeners);
        let earlier = merged.len();
        for ((l, own), conflicted) in c.ls.spec.listeners.iter().zip(listeners).zip(conflicts) {
            let before = &merged[..earlier];
            let space = port_space(&own);
            let outranked = if space.is_some() && before.iter().any(|m| port_space(&m.listener) == space) {
                Some("ProtocolConflict")
            } else if before.iter().any(|m| m.listener.name == own.name) {
                Some("ListenerConflict")
            } else {
                None
            };
            merged.push(Merged {
                origin: Some(*c),
                section: &l.name,
                listener: Cow::Owned(own),
                conflicted,
                outranked,
            });
        }
    }
    merged
}

/// A ListenerSet listener's status.
pub(crate) fn listener_status(
    ls: &ListenerSet,
    name: &str,
    report: &ListenerReport,
    now: &Time,
) -> ListenerSetStatusListeners {
    let old = ls.status.as_ref().and_then(|s| s.listeners.as_ref()).and_then(|ls| ls.iter().find(|l| l.name == name));
    let old = old.map(|l| l.conditions.as_slice()).unwrap_or_default();
    ListenerSetStatusListeners {
        name: name.into(),
        attached_routes: report.attached as i32,
        conditions: report.conditions(ls.metadata.generation, old, now),
        supported_kinds: Some(
            report
                .supported_kinds()
                .map(|(g, k)| ListenerSetStatusListenersSupportedKinds { group: Some(g.into()), kind: k.into() })
                .collect(),
        ),
    }
}

/// How a Gateway took a ListenerSet.
pub(crate) enum Verdict {
    /// Admitted, with its listeners' statuses.
    Attached(Vec<ListenerSetStatusListeners>),
    /// Its Gateway's `allowedListeners` does not admit it.
    NotAllowed,
    /// Its Gateway could not be rendered (the error's text).
    ParentNotAccepted(String),
}

/// A ListenerSet's status: `Accepted` and `Programmed`, and its listeners'.
pub(crate) fn status(ls: &ListenerSet, verdict: Verdict, now: &Time) -> ListenerSetStatus {
    let g = ls.metadata.generation;
    let mut conditions: Vec<Condition> = ls.status.as_ref().and_then(|s| s.conditions.clone()).unwrap_or_default();
    let is = |l: &ListenerSetStatusListeners, type_: &str| {
        l.conditions.iter().any(|c| c.type_ == type_ && c.status == "True")
    };
    let (accepted, programmed, listeners) = match verdict {
        Verdict::NotAllowed => {
            let message = "the parent Gateway's allowedListeners does not admit this ListenerSet";
            (
                build("Accepted", "False", "NotAllowed", message, g, now),
                build("Programmed", "False", "NotAllowed", message, g, now),
                Vec::new(),
            )
        }
        Verdict::ParentNotAccepted(message) => (
            build("Accepted", "False", "ParentNotAccepted", message.clone(), g, now),
            build("Programmed", "False", "ParentNotAccepted", message, g, now),
            Vec::new(),
        ),
        Verdict::Attached(listeners) => {
            let invalid: Vec<&str> = listeners.iter().filter(|l| !is(l, "Accepted")).map(|l| l.name.as_str()).collect();
            let not_valid = format!("listeners not valid: {}", invalid.join(", "));
            let accepted = match invalid.len() {
                0 => build("Accepted", "True", "Accepted", "listener set accepted", g, now),
                n if n < listeners.len() => build("Accepted", "True", "ListenersNotValid", not_valid.clone(), g, now),
                _ => build("Accepted", "False", "ListenersNotValid", not_valid.clone(), g, now),
            };
            let programmed = if listeners.iter().any(|l| is(l, "Programmed")) {
                build(
                    "Programmed",
                    "True",
                    "Programmed",
                    "listeners in the parent Gateway's dataplane configuration",
                    g,
                    now,
                )
            } else {
                build("Programmed", "False", "ListenersNotValid", "no listener is programmed", g, now)
            };
            (accepted, programmed, listeners)
        }
    };
    set(&mut conditions, accepted);
    set(&mut conditions, programmed);
    let mut listeners = listeners;
    for l in &mut listeners {
        let old =
            ls.status.as_ref().and_then(|s| s.listeners.as_ref()).and_then(|o| o.iter().find(|o| o.name == l.name));
        keep_times(old.map(|o| o.conditions.as_slice()).unwrap_or_default(), &mut l.conditions);
    }
    ListenerSetStatus { conditions: Some(conditions), listeners: Some(listeners) }
}

/// Whether a ListenerSet's status says it is accepted (what the Gateway's
/// `attachedListenerSets` counts).
pub(crate) fn is_accepted(status: &ListenerSetStatus) -> bool {
    status.conditions.iter().flatten().any(|c| c.type_ == "Accepted" && c.status == "True")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listener_set_listener_reads_as_a_gateway_listener_field_for_field() {
        let text = r#"{"name":"tls","port":443,"protocol":"TURN-TLS","hostname":"a.example.com",
            "tls":{"mode":"Terminate","certificateRefs":[{"group":"","kind":"Secret","name":"c","namespace":"t"}],"options":{"k":"v"}},
            "allowedRoutes":{"kinds":[{"group":"stunner.l7mp.io","kind":"UDPRoute"}],
              "namespaces":{"from":"Selector","selector":{"matchLabels":{"a":"b"},"matchExpressions":[{"key":"k","operator":"In","values":["x"]}]}}}}"#;
        let ls: ListenerSetListeners = serde_json::from_str(text).unwrap();
        let gw: GatewayListeners = same_shape(&ls);
        assert_eq!(serde_json::to_value(&gw).unwrap(), serde_json::to_value(&ls).unwrap());
    }

    #[test]
    fn port_names_are_dns_labels_apart_per_listener_set() {
        let a = port_name(&ObjectKey::new("tenant", "ls"), "turn.tls");
        assert!(a.starts_with("turn-tls-") && a.len() == "turn-tls-".len() + 8, "{a}");
        assert_ne!(a, port_name(&ObjectKey::new("tenant", "other"), "turn.tls"));
        assert_eq!(a, port_name(&ObjectKey::new("tenant", "ls"), "turn.tls"), "the same on every render");
        let long = port_name(&ObjectKey::new("t", "ls"), &"a".repeat(253));
        assert_eq!(long.len(), MAX_PORT_NAME);
        assert!(long.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'), "{long}");
    }
}
