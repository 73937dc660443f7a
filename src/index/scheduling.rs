//! Which Nodes a Dataplane's pods can be scheduled on, as the scheduler's filters decide it:
//! the Dataplane's required node affinity (`nodeSelectorTerms`, with `matchExpressions` and
//! `matchFields`), and its tolerations against the Node's `NoSchedule` and `NoExecute` taints
//! (a cordoned Node counts as tainted `node.kubernetes.io/unschedulable:NoSchedule`, as the
//! scheduler's NodeUnschedulable filter takes it). Relay address discovery (`render::relay`)
//! counts only these Nodes: a tainted control-plane Node without an external address runs no
//! dataplane pod, so it is no reason to say discovery failed.
//!
//! The tolerations are the Dataplane's plus those the cluster adds to its pods: the
//! DefaultTolerationSeconds admission plugin's (`not-ready` and `unreachable`, `NoExecute`)
//! to every pod, and the DaemonSet controller's to a DaemonSet's pods.

use super::{Index, KeyView, effective_config};
use crate::resources::{DEFAULT_DATAPLANE, Dataplane, DataplaneResourceType, Gateway};
use k8s_openapi::api::core::v1::{Node, NodeSelectorRequirement, NodeSelectorTerm, Taint, Toleration};
use std::fmt;

/// Taint keys of the node lifecycle controller (`node.kubernetes.io/...`).
const NOT_READY: &str = "node.kubernetes.io/not-ready";
const UNREACHABLE: &str = "node.kubernetes.io/unreachable";
const UNSCHEDULABLE: &str = "node.kubernetes.io/unschedulable";
/// What the DaemonSet controller tolerates for its pods with `NoSchedule`, besides
/// [`UNSCHEDULABLE`]; `network-unavailable` only for host-network pods.
const DAEMON_SET_NO_SCHEDULE: [&str; 4] = [
    "node.kubernetes.io/disk-pressure",
    "node.kubernetes.io/memory-pressure",
    "node.kubernetes.io/pid-pressure",
    UNSCHEDULABLE,
];
const NETWORK_UNAVAILABLE: &str = "node.kubernetes.io/network-unavailable";

/// Why a Dataplane's pods cannot be scheduled on a Node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unschedulable {
    /// A `NoSchedule` or `NoExecute` taint no toleration tolerates, as `key[=value]:effect`.
    Taint(String),
    /// The required node affinity selects it by none of its terms.
    NodeAffinity,
}

impl fmt::Display for Unschedulable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unschedulable::Taint(t) => write!(f, "taint {t} not tolerated"),
            Unschedulable::NodeAffinity => f.write_str("not selected by the Dataplane's required node affinity"),
        }
    }
}

/// Whether the pods of `dataplane` (`None`: no Dataplane, so no constraint) can be scheduled
/// on `node`; else the first reason they cannot (taints first, as the scheduler reports them).
pub fn schedulable(node: &Node, dataplane: Option<&Dataplane>) -> Result<(), Unschedulable> {
    let Some(dp) = dataplane else { return Ok(()) };
    let spec = node.spec.as_ref();
    let cordon = spec.and_then(|s| s.unschedulable).unwrap_or(false).then(|| Taint {
        key: UNSCHEDULABLE.into(),
        effect: "NoSchedule".into(),
        ..Default::default()
    });
    let taints = spec.and_then(|s| s.taints.as_deref()).unwrap_or_default();
    let tolerations = tolerations(dp);
    let mut blocking = cordon.iter().chain(taints).filter(|t| matches!(t.effect.as_str(), "NoSchedule" | "NoExecute"));
    if let Some(t) = blocking.find(|t| !tolerations.iter().any(|tol| tolerates(tol, t))) {
        let value = t.value.as_deref().filter(|v| !v.is_empty()).map(|v| format!("={v}")).unwrap_or_default();
        return Err(Unschedulable::Taint(format!("{}{value}:{}", t.key, t.effect)));
    }
    let required = dp.spec.affinity.as_ref().and_then(|a| a.node_affinity.as_ref());
    match required.and_then(|a| a.required_during_scheduling_ignored_during_execution.as_ref()) {
        Some(selector) if !selector.node_selector_terms.iter().any(|term| term_selects(term, node)) => {
            Err(Unschedulable::NodeAffinity)
        }
        _ => Ok(()),
    }
}

/// The Dataplane's tolerations and those the cluster adds to its pods.
fn tolerations(dp: &Dataplane) -> Vec<Toleration> {
    let exists = |key: &str, effect: &str| Toleration {
        key: Some(key.into()),
        operator: Some("Exists".into()),
        effect: Some(effect.into()),
        ..Default::default()
    };
    let mut all = dp.spec.tolerations.clone();
    all.extend([NOT_READY, UNREACHABLE].map(|k| exists(k, "NoExecute")));
    if dp.spec.dataplane_resource == Some(DataplaneResourceType::DaemonSet) {
        all.extend(DAEMON_SET_NO_SCHEDULE.map(|k| exists(k, "NoSchedule")));
        if dp.spec.host_network {
            all.push(exists(NETWORK_UNAVAILABLE, "NoSchedule"));
        }
    }
    all
}

