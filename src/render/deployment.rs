//! The managed dataplane of a Gateway (spec §3.12), a Deployment or a DaemonSet as its Dataplane's
//! `dataplaneResource` says: desired state for server-side apply, with the Dataplane's overrides.

use super::infrastructure::{self, owned_key};
use super::owner::gateway_owner;
use super::settings::RenderSettings;
use crate::index::ObjectKey;
use crate::keys::*;
use crate::resources::Dataplane;
use gateway_api::gateways::Gateway;
use k8s_openapi::api::apps::v1::{DaemonSet, DaemonSetSpec, Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, ObjectFieldSelector, PodSpec, PodTemplateSpec,
    Probe, ResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, LabelSelectorRequirement, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use std::collections::BTreeMap;

pub(crate) const CONTAINER_NAME: &str = "stunner-daemon";
/// The stunnerd of a Dataplane without an image: pinned, never `latest`, to the release
/// `tests/interop` runs (and the default Dataplane of the chart and the manifests names).
pub(crate) const DEFAULT_IMAGE: &str = "docker.io/l7mp/stunnerd:1.2.1";
const DEFAULT_GRACE_SECONDS: i64 = 3600;
const HEALTH_CHECK_PORT: i32 = 8086;
const METRICS_PORT: i32 = 8080;
const HOST_NETWORK_DNS_POLICY: &str = "ClusterFirstWithHostNet";

/// Owned entries for a map that already exists: extending it from these, not from a map built
/// for the purpose, allocates no B-tree node that is thrown away.
fn entries<'a>(kvs: &'a [(&str, &str)]) -> impl Iterator<Item = (String, String)> + 'a {
    kvs.iter().map(|(k, v)| (k.to_string(), v.to_string()))
}

fn probe(path: &str) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::Int(HEALTH_CHECK_PORT),
            scheme: Some("HTTP".into()),
            ..Default::default()
        }),
        period_seconds: Some(15),
        success_threshold: Some(1),
        failure_threshold: Some(3),
        timeout_seconds: Some(1),
        ..Default::default()
    }
}

fn env_value(name: &str, value: impl Into<String>) -> EnvVar {
    EnvVar { name: name.into(), value: Some(value.into()), ..Default::default() }
}

fn env_field(name: &str, path: &str) -> EnvVar {
    let field_ref = ObjectFieldSelector { field_path: path.into(), ..Default::default() };
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource { field_ref: Some(field_ref), ..Default::default() }),
        ..Default::default()
    }
}

/// Upstream leaves empty lists unset.
fn non_empty<T: Clone>(v: &[T]) -> Option<Vec<T>> {
    (!v.is_empty()).then(|| v.to_vec())
}

fn default_resources() -> ResourceRequirements {
    ResourceRequirements {
        limits: Some(BTreeMap::from([("memory".into(), Quantity("20M".into()))])),
        requests: Some(BTreeMap::from([("cpu".into(), Quantity("250m".into()))])),
        ..Default::default()
    }
}

