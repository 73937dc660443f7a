use super::*;
use crate::index::Resource;
use crate::manifest::{Admission, load};
use std::path::Path;

const BASE: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: class}
spec:
  controllerName: stunner.l7mp.io/gateway-operator
  parametersRef: {group: stunner.l7mp.io, kind: GatewayConfig, name: config, namespace: ns}
---
apiVersion: stunner.l7mp.io/v1
kind: GatewayConfig
metadata: {name: config, namespace: ns}
spec: {userName: u, password: p}
---
apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata: {name: default}
spec: {}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw, namespace: ns}
spec:
  gatewayClassName: class
  listeners: [{name: udp, protocol: UDP, port: 1}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-2, namespace: ns}
spec:
  gatewayClassName: class
  listeners: [{name: udp, protocol: UDP, port: 1}]
---
apiVersion: v1
kind: Service
metadata: {name: svc, namespace: ns}
spec: {clusterIP: 10.0.0.1}
---
apiVersion: stunner.l7mp.io/v1
kind: StaticService
metadata: {name: static, namespace: ns}
spec: {prefixes: [10.1.1.1]}
"#;

fn index_of(text: &str) -> Index {
    let mut index = Index::new();
    // Valid for an API server; standalone mode's loader also applies the operator's own rules
    // (`validate::rules`), which these tests check at render: only those may refuse them.
    let validated = load(Path::new("test.yaml"), text, Admission::Validated).unwrap();
    let operator_rules = ["spec.authType", "spec.userName", "spec.password", "spec.sharedSecret", "spec.rules"];
    for skipped in &validated.skipped {
        let crate::manifest::SkipReason::Rejected(invalid) = &skipped.reason else { panic!("{skipped}") };
        assert!(
            invalid.errors.iter().all(|e| operator_rules.contains(&e.field.as_str())),
            "test objects are valid: {skipped}"
        );
    }
    let manifest = load(Path::new("test.yaml"), text, Admission::Unchecked).unwrap();
    for r in manifest.into_resources() {
        index.apply(r);
    }
    index
}

fn route(backends: &str) -> Resource {
    let text = format!(
        "apiVersion: stunner.l7mp.io/v1\nkind: UDPRoute\nmetadata: {{name: r, namespace: ns}}\n\
         spec: {{parentRefs: [{{name: gw}}], rules: [{{backendRefs: {backends}}}]}}\n"
    );
    load(Path::new("route.yaml"), &text, Admission::Validated).unwrap().objects.remove(0).1
}

fn now() -> Time {
    Time("2024-01-01T00:00:00Z".parse().unwrap())
}

fn config(out: &RenderOutput, gw: &str) -> StunnerConfig {
    match &out.gateways[&ObjectKey::new("ns", gw)].config {
        Owned::Apply(c) => c.clone(),
        other => panic!("no config: {other:?}"),
    }
}

#[test]
fn incremental_render_matches_full_render() {
    let mut index = index_of(BASE);
    let dirty = index.apply(route("[{name: svc}]"));
    let settings = RenderSettings::default();
    let part = render(&index, &dirty, &settings, &now());
    let full = render_all(&index, &settings, &now());
    assert_eq!(part.gateways.keys().map(ToString::to_string).collect::<Vec<_>>(), ["ns/gw"]);
    for (k, v) in &part.gateways {
        assert_eq!(&full.gateways[k], v);
    }
    for (k, v) in &part.routes {
        assert_eq!(&full.routes[k], v);
    }
}

fn deployment_replicas(dataplane_replicas: &str) -> Option<i32> {
    let text = BASE.replace(
        "metadata: {name: default}\nspec: {}",
        &format!("metadata: {{name: default}}\nspec: {{{dataplane_replicas}}}"),
    );
    let out = render_all(&index_of(&text), &RenderSettings::default(), &now());
    match &out.gateways[&ObjectKey::new("ns", "gw")].deployment {
        Owned::Apply(d) => d.spec.as_ref().unwrap().replicas,
        other => panic!("no deployment: {other:?}"),
    }
}

/// Replicas are requested only above one, so external scaling of a one-replica dataplane survives.
#[test]
fn deployment_replicas_are_requested_only_above_one() {
    assert_eq!(deployment_replicas(""), None);
    assert_eq!(deployment_replicas("replicas: 1"), None);
    assert_eq!(deployment_replicas("replicas: 3"), Some(3));
}

/// A route status read back from the API server (parentRef group and kind defaulted) keeps its
/// condition times, so an unchanged status is not rewritten after a restart.
#[test]
fn route_condition_times_survive_api_server_defaulting() {
    let mut index = index_of(BASE);
    let settings = RenderSettings::default();
    index.apply(route("[{name: svc}]"));
    let first = render_all(&index, &settings, &now());
    let key = ObjRef::new(Kind::UdpRoute, ObjectKey::new("ns", "r"));
    let mut stored = first.routes[&key].clone();
    for parent in &mut stored.parents {
        parent.parent_ref.group = Some("gateway.networking.k8s.io".into());
        parent.parent_ref.kind = Some("Gateway".into());
    }
    let Some(Resource::UdpRoute(mut r)) = index.get(&key) else { panic!("route stored") };
    r.status = Some(stored);
    index.apply(Resource::UdpRoute(r));
    let later = Time("2025-06-01T00:00:00Z".parse().unwrap());
    let second = render_all(&index, &settings, &later);
    assert_eq!(second.routes[&key].parents[0].conditions, first.routes[&key].parents[0].conditions);
}

