//! The renderer: a pure, deterministic function from the index and a set of dirty objects to
//! the configs, statuses and owned objects they imply (design.md §2, spec §3–§4).
//!
//! No I/O and no clock: the caller passes `now` for condition timestamps. Output maps are keyed
//! and sorted; a bad object only shows in statuses and never affects other Gateways.

mod address;
mod admin;
mod adopt;
mod attach;
mod auth;
mod class;
mod cluster;
mod conditions;
mod deployment;
mod error;
mod features;
mod gateway;
mod infrastructure;
mod legacy;
mod listener;
mod listener_set;
mod listener_status;
mod owner;
mod relay;
mod serialized;
mod service;
mod settings;
mod status;
mod switch;

pub use error::{Reason, RenderError};
pub use infrastructure::owned_key;
pub use serialized::SerializedStatus;
pub use service::{parse_port_map, tcp_service_key};
pub use settings::{DEFAULT_CDS_ADDRESS, DEFAULT_CONTROLLER_NAME, DEFAULT_LABEL_FILTER, DataplaneMode, RenderSettings};

use crate::config::{API_VERSION, StunnerConfig};
use crate::index::{Dirty, Index, KeyView, Kind, ObjRef, ObjRefView, ObjectKey, class_config, effective_config};
use crate::keys::{CONTROLLER_NAME, DISABLE_MANAGED_DATAPLANE, OWNED_BY_LABEL, OWNED_BY_VALUE, RELATED_GATEWAY_NAME};
use crate::resources::{ListenerSetStatus, UdpRouteStatus};
use class::ClassState;
use gateway::ClusterErrors;
use gateway_api::gatewayclasses::{GatewayClass, GatewayClassStatus};
use gateway_api::gateways::{Gateway, GatewayStatus};
use hashbrown::HashSet;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::{BTreeMap, BTreeSet};

/// What to do with an object the operator owns.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Owned<T> {
    /// Create or update it to this desired state.
    Apply(T),
    /// Delete it (if it exists).
    Delete,
    /// Leave it alone.
    #[default]
    Keep,
}

/// The outcome for one Gateway; the default leaves everything as it is.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct GatewayOutput {
    /// The CDS config (id `<ns>/<name>`): publish, or delete; `Keep` in legacy mode.
    pub config: Owned<StunnerConfig>,
    /// The Gateway's new status; `None` for Gateways that are gone or not ours.
    pub status: Option<GatewayStatus>,
    pub service: Owned<Service>,
    /// With `service-per-protocol`, the Service of the TCP-like listeners, at
    /// [`tcp_service_key`] of the Gateway's key; deleted when no longer asked for.
    pub tcp_service: Owned<Service>,
    /// The managed dataplane as a Deployment; `Keep` in legacy mode.
    pub deployment: Owned<Deployment>,
    /// The managed dataplane as a DaemonSet; `Keep` in legacy mode. At most one of the two is
    /// applied; the other is deleted once the applied one serves (see [`switch`]).
    pub daemon_set: Owned<DaemonSet>,
    /// Set when the Gateway is withdrawn for a fault in its class's GatewayConfig.
    pub invalid_config: Option<InvalidConfig>,
    /// The new statuses of the ListenerSets naming the Gateway (GEP-1713), by key.
    pub listener_sets: BTreeMap<ObjectKey, ListenerSetStatus>,
}

impl GatewayOutput {
    /// The statuses of the ListenerSets the Gateway's render judged, serialized to be written.
    pub fn listener_set_statuses(&self) -> impl Iterator<Item = SerializedStatus> + '_ {
        let object = |key: &ObjectKey| ObjRef::new(Kind::ListenerSet, key.clone());
        self.listener_sets.iter().map(move |(key, status)| SerializedStatus::new(object(key), status))
    }

    /// Only a CDS config decision; every object and the status left as they are.
    fn gone(config: Owned<StunnerConfig>) -> Self {
        GatewayOutput { config, ..Default::default() }
    }

    /// A Gateway that was deleted or is no longer ours: `config` for its CDS config, and the
    /// Service and Deployment it got from us deleted, not left to garbage collection (which
    /// not every cluster runs promptly, and which never runs when only the class changed).
    /// Only objects this operator made: the writer deletes by name, and a same-named object
    /// of someone else's must survive, another STUNner operator's dataplane included.
    fn removed(index: &Index, key: &ObjectKey, config: Owned<StunnerConfig>, settings: &RenderSettings) -> Self {
        let owned = owned_key(key);
        GatewayOutput {
            service: delete_if_ours(index.services().get(&owned).map(|s| &s.metadata), settings),
            tcp_service: drop_tcp_service(index, key, settings),
            deployment: delete_if_ours(index.deployments().get(&owned).map(|d| &d.metadata), settings),
            daemon_set: delete_if_ours(index.daemon_sets().get(&owned).map(|d| &d.metadata), settings),
            ..Self::gone(config)
        }
    }
}

