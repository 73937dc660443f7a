use super::*;

const FIXTURE: &str = r#"
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
spec: {authRef: {name: auth}}
---
apiVersion: stunner.l7mp.io/v1
kind: Dataplane
metadata: {name: default}
spec: {}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-a, namespace: ns}
spec:
  gatewayClassName: class
  listeners:
  - {name: tls, protocol: TLS, port: 443, tls: {certificateRefs: [{name: cert}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-b, namespace: ns}
spec:
  gatewayClassName: class
  listeners: [{name: udp, protocol: UDP, port: 1}]
---
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata: {name: route-a, namespace: ns}
spec:
  parentRefs: [{name: gw-a}]
  rules: [{backendRefs: [{name: svc-a}]}]
---
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata: {name: route-b, namespace: ns}
spec:
  parentRefs: [{name: gw-b}]
  rules: [{backendRefs: [{name: static-b, group: stunner.l7mp.io, kind: StaticService}]}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: svc-a-1, namespace: ns, labels: {kubernetes.io/service-name: svc-a}}
addressType: IPv4
endpoints: [{addresses: [1.1.1.1]}]
"#;

/// The objects of a multi-document YAML text, decoded as a watcher decodes them (the index
/// sits below the manifest reader, so its tests do not go through it).
fn decode(text: &str) -> Vec<Resource> {
    serde_yaml_ng::Deserializer::from_str(text)
        .map(|doc| {
            let value: serde_json::Value = serde::Deserialize::deserialize(doc).unwrap();
            super::decode::decode_value(value).unwrap()
        })
        .collect()
}

fn one(text: &str) -> Resource {
    decode(text).remove(0)
}

fn fixture() -> Index {
    let mut index = Index::new();
    decode(FIXTURE).into_iter().for_each(|r| drop(index.apply(r)));
    index
}

fn gws(d: &Dirty) -> Vec<String> {
    d.gateways.iter().map(ToString::to_string).collect()
}

#[test]
fn decodes_known_kinds_and_reports_unknown_and_malformed() {
    assert_eq!(decode(FIXTURE).len(), 8);
    let value = |text: &str| serde_yaml_ng::from_str::<serde_json::Value>(text).unwrap();
    let unknown = decode_value(value("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n")).unwrap_err();
    assert!(unknown.is_unknown_kind());
    let bad = decode_value(value("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: 3}\n"));
    assert!(matches!(bad, Err(DecodeError::Malformed { .. })));
    assert!(matches!(decode_value(value("metadata: {name: x}\n")), Err(DecodeError::NotAnObject(_))));
}

#[test]
fn secret_string_data_is_folded_into_data() {
    let Resource::Secret(s) =
        one("apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: ns}\nstringData: {a: b}\n")
    else {
        panic!()
    };
    assert_eq!(s.data.unwrap()["a"].0, b"b");
}

#[test]
fn v1alpha2_routes_lose_backend_ports() {
    let r = one("apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: UDPRoute\nmetadata: {name: r, namespace: ns}\n\
         spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{name: svc, port: 5}]}]}\n");
    let Resource::GatewayUdpRoute(r) = r else { panic!() };
    assert_eq!(r.spec.rules[0].backend_refs[0].port, None);
    assert_eq!(r.spec.parent_refs[0].name, "gw");
}

#[test]
fn gateway_api_routes_of_either_version_are_one_object_of_their_kind() {
    let route = |version: &str, kind: &str| {
        one(&format!(
            "apiVersion: gateway.networking.k8s.io/{version}\nkind: {kind}\nmetadata: {{name: r, namespace: ns}}\n\
             spec: {{parentRefs: [{{name: gw}}], rules: [{{backendRefs: [{{name: svc, port: 5}}]}}]}}\n"
        ))
    };
    let (v1, v1alpha2) = (route("v1", "UDPRoute"), route("v1alpha2", "UDPRoute"));
    assert_eq!(v1.obj_ref(), v1alpha2.obj_ref(), "two views of one stored object");
    assert_eq!(v1, v1alpha2);
    for version in ["v1", "v1alpha2"] {
        let Resource::GatewayTcpRoute(r) = route(version, "TCPRoute") else { panic!("{version}") };
        assert_eq!((r.spec.parent_refs[0].name.as_str(), r.spec.rules[0].backend_refs[0].port), ("gw", None));
    }
    let mut index = Index::new();
    index.apply(v1alpha2);
    index.apply(v1);
    assert_eq!(index.gateway_udp_routes().keys().count(), 1);
}

#[test]
fn endpoint_slice_marks_only_its_gateway() {
    let mut index = fixture();
    let d = index.apply(one(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {name: svc-a-1, namespace: ns, labels: {kubernetes.io/service-name: svc-a}}\naddressType: IPv4\nendpoints: []\n",
    ));
    assert_eq!(gws(&d), ["ns/gw-a"]);
    assert_eq!(d.routes.iter().map(|r| r.key.name.as_str()).collect::<Vec<_>>(), ["route-a"]);
}

#[test]
fn only_objects_that_refer_to_something_have_forward_references() {
    let mut index = fixture();
    let service = ObjRef::new(Kind::Service, ObjectKey::new("ns", "svc-a"));
    let slice = ObjRef::new(Kind::EndpointSlice, ObjectKey::new("ns", "svc-a-1"));
    assert_eq!(index.references(&slice), std::slice::from_ref(&service), "a slice refers to its Service");
    drop(index.apply(one("apiVersion: v1\nkind: Service\nmetadata: {name: svc-a, namespace: ns}\n")));
    assert_eq!(index.references(&service), []);
    assert!(!index.forward.contains_key(&service), "no entry for an object that refers to nothing");
    assert_eq!(index.referrers(service.view(), Kind::EndpointSlice).collect::<Vec<_>>(), [&slice.key]);

    let unlabelled = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\n\
         metadata: {name: svc-a-1, namespace: ns, labels: {app: svc-a}}\naddressType: IPv4\nendpoints: []\n";
    assert_eq!(gws(&index.apply(one(unlabelled))), ["ns/gw-a"], "the Service it leaves is affected");
    assert!(!index.forward.contains_key(&slice), "a slice without a Service refers to nothing");
    assert_eq!(index.referrers(service.view(), Kind::EndpointSlice).count(), 0);
}

#[test]
fn static_service_and_tls_secret_mark_their_gateways() {
    let mut index = fixture();
    let d = index.apply(one("apiVersion: stunner.l7mp.io/v1\nkind: StaticService\nmetadata: {name: static-b, namespace: ns}\nspec: {prefixes: []}\n"));
    assert_eq!(gws(&d), ["ns/gw-b"]);
    let d = index.apply(one("apiVersion: v1\nkind: Secret\nmetadata: {name: cert, namespace: ns}\n"));
    assert_eq!(gws(&d), ["ns/gw-a"]);
}

#[test]
fn config_secret_and_dataplane_mark_the_class_and_all_its_gateways() {
    let mut index = fixture();
    let d = index.apply(one("apiVersion: v1\nkind: Secret\nmetadata: {name: auth, namespace: ns}\n"));
    assert_eq!(gws(&d), ["ns/gw-a", "ns/gw-b"]);
    assert!(d.classes.contains("class"));
    let d = index.delete(Kind::Dataplane, "", "default");
    assert_eq!(gws(&d), ["ns/gw-a", "ns/gw-b"]);
}

#[test]
fn route_changes_mark_old_and_new_parents() {
    let mut index = fixture();
    let moved = "apiVersion: stunner.l7mp.io/v1\nkind: UDPRoute\nmetadata: {name: route-a, namespace: ns}\n\
                 spec: {parentRefs: [{name: gw-b}], rules: [{backendRefs: [{name: svc-a}]}]}\n";
    assert_eq!(gws(&index.apply(one(moved))), ["ns/gw-a", "ns/gw-b"]);
    let d = index.delete(Kind::UdpRoute, "ns", "route-a");
    assert_eq!(gws(&d), ["ns/gw-b"]);
    assert!(index.delete(Kind::UdpRoute, "ns", "route-a").is_empty());
}

#[test]
fn gateway_deletion_marks_it_and_its_routes() {
    let mut index = fixture();
    let d = index.delete(Kind::Gateway, "ns", "gw-a");
    assert_eq!(gws(&d), ["ns/gw-a"]);
    assert_eq!(d.routes.len(), 1);
    // Its class too: legacy mode re-renders the class's config without the Gateway.
    assert!(d.classes.contains("class"));
}

#[test]
fn a_v1_route_masks_the_v1alpha2_route_of_the_same_name() {
    let mut index = fixture();
    index.apply(one(
        "apiVersion: gateway.networking.k8s.io/v1alpha2\nkind: UDPRoute\nmetadata: {name: route-a, namespace: ns}\n\
         spec: {parentRefs: [{name: gw-b}], rules: [{backendRefs: [{name: svc-a}]}]}\n",
    ));
    let d = index.delete(Kind::UdpRoute, "ns", "route-a");
    assert_eq!(gws(&d), ["ns/gw-a", "ns/gw-b"]);
    assert_eq!(d.routes.len(), 2);
}

#[test]
fn nodes_matter_only_through_the_first_external_address() {
    let mut index = fixture();
    let node = |name: &str, ip: &str| {
        one(&format!(
            "apiVersion: v1\nkind: Node\nmetadata: {{name: {name}}}\nstatus: {{addresses: [{{type: ExternalIP, address: {ip}}}]}}\n"
        ))
    };
    assert_eq!(gws(&index.apply(node("n-b", "2.2.2.2"))).len(), 2);
    assert!(index.apply(node("n-c", "3.3.3.3")).is_empty(), "not the first node");
    assert!(index.apply(node("n-b", "2.2.2.2")).is_empty(), "unchanged");
    assert_eq!(index.first_node_addresses(), ["2.2.2.2"]);
    assert_eq!(gws(&index.apply(node("n-a", "1.1.1.1"))).len(), 2);
}

#[test]
fn cluster_scoped_keys_ignore_namespaces() {
    let r = one("apiVersion: v1\nkind: Namespace\nmetadata: {name: a, namespace: junk}\n");
    assert_eq!(r.key().to_string(), "/a");
}

/// Routes of two namespaces using a Service of `shared`, each through its own Gateway.
const CROSS_NAMESPACE_ROUTES: &str = r#"
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata: {name: route-x, namespace: team-a}
spec:
  parentRefs: [{name: gw-a, namespace: ns}]
  rules: [{backendRefs: [{name: svc-1, namespace: shared}]}]
---
apiVersion: stunner.l7mp.io/v1
kind: UDPRoute
metadata: {name: route-y, namespace: team-b}
spec:
  parentRefs: [{name: gw-b, namespace: ns}]
  rules: [{backendRefs: [{name: svc-1, namespace: shared}]}]
"#;

fn grant(from_ns: &str, to: &str) -> Resource {
    one(&format!(
        "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: shared}}\n\
         spec: {{from: [{{group: stunner.l7mp.io, kind: UDPRoute, namespace: {from_ns}}}], to: [{to}]}}\n"
    ))
}

fn routes(d: &Dirty) -> Vec<String> {
    d.routes.iter().map(|r| r.key.to_string()).collect()
}

#[test]
fn a_grant_marks_only_the_gateways_of_the_routes_it_opens_a_namespace_to() {
    let mut index = fixture();
    decode(CROSS_NAMESPACE_ROUTES).into_iter().for_each(|r| drop(index.apply(r)));
    let d = index.apply(grant("team-a", "{group: '', kind: Service}"));
    assert_eq!((gws(&d), routes(&d)), (vec!["ns/gw-a".to_string()], vec!["team-a/route-x".to_string()]));
    // Moved to team-b: the routes it stops and starts allowing.
    let d = index.apply(grant("team-b", "{group: '', kind: Service}"));
    assert_eq!(gws(&d), ["ns/gw-a", "ns/gw-b"]);
    assert_eq!(routes(&d), ["team-a/route-x", "team-b/route-y"]);
    // A grant to another Service, or to StaticServices, affects no route.
    let d = index.apply(grant("team-b", "{group: '', kind: Service, name: svc-2}"));
    assert_eq!(gws(&d), ["ns/gw-b"], "only the routes the previous version allowed");
    assert!(index.apply(grant("team-b", "{group: stunner.l7mp.io, kind: StaticService}")).is_empty());
    index.apply(grant("team-b", "{group: '', kind: Service, name: svc-1}"));
    let d = index.delete(Kind::ReferenceGrant, "shared", "g");
    assert_eq!((gws(&d), routes(&d)), (vec!["ns/gw-b".to_string()], vec!["team-b/route-y".to_string()]));
    assert!(index.delete(Kind::ReferenceGrant, "shared", "g").is_empty());
}

#[test]
fn a_grant_permits_its_route_kind_namespace_and_target() {
    let mut index = fixture();
    let route = |ns: &str| ObjRef::new(Kind::UdpRoute, ObjectKey::new(ns, "r"));
    let svc = |name: &str| ObjRef::new(Kind::Service, ObjectKey::new("shared", name));
    assert!(index.reference_permitted(&route("shared"), &svc("svc-1")), "same namespace: no grant needed");
    assert!(!index.reference_permitted(&route("team-a"), &svc("svc-1")));
    index.apply(grant("team-a", "{group: '', kind: Service, name: svc-1}"));
    assert!(index.reference_permitted(&route("team-a"), &svc("svc-1")));
    assert!(!index.reference_permitted(&route("team-a"), &svc("svc-2")), "another name");
    assert!(!index.reference_permitted(&route("team-b"), &svc("svc-1")), "another namespace");
    let v1alpha2 = ObjRef::new(Kind::GatewayUdpRoute, ObjectKey::new("team-a", "r"));
    assert!(!index.reference_permitted(&v1alpha2, &svc("svc-1")), "another route kind");
    let static_service = ObjRef::new(Kind::StaticService, ObjectKey::new("shared", "svc-1"));
    assert!(!index.reference_permitted(&route("team-a"), &static_service), "another backend kind");
}

/// Gateways of two namespaces with TLS listeners on a Secret of `certs` (and one on a Secret
/// of their own namespace).
const CROSS_NAMESPACE_CERTIFICATES: &str = r#"
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-x, namespace: team-a}
spec:
  gatewayClassName: class
  listeners: [{name: tls, protocol: TLS, port: 443, tls: {certificateRefs: [{name: cert-1, namespace: certs}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-y, namespace: team-b}
spec:
  gatewayClassName: class
  listeners: [{name: tls, protocol: TLS, port: 443, tls: {certificateRefs: [{name: cert-1, namespace: certs}]}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gw-z, namespace: team-a}
spec:
  gatewayClassName: class
  listeners: [{name: tls, protocol: TLS, port: 443, tls: {certificateRefs: [{name: own}]}}]
"#;

fn gateway_grant(from_ns: &str, to: &str) -> Resource {
    one(&format!(
        "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {{name: g, namespace: certs}}\n\
         spec: {{from: [{{group: gateway.networking.k8s.io, kind: Gateway, namespace: {from_ns}}}], to: [{to}]}}\n"
    ))
}

#[test]
fn a_certificate_grant_marks_only_the_gateways_whose_listeners_it_opens_a_secret_to() {
    let mut index = fixture();
    decode(CROSS_NAMESPACE_CERTIFICATES).into_iter().for_each(|r| drop(index.apply(r)));
    let d = index.apply(gateway_grant("team-a", "{group: '', kind: Secret}"));
    assert_eq!(gws(&d), ["team-a/gw-x"], "not the Gateway on a Secret of its own namespace");
    // Moved to team-b: the Gateways it stops and starts allowing.
    assert_eq!(gws(&index.apply(gateway_grant("team-b", "{group: '', kind: Secret}"))), ["team-a/gw-x", "team-b/gw-y"]);
    // A grant to another Secret, or to Services, opens nothing of theirs: only the Gateway the
    // previous version allowed.
    assert_eq!(gws(&index.apply(gateway_grant("team-b", "{group: '', kind: Secret, name: cert-2}"))), ["team-b/gw-y"]);
    assert!(index.apply(gateway_grant("team-b", "{group: '', kind: Service}")).is_empty());
    index.apply(gateway_grant("team-b", "{group: '', kind: Secret, name: cert-1}"));
    assert_eq!(gws(&index.delete(Kind::ReferenceGrant, "certs", "g")), ["team-b/gw-y"]);
    assert!(index.delete(Kind::ReferenceGrant, "certs", "g").is_empty());
    // A grant from routes opens no Secret to Gateways.
    assert!(index.apply(grant("team-a", "{group: '', kind: Secret}")).gateways.is_empty());
}

#[test]
fn a_certificate_grant_permits_gateways_of_its_namespace_to_its_secrets() {
    let mut index = fixture();
    let gateway = |ns: &str| ObjRef::new(Kind::Gateway, ObjectKey::new(ns, "gw"));
    let secret = |name: &str| ObjRef::new(Kind::Secret, ObjectKey::new("certs", name));
    assert!(index.reference_permitted(&gateway("certs"), &secret("cert-1")), "same namespace: no grant needed");
    assert!(!index.reference_permitted(&gateway("team-a"), &secret("cert-1")));
    index.apply(grant("team-a", "{group: '', kind: Secret}"));
    assert!(!index.reference_permitted(&gateway("team-a"), &secret("cert-1")), "a grant from routes");
    index.apply(gateway_grant("team-a", "{group: '', kind: Secret, name: cert-1}"));
    assert!(index.reference_permitted(&gateway("team-a"), &secret("cert-1")));
    assert!(!index.reference_permitted(&gateway("team-a"), &secret("cert-2")), "another name");
    assert!(!index.reference_permitted(&gateway("team-b"), &secret("cert-1")), "another namespace");
    let route = ObjRef::new(Kind::UdpRoute, ObjectKey::new("team-a", "gw"));
    assert!(!index.reference_permitted(&route, &secret("cert-1")), "another kind from");
    index.apply(gateway_grant("team-a", "{group: '', kind: Secret, name: ''}"));
    assert!(index.reference_permitted(&gateway("team-a"), &secret("cert-2")), "an empty name: every Secret");
}

/// The `controller` label each kind's events count under: upstream's controller names, as
/// the reconcile metrics have always shown them.
#[test]
fn every_kind_counts_for_its_upstream_controller() {
    let of = |kind| Controller::of(kind).name();
    let expected = [
        (Kind::GatewayClass, "gateway"),
        (Kind::Gateway, "gateway"),
        (Kind::GatewayConfig, "gatewayconfig"),
        (Kind::Dataplane, "dataplane"),
        (Kind::UdpRoute, "udproute"),
        (Kind::GatewayUdpRoute, "udproute"),
        (Kind::GatewayTcpRoute, "udproute"),
        (Kind::StaticService, "udproute"),
        (Kind::Service, "udproute"),
        (Kind::EndpointSlice, "udproute"),
        (Kind::Endpoints, "udproute"),
        (Kind::Secret, "gatewayconfig"),
        (Kind::Node, "node"),
        (Kind::Namespace, "udproute"),
        (Kind::Deployment, "gateway"),
        (Kind::DaemonSet, "gateway"),
        (Kind::ReferenceGrant, "udproute"),
        (Kind::ListenerSet, "gateway"),
    ];
    assert_eq!(expected.map(|(k, _)| k), Kind::ALL, "one line per kind, in table order");
    for (kind, name) in expected {
        assert_eq!(of(kind), name, "{kind:?}");
    }
}

#[test]
fn digests_follow_content() {
    let objects = decode(FIXTURE);
    let again = decode(FIXTURE);
    for (a, b) in objects.iter().zip(&again) {
        assert_eq!(a.digest(), b.digest(), "equal objects, equal digests: {:?}", a.obj_ref());
    }
    let mut digests: Vec<u64> = objects.iter().map(Resource::digest).collect();
    digests.sort();
    digests.dedup();
    assert_eq!(digests.len(), objects.len(), "different objects, different digests");
    let mut changed = objects[4].clone();
    changed.meta_mut().labels = Some([("a".to_string(), "b".to_string())].into());
    assert_ne!(changed.digest(), objects[4].digest(), "a label more is another digest");
}

/// A ListenerSet's change re-renders its Gateway (and the one it names no longer), and with it
/// the routes naming the ListenerSet; a route naming a ListenerSet re-renders the ListenerSet's
/// Gateway; the ListenerSet's certificate Secret and Namespace re-render it too.
#[test]
fn a_listener_set_marks_its_gateway_and_the_routes_naming_it() {
    let mut index = fixture();
    let ls = |gateway: &str| {
        one(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata: {{name: ls, namespace: tenant}}\n\
             spec:\n  parentRef: {{name: {gateway}, namespace: ns}}\n  listeners:\n  \
             - {{name: tls, protocol: TURN-TLS, port: 443, tls: {{certificateRefs: [{{name: tenant-cert}}]}}}}\n"
        ))
    };
    assert_eq!(gws(&index.apply(ls("gw-a"))), ["ns/gw-a"]);
    let d = index.apply(one(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: UDPRoute\nmetadata: {name: via-ls, namespace: tenant}\n\
         spec: {parentRefs: [{kind: ListenerSet, name: ls}], rules: [{backendRefs: [{name: svc}]}]}\n",
    ));
    assert_eq!(gws(&d), ["ns/gw-a"], "the route reaches the ListenerSet's Gateway");
    let d = index.apply(ls("gw-b"));
    assert_eq!(gws(&d), ["ns/gw-a", "ns/gw-b"], "the old parent and the new");
    let route = ObjRef::new(Kind::GatewayUdpRoute, ObjectKey::new("tenant", "via-ls"));
    assert!(d.routes.contains(&route), "{:?}", d.routes);
    let secret = one("apiVersion: v1\nkind: Secret\nmetadata: {name: tenant-cert, namespace: tenant}\n");
    assert_eq!(gws(&index.apply(secret)), ["ns/gw-b"]);
    let namespace = one("apiVersion: v1\nkind: Namespace\nmetadata: {name: tenant, labels: {t: x}}\n");
    assert_eq!(gws(&index.apply(namespace)), ["ns/gw-b"]);
    assert_eq!(gws(&index.delete(Kind::ListenerSet, "tenant", "ls")), ["ns/gw-b"]);
}

#[test]
fn sizes_count_what_is_stored_and_referred_to_and_come_back_down_on_deletion() {
    let mut index = fixture();
    let objects = decode(FIXTURE);
    // The routes and the slice refer to Gateways, backends and a Service; the Gateway to its
    // Secret and class; the class to its config, the config to its Secret.
    let full = index.sizes();
    assert_eq!(full.objects, objects.len());
    assert!(full.referred > 0);
    for r in &objects {
        let key = r.key();
        drop(index.delete(r.kind(), &key.namespace, &key.name));
    }
    assert_eq!(index.sizes(), IndexSizes { objects: 0, referred: 0 }, "nothing is left of deleted objects");
}
