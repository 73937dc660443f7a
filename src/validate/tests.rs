use super::*;

fn yaml(text: &str) -> Value {
    serde_yaml_ng::from_str(text).unwrap()
}

/// A valid Gateway with one listener whose `port` and `name` are given as YAML scalars.
fn gateway(name: &str, port: &str) -> Value {
    yaml(&format!(
        "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata: {{name: gw, namespace: stunner}}\n\
         spec:\n  gatewayClassName: stunner\n  listeners:\n  - {{name: {name}, port: {port}, protocol: TURN-UDP}}\n"
    ))
}

fn errors(v: &Value) -> Vec<String> {
    validate(v).err().map(|e| e.errors.iter().map(ToString::to_string).collect()).unwrap_or_default()
}

#[test]
fn every_embedded_schema_compiles() {
    let reg = registry().unwrap();
    for (group, version, kind) in [
        ("gateway.networking.k8s.io", "v1", "Gateway"),
        ("gateway.networking.k8s.io", "v1beta1", "Gateway"),
        ("gateway.networking.k8s.io", "v1", "GatewayClass"),
        ("gateway.networking.k8s.io", "v1alpha2", "UDPRoute"),
        ("gateway.networking.k8s.io", "v1", "UDPRoute"),
        ("gateway.networking.k8s.io", "v1alpha2", "TCPRoute"),
        ("gateway.networking.k8s.io", "v1", "TCPRoute"),
        ("gateway.networking.k8s.io", "v1", "ListenerSet"),
        ("stunner.l7mp.io", "v1", "GatewayConfig"),
        ("stunner.l7mp.io", "v1", "Dataplane"),
        ("stunner.l7mp.io", "v1", "UDPRoute"),
        ("stunner.l7mp.io", "v1", "StaticService"),
    ] {
        let rules = reg.get(&(group.into(), version.into(), kind.into())).unwrap_or_else(|| panic!("{kind} {version}"));
        assert!(rules.schema.is_some());
    }
    assert!(!reg[&("gateway.networking.k8s.io".into(), "v1".into(), "GatewayClass".into())].namespaced);
}

/// A ListenerSet's listeners are checked against the v1.7.0 CRD's schema, as a Gateway's are.
#[test]
fn a_listener_set_is_judged_by_its_crd() {
    let ls = |port: &str| {
        yaml(&format!(
            "apiVersion: gateway.networking.k8s.io/v1\nkind: ListenerSet\nmetadata: {{name: ls, namespace: tenant}}\n\
             spec:\n  parentRef: {{name: gw, namespace: stunner}}\n  listeners:\n  - {{name: tls, port: {port}, protocol: TURN-TLS}}\n"
        ))
    };
    assert_eq!(validate(&ls("443")), Ok(()));
    assert_eq!(
        errors(&ls("70000")),
        ["spec.listeners[0].port: Invalid value: 70000: must be less than or equal to 65535"]
    );
}

#[test]
fn a_good_gateway_passes() {
    assert_eq!(validate(&gateway("udp", "3478")), Ok(()));
}