/// Quirk 3, fixed: a Gateway whose class is gone still has its config withdrawn.
#[test]
fn configs_of_gateways_without_a_valid_class_are_deleted() {
    let mut index = index_of(BASE);
    let mut dirty = index.delete(Kind::GatewayClass, "", "class");
    dirty.merge(index.delete(Kind::Gateway, "ns", "gw-2"));
    let out = render(&index, &dirty, &RenderSettings::default(), &now());
    assert_eq!(out.gateways[&ObjectKey::new("ns", "gw")].config, Owned::Delete);
    assert_eq!(out.gateways[&ObjectKey::new("ns", "gw-2")].config, Owned::Delete);
    assert!(out.classes.is_empty());
}

/// Quirk 6, fixed: a missing backend only drops itself.
#[test]
fn a_missing_backend_does_not_drop_later_ones() {
    let mut index = index_of(BASE);
    index.apply(route(
        "[{name: gone, group: stunner.l7mp.io, kind: StaticService}, \
          {name: static, group: stunner.l7mp.io, kind: StaticService}, {name: gone-too}]",
    ));
    let out = render_all(&index, &RenderSettings::default(), &now());
    assert_eq!(config(&out, "gw").clusters[0].endpoints, ["10.1.1.1"]);
    let status = &out.routes.values().next().unwrap().parents[0].conditions[1];
    assert_eq!((status.status.as_str(), status.reason.as_str()), ("False", "BackendNotFound"));
}

/// Quirk 6, fixed: the cluster type is that of the accepted backends.
#[test]
fn a_rejected_backend_does_not_change_the_cluster_type() {
    let mut index = index_of(BASE);
    index.apply(route("[{name: static, group: stunner.l7mp.io, kind: StaticService}, {name: svc}]"));
    let settings = RenderSettings { endpoint_discovery: false, ..Default::default() };
    let out = render_all(&index, &settings, &now());
    assert_eq!(config(&out, "gw").clusters[0].cluster_type, "STATIC");
}

/// Quirk 6, kept: a lone `endPort` counts from port 1.
#[test]
fn a_lone_end_port_counts_from_one() {
    let mut index = index_of(BASE);
    index.apply(route("[{name: static, group: stunner.l7mp.io, kind: StaticService, endPort: 10}]"));
    let out = render_all(&index, &RenderSettings::default(), &now());
    assert_eq!(config(&out, "gw").clusters[0].endpoints, ["10.1.1.1:<1-10>"]);
}

/// Quirk 7, fixed: the first node is the first by name, whatever the insertion order.
#[test]
fn the_first_node_is_the_first_by_name() {
    let node = |n: &str, ip: &str| {
        format!(
            "---\napiVersion: v1\nkind: Node\nmetadata: {{name: {n}}}\nstatus: {{addresses: [{{type: ExternalIP, address: {ip}}}]}}\n"
        )
    };
    let a = index_of(&format!("{}{}", node("b", "2.2.2.2"), node("a", "1.1.1.1")));
    let b = index_of(&format!("{}{}", node("a", "1.1.1.1"), node("b", "2.2.2.2")));
    assert_eq!(a.first_node_addresses(), ["1.1.1.1"]);
    assert_eq!(b.first_node_addresses(), ["1.1.1.1"]);
}

/// Quirk 4, fixed: in legacy mode a render error leaves the class not accepted.
#[test]
fn legacy_render_errors_reject_the_class() {
    let index = index_of(&BASE.replace("spec: {userName: u, password: p}", "spec: {userName: u}"));
    let settings = RenderSettings { dataplane_mode: DataplaneMode::Legacy, ..Default::default() };
    let out = render_all(&index, &settings, &now());
    let cond = &out.classes["class"].conditions.as_ref().unwrap()[0];
    assert_eq!((cond.status.as_str(), cond.reason.as_str()), ("False", "InvalidParameters"));
    let Owned::Apply(cm) = &out.config_maps[&ObjectKey::new("ns", "stunnerd-config")] else { panic!() };
    assert_eq!(cm.data.as_ref().unwrap()["stunnerd.conf"], "");
}

/// Quirk 5, fixed: the Service is desired state only, so a stale operator annotation is not in it.
#[test]
fn stale_operator_annotations_are_not_requested() {
    let svc = "---\napiVersion: v1\nkind: Service\nmetadata:\n  name: gw\n  namespace: ns\n  annotations:\n    \
               stunner.l7mp.io/service-type: NodePort\n    other: kept-by-others\nspec: {type: NodePort}\n";
    let index = index_of(&format!("{BASE}{svc}"));
    let out = render_all(&index, &RenderSettings::default(), &now());
    let Owned::Apply(s) = &out.gateways[&ObjectKey::new("ns", "gw")].service else { panic!() };
    let annotations = s.metadata.annotations.as_ref().unwrap();
    let keys = annotations.keys().collect::<Vec<_>>();
    assert_eq!(keys, ["stunner.l7mp.io/controller-name", "stunner.l7mp.io/related-gateway-name"]);
    assert_eq!(s.spec.as_ref().unwrap().type_.as_deref(), Some("LoadBalancer"));
}

