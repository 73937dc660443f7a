//! The one manifest loader (`stunner_gateway::manifest`, every kind), as the golden tests run
//! it (unchecked) and as standalone mode runs it (validated as the API server would, default
//! namespace, stable uid), each fed into the index and the renderer.
//!
//! Every object the loader keeps has a name, a namespace when it is namespaced and a uid, at a
//! line of the file; and the render of what it produced is deterministic, with every config it
//! publishes surviving its own wire encoding.

#![no_main]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::LazyLock;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Index, Resource};
use stunner_gateway::manifest::{Admission, load};
use stunner_gateway::render::{Owned, RenderSettings, render_all};

static NOW: LazyLock<Time> = LazyLock::new(|| Time("2024-01-01T00:00:00Z".parse().expect("a timestamp")));

fuzz_target!(|data: &[u8]| {
    // The loader takes text; the standalone source skips a file that is not UTF-8.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("fuzz.yaml");
    if let Ok(unchecked) = load(path, text, Admission::Unchecked) {
        render_checked(unchecked.into_resources());
    }
    let Ok(manifest) = load(path, text, Admission::Validated) else { return };
    let lines = text.lines().count().max(1);
    for (origin, r) in &manifest.objects {
        assert!((1..=lines).contains(&origin.line), "line {} of {lines}", origin.line);
        let meta = r.meta();
        assert!(meta.name.as_deref().is_some_and(|n| !n.is_empty()), "{:?} without a name", r.kind());
        assert!(meta.uid.as_deref().is_some_and(|u| !u.is_empty()), "{:?} without a uid", r.kind());
        if !r.kind().is_cluster_scoped() {
            assert!(meta.namespace.as_deref().is_some_and(|n| !n.is_empty()), "{:?} without a namespace", r.kind());
        }
    }
    render_checked(manifest.into_resources());
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
