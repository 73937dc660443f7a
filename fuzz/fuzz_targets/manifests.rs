//! The one manifest loader (`stunner_gateway::manifest`, every kind), as the golden tests run
//! it (unchecked) and as standalone mode runs it (validated as the API server would, default
//! namespace, stable uid), each fed into the index and the renderer.
//!
//! Every object the loader keeps has a name, a namespace when it is namespaced and a uid, at a
//! line of the file; and the render of what it produced is deterministic, with every config it
//! publishes surviving its own wire encoding. No message about a document (why it was
//! rejected, why the file failed) quotes the value of a secret field
//! (`stunner_gateway::resources::redact::SECRET_FIELDS`).

#![no_main]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use std::sync::LazyLock;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Index, Resource};
use serde_json::Value;
use stunner_gateway::manifest::{Admission, load, raw_documents};
use stunner_gateway::resources::redact::is_secret_field;
use stunner_gateway::render::{Owned, RenderSettings, render_all};

static NOW: LazyLock<Time> = LazyLock::new(|| Time("2024-01-01T00:00:00Z".parse().expect("a timestamp")));

fuzz_target!(|data: &[u8]| {
    // The loader takes text; the standalone source skips a file that is not UTF-8.
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("fuzz.yaml");
    if let Ok(unchecked) = load(path, text, Admission::Unchecked) {
        render_checked(unchecked.into_resources());
    }
    let validated = load(path, text, Admission::Validated);
    let messages: Vec<String> = match &validated {
        Ok(m) => m.skipped.iter().map(ToString::to_string).collect(),
        Err(e) => vec![e.to_string()],
    };
    for secret in secret_values(text) {
        assert!(!messages.iter().any(|m| m.contains(&secret)), "{secret} quoted in {messages:?}");
    }
    let Ok(manifest) = validated else { return };
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

/// The values of secret fields in `text`'s documents as a message would quote them (a string
/// in double quotes, as JSON or Rust writes it; a number as written), where nothing else in
/// the input could have put the same text in a message: not part of any other key or value,
/// a string that occurs once in the text, a number of at least 8 digits.
fn secret_values(text: &str) -> Vec<String> {
    let mut fields = Fields::default();
    for doc in raw_documents(text).unwrap_or_default() {
        let items = match doc.get("items").and_then(Value::as_array) {
            Some(items) if doc.get("kind").and_then(Value::as_str) == Some("List") => items.clone(),
            _ => vec![doc],
        };
        for item in items {
            let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default().to_string();
            fields.collect(&kind, &item, String::new());
        }
    }
    let elsewhere = |raw: &str| fields.other.iter().any(|o| o.contains(raw)) || text.matches(raw).count() != 1;
    let mut quoted = Vec::new();
    for (raw, is_string) in &fields.secret {
        if raw.is_empty() || elsewhere(raw) {
            continue;
        }
        if *is_string {
            quoted.push(format!("{raw:?}"));
            quoted.push(Value::from(raw.as_str()).to_string());
        } else if raw.len() >= 8 {
            quoted.push(raw.clone());
        }
    }
    quoted
}

/// The scalars of some documents: those at secret paths (with whether each is a string) and
/// every other key and scalar.
#[derive(Default)]
struct Fields {
    secret: Vec<(String, bool)>,
    other: Vec<String>,
}

impl Fields {
    fn collect(&mut self, kind: &str, v: &Value, path: String) {
        let secret = is_secret_field(kind, &path);
        match v {
            Value::Object(o) => o.iter().for_each(|(k, child)| {
                self.other.push(k.clone());
                self.collect(kind, child, if path.is_empty() { k.clone() } else { format!("{path}.{k}") });
            }),
            Value::Array(items) => items.iter().for_each(|child| self.collect(kind, child, format!("{path}[0]"))),
            Value::String(s) if secret => self.secret.push((s.clone(), true)),
            Value::Number(n) if secret => self.secret.push((n.to_string(), false)),
            Value::String(s) => self.other.push(s.clone()),
            other => self.other.push(other.to_string()),
        }
    }
}
