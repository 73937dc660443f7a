//! Every parameter and every error of the credential API against the answers of upstream's
//! running service (docs/auth-api.md has them side by side).

use super::*;
use crate::auth::params::bind;
use std::time::{Duration, UNIX_EPOCH};
use stunner_gateway::config::ListenerConfig;

/// The quickstart's Gateway as the operator serves it: static auth, UDP and TCP on 3478 at the
/// public address 127.0.0.1.
fn quickstart() -> StunnerConfig {
    let mut c = StunnerConfig::zero("stunner/udp-gateway");
    c.auth.auth_type = "static".into();
    c.auth.credentials = [("username", "user-1"), ("password", "pass-1")].map(|(k, v)| (k.into(), v.into())).into();
    for (name, protocol) in [("udp-listener", "TURN-UDP"), ("tcp-listener", "TURN-TCP")] {
        c.listeners.push(ListenerConfig {
            name: format!("stunner/udp-gateway/{name}"),
            protocol: protocol.into(),
            public_addr: "127.0.0.1".into(),
            public_port: 3478,
            addr: "$STUNNER_ADDR".into(),
            port: 3478,
            ..Default::default()
        });
    }
    c
}

fn ephemeral(name: &str, secret: &str) -> StunnerConfig {
    let mut c = quickstart();
    c.admin.name = name.into();
    for l in &mut c.listeners {
        l.name = l.name.replacen("stunner/udp-gateway", name, 1);
    }
    c.auth.auth_type = "ephemeral".into();
    c.auth.credentials = [("secret".to_string(), secret.to_string())].into();
    c
}

const NOW: u64 = 1_796_459_720;

fn at(now: u64, public_addr: Option<&str>) -> Context<'_> {
    Context { public_addr, now: UNIX_EPOCH + Duration::from_secs(now) }
}

/// The status and body (as text) of `path?query` against `configs`.
fn get_with(path: &str, query: &str, configs: &[StunnerConfig], cx: Context<'_>) -> (u16, String) {
    let endpoint = if path == "/ice" { Endpoint::Ice } else { Endpoint::Turn };
    let configs: Vec<_> = configs.iter().collect();
    let answer = match bind(endpoint, query) {
        Ok(params) => answer(endpoint, &params, &configs, cx),
        Err(e) => text(400, e.to_string()),
    };
    let body = match answer.body {
        Body::Json(bytes) => String::from_utf8(bytes).unwrap(),
        Body::Text(t) => format!("text:{t}"),
    };
    (answer.status, body)
}

fn get(path: &str, query: &str) -> (u16, String) {
    get_with(path, query, &[quickstart()], at(NOW, None))
}

const BOTH: &str = r#"["turn:127.0.0.1:3478?transport=udp","turn:127.0.0.1:3478?transport=tcp"]"#;