#[test]
fn rendering_twice_gives_the_same_statuses() {
    let mut index = index_of(BASE);
    index.apply(route("[{name: svc}]"));
    let settings = RenderSettings::default();
    let first = render_all(&index, &settings, &now());
    // Write the statuses back, as the operator would, and render later: nothing changes.
    let gw = index.gateways().get(&ObjectKey::new("ns", "gw")).expect("stored").clone();
    let status = first.gateways[&ObjectKey::new("ns", "gw")].status.clone();
    index.apply(Resource::Gateway(Box::new(Gateway { status, ..gw })));
    let later = Time("2025-01-01T00:00:00Z".parse().unwrap());
    let key = ObjectKey::new("ns", "gw");
    assert!(render_all(&index, &settings, &later).gateways[&key] == first.gateways[&key]);
}

/// `--enable-finalizer` (spec §4.5): classes and Gateways invalidated with upstream's text,
/// dataplanes removed, routes still accepted; legacy mode has nothing to finalize.
#[test]
fn finalize_invalidates_classes_and_gateways_and_keeps_routes_accepted() {
    let mut index = index_of(BASE);
    index.apply(route("[{name: static, group: stunner.l7mp.io, kind: StaticService}]"));
    let out = finalize(&index, &RenderSettings::default(), &now());
    let class = &out.classes["class"].conditions.as_ref().unwrap()[0];
    assert_eq!(class.status, "False");
    assert!(class.message.ends_with(": Operator unavailable after graceful shutdown"), "{}", class.message);
    for gw in ["gw", "gw-2"] {
        let output = &out.gateways[&ObjectKey::new("ns", gw)];
        assert_eq!((&output.service, &output.deployment), (&Owned::Delete, &Owned::Delete));
        let accepted = &output.status.as_ref().unwrap().conditions.as_ref().unwrap()[0];
        assert_eq!((accepted.type_.as_str(), accepted.status.as_str()), ("Accepted", "False"));
        assert!(accepted.message.contains("Operator unavailable after graceful shutdown"), "{}", accepted.message);
    }
    let route = &out.routes.values().next().unwrap().parents[0].conditions[0];
    assert_eq!((route.type_.as_str(), route.status.as_str()), ("Accepted", "True"));

    let legacy = RenderSettings { dataplane_mode: DataplaneMode::Legacy, ..Default::default() };
    assert_eq!(finalize(&index, &legacy, &now()), RenderOutput::default());
}

/// The dataplane Deployment of `gw` and its `STUNNER_CONFIG_ORIGIN`.
fn deployment_of(out: &RenderOutput, gw: &str) -> (Deployment, String) {
    let Owned::Apply(d) = &out.gateways[&ObjectKey::new("ns", gw)].deployment else { panic!("no Deployment") };
    let env = d.spec.as_ref().unwrap().template.spec.as_ref().unwrap().containers[0].env.clone().unwrap();
    let origin = env.into_iter().find(|e| e.name == "STUNNER_CONFIG_ORIGIN").unwrap().value.unwrap();
    (d.clone(), origin)
}

/// Renders `gw` after a live Deployment like ours but pointing at `origin` (the Go operator's
/// pod IP), with `annotation` and `unavailable` pods, was seen.
fn render_over_live(origin: &str, annotation: Option<&str>, unavailable: i32) -> (Deployment, String) {
    let mut index = index_of(BASE);
    let (mut live, _) = deployment_of(&render_all(&index, &RenderSettings::default(), &now()), "gw");
    let env = live.spec.as_mut().unwrap().template.spec.as_mut().unwrap().containers[0].env.as_mut().unwrap();
    env.iter_mut().find(|e| e.name == "STUNNER_CONFIG_ORIGIN").unwrap().value = Some(origin.into());
    if let Some(a) = annotation {
        live.metadata.annotations.get_or_insert_default().insert(crate::keys::ADOPTED_CONFIG.into(), a.into());
    }
    live.status = Some(k8s_openapi::api::apps::v1::DeploymentStatus {
        unavailable_replicas: Some(unavailable),
        ..Default::default()
    });
    index.apply(Resource::from(live));
    deployment_of(&render_all(&index, &RenderSettings::default(), &now()), "gw")
}

fn adopted(d: &Deployment) -> Option<String> {
    d.metadata.annotations.as_ref()?.get(crate::keys::ADOPTED_CONFIG).cloned()
}

