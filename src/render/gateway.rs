//! One Gateway: its listeners, their routes and clusters, its Service and its status
//! (spec §3.4 step 2 and §3.13).

use super::address::{PublicAddress, public_addresses};
use super::attach::{Holder, Route, accepts, listener_routes, parent_routes};
use super::class::ReadyClass;
use super::cluster;
use super::error::{Reason, RenderError};
use super::listener;
use super::listener_set::{self, Verdict};
use super::listener_status::{self, ListenerOutcome, ListenerReport};
use super::relay;
use super::service::{self, GatewayServices};
use super::settings::RenderSettings;
use super::status::{self, Programming};
use crate::config::{ClusterConfig, ListenerConfig};
use crate::index::{Index, Kind, ObjRef, ObjRefView, ObjectKey};
use crate::resources::ListenerSetStatus;
use gateway_api::gateways::{Gateway, GatewaySpec, GatewayStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// What rendering one Gateway's listeners yields.
#[derive(Debug, Clone)]
pub(crate) struct RenderedGateway<'a> {
    pub listeners: Vec<ListenerConfig>,
    /// The routes attached to at least one listener: those that get a cluster.
    pub routes: Vec<Route<'a>>,
    pub services: GatewayServices,
    pub status: GatewayStatus,
    /// The statuses of the ListenerSets naming the Gateway.
    pub listener_sets: BTreeMap<ObjectKey, ListenerSetStatus>,
}

/// Renders the listeners of a Gateway of a ready class, its own and those of the ListenerSets
/// it admits (see `listener_set`).
pub(crate) fn render<'a>(
    index: &'a Index,
    key: &ObjectKey,
    gw: &Gateway,
    class: &ReadyClass<'_>,
    settings: &RenderSettings,
    now: &Time,
) -> RenderedGateway<'a> {
    let candidates = listener_set::of_gateway(index, key, gw);
    let merged = listener_set::merge(gw, &candidates);
    // The Gateway as its addresses see it, with every listener of its ListenerSets, and as its
    // Services do, without those of them that are conflicted: a tenant's listener on a port
    // taken must not make the shared Service one the API server refuses.
    let with = |keep: &dyn Fn(&listener_set::Merged<'_>) -> bool| -> Cow<'_, Gateway> {
        if merged.len() == gw.spec.listeners.len() {
            return Cow::Borrowed(gw);
        }
        let listeners = merged.iter().filter(|m| keep(m)).map(|m| m.listener.clone().into_owned()).collect();
        Cow::Owned(Gateway { spec: GatewaySpec { listeners, ..gw.spec.clone() }, ..gw.clone() })
    };
    let per_protocol = service::per_protocol(gw, class.config);
    let addresses: Vec<Option<PublicAddress>> = public_addresses(index, key, &with(&|_| true), per_protocol);
    let served = with(&|m| m.origin.is_none() || !(m.conflicted || m.outranked.is_some()));
    let services = service::render(index, key, &served, class.config, settings);
    // The routes some listener accepts (whether or not that listener is valid) get clusters.
    let mut routes: Vec<Route<'a>> = parent_routes(index, Kind::Gateway, key);
    for c in candidates.iter().filter(|c| c.allowed) {
        routes.extend(parent_routes(index, Kind::ListenerSet, c.key));
    }
    routes.sort_by(|a, b| (a.kind, a.key).cmp(&(b.kind, b.key)));
    routes.dedup_by(|a, b| (a.kind, a.key) == (b.kind, b.key));
    routes.retain(|r| {
        merged.iter().any(|m| {
            let accepting = |p| accepts(index, holder(gw, m), m.section, &m.listener, r.kind, r.namespace(), p);
            r.route.spec.parent_refs.iter().any(accepting)
        })
    });
    let mut listeners = Vec::new();
    let mut statuses = Vec::new();
    let mut set_listeners: BTreeMap<&ObjectKey, Vec<_>> = BTreeMap::new();
    let mut refused = None;
    for (m, public) in merged.iter().zip(&addresses) {
        let l = m.listener.as_ref();
        let holder = holder(gw, m);
        let attached = listener_routes(index, holder, m.section, l, &routes);
        let holder_ref = ObjRef::new(holder.kind, holder.key.to_owned());
        let rendered = listener::protocol(&l.protocol)
            .and_then(|proto| Ok((proto, listener::certificate(index, &holder_ref, l, proto)?)));
        let outcome = match &rendered {
            Ok(_) => ListenerOutcome::Accepted,
            Err(e) => {
                if e.reason == Reason::RefNotPermitted && refused.is_none() && m.origin.is_none() {
                    refused = Some(format!("listener {} left out of the dataplane configuration: {e}", l.name));
                }
                ListenerOutcome::of_error(e)
            }
        };
        let report = ListenerReport {
            outcome,
            conflicted: m.conflicted,
            outranked: m.outranked,
            kinds: listener::route_kinds(l),
            // A route is listed once per parentRef the listener accepts: count it once.
            attached: attached.chunk_by(|a, b| a == b).count(),
        };
        if let Some(c) = m.origin {
            set_listeners.entry(c.key).or_default().push(listener_set::listener_status(c.ls, m.section, &report, now));
        } else {
            let mut listener_status = listener_status::gateway_listener(gw, &l.name, &report, now);
            // With two Services, which one a listener is reached through is not obvious.
            if per_protocol && let Some(a) = public {
                listener_status::address_source(&mut listener_status, &key.namespace, &a.service);
            }
            statuses.push(listener_status);
        }
        let Some((proto, cert)) = rendered.ok().filter(|_| report.programmed()) else { continue };
        let target_port = services.target_ports.get(&l.name).copied();
        let (cert, tls_key) = cert.unwrap_or_default();
        let public = public.as_ref();
        listeners.push(ListenerConfig {
            name: format!("{key}/{}", l.name),
            protocol: proto.into(),
            public_addr: public.map(|a| a.primary().value.clone()).unwrap_or_default(),
            public_addrs: public
                .map(PublicAddress::per_family)
                .filter(|a| a.len() > 1)
                .map(|a| a.into_iter().map(str::to_owned).collect())
                .unwrap_or_default(),
            public_port: public.map(|a| a.port.into()).unwrap_or_default(),
            addr: relay::listener_address(gw).into(),
            port: target_port.unwrap_or(l.port).into(),
            cert,
            key: tls_key,
            routes: attached,
        });
    }
    let listener_sets: BTreeMap<ObjectKey, ListenerSetStatus> = candidates
        .iter()
        .map(|c| {
            let verdict = if c.allowed {
                Verdict::Attached(set_listeners.remove(c.key).unwrap_or_default())
            } else {
                Verdict::NotAllowed
            };
            (c.key.clone(), listener_set::status(c.ls, verdict, now))
        })
        .collect();
    // The Gateway is programmed as its own listeners are: a ListenerSet's say so in its status.
    let programming = Programming { addresses: &addresses[..gw.spec.listeners.len()], refused };
    let mut status = status::gateway(gw, Ok(programming), statuses, settings, now);
    let attached_sets = listener_sets.values().filter(|s| listener_set::is_accepted(s)).count();
    status.attached_listener_sets = gw.spec.allowed_listeners.is_some().then_some(attached_sets as i32);
    relay::set_condition(index, gw, now, &mut status);
    RenderedGateway { listeners, routes, services, status, listener_sets }
}

