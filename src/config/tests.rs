use super::*;

const ZERO_WIRE: &str = r#"{"version":"v1","admin":{"name":"stunner/udp-gateway"},"auth":{"type":"static","realm":"stunner.l7mp.io","credentials":{"password":"dummy-password","username":"dummy-username"}}}"#;
const ZERO_VALIDATED: &str = r#"{"version":"v1","admin":{"name":"stunner/udp-gateway","loglevel":"all:INFO","healthcheck_endpoint":"http://:8086","offload_engine":"None"},"auth":{"type":"static","realm":"stunner.l7mp.io","credentials":{"password":"dummy-password","username":"dummy-username"}}}"#;

/// stunner-config.md §10, compacted: what the operator stores and serves.
const EXAMPLE: &str = r#"{"version":"v1","admin":{"name":"stunner/udp-gateway","loglevel":"all:INFO","metrics_endpoint":"http://:8080/metrics","healthcheck_endpoint":"http://:8086","offload_engine":"None"},"auth":{"type":"static","realm":"stunner.l7mp.io","credentials":{"password":"pass-1","username":"user-1"}},"listeners":[{"name":"stunner/udp-gateway/udp-listener","protocol":"TURN-UDP","public_address":"34.118.36.108","public_port":3478,"address":"$STUNNER_ADDR","port":3478,"routes":["stunner/media-plane"]},{"name":"stunner/udp-gateway/tcp-listener","protocol":"TURN-TCP","public_address":"34.118.36.108","public_port":3479,"address":"$STUNNER_ADDR","port":3479,"routes":["stunner/media-plane"]}],"clusters":[{"name":"stunner/media-plane","type":"STATIC","protocol":"UDP","endpoints":["10.76.0.15","10.76.0.16","10.80.7.3"]}]}"#;

fn parse(s: &str) -> StunnerConfig {
    serde_json::from_str(s).unwrap()
}

fn validation_error(s: &str) -> String {
    parse(s).validate().unwrap_err().0
}

#[test]
fn zero_config_has_the_exact_wire_bytes() {
    assert_eq!(StunnerConfig::zero("stunner/udp-gateway").to_json(), ZERO_WIRE);
}

#[test]
fn zero_config_validates_to_the_spec_form() {
    let z = StunnerConfig::zero("stunner/udp-gateway").normalized().unwrap();
    assert_eq!(z.to_json(), ZERO_VALIDATED);
    assert!(z.is_deleted());
    assert_eq!(parse(ZERO_VALIDATED), z);
}

#[test]
fn spec_example_round_trips_byte_for_byte() {
    let c = parse(EXAMPLE);
    assert_eq!(c.to_json(), EXAMPLE);
    assert_eq!(c.listeners[1].port, 3479);
    assert_eq!(c.clusters[0].endpoints.len(), 3);
}

#[test]
fn spec_example_validates_with_only_the_documented_changes() {
    let c = parse(EXAMPLE);
    let v = c.normalized().unwrap();
    // Listener addresses stay literal here (env expansion is the client's job) and nothing else moves.
    assert_eq!(v, c);
    assert!(!v.is_deleted());
}

#[test]
fn deletion_is_recognised_only_for_the_exact_zero_config() {
    let mut z = StunnerConfig::zero("ns/gw").normalized().unwrap();
    z.admin.loglevel = "all:DEBUG".into();
    assert!(!z.is_deleted(), "a different log level is a real config to stunnerd");
    let mut z = StunnerConfig::zero("ns/gw").normalized().unwrap();
    z.auth.realm = "example.com".into();
    assert!(!z.is_deleted());
}

