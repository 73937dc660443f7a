//! One Gateway: its listeners, their routes and clusters, its Service and its status
//! (spec §3.4 step 2 and §3.13).

use super::address::{PublicAddress, public_addresses};
use super::attach::{Route, accepts, gateway_routes, listener_routes};
use super::class::ReadyClass;
use super::cluster;
use super::error::{Reason, RenderError};
use super::listener;
use super::listener_status::{self, ListenerOutcome, ListenerReport};
use super::relay;
use super::service::{self, GatewayServices};
use super::settings::RenderSettings;
use super::status::{self, Programming};
use crate::config::{ClusterConfig, ListenerConfig};
use crate::index::{Index, ObjRefView, ObjectKey};
use gateway_api::gateways::{Gateway, GatewayStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use std::collections::BTreeMap;

/// What rendering one Gateway's listeners yields.
#[derive(Debug, Clone)]
pub(crate) struct RenderedGateway<'a> {
    pub listeners: Vec<ListenerConfig>,
    /// The routes attached to at least one listener: those that get a cluster.
    pub routes: Vec<Route<'a>>,
    pub services: GatewayServices,
    pub status: GatewayStatus,
}

/// Renders the listeners of a Gateway of a ready class.
pub(crate) fn render<'a>(
    index: &'a Index,
    key: &ObjectKey,
    gw: &Gateway,
    class: &ReadyClass<'_>,
    settings: &RenderSettings,
    now: &Time,
) -> RenderedGateway<'a> {
    let per_protocol = service::per_protocol(gw, class.config);
    let addresses: Vec<Option<PublicAddress>> = public_addresses(index, key, gw, per_protocol);
    let services = service::render(index, key, gw, class.config, settings);
    // The routes some listener accepts (whether or not that listener is valid) get clusters.
    let routes: Vec<Route<'a>> = gateway_routes(index, key)
        .into_iter()
        .filter(|r| {
            gw.spec
                .listeners
                .iter()
                .any(|l| r.route.spec.parent_refs.iter().any(|p| accepts(index, gw, l, r.kind, r.namespace(), p)))
        })
        .collect();
    let conflicts = listener::conflicts(&gw.spec.listeners);
    let mut listeners = Vec::new();
    let mut statuses = Vec::new();
    let mut refused = None;
    for (i, l) in gw.spec.listeners.iter().enumerate() {
        let attached = listener_routes(index, gw, l, &routes);
        let rendered =
            listener::protocol(&l.protocol).and_then(|proto| Ok((proto, listener::certificate(index, gw, l, proto)?)));
        let outcome = match &rendered {
            Ok(_) => ListenerOutcome::Accepted,
            Err(e) => {
                if e.reason == Reason::RefNotPermitted && refused.is_none() {
                    refused = Some(format!("listener {} left out of the dataplane configuration: {e}", l.name));
                }
                ListenerOutcome::of_error(e)
            }
        };
        let report = ListenerReport {
            outcome,
            conflicted: conflicts[i],
            kinds: listener::route_kinds(l),
            // A route is listed once per parentRef the listener accepts: count it once.
            attached: attached.chunk_by(|a, b| a == b).count(),
        };
        let mut listener_status = listener_status::gateway_listener(gw, &l.name, &report, now);
        let public = addresses[i].as_ref();
        // With two Services, which one a listener is reached through is not obvious.
        if per_protocol && let Some(a) = public {
            listener_status::address_source(&mut listener_status, &key.namespace, &a.service);
        }
        statuses.push(listener_status);
        let Some((proto, cert)) = rendered.ok().filter(|_| report.programmed()) else { continue };
        let target_port = services.target_ports.get(&l.name).copied();
        let (cert, tls_key) = cert.unwrap_or_default();
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
    let programming = Programming { addresses: &addresses, refused };
    let mut status = status::gateway(gw, Ok(programming), statuses, settings, now);
    relay::set_condition(index, gw, now, &mut status);
    RenderedGateway { listeners, routes, services, status }
}

/// The status of an invalidated Gateway: not accepted, every listener pending.
pub(crate) fn invalid_status(gw: &Gateway, err: &RenderError, settings: &RenderSettings, now: &Time) -> GatewayStatus {
    let listeners = gw.spec.listeners.iter().map(|l| {
        let report = ListenerReport {
            outcome: ListenerOutcome::Pending,
            conflicted: false,
            kinds: listener::route_kinds(l),
            attached: 0,
        };
        listener_status::gateway_listener(gw, &l.name, &report, now)
    });
    status::gateway(gw, Err(err), listeners.collect(), settings, now)
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
