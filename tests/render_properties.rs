//! Property test of the renderer on random small indexes: it never panics, it is deterministic,
//! it does not depend on the order objects arrived in, and incremental renders agree with full
//! ones. Inputs come from a seeded generator (no external crate), so failures reproduce by seed.

use serde_json::{Value, json};
use stunner_gateway::index::{Index, Resource, decode_value};
use stunner_gateway::render::{DataplaneMode, RenderSettings, render, render_all};

/// xorshift64*: small, seedable, good enough to pick among a few options.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() % items.len() as u64) as usize]
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

const NAMES: [&str; 3] = ["a", "b", "c"];
const NAMESPACES: [&str; 2] = ["ns", "other"];
const PROTOCOLS: [&str; 7] = ["UDP", "TCP", "TLS", "DTLS", "turn-udp", "udp", "HTTP"];

fn random_objects(rng: &mut Rng) -> Vec<Value> {
    let mut out = vec![
        json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "GatewayClass", "metadata": {"name": "class"},
        "spec": {"controllerName": rng.pick(&["stunner.l7mp.io/gateway-operator", "other/ctrl"]),
                 "parametersRef": {"group": "stunner.l7mp.io", "kind": "GatewayConfig", "name": "config", "namespace": "ns"}}}),
    ];
    if rng.chance(90) {
        let auth = rng
            .pick(&[
                json!({"userName": "u", "password": "p"}),
                json!({"authType": "longterm"}),
                json!({"authRef": {"name": "a"}}),
                json!({"authType": "bogus"}),
            ])
            .clone();
        out.push(json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "GatewayConfig", "metadata": {"name": "config", "namespace": "ns"}, "spec": auth}));
    }
    if rng.chance(90) {
        out.push(json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "Dataplane", "metadata": {"name": "default"},
            "spec": {"offloadEngine": rng.pick(&["", "XDP", "junk"])}}));
    }
    for name in NAMES {
        let ns = *rng.pick(&NAMESPACES);
        if rng.chance(70) {
            let listeners: Vec<Value> = (0..rng.next() % 4)
                .map(|i| {
                    json!({"name": format!("l{i}"), "protocol": rng.pick(&PROTOCOLS), "port": 1 + rng.next() % 3,
                    "tls": {"certificateRefs": [{"name": rng.pick(&NAMES)}]},
                    "allowedRoutes": {"namespaces": {"from": rng.pick(&["All", "Same", "Selector"])}}})
                })
                .collect();
            out.push(json!({"apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": {"name": name, "namespace": ns},
                "spec": {"gatewayClassName": "class", "listeners": listeners}}));
        }
        if rng.chance(70) {
            let backends: Vec<Value> = (0..rng.next() % 3)
                .map(|_| json!({"name": rng.pick(&NAMES), "namespace": rng.pick(&NAMESPACES), "group": rng.pick(&["", "stunner.l7mp.io", "x"]),
                    "kind": rng.pick(&["Service", "StaticService"]), "port": rng.next() % 70000, "endPort": rng.next() % 70000}))
                .collect();
            let parents: Vec<Value> = (0..rng.next() % 3)
                .map(|_| json!({"name": rng.pick(&NAMES), "namespace": rng.pick(&NAMESPACES)}))
                .collect();
            let api = rng.pick(&["stunner.l7mp.io/v1", "gateway.networking.k8s.io/v1alpha2"]);
            out.push(json!({"apiVersion": api, "kind": "UDPRoute", "metadata": {"name": name, "namespace": ns},
                "spec": {"parentRefs": parents, "rules": [{"backendRefs": backends}]}}));
        }
        if rng.chance(50) {
            out.push(json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns,
                "annotations": {"stunner.l7mp.io/related-gateway-name": format!("{ns}/{name}"), "stunner.l7mp.io/targetport": "junk"}},
                "spec": {"type": rng.pick(&["LoadBalancer", "NodePort"]), "clusterIP": rng.pick(&["10.0.0.1", "None"]),
                         "ports": [{"name": "l0", "port": 1, "protocol": "UDP", "nodePort": 30000}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}}));
        }
        if rng.chance(50) {
            out.push(json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
                "metadata": {"name": name, "namespace": ns, "labels": {"kubernetes.io/service-name": rng.pick(&NAMES)}},
                "endpoints": [{"addresses": [rng.pick(&["1.1.1.1", "2.2.2.2", "not-an-ip"])]}]}));
        }
        if rng.chance(40) {
            out.push(json!({"apiVersion": "stunner.l7mp.io/v1", "kind": "StaticService", "metadata": {"name": name, "namespace": ns},
                "spec": {"prefixes": [rng.pick(&["10.0.0.0/8", "bogus"])]}}));
        }
        if rng.chance(40) {
            out.push(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns},
                "data": {"tls.crt": "Y2VydA==", "tls.key": "a2V5", "username": "dQ=="}}));
        }
        if rng.chance(30) {
            out.push(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
                "status": {"addresses": [{"type": "ExternalIP", "address": rng.pick(&["1.1.1.1", "::1"])}]}}));
        }
    }
    // Last, so that the incremental check below often starts from a grant.
    for name in NAMES {
        if rng.chance(40) {
            let from = json!([{"group": rng.pick(&["stunner.l7mp.io", "gateway.networking.k8s.io"]), "kind": "UDPRoute",
                "namespace": rng.pick(&NAMESPACES)}]);
            let target = *rng.pick(&NAMES);
            let to = rng
                .pick(&[
                    json!([{"group": "", "kind": "Service"}]),
                    json!([{"group": "", "kind": "Service", "name": target}]),
                    json!([{"group": "stunner.l7mp.io", "kind": "StaticService"}]),
                ])
                .clone();
            out.push(json!({"apiVersion": "gateway.networking.k8s.io/v1beta1", "kind": "ReferenceGrant",
                "metadata": {"name": name, "namespace": rng.pick(&NAMESPACES)}, "spec": {"from": from, "to": to}}));
        }
    }
    out
}