/// The object a merged listener of `gw` is declared in.
fn holder<'b>(gw: &'b Gateway, m: &listener_set::Merged<'b>) -> Holder<'b> {
    match m.origin {
        None => Holder::gateway(gw),
        Some(c) => Holder { kind: Kind::ListenerSet, key: c.key.view() },
    }
}

/// The status of an invalidated Gateway: not accepted, every listener pending.
pub(crate) fn invalid_status(gw: &Gateway, err: &RenderError, settings: &RenderSettings, now: &Time) -> GatewayStatus {
    let listeners = gw.spec.listeners.iter().map(|l| {
        let report = ListenerReport {
            outcome: ListenerOutcome::Pending,
            conflicted: false,
            outranked: None,
            kinds: listener::route_kinds(l),
            attached: 0,
        };
        listener_status::gateway_listener(gw, &l.name, &report, now)
    });
    status::gateway(gw, Err(err), listeners.collect(), settings, now)
}

/// The statuses of the ListenerSets naming an invalidated Gateway: those it admits are not
/// accepted for want of an accepted parent.
pub(crate) fn invalid_listener_sets(
    index: &Index,
    key: &ObjectKey,
    gw: &Gateway,
    err: &RenderError,
    now: &Time,
) -> BTreeMap<ObjectKey, ListenerSetStatus> {
    let verdict = |allowed| if allowed { Verdict::ParentNotAccepted(err.to_string()) } else { Verdict::NotAllowed };
    listener_set::of_gateway(index, key, gw)
        .into_iter()
        .map(|c| (c.key.clone(), listener_set::status(c.ls, verdict(c.allowed), now)))
        .collect()
}

/// The backend errors of the routes whose clusters a render made: their statuses need them,
/// and rendering a cluster again only to learn its error would cost as much as the first time.
pub(crate) type ClusterErrors<'a> = BTreeMap<ObjRefView<'a>, Option<RenderError>>;

/// The clusters of a set of routes, sorted by name; routes whose cluster a critical error
/// dropped have none. Each route's backend error goes to `errors`.
pub(crate) fn clusters<'a>(
    index: &Index,
    routes: &[Route<'a>],
    settings: &RenderSettings,
    errors: &mut ClusterErrors<'a>,
) -> Vec<ClusterConfig> {
    let mut clusters: Vec<ClusterConfig> = routes
        .iter()
        .filter_map(|r| {
            let rendered = cluster::render(index, r, settings);
            errors.insert(r.view(), rendered.error);
            rendered.cluster
        })
        .collect();
    clusters.sort_by(|a, b| a.name.cmp(&b.name));
    clusters.dedup_by(|a, b| a.name == b.name);
    clusters
}