#[test]
fn a_dataplane_started_by_another_operator_keeps_its_origin_while_its_config_holds() {
    let index = index_of(BASE);
    let out = render_all(&index, &RenderSettings::default(), &now());
    let (ours, our_origin) = deployment_of(&out, "gw");
    let digest = format!("{:016x}", config(&out, "gw").digest());
    assert_eq!(adopted(&ours), None, "a new Deployment is simply ours");

    // Taken over: the pods keep the Go operator's address; the config's digest is recorded.
    let (d, origin) = render_over_live("http://10.0.0.9:13478", None, 0);
    assert_eq!((origin.as_str(), adopted(&d)), ("http://10.0.0.9:13478", Some(digest.clone())));
    let (d, origin) = render_over_live("http://10.0.0.9:13478", Some(&digest), 0);
    assert_eq!((origin.as_str(), adopted(&d)), ("http://10.0.0.9:13478", Some(digest)));

    // The config changed since: the pods must get it from us.
    let (d, origin) = render_over_live("http://10.0.0.9:13478", Some("0123456789abcdef"), 0);
    assert_eq!((origin, adopted(&d)), (our_origin.clone(), None));
    // A pod is unavailable (perhaps restarted against the old address): no more waiting.
    let (d, origin) = render_over_live("http://10.0.0.9:13478", None, 1);
    assert_eq!((origin, adopted(&d)), (our_origin.clone(), None));
    // Already ours: nothing to adopt.
    let (d, origin) = render_over_live(&our_origin, None, 0);
    assert_eq!((origin, adopted(&d)), (our_origin, None));
}

/// A deleted Gateway's Service and Deployment are deleted by the operator, not left to garbage
/// collection; a same-named Service without our label is someone else's and stays.
#[test]
fn a_deleted_gateways_own_objects_are_deleted_and_no_others() {
    let mut index = index_of(BASE);
    let out = render_all(&index, &RenderSettings::default(), &now());
    let gw = &out.gateways[&ObjectKey::new("ns", "gw")];
    let (Owned::Apply(service), Owned::Apply(deployment)) = (&gw.service, &gw.deployment) else { panic!("rendered") };
    index.apply(Resource::Service(Box::new(service.clone())));
    index.apply(Resource::from(deployment.clone()));
    let mut foreign = service.clone();
    foreign.metadata.name = Some("gw-2".into());
    foreign.metadata.labels = None;
    index.apply(Resource::Service(Box::new(foreign)));

    let mut dirty = index.delete(Kind::Gateway, "ns", "gw");
    dirty.merge(index.delete(Kind::Gateway, "ns", "gw-2"));
    let out = render(&index, &dirty, &RenderSettings::default(), &now());
    let gone = &out.gateways[&ObjectKey::new("ns", "gw")];
    assert_eq!((&gone.config, &gone.service, &gone.deployment), (&Owned::Delete, &Owned::Delete, &Owned::Delete));
    let other = &out.gateways[&ObjectKey::new("ns", "gw-2")];
    assert_eq!((&other.service, &other.deployment), (&Owned::Keep, &Owned::Keep));
}

/// `BASE` with the Dataplane's spec replaced.
fn with_dataplane(spec: &str) -> Index {
    index_of(
        &BASE.replace("metadata: {name: default}\nspec: {}", &format!("metadata: {{name: default}}\nspec: {spec}")),
    )
}

/// The Gateway `gw`'s dataplane decisions.
fn dataplane_of(index: &Index) -> (Owned<Deployment>, Owned<DaemonSet>) {
    let out = render_all(index, &RenderSettings::default(), &now());
    let gw = &out.gateways[&ObjectKey::new("ns", "gw")];
    (gw.deployment.clone(), gw.daemon_set.clone())
}

/// Shows `object` to the index as the API server would after `available` pods came up.
fn held_deployment(index: &mut Index, mut d: Deployment, available: i32) -> Dirty {
    d.status = Some(k8s_openapi::api::apps::v1::DeploymentStatus {
        available_replicas: Some(available),
        ..Default::default()
    });
    index.apply(Resource::from(d))
}

fn held_daemon_set(index: &mut Index, mut d: DaemonSet, available: i32) -> Dirty {
    d.status =
        Some(k8s_openapi::api::apps::v1::DaemonSetStatus { number_available: Some(available), ..Default::default() });
    index.apply(Resource::from(d))
}

/// The object of the other kind is asked gone with every upsert (the writer deletes only one
/// that is there), except while it is there and the new one has no available pod yet; its
/// appearance and the new one's availability re-render the Gateway of its name.
#[test]
fn switching_the_dataplane_kind_deletes_the_old_object_once_the_new_one_serves() {
    let mut index = with_dataplane("{dataplaneResource: DaemonSet}");
    let (deployment, daemon_set) = dataplane_of(&index);
    let Owned::Apply(ds) = daemon_set else { panic!("a DaemonSet: {daemon_set:?}") };
    assert_eq!(deployment, Owned::Delete, "none there: asked gone all the same");
    let d = {
        let mut other = with_dataplane("{}");
        let (Owned::Apply(d), _) = dataplane_of(&other) else { panic!("a Deployment") };
        held_deployment(&mut other, d.clone(), 1);
        d
    };
    let dirty = held_deployment(&mut index, d.clone(), 1);
    assert_eq!(dirty.gateways.iter().map(ToString::to_string).collect::<Vec<_>>(), ["ns/gw"]);
    assert_eq!(dataplane_of(&index).0, Owned::Keep, "the Deployment serves until the DaemonSet does");
    held_daemon_set(&mut index, ds.clone(), 0);
    assert_eq!(dataplane_of(&index).0, Owned::Keep, "no DaemonSet pod available yet");
    let dirty = held_daemon_set(&mut index, ds.clone(), 1);
    assert_eq!(dirty.gateways.iter().map(ToString::to_string).collect::<Vec<_>>(), ["ns/gw"]);
    assert_eq!(dataplane_of(&index).0, Owned::Delete, "the DaemonSet serves: the Deployment goes");

    // And back: the Deployment (deleted meanwhile) is applied, the DaemonSet kept until the
    // Deployment serves.
    index.delete(Kind::Deployment, "ns", "gw");
    index.apply(
        with_dataplane("{}").dataplanes().get(&ObjectKey::cluster("default")).cloned().map(Resource::from).unwrap(),
    );
    let (deployment, daemon_set) = dataplane_of(&index);
    assert!(matches!(deployment, Owned::Apply(_)));
    assert_eq!(daemon_set, Owned::Keep);
    held_deployment(&mut index, d, 2);
    assert_eq!(dataplane_of(&index).1, Owned::Delete);
}

