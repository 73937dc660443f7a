//! The URL → request mapping of the CDS API (cds-protocol.md §2): paths and query strings of
//! GETs, with and without stunnerd's upgrade headers.
//!
//! Input: one flag byte (bit 0: send stunnerd's WebSocket headers), then the request target.
//! The answer must be what the route means: a config route serves exactly that config (or
//! 404 with upstream's message), a namespace list exactly the configs of that namespace, the
//! full list every config; a bad query is a 400 with the binder's message, a watch without an
//! upgradable connection a 426; nothing else.

#![no_main]

use axum::body::Body;
use axum::http::{Request, StatusCode, Uri};
use libfuzzer_sys::fuzz_target;
use percent_encoding::percent_decode_str;
use serde_json::Value;
use std::sync::LazyLock;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway_operator::fuzzing::CdsServer;

static SERVER: LazyLock<CdsServer> = LazyLock::new(CdsServer::new);

/// Which route a path names, with its decoded parameters.
#[derive(Debug)]
enum Route {
    All,
    Namespace(String),
    Config(String, String),
    License,
    Clients,
    Unknown,
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, target)) = data.split_first() else { return };
    // What hyper would refuse before routing is out of scope here.
    let Ok(uri) = Uri::try_from(target) else { return };
    if uri.scheme().is_some() || uri.authority().is_some() || !uri.path().starts_with('/') {
        return;
    }
    let mut request = Request::get(uri.clone()).header("host", "10.0.1.23:13478");
    if flags & 1 != 0 {
        request = request
            .header("connection", "Upgrade")
            .header("upgrade", "websocket")
            .header("sec-websocket-version", "13")
            .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==");
    }
    let answer = SERVER.http(request.body(Body::empty()).expect("a valid request"));
    let body = String::from_utf8(answer.body.to_vec()).expect("answers are UTF-8");
    let Some(route) = route(uri.path()) else {
        // An empty parameter: whether the router matches it is its own affair.
        assert!([200, 400, 403, 404, 426].contains(&answer.status.as_u16()), "{}: {body}", answer.status);
        return;
    };
    let Some(route) = route else {
        // A parameter that is not UTF-8 once decoded: axum's Path extractor refuses it.
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{body}");
        return;
    };
    // The query's keys as the binder sees them (decoded as Go's `url.ParseQuery`).
    let query = stunner_gateway::query::Query::parse(uri.query().unwrap_or(""));
    let keys: Vec<&str> = query.pairs.iter().map(|(k, _)| k.as_str()).collect();
    let has = |key: &str| keys.contains(&key);
    let config_route = matches!(route, Route::All | Route::Namespace(_) | Route::Config(..));
    match answer.status {
        // A watch refused by the handshake checks (gorilla's texts): only without stunnerd's headers.
        StatusCode::BAD_REQUEST | StatusCode::FORBIDDEN | StatusCode::UPGRADE_REQUIRED
            if body.contains("\nwebsocket: ") =>
        {
            assert!(flags & 1 == 0, "stunnerd's handshake refused: {body}");
            assert!(config_route && has("watch"), "a handshake check on {route:?} {keys:?}");
        }
        StatusCode::OK => check_served(&route, &body),
        StatusCode::NOT_FOUND => match &route {
            Route::Config(ns, name) => {
                assert!(!SERVER.configs.iter().any(|c| c.admin.name == format!("{ns}/{name}")), "{ns}/{name} exists");
                let error: Value = serde_json::from_str(&body).expect("a JSON error");
                assert_eq!(error["message"], format!("Config not found for ID {ns}/{name}"));
            }
            Route::Unknown => assert_eq!(body, "404 page not found\n"),
            other => panic!("404 on {other:?}"),
        },
        StatusCode::BAD_REQUEST => {
            assert!(config_route, "400 on {route:?}");
            assert!(body.starts_with("Invalid format for parameter "), "{body}");
            assert!(has("watch") || has("node"), "400 for {keys:?}");
        }
        StatusCode::UPGRADE_REQUIRED => {
            assert!(config_route && has("watch"), "426 on {route:?} {keys:?}");
            assert_eq!(body, "WebSocket watches need an HTTP/1.1 connection\n");
        }
        other => panic!("{other} for {uri}: {body}"),
    }
});

/// The route of `path` as the router matches it: a parameter is one segment,
/// percent-decoded after matching; `Some(None)` if a parameter does not decode to UTF-8,
/// `None` if one is empty.
fn route(path: &str) -> Option<Option<Route>> {
    let param = |s: &str| percent_decode_str(s).decode_utf8().ok().map(|s| s.into_owned());
    let segments: Vec<&str> = path.strip_prefix('/').unwrap_or(path).split('/').collect();
    let params = match segments[..] {
        ["api", "v1", "configs", ns] => vec![ns],
        ["api", "v1", "configs", ns, name] => vec![ns, name],
        _ => vec![],
    };
    if params.iter().any(|p| p.is_empty()) {
        return None;
    }
    let Some(params) = params.into_iter().map(param).collect::<Option<Vec<String>>>() else { return Some(None) };
    Some(Some(match (&segments[..], &params[..]) {
        (["api", "v1", "configs"], _) => Route::All,
        (["api", "v1", "configs", _], [ns]) => Route::Namespace(ns.clone()),
        (["api", "v1", "configs", _, _], [ns, name]) => Route::Config(ns.clone(), name.clone()),
        (["api", "v1", "license"], _) => Route::License,
        (["api", "v1", "clients"], _) => Route::Clients,
        _ => Route::Unknown,
    }))
}

/// A 200 serves what `route` names, as the store holds it.
fn check_served(route: &Route, body: &str) {
    let value: Value = serde_json::from_str(body).expect("a JSON body");
    let items = |value: &Value| -> Vec<String> {
        assert_eq!(value["version"], "v1");
        value["items"]
            .as_array()
            .expect("a list of configs")
            .iter()
            .map(|c| serde_json::from_value::<StunnerConfig>(c.clone()).expect("a config").admin.name)
            .collect()
    };
    let ids = |filter: &dyn Fn(&str) -> bool| -> Vec<String> {
        CdsServer::CONFIGS.iter().filter(|id| filter(id)).map(|id| id.to_string()).collect()
    };
    match route {
        Route::All => assert_eq!(items(&value), ids(&|_| true)),
        Route::Namespace(ns) => assert_eq!(items(&value), ids(&|id| id.split_once('/').unwrap().0 == ns.as_str())),
        Route::Config(ns, name) => {
            let served: StunnerConfig = serde_json::from_value(value).expect("a config");
            let id = format!("{ns}/{name}");
            let stored = SERVER.configs.iter().find(|c| c.admin.name == id).expect("a stored config");
            // Only the node-address placeholder may be patched (with the node's address).
            let mut unpatched = served.clone();
            for (l, s) in unpatched.listeners.iter_mut().zip(&stored.listeners) {
                l.addr.clone_from(&s.addr);
            }
            assert_eq!(&unpatched, stored, "{id} served as stored");
        }
        Route::License => assert!(value.is_object(), "a license status"),
        Route::Clients => assert!(value.is_object(), "a client list"),
        Route::Unknown => panic!("200 on an unknown route: {body}"),
    }
}
