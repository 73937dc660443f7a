//! The soak's cluster as it should be: per Gateway slot, its Gateway, UDPRoute, EndpointSlice and
//! TLS Secret (each present or not, with the values the churn gave it), beside a Service that
//! stays; the writes that make the API server hold it, and the random edits of the churn.
//!
//! A steady state of round `r` has every object of every slot, with values of that round: two
//! rounds hold the same objects of the same sizes, so what the operator holds at both should
//! be the same, while every config differs (its certificate and its endpoint).

use crate::rng::Rng;
use base64::Engine;
use futures_util::StreamExt;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::{Client, discovery::ApiResource};
use serde_json::{Value, json};

/// The namespace of every object of the soak.
pub const NAMESPACE: &str = "soak";
/// The churn's field manager.
const MANAGER: &str = "soak";
/// Writes in flight when a whole state is written.
const PARALLEL_WRITES: usize = 16;

/// One Gateway slot's objects: `None` while deleted.
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    pub gateway: Option<GatewaySpec>,
    /// The route's backend: the slot whose Service it sends to (beyond the last slot, a
    /// Service that does not exist).
    pub route: Option<usize>,
    /// The version of the endpoint address of this slot's Service.
    pub endpoint: Option<u32>,
    /// The version of the certificate and key.
    pub secret: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GatewaySpec {
    pub udp_port: u16,
    pub tls: bool,
}

/// The kinds the churn edits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    Gateway,
    Route,
    Endpoint,
    Secret,
}

const PARTS: [Part; 4] = [Part::Gateway, Part::Route, Part::Endpoint, Part::Secret];

pub fn gateway_name(i: usize) -> String {
    format!("gw-{i}")
}

/// The certificate of a Secret's version, as the config carries it (base64).
pub fn certificate(i: usize, version: u32) -> String {
    base64::engine::general_purpose::STANDARD.encode(format!("crt-{i}-{version}"))
}

/// The endpoint address of a slot's Service at a version.
pub fn endpoint_address(i: usize, version: u32) -> String {
    format!("10.{}.{}.{}", version % 250, i / 250, i % 250)
}

impl Slot {
    /// No object at all: the slot before the first write.
    pub fn absent() -> Slot {
        Slot { gateway: None, route: None, endpoint: None, secret: None }
    }

    /// Every object, with the values of round `round`.
    pub fn steady(i: usize, round: u32) -> Slot {
        Slot {
            gateway: Some(GatewaySpec { udp_port: 3478, tls: true }),
            route: Some(i),
            endpoint: Some(round),
            secret: Some(round),
        }
    }
}

/// The API of each kind the soak writes, resolved once.
#[derive(Clone)]
pub struct Apis {
    gateways: Api<DynamicObject>,
    routes: Api<DynamicObject>,
    slices: Api<DynamicObject>,
    secrets: Api<DynamicObject>,
    services: Api<DynamicObject>,
}

impl Apis {
    pub async fn new(client: &Client) -> Apis {
        let api = |(resource, _): (ApiResource, _)| Api::namespaced_with(client.clone(), NAMESPACE, &resource);
        Apis {
            gateways: api(crate::e2e::discover(client, "gateway.networking.k8s.io/v1", "Gateway").await),
            routes: api(crate::e2e::discover(client, "stunner.l7mp.io/v1", "UDPRoute").await),
            slices: api(crate::e2e::discover(client, "discovery.k8s.io/v1", "EndpointSlice").await),
            secrets: api(crate::e2e::discover(client, "v1", "Secret").await),
            services: api(crate::e2e::discover(client, "v1", "Service").await),
        }
    }

    fn of(&self, part: Part) -> &Api<DynamicObject> {
        match part {
            Part::Gateway => &self.gateways,
            Part::Route => &self.routes,
            Part::Endpoint => &self.slices,
            Part::Secret => &self.secrets,
        }
    }

    /// Makes the API server hold `part` of slot `i` as `slot` has it (applied, or deleted).
    pub async fn write(&self, i: usize, slot: &Slot, part: Part) {
        let api = self.of(part);
        let name = object_name(i, part);
        match object(i, slot, part) {
            Some(object) => {
                let params = PatchParams::apply(MANAGER).force();
                if let Err(e) = api.patch(&name, &params, &Patch::Apply(&object)).await {
                    panic!("apply {name}: {e}");
                }
            }
            None => match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => panic!("delete {name}: {e}"),
            },
        }
    }

    /// Writes what differs between `before` and `after`, a few objects at a time (each object
    /// once: no two writes race).
    pub async fn write_changes(&self, before: &[Slot], after: &[Slot]) {
        let writes = before
            .iter()
            .zip(after)
            .enumerate()
            .flat_map(|(i, (b, a))| differences(b, a).into_iter().map(move |part| (i, a, part)));
        futures_util::stream::iter(writes)
            .for_each_concurrent(PARALLEL_WRITES, |(i, slot, part)| self.write(i, slot, part))
            .await;
    }

    /// The Services the routes send to, one per slot; never churned.
    pub async fn create_services(&self, slots: usize) {
        futures_util::stream::iter(0..slots)
            .for_each_concurrent(PARALLEL_WRITES, |i| async move {
                let name = format!("media-{i}");
                let service = json!({
                    "apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": NAMESPACE},
                    "spec": {"ports": [{"port": 9000, "protocol": "UDP"}]},
                });
                let params = PatchParams::apply(MANAGER).force();
                if let Err(e) = self.services.patch(&name, &params, &Patch::Apply(&service)).await {
                    panic!("apply {name}: {e}");
                }
            })
            .await;
    }
}