/// A host-network dataplane's old pods hold its ports on their nodes: the old object goes at
/// once. Both kinds share pod template, labels and selector; the DaemonSet has no replicas.
#[test]
fn host_network_dataplanes_switch_break_before_make_and_resolve_cluster_names() {
    let spec = "{dataplaneResource: DaemonSet, hostNetwork: true, replicas: 3}";
    let mut index = with_dataplane(spec);
    let (Owned::Apply(ds), _) = (dataplane_of(&index).1, ()) else { panic!("a DaemonSet") };
    let (Owned::Apply(d), _) = dataplane_of(&with_dataplane("{hostNetwork: true, replicas: 3}")) else {
        panic!("a Deployment")
    };
    held_deployment(&mut index, d.clone(), 1);
    assert_eq!(dataplane_of(&index).0, Owned::Delete, "no DaemonSet pod yet, and gone all the same");
    let (ds_spec, d_spec) = (ds.spec.unwrap(), d.spec.unwrap());
    assert_eq!((&ds.metadata, &ds_spec.selector, &ds_spec.template), (&d.metadata, &d_spec.selector, &d_spec.template));
    assert_eq!(d_spec.replicas, Some(3));
    let pod = d_spec.template.spec.unwrap();
    assert_eq!((pod.host_network, pod.dns_policy.as_deref()), (Some(true), Some("ClusterFirstWithHostNet")));
}

/// Standalone mode renders a Gateway's Deployment only where the index holds one, to merge
/// into; the rest of the Gateway's output is the same as in a cluster.
#[test]
fn held_deployments_only_renders_the_deployments_the_index_holds() {
    let mut index = index_of(BASE);
    let standalone = RenderSettings { held_deployments_only: true, ..Default::default() };
    let (gw, gw_2) = (ObjectKey::new("ns", "gw"), ObjectKey::new("ns", "gw-2"));
    let in_cluster = render_all(&index, &RenderSettings::default(), &now());
    let (deployment, _) = deployment_of(&in_cluster, "gw");
    let alone = render_all(&index, &standalone, &now());
    for key in [&gw, &gw_2] {
        let (cluster, standalone) = (&in_cluster.gateways[key], &alone.gateways[key]);
        assert_eq!((&standalone.deployment, &standalone.daemon_set), (&Owned::Keep, &Owned::Keep), "none held");
        let same = |o: &GatewayOutput| (o.config.clone(), o.status.clone(), o.service.clone());
        assert_eq!(same(standalone), same(cluster), "the rest as in a cluster");
    }

    let dirty = index.apply(Resource::from(deployment.clone()));
    let out = render(&index, &dirty, &standalone, &now());
    assert_eq!(out.gateways[&gw].deployment, Owned::Apply(deployment), "held: rendered, as in a cluster");
    assert!(!out.gateways.contains_key(&gw_2), "only the Gateway of the held Deployment is dirty");
}

/// Every STUNner operator labels its objects the same way: a second operator (another
/// `--controller-name`) must not delete the dataplane of a Gateway that is not its own, and
/// the operator that made them still does once the Gateway's class is no longer its.
#[test]
fn only_the_operator_that_made_a_dataplane_deletes_it() {
    let mut index = index_of(BASE);
    let ours = RenderSettings::default();
    let out = render_all(&index, &ours, &now());
    let gw = &out.gateways[&ObjectKey::new("ns", "gw")];
    let (Owned::Apply(service), Owned::Apply(deployment)) = (&gw.service, &gw.deployment) else { panic!("rendered") };
    index.apply(Resource::Service(Box::new(service.clone())));
    index.apply(Resource::from(deployment.clone()));

    let other = RenderSettings { controller_name: "example.com/other-operator".into(), ..RenderSettings::default() };
    let seen_by_other = &render_all(&index, &other, &now()).gateways[&ObjectKey::new("ns", "gw")];
    assert_eq!((&seen_by_other.service, &seen_by_other.deployment), (&Owned::Keep, &Owned::Keep));

    // The class moves to the other controller: the objects we made are ours to remove.
    let moved =
        BASE.replace("controllerName: stunner.l7mp.io/gateway-operator", "controllerName: example.com/other-operator");
    for r in load(Path::new("moved.yaml"), &moved, Admission::Validated).unwrap().into_resources().take(1) {
        index.apply(r);
    }
    let after_move = &render_all(&index, &ours, &now()).gateways[&ObjectKey::new("ns", "gw")];
    assert_eq!((&after_move.service, &after_move.deployment), (&Owned::Delete, &Owned::Delete));
}

