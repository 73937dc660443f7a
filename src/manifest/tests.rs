use super::*;
use crate::index::Kind;

const GATEWAY: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw\nspec:\n  gatewayClassName: stunner\n  listeners:\n  - name: udp\n    port: 3478\n    protocol: UDP\n";
const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: stunner\nspec:\n  controllerName: stunner.l7mp.io/gateway-operator\n";

fn summary(m: &Manifest) -> Vec<(usize, String)> {
    m.objects.iter().map(|(o, r)| (o.line, format!("{:?} {}", r.kind(), r.key()))).collect()
}

#[test]
fn objects_carry_their_file_and_line() {
    let text = format!("# a header\n{GATEWAY}---\n# comment only\n---\n{CLASS}");
    let m = load(Path::new("m.yaml"), &text, Admission::Validated).unwrap();
    assert_eq!(summary(&m), [(2, "Gateway default/gw".to_string()), (15, "GatewayClass /stunner".to_string())]);
    assert_eq!(m.objects[0].0.to_string(), "m.yaml:2");
}

#[test]
fn json_and_lists() {
    let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": [
        serde_yaml_ng::from_str::<Value>(GATEWAY).unwrap(),
        serde_yaml_ng::from_str::<Value>(CLASS).unwrap(),
    ]});
    let m = load(Path::new("l.json"), &list.to_string(), Admission::Validated).unwrap();
    assert_eq!(summary(&m), [(1, "Gateway default/gw".to_string()), (1, "GatewayClass /stunner".to_string())]);
}

#[test]
fn objects_get_a_namespace_and_a_stable_uid() {
    let one = |text: &str| load(Path::new("x.yaml"), text, Admission::Validated).unwrap().objects.remove(0).1;
    let gw = one(GATEWAY);
    assert_eq!(gw.meta().namespace.as_deref(), Some(DEFAULT_NAMESPACE));
    let uid = gw.meta().uid.clone().unwrap();
    assert_eq!(uid.len(), 36);
    assert_eq!(one(GATEWAY).meta().uid.as_deref(), Some(uid.as_str()), "stable across reads");
    assert_ne!(one(&GATEWAY.replace("name: gw", "name: gw2")).meta().uid.as_deref(), Some(uid.as_str()));
    assert_eq!(one(CLASS).meta().namespace, None, "cluster-scoped objects stay without a namespace");
    let given = one(&GATEWAY.replace("name: gw", "name: gw\n  namespace: ns\n  uid: u-1"));
    assert_eq!((given.meta().namespace.as_deref(), given.meta().uid.as_deref()), (Some("ns"), Some("u-1")));
}

#[test]
fn unknown_kinds_and_invalid_objects_are_skipped_with_their_line() {
    let bad_port = GATEWAY.replace("name: gw", "name: gw-port").replace("3478", "70000");
    let text = format!("{GATEWAY}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n---\n{bad_port}");
    let m = load(Path::new("s.yaml"), &text, Admission::Validated).unwrap();
    assert_eq!(summary(&m), [(1, "Gateway default/gw".to_string())]);
    let skipped: Vec<String> = m.skipped.iter().map(ToString::to_string).collect();
    assert_eq!(skipped.len(), 2, "{skipped:?}");
    assert!(skipped[0].starts_with("s.yaml:12: skipped: unknown kind \"ConfigMap\""), "{}", skipped[0]);
    assert!(skipped[1].starts_with("s.yaml:17: rejected: Gateway \"gw-port\" is invalid"), "{}", skipped[1]);
    assert!(skipped[1].contains("spec.listeners[0].port: Invalid value: 70000"), "{}", skipped[1]);
    let unchecked = load(Path::new("s.yaml"), &text, Admission::Unchecked).unwrap();
    assert_eq!(summary(&unchecked)[1], (17, "Gateway default/gw-port".to_string()), "admitted unchecked");
    assert_eq!(unchecked.skipped.len(), 1, "the unknown kind is still skipped");
}