/// `Delete` for an object with our owned-by label and our controller name. The label alone
/// does not do: every STUNner operator sets the same one, so a second operator with another
/// `--controller-name` would delete the first one's dataplanes. Objects without the controller
/// name (made by the Go operator, or by a version of ours before it) are left to garbage
/// collection, which their owner reference to the Gateway arranges.
fn delete_if_ours<T>(meta: Option<&ObjectMeta>, settings: &RenderSettings) -> Owned<T> {
    let value = |map: Option<&BTreeMap<String, String>>, key: &str| map.and_then(|m| m.get(key)).cloned();
    let labelled = value(meta.and_then(|m| m.labels.as_ref()), OWNED_BY_LABEL).is_some_and(|v| v == OWNED_BY_VALUE);
    let made_by = value(meta.and_then(|m| m.annotations.as_ref()), CONTROLLER_NAME);
    if labelled && made_by.as_ref() == Some(&settings.controller_name) { Owned::Delete } else { Owned::Keep }
}

/// A Gateway's `<gateway>-tcp` Service when it renders none (no `service-per-protocol`, no
/// TCP-like listener, or the Gateway is gone): deleted if ours and this Gateway's, since a
/// Gateway of that name has a Service of that name too.
fn drop_tcp_service(index: &Index, key: &ObjectKey, settings: &RenderSettings) -> Owned<Service> {
    let meta = index.services().get(&tcp_service_key(key)).map(|s| &s.metadata);
    let related = meta.and_then(|m| m.annotations.as_ref()?.get(RELATED_GATEWAY_NAME));
    if related.is_some_and(|r| *r == key.to_string()) { delete_if_ours(meta, settings) } else { Owned::Keep }
}

/// A Gateway's Services as rendered: the second one, if not rendered, dropped.
fn services(
    index: &Index,
    key: &ObjectKey,
    rendered: service::GatewayServices,
    settings: &RenderSettings,
) -> (Owned<Service>, Owned<Service>) {
    let tcp = match rendered.tcp_service {
        Some(s) => Owned::Apply(s),
        None => drop_tcp_service(index, key, settings),
    };
    (rendered.service.map_or(Owned::Keep, Owned::Apply), tcp)
}

/// Everything one render produced, keyed and sorted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RenderOutput {
    pub gateways: BTreeMap<ObjectKey, GatewayOutput>,
    /// Legacy mode: the `stunnerd-config` ConfigMap of each GatewayConfig.
    pub config_maps: BTreeMap<ObjectKey, Owned<ConfigMap>>,
    /// New statuses of routes (of the kinds of `index::ROUTE_KINDS`).
    pub routes: BTreeMap<ObjRef, UdpRouteStatus>,
    /// New statuses of GatewayClasses, by name.
    pub classes: BTreeMap<String, GatewayClassStatus>,
}

/// Where [`render_each`] hands each result as soon as it is rendered.
pub trait RenderSink {
    fn gateway(&mut self, key: ObjectKey, output: GatewayOutput);
    fn route(&mut self, route: ObjRef, status: UdpRouteStatus);
    fn class(&mut self, name: String, status: GatewayClassStatus);
    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>);
}

/// Keeps every result.
impl RenderSink for RenderOutput {
    fn gateway(&mut self, key: ObjectKey, output: GatewayOutput) {
        self.gateways.insert(key, output);
    }

    fn route(&mut self, route: ObjRef, status: UdpRouteStatus) {
        self.routes.insert(route, status);
    }

    fn class(&mut self, name: String, status: GatewayClassStatus) {
        self.classes.insert(name, status);
    }

    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>) {
        self.config_maps.insert(key, config_map);
    }
}

/// A fault in a GatewayConfig that withdraws every Gateway of its class (as upstream): which
/// GatewayConfig, the field to fix, and the error the Gateway's status shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidConfig {
    pub config: ObjectKey,
    pub field: &'static str,
    pub message: String,
}

impl InvalidConfig {
    /// `e` as a fault of the GatewayConfig of `config`, if it is one.
    fn of(config: Option<KeyView<'_>>, e: &RenderError) -> Option<Self> {
        Some(InvalidConfig { config: config?.to_owned(), field: e.field()?, message: e.to_string() })
    }
}

/// Renders everything in the index.
pub fn render_all(index: &Index, settings: &RenderSettings, now: &Time) -> RenderOutput {
    render(index, &index.everything(), settings, now)
}

