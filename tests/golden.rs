//! Golden tests of the renderer, in the style of Envoy Gateway's translator tests: each
//! `tests/golden/<case>/input.yaml` (multi-document manifests, optionally with a
//! `settings.yaml` beside it) renders to `output.yaml`. `UPDATE_GOLDEN=1 cargo test --test
//! golden` rewrites the expectations; review the diff. Each case is its own test, named after
//! its directory: `cargo test --test golden -- auth-ref-static` runs one.
//!
//! Every case is also rendered from the manifests applied in reverse order, which must give
//! the same output (rendering does not depend on insertion order).

use libtest_mimic::{Arguments, Failed, Trial};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::path::{Path, PathBuf};
use stunner_gateway::index::{Index, Resource};
use stunner_gateway::manifest::{Admission, load};
use stunner_gateway::render::{DataplaneMode, Owned, RenderOutput, RenderSettings, render_all};

/// Overrides of the default settings for a case.
#[derive(Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase", deny_unknown_fields)]
struct CaseSettings {
    controller_name: Option<String>,
    legacy: bool,
    endpoint_discovery: Option<bool>,
    endpoint_slices: Option<bool>,
    cds_address: Option<String>,
    label_filter: Option<Vec<String>>,
    /// Render as `--enable-finalizer` does at exit.
    finalize: bool,
    /// `--enforce-reference-grants`.
    enforce_reference_grants: bool,
}

impl CaseSettings {
    fn load(dir: &Path) -> RenderSettings {
        let text = std::fs::read_to_string(dir.join("settings.yaml")).unwrap_or_default();
        let c: CaseSettings = serde_yaml_ng::from_str::<Option<CaseSettings>>(&text).unwrap().unwrap_or_default();
        let d = RenderSettings::default();
        RenderSettings {
            controller_name: c.controller_name.unwrap_or(d.controller_name),
            dataplane_mode: if c.legacy { DataplaneMode::Legacy } else { DataplaneMode::Managed },
            endpoint_discovery: c.endpoint_discovery.unwrap_or(d.endpoint_discovery),
            endpoint_slices: c.endpoint_slices.unwrap_or(d.endpoint_slices),
            cds_address: c.cds_address.unwrap_or(d.cds_address),
            label_filter: c.label_filter.unwrap_or(d.label_filter),
            finalizing: c.finalize,
            enforce_reference_grants: c.enforce_reference_grants,
            // Golden cases render as in a cluster: upstream's renderer has no standalone mode.
            held_deployments_only: d.held_deployments_only,
        }
    }
}

fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time("2024-01-01T00:00:00Z".parse().unwrap())
}

fn owned<T: serde::Serialize>(o: &Owned<T>) -> Option<Value> {
    match o {
        Owned::Apply(v) => Some(serde_json::to_value(v).unwrap()),
        Owned::Delete => Some(json!("delete")),
        Owned::Keep => None,
    }
}

/// The output as one readable document; `Keep` entries and empty sections are left out.
fn to_value(out: &RenderOutput) -> Value {
    let mut gateways = Map::new();
    for (key, g) in &out.gateways {
        let mut m = Map::new();
        let fields = [
            ("config", owned(&g.config)),
            ("status", g.status.as_ref().map(|s| serde_json::to_value(s).unwrap())),
            ("service", owned(&g.service)),
            ("tcpService", owned(&g.tcp_service)),
            ("deployment", owned(&g.deployment)),
            // A DaemonSet's delete as the flag it was before DaemonSets were rendered.
            ("deleteDaemonSet", (g.daemon_set == Owned::Delete).then_some(json!(true))),
            ("daemonSet", owned(&g.daemon_set).filter(|_| g.daemon_set != Owned::Delete)),
            (
                "listenerSets",
                (!g.listener_sets.is_empty()).then(|| {
                    let sets = g.listener_sets.iter().map(|(k, s)| (k.to_string(), serde_json::to_value(s).unwrap()));
                    Value::Object(sets.collect())
                }),
            ),
        ];
        m.extend(fields.into_iter().filter_map(|(k, v)| Some((k.to_string(), v?))));
        gateways.insert(key.to_string(), Value::Object(m));
    }
    let config_maps = out.config_maps.iter().filter_map(|(k, v)| Some((k.to_string(), owned(v)?)));
    let routes = out.routes.iter().map(|(r, s)| (format!("{:?} {}", r.kind, r.key), serde_json::to_value(s).unwrap()));
    let classes = out.classes.iter().map(|(n, s)| (n.clone(), serde_json::to_value(s).unwrap()));
    let mut doc = Map::new();
    let sections = [
        ("gateways", gateways),
        ("configMaps", config_maps.collect()),
        ("routes", routes.collect()),
        ("classes", classes.collect()),
    ];
    doc.extend(sections.into_iter().filter(|(_, m)| !m.is_empty()).map(|(k, m)| (k.to_string(), Value::Object(m))));
    Value::Object(doc)
}

/// The case's objects, loaded as standalone mode loads them (kinds the operator does not watch
/// are skipped), but unchecked: some cases pin how the renderer treats objects an API server
/// would refuse (an unknown `authType`, a Gateway without listeners), as upstream's do. An
/// object defined twice (the same kind and key, e.g. a UDPRoute as `v1` and as `v1alpha2`) is
/// the later definition, as in standalone mode and as repeated applies make it.
fn load_case(dir: &Path) -> Result<Vec<Resource>, Failed> {
    let path = dir.join("input.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut resources: Vec<Resource> =
        load(&path, &text, Admission::Unchecked).map_err(|e| e.to_string())?.into_resources().collect();
    let mut seen = std::collections::HashSet::new();
    resources.reverse();
    resources.retain(|r| seen.insert(r.obj_ref()));
    resources.reverse();
    Ok(resources)
}

fn render_case(dir: &Path) -> Result<String, Failed> {
    let settings = CaseSettings::load(dir);
    let resources = load_case(dir)?;
    let mut forward = Index::new();
    resources.iter().cloned().for_each(|r| drop(forward.apply(r)));
    let mut backward = Index::new();
    resources.into_iter().rev().for_each(|r| drop(backward.apply(r)));
    let out = render_all(&forward, &settings, &now());
    if out != render_all(&backward, &settings, &now()) {
        return Err("the output depends on the order the objects were applied in".into());
    }
    Ok(serde_yaml_ng::to_string(&to_value(&out)).unwrap())
}

/// Renders one case and compares (or, with `update`, rewrites) its expected output.
fn check_case(dir: &Path, update: bool) -> Result<(), Failed> {
    let got = render_case(dir)?;
    let path = dir.join("output.yaml");
    if update {
        return std::fs::write(&path, &got).map_err(|e| format!("{}: {e}", path.display()).into());
    }
    let want = std::fs::read_to_string(&path).unwrap_or_default();
    if got != want {
        return Err(format!("output differs (UPDATE_GOLDEN=1 to accept); got:\n{got}").into());
    }
    Ok(())
}

fn cases() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut dirs: Vec<PathBuf> =
        std::fs::read_dir(root).unwrap().map(|e| e.unwrap().path()).filter(|p| p.join("input.yaml").exists()).collect();
    dirs.sort();
    dirs
}

fn main() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let trials = cases()
        .into_iter()
        .map(|dir| {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            Trial::test(name, move || check_case(&dir, update))
        })
        .collect();
    libtest_mimic::run(&Arguments::from_args(), trials).exit();
}