#[test]
fn a_bad_file_fails_as_a_whole_naming_the_line() {
    let err = |text: &str| load(Path::new("bad.yaml"), text, Admission::Validated).unwrap_err();
    let e = err("kind: A\n---\nkind: B\nmetadata:\n  name: [unclosed\n");
    assert!(matches!(e.kind, LoadErrorKind::Syntax(_)) && e.origin.line >= 5, "{e}");
    assert!(e.to_string().starts_with("bad.yaml:"), "{e}");
    let e = err(&format!("{GATEWAY}---\n- 1\n"));
    assert_eq!((e.origin.line, e.to_string()), (12, "bad.yaml:12: expected a Kubernetes object, found a list".into()));
    let e = err("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {ports: 3}\n");
    assert!(matches!(e.kind, LoadErrorKind::Decode(DecodeError::Malformed { .. })), "{e}");
    let e = err("metadata:\n  name: x\n");
    assert!(matches!(e.kind, LoadErrorKind::Decode(DecodeError::NotAnObject(_))), "{e}");
    // Kinds without a schema here (ReferenceGrant) are not validated: the loader still wants a name.
    let e = err(
        "apiVersion: gateway.networking.k8s.io/v1beta1\nkind: ReferenceGrant\nmetadata: {namespace: ns}\nspec: {from: [], to: []}\n",
    );
    assert_eq!(e.kind, LoadErrorKind::NoName(Kind::ReferenceGrant));
}

#[test]
fn manifest_files_are_told_from_backups() {
    for (name, want) in
        [("a.yaml", true), ("b.yml", true), ("c.json", true), (".a.yaml", false), ("a.yaml~", false), ("a.txt", false)]
    {
        assert_eq!(is_manifest(Path::new(name)), want, "{name}");
    }
}

#[test]
fn gateway_api_routes_of_either_version_are_admitted_as_their_schemas_allow() {
    let route = |version: &str, kind: &str, rules: &str| {
        format!(
            "apiVersion: gateway.networking.k8s.io/{version}\nkind: {kind}\nmetadata: {{name: r}}\n\
             spec: {{parentRefs: [{{name: gw}}], rules: [{rules}]}}\n"
        )
    };
    let one_rule = "{backendRefs: [{name: svc, port: 1}]}";
    let two_rules = format!("{one_rule}, {one_rule}");
    let text = [
        route("v1", "UDPRoute", one_rule),
        route("v1alpha2", "UDPRoute", one_rule),
        route("v1", "TCPRoute", one_rule),
        route("v1alpha2", "TCPRoute", &two_rules),
        route("v1", "TCPRoute", &two_rules),
    ]
    .join("---\n");
    let m = load(Path::new("r.yaml"), &text, Admission::Validated).unwrap();
    let admitted: Vec<_> = summary(&m).into_iter().map(|(_, s)| s).collect();
    assert_eq!(
        admitted,
        [
            "GatewayUdpRoute default/r",
            "GatewayUdpRoute default/r",
            "GatewayTcpRoute default/r",
            "GatewayTcpRoute default/r"
        ]
    );
    let skipped: Vec<String> = m.skipped.iter().map(ToString::to_string).collect();
    assert_eq!(skipped.len(), 1, "v1 allows one rule: {skipped:?}");
    assert!(skipped[0].contains("rejected: TCPRoute \"r\" is invalid"), "{}", skipped[0]);
}

/// A Secret whose data does not decode (not base64, not a string) fails its file with the
/// path of the field and the type found, not the value: serde's message quotes it.
#[test]
fn a_secret_that_does_not_decode_is_named_without_its_value() {
    for (data, value) in [
        ("data: {password: not-base64-Hunter2!}", "symbol"),
        ("stringData: {password: 987654321012}", "987654321012"),
        ("data: {tls.key: 4242424242.5}", "4242424242"),
    ] {
        let text = format!("apiVersion: v1\nkind: Secret\nmetadata: {{name: s, namespace: stunner}}\n{data}\n");
        let e = load(Path::new("s.yaml"), &text, Admission::Validated).unwrap_err().to_string();
        assert!(e.starts_with("s.yaml:1: malformed Secret \"s\": "), "{e}");
        assert!(e.contains("<redacted>") && !e.contains(value), "{e}");
        let field = data.split(": {").collect::<Vec<_>>();
        let key = field[1].split(':').next().unwrap();
        assert!(e.contains(&format!("{}.{key}", field[0])), "names the field: {e}");
    }
}