/// The exit-time cleanup of `--enable-finalizer` (spec §4.5), managed mode only: every class
/// of ours and its Gateways invalidated ("Operator unavailable after graceful shutdown"),
/// their Services and Deployments deleted, routes reported as usual. Legacy mode has none, as
/// upstream (whose operator then waits forever; here the output is simply empty).
pub fn finalize(index: &Index, settings: &RenderSettings, now: &Time) -> RenderOutput {
    if settings.dataplane_mode == DataplaneMode::Legacy {
        return RenderOutput::default();
    }
    let settings = RenderSettings { finalizing: true, ..settings.clone() };
    render_all(index, &settings, now)
}

/// Renders the dirty Gateways, routes and classes (and the routes and classes of the dirty
/// Gateways).
pub fn render(index: &Index, dirty: &Dirty, settings: &RenderSettings, now: &Time) -> RenderOutput {
    let mut out = RenderOutput::default();
    render_each(index, dirty, settings, now, &mut out);
    out
}

/// Renders as [`render`] does, but hands each result to `sink` as soon as it is rendered
/// instead of keeping it: each Gateway (managed mode: in key order; legacy mode: class by
/// class), then the status of each of its routes not handed on yet, then the dirty routes
/// left, then the classes. A large render's working set is then one Gateway's results, not
/// all of them: written and read while they are still in the caches.
pub fn render_each(index: &Index, dirty: &Dirty, settings: &RenderSettings, now: &Time, sink: &mut dyn RenderSink) {
    // The dirty classes, and those of the dirty Gateways.
    let of_gateways =
        dirty.gateways.iter().filter_map(|k| Some(index.gateways().get(k)?.spec.gateway_class_name.as_str()));
    let classes: BTreeSet<&str> = dirty.classes.iter().map(String::as_str).chain(of_gateways).collect();
    let mut rendering = Rendering {
        index,
        settings,
        now,
        sink,
        // Most renders reach every dirty route: sized once, the set never rehashes.
        routes_done: HashSet::with_capacity(dirty.routes.len()),
        cluster_errors: ClusterErrors::new(),
    };
    let mut class_errors = BTreeMap::new();
    match settings.dataplane_mode {
        DataplaneMode::Managed => {
            for key in &dirty.gateways {
                let output = managed_gateway(index, key, settings, now, &mut rendering.cluster_errors);
                rendering.gateway(key.clone(), output);
            }
        }
        DataplaneMode::Legacy => {
            let mut rendered_keys = BTreeSet::new();
            for &name in &classes {
                let rendered = legacy::render_class(index, name, settings, now, &mut rendering.cluster_errors);
                let class = index.gateway_classes().lookup(KeyView::cluster(name));
                let invalid = rendered.error.as_ref().and_then(|e| InvalidConfig::of(class.and_then(class_config), e));
                for (key, mut gateway) in rendered.gateways {
                    gateway.invalid_config.clone_from(&invalid);
                    rendered_keys.insert(key.clone());
                    rendering.gateway(key, gateway);
                }
                if let Some((key, config_map)) = rendered.config_map {
                    rendering.sink.config_map(key, config_map);
                }
                if let Some(e) = rendered.error {
                    class_errors.insert(name, e);
                }
            }
            // Dirty Gateways no class rendered (deleted ones) only lose nothing: no CDS config.
            for key in dirty.gateways.iter().filter(|k| !rendered_keys.contains(*k)) {
                rendering.gateway(key.clone(), GatewayOutput::removed(index, key, Owned::Keep, settings));
            }
        }
    }
    for r in &dirty.routes {
        rendering.route(r.view());
    }
    for name in classes {
        let state = match (class::resolve(index, name, settings), class_errors.remove(name)) {
            (ClassState::Ready(c), Some(e)) => ClassState::Invalid(c.class, e),
            (state, _) => state,
        };
        if let Some(status) = class::status(&state, settings, now) {
            rendering.sink.class(name.to_owned(), status);
        }
    }
}

/// A render under way: where its results go, and what it has done so far.
struct Rendering<'a, 's> {
    index: &'a Index,
    settings: &'a RenderSettings,
    now: &'a Time,
    sink: &'s mut dyn RenderSink,
    /// The routes whose status was rendered (a route with several parents is rendered once).
    /// Hashed: a B-tree of every route would compare keys borrowed from all over the index.
    routes_done: HashSet<ObjRefView<'a>>,
    /// The backend errors of the clusters rendered whose route status is still to come.
    cluster_errors: ClusterErrors<'a>,
}