/// Whether `toleration` tolerates `taint` (core/v1 `Toleration.ToleratesTaint`): an empty
/// effect matches every effect, an empty key (with `Exists`) every key; `Equal` (the default
/// operator) compares values.
fn tolerates(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or_default();
    let key = toleration.key.as_deref().unwrap_or_default();
    if (!effect.is_empty() && effect != taint.effect) || (!key.is_empty() && key != taint.key) {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or_default() {
        "Exists" => true,
        "" | "Equal" => toleration.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        _ => false,
    }
}

/// Whether a node selector term selects `node`: every expression on its labels and every
/// field requirement hold, and there is at least one of them (an empty term selects nothing).
fn term_selects(term: &NodeSelectorTerm, node: &Node) -> bool {
    let expressions = term.match_expressions.as_deref().unwrap_or_default();
    let fields = term.match_fields.as_deref().unwrap_or_default();
    if expressions.is_empty() && fields.is_empty() {
        return false;
    }
    let labels = node.metadata.labels.as_ref();
    let name = node.metadata.name.as_deref();
    expressions.iter().all(|r| requirement_holds(r, labels.and_then(|l| l.get(&r.key)).map(String::as_str)))
        // The only field a node selector can name is `metadata.name`, with `In` or `NotIn`.
        && fields.iter().all(|r| {
            r.key == "metadata.name" && matches!(r.operator.as_str(), "In" | "NotIn") && requirement_holds(r, name)
        })
}

/// Whether a requirement holds for a label (or field) whose value is `value` (`None`: absent).
/// `Gt` and `Lt` take one integer and compare the value as an integer.
fn requirement_holds(r: &NodeSelectorRequirement, value: Option<&str>) -> bool {
    let values = r.values.as_deref().unwrap_or_default();
    let in_values = || value.is_some_and(|v| values.iter().any(|x| x == v));
    let compare = |holds: fn(i64, i64) -> bool| match (value.map(str::parse::<i64>), values) {
        (Some(Ok(v)), [bound]) => bound.parse::<i64>().is_ok_and(|b| holds(v, b)),
        _ => false,
    };
    match r.operator.as_str() {
        "In" => in_values(),
        "NotIn" => !in_values(),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => compare(|v, b| v > b),
        "Lt" => compare(|v, b| v < b),
        _ => false,
    }
}

impl Index {
    /// The Dataplane whose pods serve a Gateway: its GatewayConfig's (the one its
    /// `spec.infrastructure.parametersRef` names, else its class's; `None` when any link is
    /// missing, as in legacy mode, where no Dataplane constrains the Nodes).
    pub fn gateway_dataplane(&self, gw: &Gateway) -> Option<&Dataplane> {
        let class = self.gateway_classes().lookup(KeyView::cluster(&gw.spec.gateway_class_name))?;
        let config = self.gateway_configs().lookup(effective_config(gw, class)?)?;
        let name = config.spec.dataplane.as_deref().unwrap_or(DEFAULT_DATAPLANE);
        self.dataplanes().lookup(KeyView::cluster(name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(value: serde_json::Value) -> Node {
        serde_json::from_value(value).unwrap()
    }

    fn dataplane(spec: serde_json::Value) -> Dataplane {
        serde_json::from_value(json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "Dataplane",
            "metadata": {"name": "default"}, "spec": spec}))
        .unwrap()
    }

    fn control_plane() -> Node {
        node(json!({"metadata": {"name": "cp", "labels": {"node-role.kubernetes.io/control-plane": ""}},
            "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}}))
    }

    fn worker(labels: serde_json::Value) -> Node {
        node(json!({"metadata": {"name": "w", "labels": labels}, "spec": {
            "taints": [{"key": "soft", "effect": "PreferNoSchedule"}]}}))
    }

    #[test]
    fn untolerated_no_schedule_and_no_execute_taints_exclude_a_node() {
        let plain = dataplane(json!({"image": "x"}));
        let refused = schedulable(&control_plane(), Some(&plain)).unwrap_err();
        assert_eq!(refused.to_string(), "taint node-role.kubernetes.io/control-plane:NoSchedule not tolerated");
        assert_eq!(schedulable(&worker(json!({})), Some(&plain)), Ok(()), "PreferNoSchedule does not exclude");
        assert_eq!(schedulable(&control_plane(), None), Ok(()), "no Dataplane, no constraint");
        let tolerant = |tol: serde_json::Value| dataplane(json!({"image": "x", "tolerations": [tol]}));
        let cp = control_plane();
        let ok = |tol| schedulable(&cp, Some(&tolerant(tol))).is_ok();
        assert!(ok(json!({"key": "node-role.kubernetes.io/control-plane", "operator": "Exists"})));
        assert!(ok(json!({"operator": "Exists"})), "an empty key and Exists tolerate everything");
        assert!(ok(json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"})), "Equal to ''");
        assert!(!ok(json!({"key": "node-role.kubernetes.io/control-plane", "value": "x"})), "another value");
        assert!(!ok(json!({"key": "node-role.kubernetes.io/control-plane", "effect": "NoExecute"})), "another effect");
        let evicting = node(json!({"metadata": {"name": "e"},
            "spec": {"taints": [{"key": "k", "value": "v", "effect": "NoExecute"}]}}));
        assert_eq!(schedulable(&evicting, Some(&plain)), Err(Unschedulable::Taint("k=v:NoExecute".into())));
    }

    #[test]
    fn a_cordoned_node_runs_only_daemon_set_pods() {
        let cordoned = node(json!({"metadata": {"name": "c"}, "spec": {"unschedulable": true}}));
        let deployment = dataplane(json!({"image": "x"}));
        let refused = schedulable(&cordoned, Some(&deployment)).unwrap_err();
        assert_eq!(refused, Unschedulable::Taint("node.kubernetes.io/unschedulable:NoSchedule".into()));
        let daemon_set = dataplane(json!({"image": "x", "dataplaneResource": "DaemonSet"}));
        assert_eq!(schedulable(&cordoned, Some(&daemon_set)), Ok(()));
        // Every pod tolerates a node that is not ready (for a while, but it is scheduled there).
        let not_ready = node(json!({"metadata": {"name": "n"},
            "spec": {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]}}));
        assert_eq!(schedulable(&not_ready, Some(&deployment)), Ok(()));
        let no_network = node(json!({"metadata": {"name": "n"},
            "spec": {"taints": [{"key": "node.kubernetes.io/network-unavailable", "effect": "NoSchedule"}]}}));
        assert!(schedulable(&no_network, Some(&daemon_set)).is_err());
        let host = dataplane(json!({"image": "x", "dataplaneResource": "DaemonSet", "hostNetwork": true}));
        assert_eq!(schedulable(&no_network, Some(&host)), Ok(()));
    }

    #[test]
    fn required_node_affinity_selects_by_any_term_of_all_requirements() {
        let affine = |terms: serde_json::Value| {
            dataplane(json!({"image": "x", "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}))
        };
        let w = worker(json!({"role": "media", "cores": "8"}));
        let selects = |terms| schedulable(&w, Some(&affine(terms))).is_ok();
        let expr = |key: &str, op: &str, values: &[&str]| json!({"key": key, "operator": op, "values": values});
        assert!(selects(json!([{"matchExpressions": [expr("role", "In", &["media", "x"])]}])));
        assert!(!selects(json!([{"matchExpressions": [expr("role", "In", &["other"])]}])));
        assert!(selects(
            json!([{"matchExpressions": [expr("role", "NotIn", &["other"]), expr("zone", "NotIn", &["a"])]}])
        ));
        assert!(selects(
            json!([{"matchExpressions": [expr("role", "Exists", &[]), expr("gpu", "DoesNotExist", &[])]}])
        ));
        assert!(!selects(json!([{"matchExpressions": [expr("role", "Exists", &[]), expr("gpu", "Exists", &[])]}])));
        assert!(selects(json!([{"matchExpressions": [expr("cores", "Gt", &["4"]), expr("cores", "Lt", &["16"])]}])));
        assert!(!selects(json!([{"matchExpressions": [expr("cores", "Gt", &["8"])]}])));
        assert!(!selects(json!([{"matchExpressions": [expr("role", "Gt", &["1"])]}])), "not an integer");
        assert!(selects(json!([{"matchFields": [expr("metadata.name", "In", &["w"])]}])));
        assert!(!selects(json!([{"matchFields": [expr("metadata.name", "NotIn", &["w"])]}])));
        assert!(!selects(json!([{"matchFields": [expr("metadata.uid", "In", &["w"])]}])), "not a node field");
        // Terms are ORed; an empty term and an empty list select nothing.
        assert!(selects(
            json!([{"matchExpressions": [expr("role", "In", &["other"])]}, {"matchFields": [expr("metadata.name", "In", &["w"])]}])
        ));
        assert!(!selects(json!([{}])));
        assert!(!selects(json!([])));
        let refused = schedulable(&w, Some(&affine(json!([{}])))).unwrap_err();
        assert_eq!(refused.to_string(), "not selected by the Dataplane's required node affinity");
    }
}