#[test]
fn healthcheck_endpoint_is_tri_state() {
    let absent = parse(r#"{"version":"v1","admin":{},"auth":{"type":"none"}}"#).normalized().unwrap();
    assert_eq!(absent.admin.healthcheck_endpoint.as_deref(), Some("http://:8086"));
    let disabled = parse(r#"{"version":"v1","admin":{"healthcheck_endpoint":""},"auth":{"type":"none"}}"#);
    assert!(disabled.to_json().contains(r#""healthcheck_endpoint":"""#));
    assert_eq!(disabled.normalized().unwrap().admin.healthcheck_endpoint.as_deref(), Some(""));
}

#[test]
fn credentials_are_always_emitted() {
    let c = StunnerConfig { version: "v1".into(), ..Default::default() };
    assert_eq!(c.to_json(), r#"{"version":"v1","admin":{},"auth":{"credentials":{}}}"#);
}

#[test]
fn unknown_keys_are_ignored() {
    let c = parse(r#"{"version":"v1","future":1,"admin":{"name":"a/b","x":[]},"auth":{"type":"none"}}"#);
    assert_eq!(c.admin.name, "a/b");
}

#[test]
fn normalisation_follows_the_dataplane() {
    let c = parse(
        r#"{"version":"v1","admin":{"offload_engine":"xdp","offload_interfaces":["b","a"],"user_quota":-3},
        "auth":{"type":"plaintext","credentials":{"username":"u","password":"","extra":"kept"}},
        "listeners":[{"name":"l","protocol":"turn-tcp","routes":["z","a"]},{"name":"m","protocol":"udp"}],
        "clusters":[{"name":"c","type":"strict_dns","protocol":"tcp","endpoints":["b.example","a.example"]}]}"#,
    )
    .normalized()
    .unwrap();
    assert_eq!(c.admin.name, "default-stunnerd");
    assert_eq!(c.admin.loglevel, "all:INFO");
    assert_eq!(c.admin.offload_engine, "XDP");
    assert_eq!(c.admin.offload_interfaces, ["a", "b"]);
    assert_eq!(c.admin.user_quota, 0);
    assert_eq!((c.auth.auth_type.as_str(), c.auth.realm.as_str()), ("static", "stunner.l7mp.io"));
    assert_eq!(c.auth.credentials["extra"], "kept");
    let l = &c.listeners[0];
    assert_eq!((l.protocol.as_str(), l.addr.as_str(), l.port), ("TURN-TCP", "0.0.0.0", 3478));
    assert_eq!(l.routes, ["a", "z"]);
    assert_eq!(c.listeners[1].protocol, "UDP", "short forms are kept as written, upper-cased");
    let cl = &c.clusters[0];
    assert_eq!((cl.cluster_type.as_str(), cl.protocol.as_str()), ("STRICT_DNS", "TCP"));
    assert_eq!(cl.endpoints, ["a.example", "b.example"]);
    assert_eq!(c.normalized().unwrap(), c, "validation is idempotent");
}

#[test]
fn ephemeral_aliases_and_none() {
    let c = parse(r#"{"version":"v1","auth":{"type":"longterm","credentials":{"secret":"s"}}}"#).normalized().unwrap();
    assert_eq!(c.auth.auth_type, "ephemeral");
    let c = parse(r#"{"version":"v1","auth":{"type":"none"}}"#).normalized().unwrap();
    assert_eq!(c.auth.auth_type, "none");
}

#[test]
fn validation_errors_carry_the_dataplane_texts_in_order() {
    let cases = [
        (r#"{"version":"v2"}"#, r#"unsupported API version: "v2""#),
        (r#"{}"#, r#"unsupported API version: """#),
        (
            r#"{"version":"v1","admin":{"metrics_endpoint":":1"}}"#,
            r#"invalid metric server endpoint URL :1: parse ":1": missing protocol scheme"#,
        ),
        (
            r#"{"version":"v1","admin":{"healthcheck_endpoint":"http://x:y"}}"#,
            r#"invalid health-check server endpoint URL http://x:y: parse "http://x:y": invalid port ":y" after host"#,
        ),
        (r#"{"version":"v1","admin":{"offload_engine":"ebpf"}}"#, r#"unknown offload mode: "ebpf""#),
        // Admin errors come before auth errors.
        (r#"{"version":"v1","admin":{"offload_engine":"x"},"auth":{"type":"bad"}}"#, r#"unknown offload mode: "x""#),
        (r#"{"version":"v1","auth":{"type":"Static"}}"#, r#"unknown authentication type: "Static""#),
        (r#"{"version":"v1","auth":{"credentials":{"username":"u"}}}"#, "static: empty username or password"),
        (r#"{"version":"v1","auth":{"type":"ephemeral"}}"#, "no secret found in ephemeral auth config"),
        (
            r#"{"version":"v1","auth":{"type":"none"},"listeners":[{"protocol":"udp","port":5,"cert":"c"}]}"#,
            r#"missing name in listener configuration: "-":{turn://0.0.0.0:5?transport=udp,public=-:-,cert/key=<SECRET>/-,routes=[]}"#,
        ),
        (
            r#"{"version":"v1","auth":{"type":"none"},"listeners":[{"name":"l","protocol":"http"}]}"#,
            r#"unknown listener protocol: "http""#,
        ),
        (r#"{"version":"v1","auth":{"type":"none"},"listeners":[{"name":"l","port":70000}]}"#, "invalid port: 70000"),
        (r#"{"version":"v1","auth":{"type":"none"},"listeners":[{"name":"l","port":-1}]}"#, "invalid port: -1"),
        (
            r#"{"version":"v1","auth":{"type":"none"},"listeners":[{"name":"l","protocol":"turn-tls"}]}"#,
            "empty TLS cert for TURN-TLS listener",
        ),
        (
            r#"{"version":"v1","auth":{"type":"none"},"listeners":[{"name":"l","protocol":"dtls","cert":"c"}]}"#,
            "empty TLS key for DTLS listener",
        ),
        (
            r#"{"version":"v1","auth":{"type":"none"},"clusters":[{"endpoints":["1.2.3.4"]}]}"#,
            r#"missing name in cluster configuration: "-":{endpoints=[1.2.3.4]}"#,
        ),
        (
            r#"{"version":"v1","auth":{"type":"none"},"clusters":[{"name":"c","type":"EDS"}]}"#,
            r#"unknown cluster type: "EDS""#,
        ),
        (
            r#"{"version":"v1","auth":{"type":"none"},"clusters":[{"name":"c","protocol":"sctp"}]}"#,
            r#"unknown cluster protocol: "sctp""#,
        ),
        (
            r#"{"version":"v1","auth":{"type":"none"},"clusters":[{"name":"c","endpoints":["backend.svc"]}]}"#,
            r#"invalid endpoint "backend.svc": invalid CIDR address: backend.svc"#,
        ),
    ];
    for (doc, want) in cases {
        assert_eq!(validation_error(doc), want, "{doc}");
    }
}

#[test]
fn display_never_reveals_secrets() {
    let c = parse(
        r#"{"version":"v1","admin":{"name":"a/b"},"auth":{"type":"static","credentials":{"username":"alice","password":"hunter2"}},
        "listeners":[{"name":"l","protocol":"TURN-TLS","cert":"Q0VSVA==","key":"S0VZ"}]}"#,
    );
    let shown = c.to_string();
    for secret in ["alice", "hunter2", "Q0VSVA==", "S0VZ"] {
        assert!(!shown.contains(secret), "{shown}");
    }
    assert!(shown.contains("<SECRET>"));
}