impl<'a> Rendering<'a, '_> {
    /// Hands on a Gateway's results, then its routes' statuses (which its render decided),
    /// those naming one of its ListenerSets included.
    fn gateway(&mut self, key: ObjectKey, output: GatewayOutput) {
        // Borrowed from the index, not from `key`, which the sink takes first.
        let referrers = self.index.all_referrers(ObjRefView::new(Kind::Gateway, &key));
        let sets = self.index.referrers(ObjRefView::new(Kind::Gateway, &key), Kind::ListenerSet);
        let index = self.index;
        let of_sets = sets.flat_map(move |ls| index.all_referrers(ObjRefView::new(Kind::ListenerSet, ls)));
        self.sink.gateway(key, output);
        for r in referrers.chain(of_sets).filter(|r| attach::is_route(r.kind)) {
            self.route(r.view());
        }
    }

    /// Hands on a route's status, if it is ours to report and was not handed on yet.
    fn route(&mut self, r: ObjRefView<'a>) {
        if !self.routes_done.insert(r) {
            return;
        }
        if let Some(status) = route_status(self.index, r, self.settings, self.now, &mut self.cluster_errors) {
            self.sink.route(r.to_owned(), status);
        }
    }
}

/// Managed mode: one config, Service and dataplane (Deployment or DaemonSet) per Gateway.
fn managed_gateway<'a>(
    index: &'a Index,
    key: &ObjectKey,
    settings: &RenderSettings,
    now: &Time,
    cluster_errors: &mut ClusterErrors<'a>,
) -> GatewayOutput {
    let Some(gw) = index.gateways().get(key) else {
        return GatewayOutput::removed(index, key, Owned::Delete, settings);
    };
    let withdrawn = |class: &GatewayClass, e: &RenderError| GatewayOutput {
        invalid_config: InvalidConfig::of(effective_config(gw, class), e),
        ..invalidated(index, key, gw, e, settings, now)
    };
    let ready = match class::for_gateway(index, gw, settings) {
        ClassState::NotOurs => return GatewayOutput::removed(index, key, Owned::Delete, settings),
        ClassState::Invalid(class, e) => return withdrawn(class, &e),
        ClassState::Ready(c) => c,
    };
    let header = admin::render(&ready, key.to_string()).and_then(|a| Ok((a, auth::render(index, ready.config)?)));
    let (admin, auth) = match header {
        Ok(h) => h,
        Err(e) => return withdrawn(ready.class, &e),
    };
    let rendered = gateway::render(index, key, gw, &ready, settings, now);
    let (service, tcp_service) = services(index, key, rendered.services, settings);
    let config = StunnerConfig {
        version: API_VERSION.into(),
        admin,
        auth,
        listeners: rendered.listeners,
        clusters: gateway::clusters(index, &rendered.routes, settings, cluster_errors),
    };
    let disabled = gw
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DISABLE_MANAGED_DATAPLANE))
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    let dataplane = match ready.dataplane {
        Some(dp) if !disabled => switch::render(index, key, gw, dp, settings, &config),
        _ => switch::DataplaneObjects { deployment: Owned::Delete, daemon_set: Owned::Delete },
    };
    GatewayOutput {
        config: Owned::Apply(config),
        status: Some(rendered.status),
        service,
        tcp_service,
        deployment: dataplane.deployment,
        daemon_set: dataplane.daemon_set,
        invalid_config: None,
        listener_sets: rendered.listener_sets,
    }
}

/// Managed mode: a Gateway that cannot be rendered loses its config, Services and dataplane.
fn invalidated(
    index: &Index,
    key: &ObjectKey,
    gw: &Gateway,
    e: &RenderError,
    settings: &RenderSettings,
    now: &Time,
) -> GatewayOutput {
    GatewayOutput {
        config: Owned::Delete,
        status: Some(gateway::invalid_status(gw, e, settings, now)),
        service: Owned::Delete,
        tcp_service: drop_tcp_service(index, key, settings),
        deployment: Owned::Delete,
        daemon_set: Owned::Delete,
        invalid_config: None,
        listener_sets: gateway::invalid_listener_sets(index, key, gw, e, now),
    }
}

/// A route's status, if it is ours to report: some parentRef names a stored Gateway of one of
/// our classes, or a stored ListenerSet of such a Gateway. `cluster_errors` holds the backend errors of the clusters rendered already.
fn route_status<'a>(
    index: &'a Index,
    r: ObjRefView<'a>,
    settings: &RenderSettings,
    now: &Time,
    cluster_errors: &mut ClusterErrors<'a>,
) -> Option<UdpRouteStatus> {
    let route = attach::route(index, r)?;
    let controlled = route.route.spec.parent_refs.iter().any(|p| {
        let parent = status::route_parent(index, route.namespace(), p);
        parent.is_some_and(|parent| class::is_ours(index, &parent.gateway.spec.gateway_class_name, settings))
    });
    if !controlled {
        return None;
    }
    let masked = attach::masked_by(index, r);
    let error = match cluster_errors.remove(&r) {
        Some(error) => error,
        None => cluster::render(index, &route, settings).error,
    };
    Some(status::route(index, &route, error.as_ref(), masked, settings, now))
}

#[cfg(test)]
mod tests;