/// An invalid GatewayConfig withdraws every Gateway of its class, as upstream, and says which
/// field is at fault (`plaintextt` passes the CRD's pattern, so an API server lets it in).
#[test]
fn an_invalid_gateway_config_withdraws_every_gateway_of_its_class_naming_the_field() {
    let config = |spec: &str| BASE.replace("spec: {userName: u, password: p}", spec);
    let invalid = |field: &'static str, message: &str| InvalidConfig {
        config: ObjectKey::new("ns", "config"),
        field,
        message: message.into(),
    };
    let gateways = [ObjectKey::new("ns", "gw"), ObjectKey::new("ns", "gw-2")];
    for (spec, field, message) in [
        ("spec: {authType: plaintextt, userName: u, password: p}", "spec.authType", "invalid authentication type"),
        (
            "spec: {userName: u}",
            "spec.userName, spec.password",
            "missing username and/or password for plaintext authentication",
        ),
        ("spec: {authType: longterm}", "spec.sharedSecret", "missing shared-secret for longterm authentication"),
        ("spec: {authRef: {name: nope}}", "spec.authRef", "missing or invalid external authentication credentials"),
        (
            "spec: {dataplane: nope, userName: u, password: p}",
            "spec.dataplane",
            "missing Dataplane resource for Gateway",
        ),
    ] {
        let out = render_all(&index_of(&config(spec)), &RenderSettings::default(), &now());
        for gw in &gateways {
            assert_eq!(out.gateways[gw].config, Owned::Delete, "{spec}");
            assert_eq!(out.gateways[gw].invalid_config, Some(invalid(field, message)), "{spec}");
        }
        let settings = RenderSettings { dataplane_mode: DataplaneMode::Legacy, ..Default::default() };
        let legacy = render_all(&index_of(&config(spec)), &settings, &now());
        let expected = if field == "spec.dataplane" { None } else { Some(invalid(field, message)) };
        assert_eq!(legacy.gateways[&gateways[0]].invalid_config, expected, "legacy: {spec}");
    }
    let out = render_all(&index_of(BASE), &RenderSettings::default(), &now());
    assert!(out.gateways.values().all(|gw| gw.invalid_config.is_none()));
}

/// With `--enforce-reference-grants`, removing the grant re-renders the route's Gateway
/// without the backend and flips the route to `RefNotPermitted`; without the flag the grant is
/// never consulted.
#[test]
fn removing_a_reference_grant_revokes_the_backend() {
    let mut index = index_of(&format!(
        "{BASE}---\napiVersion: v1\nkind: Service\nmetadata: {{name: remote, namespace: shared}}\nspec: {{clusterIP: 10.0.0.9}}\n\
         ---\napiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: shared}}\n\
         spec: {{from: [{{group: stunner.l7mp.io, kind: UDPRoute, namespace: ns}}], to: [{{group: '', kind: Service}}]}}\n"
    ));
    index.apply(route("[{name: svc}, {name: remote, namespace: shared}]"));
    let enforce = RenderSettings { enforce_reference_grants: true, ..Default::default() };
    let resolved = |out: &RenderOutput| {
        let c = &out.routes.values().next().unwrap().parents[0].conditions[1];
        (c.status.clone(), c.reason.clone())
    };
    let out = render_all(&index, &enforce, &now());
    assert_eq!(config(&out, "gw").clusters[0].endpoints, ["10.0.0.1", "10.0.0.9"]);
    let dirty = index.delete(Kind::ReferenceGrant, "shared", "g");
    assert_eq!(dirty.gateways.iter().map(ToString::to_string).collect::<Vec<_>>(), ["ns/gw"]);
    let out = render(&index, &dirty, &enforce, &now());
    assert_eq!(config(&out, "gw").clusters[0].endpoints, ["10.0.0.1"], "the local backend stays");
    assert_eq!(resolved(&out), ("False".to_string(), "RefNotPermitted".to_string()));
    let out = render_all(&index, &RenderSettings::default(), &now());
    assert_eq!(config(&out, "gw").clusters[0].endpoints, ["10.0.0.1", "10.0.0.9"], "not enforced: as upstream");
}

/// A GatewayConfig a Gateway names in `spec.infrastructure.parametersRef` is read for that
/// Gateway alone, and its changes (creation included) re-render that Gateway and no other.
#[test]
fn a_gateway_config_named_by_a_gateway_renders_it_and_its_changes_re_render_it() {
    let tenant = |realm: &str| {
        let text = format!(
            "apiVersion: stunner.l7mp.io/v1\nkind: GatewayConfig\nmetadata: {{name: tenant, namespace: ns}}\n\
             spec: {{realm: {realm}, userName: t, password: tp}}\n"
        );
        load(Path::new("tenant.yaml"), &text, Admission::Validated).unwrap().objects.remove(0).1
    };
    let mut index = index_of(&BASE.replace(
        "metadata: {name: gw, namespace: ns}\nspec:\n",
        "metadata: {name: gw, namespace: ns}\nspec:\n  infrastructure: {parametersRef: {group: stunner.l7mp.io, kind: GatewayConfig, name: tenant}}\n",
    ));
    let accepted = |out: &RenderOutput| {
        let status = out.gateways[&ObjectKey::new("ns", "gw")].status.as_ref().unwrap();
        status.conditions.as_ref().unwrap()[0].reason.clone()
    };
    assert_eq!(accepted(&render_all(&index, &RenderSettings::default(), &now())), "InvalidParameters");
    let dirty = index.apply(tenant("first"));
    assert_eq!(dirty.gateways.iter().map(ToString::to_string).collect::<Vec<_>>(), ["ns/gw"]);
    let out = render(&index, &dirty, &RenderSettings::default(), &now());
    assert_eq!(accepted(&out), "Accepted");
    assert_eq!(config(&out, "gw").auth.realm, "first");
    let dirty = index.apply(tenant("second"));
    assert_eq!(config(&render(&index, &dirty, &RenderSettings::default(), &now()), "gw").auth.realm, "second");
    let out = render_all(&index, &RenderSettings::default(), &now());
    assert_ne!(config(&out, "gw-2").auth.realm, "second", "the class's own Gateways keep its GatewayConfig");
}