fn build(objects: &[Resource]) -> Index {
    let mut index = Index::new();
    objects.iter().cloned().for_each(|r| drop(index.apply(r)));
    index
}

#[test]
fn random_indexes_render_deterministically() {
    let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2024-01-01T00:00:00Z".parse().unwrap());
    for seed in 1..=3000u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let objects: Vec<Resource> = random_objects(&mut rng).into_iter().map(|v| decode_value(v).unwrap()).collect();
        let settings = RenderSettings {
            dataplane_mode: if rng.chance(30) { DataplaneMode::Legacy } else { DataplaneMode::Managed },
            endpoint_discovery: rng.chance(80),
            endpoint_slices: rng.chance(80),
            enforce_reference_grants: rng.chance(60),
            ..Default::default()
        };
        let index = build(&objects);
        let out = render_all(&index, &settings, &now);
        assert_eq!(out, render_all(&index, &settings, &now), "seed {seed}: not deterministic");
        let mut reversed = objects.clone();
        reversed.reverse();
        assert_eq!(out, render_all(&build(&reversed), &settings, &now), "seed {seed}: depends on insertion order");
        // Incremental: rendering what the last object dirtied agrees with the full render.
        let (last, rest) = objects.split_last().unwrap();
        let mut index = build(rest);
        let before = render_all(&index, &settings, &now);
        let dirty = index.apply(last.clone());
        let part = render(&index, &dirty, &settings, &now);
        for (k, v) in &part.gateways {
            assert_eq!(Some(v), out.gateways.get(k), "seed {seed}: incremental gateway {k} differs");
        }
        for (k, v) in &part.routes {
            assert_eq!(Some(v), out.routes.get(k), "seed {seed}: incremental route {k:?} differs");
        }
        // And what it did not dirty did not change.
        for (k, v) in out.gateways.iter().filter(|(k, _)| !part.gateways.contains_key(*k)) {
            assert_eq!(Some(v), before.gateways.get(k), "seed {seed}: gateway {k} changed but was not dirtied");
        }
        for (k, v) in out.routes.iter().filter(|(k, _)| !part.routes.contains_key(*k)) {
            assert_eq!(Some(v), before.routes.get(k), "seed {seed}: route {k:?} changed but was not dirtied");
        }
    }
}