fn object_name(i: usize, part: Part) -> String {
    match part {
        Part::Gateway => gateway_name(i),
        Part::Route => format!("route-{i}"),
        Part::Endpoint => format!("media-{i}"),
        Part::Secret => format!("cert-{i}"),
    }
}

/// The object of `part` of slot `i`, or `None` when the slot has none.
fn object(i: usize, slot: &Slot, part: Part) -> Option<Value> {
    let metadata = json!({"name": object_name(i, part), "namespace": NAMESPACE});
    Some(match part {
        Part::Gateway => {
            let spec = slot.gateway?;
            let mut listeners = vec![json!({"name": "udp", "port": spec.udp_port, "protocol": "UDP"})];
            if spec.tls {
                listeners.push(json!({
                    "name": "tls", "port": 443, "protocol": "TLS",
                    "tls": {"mode": "Terminate", "certificateRefs": [{"name": format!("cert-{i}")}]},
                }));
            }
            json!({
                "apiVersion": "gateway.networking.k8s.io/v1", "kind": "Gateway", "metadata": metadata,
                "spec": {"gatewayClassName": "stunner-gatewayclass", "listeners": listeners},
            })
        }
        Part::Route => json!({
            "apiVersion": "stunner.l7mp.io/v1", "kind": "UDPRoute", "metadata": metadata,
            "spec": {
                "parentRefs": [{"name": gateway_name(i)}],
                "rules": [{"backendRefs": [{"name": format!("media-{}", slot.route?)}]}],
            },
        }),
        Part::Endpoint => {
            let mut metadata = metadata;
            metadata["labels"] = json!({"kubernetes.io/service-name": format!("media-{i}")});
            json!({
                "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "metadata": metadata,
                "addressType": "IPv4",
                "endpoints": [{"addresses": [endpoint_address(i, slot.endpoint?)]}],
                "ports": [{"port": 9000, "protocol": "UDP"}],
            })
        }
        Part::Secret => {
            let version = slot.secret?;
            let key = base64::engine::general_purpose::STANDARD.encode(format!("key-{i}-{version}"));
            json!({
                "apiVersion": "v1", "kind": "Secret", "metadata": metadata, "type": "Opaque",
                "data": {"tls.crt": certificate(i, version), "tls.key": key},
            })
        }
    })
}

/// One random edit of one slot's part: created when absent; when present, changed (three
/// times in four) or deleted. Returns what to write.
pub fn churn(rng: &mut Rng, slots: &mut [Slot]) -> (usize, Part) {
    let n = slots.len() as u64;
    let i = rng.below(n) as usize;
    let part = PARTS[rng.below(PARTS.len() as u64) as usize];
    let delete = rng.chance(25);
    let slot = &mut slots[i];
    // Versions 0 and 1 are the steady rounds': the churn's differ from both.
    let version = |rng: &mut Rng| 2 + rng.below(1_000_000) as u32;
    match part {
        Part::Gateway => {
            let present = slot.gateway.is_some();
            slot.gateway = (!present || !delete)
                .then(|| GatewaySpec { udp_port: [3478, 3479, 3480][rng.below(3) as usize], tls: rng.chance(50) });
        }
        Part::Route => {
            let present = slot.route.is_some();
            // Half of them to a Service that does not exist: what the index keeps for a
            // reference to nothing must go when the reference goes.
            slot.route = (!present || !delete).then(|| rng.below(2 * n) as usize);
        }
        Part::Endpoint => {
            let present = slot.endpoint.is_some();
            slot.endpoint = (!present || !delete).then(|| version(rng));
        }
        Part::Secret => {
            let present = slot.secret.is_some();
            slot.secret = (!present || !delete).then(|| version(rng));
        }
    }
    (i, part)
}

/// The parts whose objects differ between two versions of a slot.
fn differences(before: &Slot, after: &Slot) -> Vec<Part> {
    let mut parts = Vec::new();
    if before.gateway != after.gateway {
        parts.push(Part::Gateway);
    }
    if before.route != after.route {
        parts.push(Part::Route);
    }
    if before.endpoint != after.endpoint {
        parts.push(Part::Endpoint);
    }
    if before.secret != after.secret {
        parts.push(Part::Secret);
    }
    parts
}
