//! The manifest loaders: the core's `index::decode_manifests` (multi-document YAML, every
//! kind) and the standalone source's per-file loader (flow-depth bound, validation as the API
//! server would, default namespace, stable uid), each fed into the index and the renderer.
//!
//! Every object the standalone loader keeps has a name, a namespace when it is namespaced and
//! a uid, at a line of the file; and the render of what either loader produced is
//! deterministic, with every config it publishes surviving its own wire encoding.

#![no_main]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::LazyLock;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Index, Resource, decode_manifests};
use stunner_gateway::render::{Owned, RenderSettings, render_all};
use stunner_gateway_operator::fuzzing::load_manifest_file;

static NOW: LazyLock<Time> = LazyLock::new(|| Time("2024-01-01T00:00:00Z".parse().expect("a timestamp")));

fuzz_target!(|data: &[u8]| {
    // Both loaders take text; the standalone source skips a file that is not UTF-8.
    let Ok(text) = std::str::from_utf8(data) else { return };
    render_checked(decode_manifests(text).into_iter().filter_map(Result::ok));

    let Ok((objects, _skipped)) = load_manifest_file(Path::new("fuzz.yaml"), text) else { return };
    let lines = text.lines().count().max(1);
    for (line, r) in &objects {
        assert!((1..=lines).contains(line), "line {line} of {lines}");
        let meta = r.meta();
        assert!(meta.name.as_deref().is_some_and(|n| !n.is_empty()), "{:?} without a name", r.kind());
        assert!(meta.uid.as_deref().is_some_and(|u| !u.is_empty()), "{:?} without a uid", r.kind());
        if !r.kind().is_cluster_scoped() {
            assert!(meta.namespace.as_deref().is_some_and(|n| !n.is_empty()), "{:?} without a namespace", r.kind());
        }
    }
    render_checked(objects.into_iter().map(|(_, r)| r));
});

fn render_checked(resources: impl Iterator<Item = Resource>) {
    let mut index = Index::new();
    for r in resources {
        index.apply(r);
    }
    let settings = RenderSettings::default();
    let out = render_all(&index, &settings, &NOW);
    assert_eq!(render_all(&index, &settings, &NOW), out, "render is deterministic");
    for gateway in out.gateways.values() {
        if let Owned::Apply(config) = &gateway.config {
            let back: StunnerConfig = serde_json::from_str(&config.to_json()).expect("a rendered config decodes");
            assert_eq!(&back, config, "a rendered config survives its wire encoding");
        }
    }
}