#[test]
fn listener_ports_out_of_range_are_refused() {
    assert_eq!(
        errors(&gateway("udp", "70000")),
        ["spec.listeners[0].port: Invalid value: 70000: must be less than or equal to 65535"]
    );
    assert_eq!(
        errors(&gateway("udp", "-1")),
        ["spec.listeners[0].port: Invalid value: -1: must be greater than or equal to 1"]
    );
    assert_eq!(
        errors(&gateway("udp", "'3478'")),
        [r#"spec.listeners[0].port: Invalid value: "3478": must be of type integer"#]
    );
}

#[test]
fn a_huge_listener_name_is_refused_with_a_short_message() {
    let name = "a".repeat(1 << 20);
    let err = validate(&gateway(&name, "3478")).unwrap_err();
    assert_eq!(err.errors.len(), 1);
    assert_eq!(err.errors[0].field, "spec.listeners[0].name");
    assert!(err.errors[0].message.starts_with("Too long: may not be more than 253 characters"), "{err}");
    assert!(err.to_string().len() < 200, "{err}");
}

#[test]
fn listener_names_must_be_unique_and_well_formed() {
    let mut gw = gateway("udp", "3478");
    let listeners = gw.pointer_mut("/spec/listeners").unwrap().as_array_mut().unwrap();
    let mut second = listeners[0].clone();
    second["port"] = 3479.into();
    listeners.push(second);
    assert_eq!(errors(&gw), [r#"spec.listeners[1]: Duplicate value: {"name":"udp"}"#]);
    let errs = errors(&gateway("Bad_Name", "3478"));
    assert!(errs[0].starts_with(r#"spec.listeners[0].name: Invalid value: "Bad_Name": must match"#), "{errs:?}");
}

#[test]
fn listener_combinations_must_be_unique_as_the_cel_rule_says() {
    let mut gw = gateway("udp", "3478");
    let listeners = gw.pointer_mut("/spec/listeners").unwrap().as_array_mut().unwrap();
    let mut second = listeners[0].clone();
    second["name"] = "udp2".into();
    listeners.push(second);
    assert_eq!(
        errors(&gw),
        [
            r#"spec.listeners: Invalid value: "array": Combination of port, protocol and hostname must be unique for each listener"#
        ]
    );
}

#[test]
fn object_names_and_namespaces_follow_the_api_servers_rules() {
    for bad in ["a/b", "../x", "UPPER", "", "-x"] {
        let mut gw = gateway("udp", "3478");
        gw["metadata"]["name"] = bad.into();
        let errs = errors(&gw);
        assert_eq!(errs.len(), 1, "{bad:?}: {errs:?}");
        assert!(errs[0].starts_with("metadata.name: Invalid value:"), "{errs:?}");
    }
    let mut gw = gateway("udp", "3478");
    gw["metadata"]["name"] = "a".repeat(254).into();
    assert!(errors(&gw)[0].contains("must be no more than 253 characters"));
    gw["metadata"]["name"] = "a.b-c".into();
    gw["metadata"]["namespace"] = "a/b".into();
    let errs = errors(&gw);
    assert!(errs[0].starts_with(r#"metadata.namespace: Invalid value: "a/b": a lowercase RFC 1123 label"#), "{errs:?}");
    gw["metadata"]["namespace"] = "n".repeat(64).into();
    assert!(errors(&gw)[0].contains("must be no more than 63 characters"));
    let mut gw = gateway("udp", "3478");
    gw["metadata"].as_object_mut().unwrap().remove("namespace");
    assert_eq!(validate(&gw), Ok(()), "no namespace: the loader defaults it");

    let service = yaml("apiVersion: v1\nkind: Service\nmetadata: {name: 1st}\n");
    assert!(errors(&service)[0].contains("DNS-1035 label"), "Service names start with a letter");
    let namespace = yaml("apiVersion: v1\nkind: Namespace\nmetadata: {name: a.b}\n");
    assert!(errors(&namespace)[0].contains("RFC 1123 label"));
}

#[test]
fn an_auth_type_typo_is_refused_naming_the_field() {
    let config = yaml(
        "apiVersion: stunner.l7mp.io/v1\nkind: GatewayConfig\nmetadata: {name: c, namespace: stunner}\n\
         spec: {authType: statik, userName: u, password: p}\n",
    );
    let err = validate(&config).unwrap_err();
    assert_eq!(err.errors[0].field, "spec.authType");
    assert!(
        err.to_string().starts_with(r#"GatewayConfig "stunner/c" is invalid: spec.authType: Invalid value: "statik""#),
        "{err}"
    );
}

#[test]
fn required_fields_enums_and_nested_objects() {
    let route = yaml(
        "apiVersion: stunner.l7mp.io/v1\nkind: UDPRoute\nmetadata: {name: r}\n\
         spec: {parentRefs: [{name: gw}], rules: [{backendRefs: [{}]}]}\n",
    );
    assert_eq!(errors(&route), ["spec.rules[0].backendRefs[0].name: Required value"]);
    let class = yaml("apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata: {name: c}\nspec: {}\n");
    assert_eq!(errors(&class), ["spec.controllerName: Required value"]);
}

#[test]
fn what_the_api_server_ignores_is_ignored() {
    let mut gw = gateway("udp", "3478");
    gw["status"] = yaml("{conditions: [{type: 1}], junk: true}");
    gw["spec"]["unknownField"] = "pruned".into();
    gw["spec"]["addresses"] = Value::Null;
    assert_eq!(validate(&gw), Ok(()), "status, unknown fields and nulls");
    let unknown = yaml("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: A/B}\n");
    assert_eq!(validate(&unknown), Ok(()), "kinds not listed are the decoder's business");
}

#[test]
fn errors_are_capped() {
    let mut gw = gateway("udp", "0");
    let listeners = gw.pointer_mut("/spec/listeners").unwrap().as_array_mut().unwrap();
    for i in 1..30 {
        let mut l = listeners[0].clone();
        l["name"] = format!("l{i}").into();
        l["port"] = (-i).into();
        listeners.push(l);
    }
    let err = validate(&gw).unwrap_err();
    assert_eq!(err.errors.len(), MAX_ERRORS);
    assert!(err.more > 0);
    assert!(err.to_string().ends_with(&format!("; and {} more", err.more)), "{err}");
}

/// The examples are what people copy: none may be refused. The golden inputs come from
/// upstream's renderer tests, which never meet an API server: exactly these hold objects it
/// would refuse.
#[test]
fn shipped_manifests_pass_except_golden_cases_of_objects_an_api_server_refuses() {
    let refused_cases = [
        "address-spec-unusable",      // Gateway CEL: an IPAddress entry must be an IP address
        "admin-offload",              // offloadEngine "xdp": the pattern is case-sensitive
        "admin-offload-invalid",      // offloadEngine "bogus"
        "auth-missing-password",      // the operator's own rule: plaintext needs both credentials
        "auth-missing-shared-secret", // and longterm a shared secret
        "auth-none",                  // authType "none" is outside the CRD's pattern
        "auth-unknown-type",
        "cluster-empty-backends", // backendRefs: minItems 1
        "cluster-no-rules",       // rules: minItems 1
        "gateway-no-listeners",   // listeners: minItems 1
        "legacy-invalid-auth",    // the operator's own rule, as auth-missing-password
    ];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in ["deploy/examples", "tests/golden"] {
        collect(&root.join(dir), &mut files);
    }
    assert!(files.len() > 50, "{}", files.len());
    let mut refused = std::collections::BTreeSet::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        for doc in serde_yaml_ng::Deserializer::from_str(&text) {
            let Ok(v) = <Value as serde::Deserialize>::deserialize(doc) else { continue };
            if validate(&v).is_err() {
                let case = file.parent().unwrap().file_name().unwrap().to_str().unwrap();
                assert!(
                    file.starts_with(root.join("tests/golden")),
                    "{}: {}",
                    file.display(),
                    validate(&v).unwrap_err()
                );
                refused.insert(case.to_string());
            }
        }
    }
    assert_eq!(refused.into_iter().collect::<Vec<_>>(), refused_cases);
}

fn collect(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml") && !path.ends_with("output.yaml") {
            out.push(path);
        }
    }
}

#[test]
fn defaults_are_applied_before_the_rules_that_need_them() {
    let mut gw = gateway("udp", "3478");
    gw["spec"]["addresses"] = yaml("[{value: 1.1.1.1}]");
    assert_eq!(validate(&gw), Ok(()), "type defaults to IPAddress, and the value is one");
    gw["spec"]["addresses"] = yaml("[{value: not-an-ip}]");
    assert_eq!(
        errors(&gw),
        [
            r#"spec.addresses[0]: Invalid value: {"type":"IPAddress","value":"not-an-ip"}: must validate one and only one schema (oneOf)"#
        ]
    );
    gw["spec"]["addresses"] = yaml("[{type: Hostname, value: example.com}]");
    assert_eq!(validate(&gw), Ok(()));
}

/// Every secret field of a GatewayConfig that fails its schema is named with why it failed,
/// never with its value (`resources::redact`); other fields still quote theirs.
#[test]
fn invalid_secret_fields_are_named_without_their_values() {
    for (field, value, quoted) in [
        ("password", r#""Hunter2 Secret""#, "Hunter2 Secret"),
        ("password", "987654321012", "987654321012"),
        ("userName", r#""user name with spaces""#, "user name with spaces"),
        ("userName", "[a, list]", "list"),
        ("sharedSecret", "{nested: sekrit-map}", "sekrit-map"),
        ("sharedSecret", "123456789", "123456789"),
    ] {
        for version in ["v1", "v1alpha1"] {
            let config = yaml(&format!(
                "apiVersion: stunner.l7mp.io/{version}\nkind: GatewayConfig\nmetadata: {{name: c, namespace: stunner}}\n\
                 spec: {{realm: a_b, {field}: {value}}}\n"
            ));
            let err = validate(&config).unwrap_err().to_string();
            assert!(err.contains(&format!("spec.{field}: Invalid value: <redacted>: ")), "{version} {field}: {err}");
            assert!(!err.contains(quoted), "{version} {field}: {err}");
            assert!(err.contains(r#"spec.realm: Invalid value: "a_b""#), "not a secret: {err}");
        }
    }
}
