//! Render benchmarks (a plain harness: `cargo bench -p stunner-gateway --bench render`; under
//! `cargo test` it runs a small smoke version).
//!
//! - full render of N combos (Gateway + UDPRoute + Service + EndpointSlice each);
//! - incremental: one EndpointSlice change among 5,000 Gateways renders only its Gateway.

use serde_json::json;
use std::hint::black_box;
use std::time::{Duration, Instant};
use stunner_gateway::index::{Dirty, Index, Resource, decode_value};
use stunner_gateway::render::{RenderSettings, render, render_all};

fn object(v: serde_json::Value) -> Resource {
    decode_value(v).expect("bench fixture decodes")
}

fn slice(i: usize, last_octet: usize) -> Resource {
    object(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": format!("svc-{i}-slice"), "namespace": "bench",
                     "labels": {"kubernetes.io/service-name": format!("svc-{i}")}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [format!("10.{}.{}.{last_octet}", i / 256, i % 256)]}]
    }))
}

/// An index with the shared class, config and dataplane plus `n` combos.
fn index(n: usize) -> Index {
    let mut index = Index::new();
    let shared = [
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "class"},
               "spec": {"controllerName": "stunner.l7mp.io/gateway-operator",
                        "parametersRef": {"group": "stunner.l7mp.io", "kind": "GatewayConfig", "name": "config", "namespace": "bench"}}}),
        json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "GatewayConfig", "metadata": {"name": "config", "namespace": "bench"},
               "spec": {"userName": "user", "password": "pass"}}),
        json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "Dataplane", "metadata": {"name": "default"}, "spec": {}}),
    ];
    for v in shared {
        index.apply(object(v));
    }
    for i in 0..n {
        index.apply(object(json!({
            "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway",
            "metadata": {"name": format!("gw-{i}"), "namespace": "bench"},
            "spec": {"gatewayClassName": "class", "listeners": [{"name": "udp", "protocol": "TURN-UDP", "port": 3478}]}
        })));
        index.apply(object(json!({
            "apiVersion": "stunner.l7mp.io/v1", "kind": "UDPRoute",
            "metadata": {"name": format!("route-{i}"), "namespace": "bench"},
            "spec": {"parentRefs": [{"name": format!("gw-{i}")}], "rules": [{"backendRefs": [{"name": format!("svc-{i}")}]}]}
        })));
        index.apply(object(json!({
            "apiVersion": "v1", "kind": "Service", "metadata": {"name": format!("svc-{i}"), "namespace": "bench"},
            "spec": {"clusterIP": format!("172.16.{}.{}", i / 256, i % 256)}
        })));
        index.apply(slice(i, 1));
    }
    index
}

/// Mean time per run over enough runs to fill about a second (at least 3).
fn measure(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    let mut runs = 0u32;
    while runs < 3 || start.elapsed() < Duration::from_secs(1) {
        f();
        runs += 1;
    }
    start.elapsed() / runs
}

fn main() {
    let settings = RenderSettings::default();
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2024-01-01T00:00:00Z".parse().unwrap());
    let full = std::env::args().any(|a| a == "--bench");
    let (sizes, many): (&[usize], usize) = if full { (&[1, 8, 64, 512, 1024, 4096], 5000) } else { (&[1, 8], 50) };
    for &n in sizes {
        let index = index(n);
        let t = measure(|| drop(black_box(render_all(&index, &settings, &now))));
        println!(
            "full render, {n:>5} combos: {:>10.3} ms ({:.1} µs/gateway)",
            t.as_secs_f64() * 1e3,
            t.as_secs_f64() * 1e6 / n as f64
        );
    }
    let mut index = index(many);
    let mut octet = 1;
    let t = measure(|| {
        octet = octet % 250 + 2;
        let dirty: Dirty = index.apply(slice(many / 2, octet));
        assert_eq!(dirty.gateways.len(), 1, "one slice change must dirty one Gateway");
        let out = render(&index, &dirty, &settings, &now);
        assert_eq!(out.gateways.len(), 1);
        black_box(out);
    });
    println!("incremental, 1 EndpointSlice among {many} Gateways (apply + render): {:.1} µs", t.as_secs_f64() * 1e6);
}
