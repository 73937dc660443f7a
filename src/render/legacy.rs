//! Legacy mode: all Gateways of a class in one config, published in a ConfigMap (spec §3.3, §3.14).

use super::class::{self, ClassState, ReadyClass};
use super::error::RenderError;
use super::gateway::ClusterErrors;
use super::owner::gateway_config_owner;
use super::settings::RenderSettings;
use super::{GatewayOutput, Owned, admin, auth, gateway};
use crate::config::{API_VERSION, StunnerConfig};
use crate::index::{Index, KeyView, Kind, ObjRefView, ObjectKey};
use crate::keys::{OWNED_BY_LABEL, OWNED_BY_VALUE, RELATED_GATEWAY_NAME};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use std::collections::BTreeMap;

pub(crate) const CONFIG_MAP_NAME: &str = "stunnerd-config";
pub(crate) const CONFIG_MAP_KEY: &str = "stunnerd.conf";

/// The outcome for one class.
#[derive(Debug, Default)]
pub(crate) struct LegacyClass {
    pub gateways: BTreeMap<ObjectKey, GatewayOutput>,
    pub config_map: Option<(ObjectKey, Owned<ConfigMap>)>,
    /// A render error that invalidated the whole class.
    pub error: Option<RenderError>,
}

fn config_map(ready: &ReadyClass<'_>, content: String) -> (ObjectKey, Owned<ConfigMap>) {
    let key = ObjectKey::new(ready.config_key.namespace, CONFIG_MAP_NAME);
    let class_key = ObjectKey::cluster(ready.class.metadata.name.clone().unwrap_or_default());
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(key.name.to_string()),
            namespace: Some(key.namespace.to_string()),
            labels: Some(BTreeMap::from([(OWNED_BY_LABEL.into(), OWNED_BY_VALUE.into())])),
            annotations: Some(BTreeMap::from([(RELATED_GATEWAY_NAME.into(), class_key.to_string())])),
            owner_references: Some(vec![gateway_config_owner(ready.config)]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(CONFIG_MAP_KEY.into(), content)])),
        ..Default::default()
    };
    (key, Owned::Apply(cm))
}

fn invalidate(
    index: &Index,
    keys: &[ObjectKey],
    e: &RenderError,
    settings: &RenderSettings,
    now: &Time,
) -> LegacyClass {
    let gateways = keys.iter().filter_map(|k| {
        let gw = index.gateways().get(k)?;
        let status = Some(gateway::invalid_status(gw, e, settings, now));
        let listener_sets = gateway::invalid_listener_sets(index, k, gw, e, now);
        Some((k.clone(), GatewayOutput { status, listener_sets, ..GatewayOutput::gone(Owned::Keep) }))
    });
    LegacyClass { gateways: gateways.collect(), config_map: None, error: Some(e.clone()) }
}

pub(crate) fn render_class<'a>(
    index: &'a Index,
    name: &str,
    settings: &RenderSettings,
    now: &Time,
    cluster_errors: &mut ClusterErrors<'a>,
) -> LegacyClass {
    let class_ref = ObjRefView::new(Kind::GatewayClass, KeyView::cluster(name));
    let keys: Vec<ObjectKey> = index.referrers(class_ref, Kind::Gateway).cloned().collect();
    let ready = match class::resolve(index, name, settings) {
        ClassState::NotOurs => {
            let gone = keys.into_iter().map(|k| (k.clone(), GatewayOutput::removed(index, &k, Owned::Keep, settings)));
            return LegacyClass { gateways: gone.collect(), ..Default::default() };
        }
        // Upstream sends nothing at all here (quirk 4); the Gateways are reported instead.
        ClassState::Invalid(_, e) => return LegacyClass { error: None, ..invalidate(index, &keys, &e, settings, now) },
        ClassState::Ready(r) => r,
    };
    let header =
        admin::render(&ready, admin::LEGACY_NAME.into()).and_then(|a| Ok((a, auth::render(index, ready.config)?)));
    let (admin, auth) = match header {
        Ok(h) => h,
        Err(e) => {
            return LegacyClass {
                config_map: Some(config_map(&ready, String::new())),
                ..invalidate(index, &keys, &e, settings, now)
            };
        }
    };
    let mut out = LegacyClass::default();
    let mut listeners = Vec::new();
    let mut routes = Vec::new();
    for key in keys {
        let Some(gw) = index.gateways().get(&key) else { continue };
        let rendered = gateway::render(index, &key, gw, &ready, settings, now);
        listeners.extend(rendered.listeners);
        routes.extend(rendered.routes);
        let (service, tcp_service) = super::services(index, &key, rendered.services, settings);
        let output = GatewayOutput {
            status: Some(rendered.status),
            service,
            tcp_service,
            listener_sets: rendered.listener_sets,
            ..GatewayOutput::gone(Owned::Keep)
        };
        out.gateways.insert(key, output);
    }
    let config = StunnerConfig {
        version: API_VERSION.into(),
        admin,
        auth,
        listeners,
        clusters: gateway::clusters(index, &routes, settings, cluster_errors),
    };
    out.config_map = Some(config_map(&ready, config.to_json()));
    out
}