fn container(key: &ObjectKey, dp: &Dataplane, settings: &RenderSettings) -> Container {
    let spec = &dp.spec;
    let or_default =
        |v: &Vec<String>, d: &[&str]| if v.is_empty() { d.iter().map(|s| s.to_string()).collect() } else { v.clone() };
    let mut env = vec![
        env_field("STUNNER_ADDR", "status.podIP"),
        env_value("STUNNER_NAME", key.name.as_str()),
        env_value("STUNNER_NAMESPACE", key.namespace.as_str()),
        env_field("STUNNER_NODENAME", "spec.nodeName"),
        env_value(CONFIG_ORIGIN_ENV, settings.cds_origin()),
    ];
    env.extend(spec.env.iter().cloned());
    let probes = !spec.disable_health_check;
    Container {
        name: CONTAINER_NAME.into(),
        image: Some(if spec.image.is_empty() { DEFAULT_IMAGE.into() } else { spec.image.clone() }),
        image_pull_policy: Some(spec.image_pull_policy.clone().unwrap_or_else(|| "Always".into())),
        command: Some(or_default(&spec.command, &["stunnerd"])),
        args: Some(or_default(&spec.args, &["-w", "--udp-thread-num=16"])),
        env: Some(env),
        resources: Some(spec.resources.clone().unwrap_or_else(default_resources)),
        liveness_probe: probes.then(|| probe("/live")),
        readiness_probe: probes.then(|| probe("/ready")),
        security_context: spec.container_security_context.clone(),
        ports: Some(vec![ContainerPort {
            name: Some("metrics-port".into()),
            container_port: METRICS_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        ..Default::default()
    }
}

/// What a Gateway's dataplane object is, whichever its kind: metadata, pod selector and pod
/// template are the same for a Deployment and a DaemonSet, so switching the kind changes no
/// pod label and the Gateway's Service selects the pods of either.
struct Workload {
    metadata: ObjectMeta,
    selector: LabelSelector,
    template: PodTemplateSpec,
}

fn workload(key: &ObjectKey, gw: &Gateway, dp: &Dataplane, settings: &RenderSettings) -> Workload {
    let spec = &dp.spec;
    let related = key.to_string();
    // The object's name and the labels naming it: the Gateway's, shortened past 63 characters.
    let owned = owned_key(key);
    let gw_labels = gw.metadata.labels.iter().flatten();
    let mut labels: BTreeMap<String, String> =
        gw_labels.filter(|(k, _)| !settings.label_filter.contains(k)).map(|(k, v)| (k.clone(), v.clone())).collect();
    labels.extend(infrastructure::labels(gw));
    labels.extend(entries(&[
        (OWNED_BY_LABEL, OWNED_BY_VALUE),
        (RELATED_GATEWAY_NAME, &owned.name),
        (RELATED_GATEWAY_NAMESPACE, &key.namespace),
    ]));
    let mut annotations = gw.metadata.annotations.clone().unwrap_or_default();
    annotations.extend(infrastructure::annotations(gw));
    annotations.insert(RELATED_GATEWAY_NAME.into(), related.clone());
    annotations.insert(CONTROLLER_NAME.into(), settings.controller_name.clone());
    let mut pod_labels = spec.labels.clone();
    pod_labels.extend(infrastructure::labels(gw));
    pod_labels.extend(entries(&[
        (APP_LABEL, APP_VALUE),
        (RELATED_GATEWAY_NAME, &owned.name),
        (RELATED_GATEWAY_NAMESPACE, &key.namespace),
    ]));
    let mut pod_annotations = spec.annotations.clone();
    pod_annotations.extend(infrastructure::annotations(gw));
    pod_annotations.insert(RELATED_GATEWAY_NAME.into(), related);
    let requirement = |k: &str, v: &str| LabelSelectorRequirement {
        key: k.into(),
        operator: "In".into(),
        values: Some(vec![v.into()]),
    };
    Workload {
        metadata: ObjectMeta {
            name: Some(owned.name.to_string()),
            namespace: Some(key.namespace.to_string()),
            labels: Some(labels),
            annotations: Some(annotations),
            owner_references: Some(vec![gateway_owner(gw)]),
            ..Default::default()
        },
        selector: LabelSelector {
            match_expressions: Some(vec![
                requirement(APP_LABEL, APP_VALUE),
                requirement(RELATED_GATEWAY_NAME, &owned.name),
                requirement(RELATED_GATEWAY_NAMESPACE, &key.namespace),
            ]),
            match_labels: None,
        },
        template: PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(pod_labels),
                annotations: Some(pod_annotations),
                ..Default::default()
            }),
            spec: Some(PodSpec {
                containers: vec![container(key, dp, settings)],
                termination_grace_period_seconds: Some(
                    spec.termination_grace_period_seconds.unwrap_or(DEFAULT_GRACE_SECONDS),
                ),
                host_network: Some(spec.host_network),
                // A host-network pod resolves names with the node's resolver unless asked
                // otherwise, and then the CDS Service name in `STUNNER_CONFIG_ORIGIN` does
                // not resolve: stunnerd would never get a config.
                dns_policy: spec.host_network.then(|| HOST_NETWORK_DNS_POLICY.into()),
                affinity: spec.affinity.clone(),
                tolerations: non_empty(&spec.tolerations),
                security_context: spec.security_context.clone(),
                image_pull_secrets: non_empty(&spec.image_pull_secrets),
                topology_spread_constraints: non_empty(&spec.topology_spread_constraints),
                ..Default::default()
            }),
        },
    }
}

/// The Gateway's dataplane as a Deployment (`dataplaneResource: Deployment`, the default).
pub(crate) fn render(key: &ObjectKey, gw: &Gateway, dp: &Dataplane, settings: &RenderSettings) -> Deployment {
    let Workload { metadata, selector, template } = workload(key, gw, dp, settings);
    Deployment {
        metadata,
        spec: Some(DeploymentSpec {
            // Requested only when the Dataplane asks for more than one (upstream enforces
            // replicas only then): left out, the field is not ours under server-side apply, so
            // an autoscaler or `kubectl scale` keeps control of it.
            replicas: dp.spec.replicas.filter(|&r| r != 1),
            selector,
            template,
            ..Default::default()
        }),
        status: None,
    }
}

/// The Gateway's dataplane as a DaemonSet (`dataplaneResource: DaemonSet`): one pod per
/// schedulable node; `replicas` means nothing here and is not rendered.
pub(crate) fn render_daemon_set(key: &ObjectKey, gw: &Gateway, dp: &Dataplane, settings: &RenderSettings) -> DaemonSet {
    let Workload { metadata, selector, template } = workload(key, gw, dp, settings);
    DaemonSet { metadata, spec: Some(DaemonSetSpec { selector, template, ..Default::default() }), status: None }
}