/// A sink that keeps what it is handed, and in which order, refusing anything handed twice.
#[derive(Default)]
struct Handed {
    output: RenderOutput,
    order: Vec<String>,
}

impl RenderSink for Handed {
    fn gateway(&mut self, key: ObjectKey, output: GatewayOutput) {
        self.order.push(format!("gateway {key}"));
        assert!(self.output.gateways.insert(key, output).is_none(), "a Gateway handed on twice");
    }

    fn route(&mut self, route: ObjRef, status: UdpRouteStatus) {
        self.order.push(format!("route {route:?}"));
        assert!(self.output.routes.insert(route, status).is_none(), "a route handed on twice");
    }

    fn class(&mut self, name: String, status: GatewayClassStatus) {
        assert!(self.output.classes.insert(name, status).is_none(), "a class handed on twice");
    }

    fn config_map(&mut self, key: ObjectKey, config_map: Owned<ConfigMap>) {
        assert!(self.output.config_maps.insert(key, config_map).is_none(), "a ConfigMap handed on twice");
    }
}

/// `render_each` hands every result on once, exactly what `render` keeps, each Gateway
/// before the routes it decides. In legacy mode a dirty Gateway's class hands on all of its
/// Gateways.
#[test]
fn render_each_hands_on_each_dirty_gateway_once_and_keeps_the_rest() {
    let mut index = index_of(BASE);
    index.apply(route(r#"[{name: svc}]"#));
    let gw = ObjectKey::new("ns", "gw");
    let dirty = Dirty { gateways: [gw.clone()].into(), ..Default::default() };
    for mode in [DataplaneMode::Managed, DataplaneMode::Legacy] {
        let settings = RenderSettings { dataplane_mode: mode, ..Default::default() };
        let kept = render(&index, &dirty, &settings, &now());
        let mut handed = Handed::default();
        render_each(&index, &dirty, &settings, &now(), &mut handed);
        let route = ObjRef::new(Kind::UdpRoute, ObjectKey::new("ns", "r"));
        // Each Gateway, then its route.
        let gateway_then_route = handed.order.iter().position(|h| *h == format!("route {route:?}"))
            > handed.order.iter().position(|h| *h == format!("gateway {gw}"));
        assert!(gateway_then_route, "{mode:?}: {:?}", handed.order);
        assert_eq!(handed.output, kept, "{mode:?}");
        let keys: Vec<_> = handed.output.gateways.into_keys().collect();
        match mode {
            DataplaneMode::Managed => assert_eq!(keys, std::slice::from_ref(&gw)),
            // The class of the dirty Gateway is rendered whole: both of its Gateways.
            DataplaneMode::Legacy => assert_eq!(keys, [gw.clone(), ObjectKey::new("ns", "gw-2")]),
        }
    }
}

/// A Node that comes, goes, or gains or loses its external address re-renders the Gateways
/// with relay address discovery (their condition names nodes without one), and no other; a
/// Node change that keeps its address re-renders none of them.
#[test]
fn node_address_changes_re_render_the_gateways_that_discover_relay_addresses() {
    let annotated = BASE.replacen(
        "metadata: {name: gw, namespace: ns}",
        "metadata: {name: gw, namespace: ns, annotations: {stunner.l7mp.io/enable-relay-address-discovery: \"true\"}}",
        1,
    );
    let mut index = index_of(&annotated);
    let node = |addresses: &str| {
        let text = format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: n1, labels: {{l: x}}}}\nstatus: {{addresses: {addresses}}}\n"
        );
        load(Path::new("node.yaml"), &text, Admission::Validated).unwrap().into_resources().next().unwrap()
    };
    let dirty_gateways = |d: Dirty| d.gateways.iter().map(ToString::to_string).collect::<Vec<_>>();
    // A node without an external address: only the Gateway that discovers relay addresses.
    assert_eq!(dirty_gateways(index.apply(node("[{type: InternalIP, address: 10.0.0.1}]"))), ["ns/gw"]);
    let condition = |index: &Index| {
        let out = render_all(index, &RenderSettings::default(), &now());
        let status = out.gateways[&ObjectKey::new("ns", "gw")].status.clone().unwrap();
        let c = status.conditions.unwrap().into_iter().find(|c| c.type_ == "RelayAddressDiscovered").unwrap();
        (c.status, c.message)
    };
    let (status, message) = condition(&index);
    assert_eq!(status, "False");
    assert!(message.contains("n1"), "{message}");
    let dirty = index.apply(node("[{type: InternalIP, address: 10.0.0.1}, {type: ExternalIP, address: 192.0.2.1}]"));
    assert_eq!(dirty_gateways(dirty), ["ns/gw", "ns/gw-2"], "the first node address changed too");
    assert_eq!(condition(&index).0, "True");
    let same = index.apply(node("[{type: InternalIP, address: 10.0.0.2}, {type: ExternalIP, address: 192.0.2.1}]"));
    assert_eq!(dirty_gateways(same), Vec::<String>::new());
    assert_eq!(dirty_gateways(index.delete(Kind::Node, "", "n1")), ["ns/gw", "ns/gw-2"]);
    let out = render_all(&index, &RenderSettings::default(), &now());
    let listeners = &config(&out, "gw").listeners;
    assert!(listeners.iter().all(|l| l.addr == crate::config::NODE_ADDRESS_PLACEHOLDER), "{listeners:?}");
    assert!(config(&out, "gw-2").listeners.iter().all(|l| l.addr == "$STUNNER_ADDR"));
}