#[test]
fn static_answers_as_upstreams_service() {
    assert_eq!(
        get("/ice", "service=turn&username=u1&ttl=3600"),
        (
            200,
            format!(
                r#"{{"iceServers":[{{"credential":"pass-1","urls":{BOTH},"username":"user-1"}}],"iceTransportPolicy":"all"}}"#
            ) + "\n"
        )
    );
    assert_eq!(
        get("/", "service=turn&username=u1&ttl=3600"),
        (200, format!(r#"{{"password":"pass-1","ttl":3600,"uris":{BOTH},"username":"user-1"}}"#) + "\n")
    );
    // ttl defaults to a day; the static credential is the same whoever asks.
    let (_, body) = get("/", "service=turn");
    assert_eq!(body, format!(r#"{{"password":"pass-1","ttl":86400,"uris":{BOTH},"username":"user-1"}}"#) + "\n");
}

#[test]
fn errors_as_upstreams_service() {
    let service = r#": "\"service\" must be \"turn\"""#;
    assert_eq!(get("/", "service=nope"), (400, format!("text:could not generate TURN auth token{service}")));
    assert_eq!(get("/ice", ""), (400, format!("text:could not generate ICE auth token{service}")));
    assert_eq!(get("/ice", "service=TURN"), (400, format!("text:could not generate ICE auth token{service}")));
    assert_eq!(get("/", ""), (400, "text:Query argument service is required, but not found".into()));
    assert_eq!(
        get("/?", "service=turn&namespace=nope"),
        (404, "text:could not generate TURN auth token: no valid listener found".into())
    );
    assert_eq!(
        get("/ice", "service=turn&namespace=nope"),
        (404, "text:could not generate ICE config: no valid listener found".into())
    );
    // No config at all: a 500 before the service is even looked at (a bad ttl still a 400 first).
    assert_eq!(get_with("/ice", "", &[], at(NOW, None)), (500, "text:no STUNner configuration available".into()));
    assert_eq!(get_with("/", "service=x", &[], at(NOW, None)).0, 500);
    assert_eq!(get_with("/ice", "ttl=x", &[], at(NOW, None)).0, 400);
}

#[test]
fn filters_as_upstream_reads_them() {
    let tcp_only = r#"["turn:127.0.0.1:3478?transport=tcp"]"#;
    let (status, body) = get("/ice", "service=turn&namespace=stunner&gateway=udp-gateway&listener=tcp-listener");
    assert_eq!(status, 200);
    assert!(body.contains(&format!(r#""urls":{tcp_only}"#)), "{body}");
    // gateway counts only with namespace, listener only with both.
    for ignored in ["listener=tcp-listener", "gateway=nope", "gateway=nope&listener=nope", "namespace=stunner"] {
        let (status, body) = get("/ice", &format!("service=turn&{ignored}"));
        assert!(status == 200 && body.contains(BOTH), "{ignored}: {body}");
    }
    for none in ["namespace=stunner&gateway=nope", "namespace=stunner&gateway=udp-gateway&listener=nope", "namespace="]
    {
        assert_eq!(get("/ice", &format!("service=turn&{none}")).0, 404, "{none}");
    }
    // A listener whose name is not namespace/gateway/listener is never served.
    let mut odd = quickstart();
    odd.listeners[0].name = "udp-listener".into();
    let (_, body) = get_with("/ice", "service=turn", &[odd], at(NOW, None));
    assert!(body.contains(r#""urls":["turn:127.0.0.1:3478?transport=tcp"]"#), "{body}");
}

#[test]
fn ice_transport_policy_is_echoed_and_key_is_accepted() {
    let (_, body) = get("/ice", "service=turn&iceTransportPolicy=relay&key=whatever");
    assert!(body.ends_with("\"iceTransportPolicy\":\"relay\"}\n"), "{body}");
    let (_, body) = get("/", "service=turn&iceTransportPolicy=relay");
    assert!(!body.contains("iceTransportPolicy"), "{body}");
}

#[test]
fn ephemeral_credentials_as_stunner_computes_them() {
    let configs = [ephemeral("stunner/udp-gateway", "bar-shared-secret")];
    // The spec's vector: ttl 3600 from NOW gives 1796463320.
    let (status, body) = get_with("/", "service=turn&username=u1&ttl=3600", &configs, at(NOW, None));
    assert_eq!(status, 200);
    assert_eq!(
        body,
        format!(r#"{{"password":"Vy0eRoHjjf4EjI1DvIPKzS0as44=","ttl":3600,"uris":{BOTH},"username":"1796463320:u1"}}"#)
            + "\n"
    );
    let (_, body) = get_with("/ice", "service=turn", &configs, at(NOW, None));
    let v: IceConfig = serde_json::from_str(&body).unwrap();
    let server = &v.ice_servers[0];
    assert_eq!(server.username, format!("{}:", NOW + 86_400), "default ttl, no user id: a trailing colon");
    assert_eq!(server.credential, turn_auth::timewindowed_password(&server.username, "bar-shared-secret"));
    // Characters Go's encoder escapes are escaped the same way.
    let (_, body) = get_with("/ice", "service=turn&username=a%26b%3C", &configs, at(NOW, None));
    assert!(body.contains(r#":a\u0026b\u003c""#), "{body}");
}

#[test]
fn public_address_from_the_request_then_the_environment() {
    let (_, body) = get_with("/ice", "service=turn&public-addr=5.6.7.8", &[quickstart()], at(NOW, Some("9.9.9.9")));
    assert!(body.contains("turn:5.6.7.8:3478?transport=udp"), "{body}");
    let (_, body) = get_with("/ice", "service=turn", &[quickstart()], at(NOW, Some("9.9.9.9")));
    assert!(body.contains("turn:9.9.9.9:3478?transport=udp"), "{body}");
    let (_, body) = get_with("/ice", "service=turn", &[quickstart()], at(NOW, Some("")));
    assert!(body.contains("turn:127.0.0.1:3478?transport=udp"), "an empty override is none: {body}");
    // An empty public-addr in the request clears the public address: the listener's own is
    // $STUNNER_ADDR, which only the dataplane knows.
    let (_, body) = get_with("/ice", "service=turn&public-addr=", &[quickstart()], at(NOW, Some("9.9.9.9")));
    assert!(body.contains("turn:0.0.0.0:3478?transport=udp"), "{body}");
}

#[test]
fn every_gateway_is_a_server_and_the_turn_answer_takes_the_first() {
    let mut none = ephemeral("media/none", "");
    none.auth.auth_type = "none".into();
    let mut broken = ephemeral("media/broken", "");
    broken.auth.credentials.clear();
    let configs = [quickstart(), broken, none, ephemeral("other/e", "s")];
    let (_, body) = get_with("/ice", "service=turn", &configs, at(NOW, None));
    let v: IceConfig = serde_json::from_str(&body).unwrap();
    // The broken one is left out; `none` hands out empty credentials.
    let users: Vec<_> = v.ice_servers.iter().map(|s| s.username.as_str()).collect();
    assert_eq!(users, ["user-1", "", &format!("{}:", NOW + 86_400)]);
    assert_eq!(v.ice_servers[1].credential, "");
    let (_, body) = get_with("/", "service=turn&namespace=other", &configs, at(NOW, None));
    assert!(body.contains(&format!(r#""username":"{}:""#, NOW + 86_400)), "{body}");
    let (_, body) = get_with("/", "service=turn", &configs, at(NOW, None));
    assert!(body.contains(r#""username":"user-1""#), "{body}");
}

/// A dual-stack Gateway's listeners (docs/deploy.md §12): a URI per address family and
/// transport, in the config's order (the primary family first), IPv6 bracketed; an override
/// of the public address gives one.
#[test]
fn a_dual_stack_listener_gives_a_uri_per_family() {
    let mut c = quickstart();
    for l in &mut c.listeners {
        l.public_addrs = vec!["127.0.0.1".into(), "::1".into()];
    }
    let (status, body) = get_with("/ice", "service=turn", std::slice::from_ref(&c), at(NOW, None));
    assert_eq!(status, 200);
    let ice: serde_json::Value = serde_json::from_str(&body).unwrap();
    let urls = &ice["iceServers"][0]["urls"];
    let want = [
        "turn:127.0.0.1:3478?transport=udp",
        "turn:[::1]:3478?transport=udp",
        "turn:127.0.0.1:3478?transport=tcp",
        "turn:[::1]:3478?transport=tcp",
    ];
    assert_eq!(urls, &serde_json::json!(want));
    let (_, body) = get_with("/ice", "service=turn&public-addr=5.6.7.8", &[c], at(NOW, None));
    assert!(body.contains(r#""urls":["turn:5.6.7.8:3478?transport=udp","turn:5.6.7.8:3478?transport=tcp"]"#), "{body}");
}