/// Relay address discovery counts only the Nodes the dataplane pods can be scheduled on: a
/// tainted control-plane Node without an external address is no failure; a Dataplane whose
/// required node affinity leaves no Node says so. Only changes of what the condition reads of a
/// Node (can the pods run there, has it an external address) re-render the Gateway.
#[test]
fn relay_address_discovery_counts_the_nodes_the_dataplane_pods_can_run_on() {
    let annotated = BASE.replacen(
        "metadata: {name: gw, namespace: ns}",
        "metadata: {name: gw, namespace: ns, annotations: {stunner.l7mp.io/enable-relay-address-discovery: \"true\"}}",
        1,
    );
    let mut index = index_of(&annotated);
    let one =
        |text: &str| load(Path::new("x.yaml"), text, Admission::Validated).unwrap().into_resources().next().unwrap();
    let control_plane = |labels: &str| {
        one(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: cp, labels: {{{labels}}}}}\n\
             spec: {{taints: [{{key: node-role.kubernetes.io/control-plane, effect: NoSchedule}}]}}\n\
             status: {{addresses: [{{type: InternalIP, address: 10.0.0.1}}]}}\n"
        ))
    };
    let worker = one("apiVersion: v1\nkind: Node\nmetadata: {name: worker, labels: {role: media}}\n\
         status: {addresses: [{type: ExternalIP, address: 192.0.2.1}]}\n");
    let dirty_gateways = |d: Dirty| d.gateways.iter().map(ToString::to_string).collect::<Vec<_>>();
    let condition = |index: &Index| {
        let out = render_all(index, &RenderSettings::default(), &now());
        let status = out.gateways[&ObjectKey::new("ns", "gw")].status.clone().unwrap();
        let c = status.conditions.unwrap().into_iter().find(|c| c.type_ == "RelayAddressDiscovered").unwrap();
        (c.status, c.reason, c.message)
    };
    index.apply(worker);
    // The control plane runs no dataplane pod: its lack of an address is no failure, and its
    // coming re-renders none of the relay Gateways' conditions; neither does a label that
    // leaves it tainted.
    assert_eq!(dirty_gateways(index.apply(control_plane("a: b"))), Vec::<String>::new());
    assert_eq!(condition(&index).0, "True", "{:?}", condition(&index));
    assert_eq!(dirty_gateways(index.apply(control_plane("a: c"))), Vec::<String>::new());
    // Tolerated, it counts.
    let tolerant = one("apiVersion: stunner.l7mp.io/v1\nkind: Dataplane\nmetadata: {name: default}\n\
         spec: {tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists}]}\n");
    assert!(index.apply(tolerant).gateways.contains(&ObjectKey::new("ns", "gw")));
    let (status, reason, message) = condition(&index);
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NoExternalAddress"));
    assert!(message.contains("cp") && !message.contains("worker"), "{message}");
    // Now a label change on it that keeps it eligible and without an address changes nothing.
    assert_eq!(dirty_gateways(index.apply(control_plane("a: d"))), Vec::<String>::new());
    // A required node affinity that selects no Node: False, saying why for each.
    let selective = one("apiVersion: stunner.l7mp.io/v1\nkind: Dataplane\nmetadata: {name: default}\n\
         spec: {affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: \
         {nodeSelectorTerms: [{matchExpressions: [{key: role, operator: In, values: [turn]}]}]}}}}\n");
    index.apply(selective);
    let (status, reason, message) = condition(&index);
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NoSchedulableNode"));
    assert_eq!(
        message,
        "the pods of Dataplane default can be scheduled on no node (cp: taint \
         node-role.kubernetes.io/control-plane:NoSchedule not tolerated; worker: not selected by the \
         Dataplane's required node affinity)"
    );
    // The worker relabelled into the affinity: the condition changes, so the Gateway is dirty.
    let relabelled = one("apiVersion: v1\nkind: Node\nmetadata: {name: worker, labels: {role: turn}}\n\
         status: {addresses: [{type: ExternalIP, address: 192.0.2.1}]}\n");
    assert_eq!(dirty_gateways(index.apply(relabelled)), ["ns/gw"]);
    assert_eq!(condition(&index).0, "True");
}
