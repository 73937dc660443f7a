//! The CRDs: `deploy/crds/` must be what the types generate (CI catches drift), and the
//! generated CRDs must match upstream's field by field, but for the deliberate differences
//! listed in [`ALLOWED`].
//!
//! Upstream's CRDs are read at test time, never copied into this repository, from the first of:
//! `$STUNNER_REFERENCE_CRDS` (a directory of `stunner.l7mp.io_*.yaml`); the Go module cache at the
//! version pinned in `tests/reference/go.mod` (`tests/reference/fetch.sh` downloads it);
//! `$STUNNER_OPERATOR_GIT` (a git directory of upstream, read at the pinned commit). With none of
//! them the comparison is skipped with a notice, or fails if `STUNNER_REQUIRE_REFERENCE` is set
//! (tests/support/external.rs). Not `CI`, as for the built tools: the module proxy does not
//! serve the pinned pseudo-version, so CI may have no reference to compare with.

#[path = "support/external.rs"]
mod external;

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use stunner_gateway::resources::{crd_files, crds};

const UPSTREAM_MODULE: &str = "github.com/l7mp/stunner-gateway-operator";

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn deploy_crds_are_generated_from_the_types() {
    let dir = repo_root().join("deploy/crds");
    let regenerate = "run `cargo run -p stunner-gateway --bin crdgen` and commit deploy/crds";
    let files = crd_files();
    for file in &files {
        let path = dir.join(&file.name);
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(on_disk == file.yaml, "{} is not what the types generate: {regenerate}", path.display());
    }
    let expected: BTreeSet<_> = files.iter().map(|f| f.name.clone()).collect();
    let on_disk: BTreeSet<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}: {regenerate}", dir.display()))
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".yaml"))
        .collect();
    assert_eq!(on_disk, expected, "stale or missing files in {}: {regenerate}", dir.display());
}

#[test]
fn generated_yaml_parses_back_to_the_crds() {
    for (file, crd) in crd_files().iter().zip(crds()) {
        let parsed: Value = serde_yaml_ng::from_str(&file.yaml).unwrap();
        assert_eq!(numbers_as_floats(parsed), numbers_as_floats(serde_json::to_value(&crd).unwrap()), "{}", file.name);
    }
}

/// Makes `1` and `1.0` compare equal: schema bounds are floats in Rust, integers in YAML.
fn numbers_as_floats(value: Value) -> Value {
    match value {
        Value::Number(n) => Value::from(n.as_f64().unwrap()),
        Value::Array(items) => Value::Array(items.into_iter().map(numbers_as_floats).collect()),
        Value::Object(map) => Value::Object(map.into_iter().map(|(k, v)| (k, numbers_as_floats(v))).collect()),
        other => other,
    }
}

/// A difference from upstream that is deliberate: `file` and `version` name the CRD version
/// (`*` for any), `path` the schema node (a trailing `*` matches a prefix), `key` the keyword.
struct Allowed {
    file: &'static str,
    version: &'static str,
    path: &'static str,
    key: &'static str,
    reason: &'static str,
}

const ALLOWED: &[Allowed] = &[
    Allowed {
        file: "stunner.l7mp.io_gatewayconfigs.yaml",
        version: "*",
        path: "",
        key: "subresources",
        reason: "controller-gen writes an empty `subresources: {}` beside printer columns; empty and absent are the same",
    },
    Allowed {
        file: "stunner.l7mp.io_gatewayconfigs.yaml",
        version: "v1",
        path: ".spec.ipFamilies",
        key: "<property>",
        reason: "ours: the IP families of dual-stack Gateway Services (docs/compatibility.md)",
    },
    Allowed {
        file: "stunner.l7mp.io_gatewayconfigs.yaml",
        version: "v1",
        path: ".spec.ipFamilyPolicy",
        key: "<property>",
        reason: "ours: the IP family policy of dual-stack Gateway Services (docs/compatibility.md)",
    },
];

fn allowed(file: &str, diff: &Diff) -> Option<&'static Allowed> {
    ALLOWED.iter().find(|a| {
        a.file == file
            && (a.version == "*" || a.version == diff.version)
            && a.key == diff.key
            && match a.path.strip_suffix('*') {
                Some(prefix) => diff.path.starts_with(prefix),
                None => a.path == diff.path,
            }
    })
}

#[derive(Debug)]
struct Diff {
    version: String,
    path: String,
    key: String,
    ours: Option<Value>,
    upstream: Option<Value>,
}

impl std::fmt::Display for Diff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let show = |v: &Option<Value>| v.as_ref().map_or("<absent>".to_string(), Value::to_string);
        write!(
            f,
            "[{}] {}: {}: ours {} / upstream {}",
            self.version,
            if self.path.is_empty() { "<root>" } else { &self.path },
            self.key,
            show(&self.ours),
            show(&self.upstream)
        )
    }
}

/// Collects differences between two CRDs: names, scope, and per version everything but the
/// schema's descriptions.
fn diff_crds(ours: &Value, upstream: &Value) -> Vec<Diff> {
    let mut diffs = Vec::new();
    let mut top = |key: &str, a: Option<&Value>, b: Option<&Value>| {
        if a != b {
            diffs.push(Diff {
                version: "*".into(),
                path: String::new(),
                key: key.into(),
                ours: a.cloned(),
                upstream: b.cloned(),
            });
        }
    };
    top("metadata.name", ours.pointer("/metadata/name"), upstream.pointer("/metadata/name"));
    for key in ["group", "scope", "conversion", "preserveUnknownFields"] {
        top(key, ours["spec"].get(key), upstream["spec"].get(key));
    }
    for key in ["kind", "listKind", "plural", "singular", "shortNames", "categories"] {
        top(&format!("names.{key}"), ours["spec"]["names"].get(key), upstream["spec"]["names"].get(key));
    }
    let names = |crd: &Value| -> Vec<Value> {
        crd["spec"]["versions"].as_array().unwrap().iter().map(|v| v["name"].clone()).collect()
    };
    top("versions", Some(&Value::from(names(ours))), Some(&Value::from(names(upstream))));

    for a in ours["spec"]["versions"].as_array().unwrap() {
        let version = a["name"].as_str().unwrap();
        let Some(b) = upstream["spec"]["versions"].as_array().unwrap().iter().find(|b| b["name"] == version) else {
            continue;
        };
        let keys: BTreeSet<&String> = a.as_object().unwrap().keys().chain(b.as_object().unwrap().keys()).collect();
        for key in keys.into_iter().filter(|k| *k != "schema" && *k != "name") {
            if a.get(key) != b.get(key) {
                diffs.push(Diff {
                    version: version.into(),
                    path: String::new(),
                    key: key.clone(),
                    ours: a.get(key).cloned(),
                    upstream: b.get(key).cloned(),
                });
            }
        }
        let schema = "/schema/openAPIV3Schema";
        diff_schemas(version, "", a.pointer(schema).unwrap(), b.pointer(schema).unwrap(), &mut diffs);
    }
    diffs
}

/// Walks two schemas in step. Paths read `.spec.realm`, `[]` for array items, `{}` for map values.
fn diff_schemas(version: &str, path: &str, a: &Value, b: &Value, diffs: &mut Vec<Diff>) {
    let diff = |key: &str, ours: Option<&Value>, upstream: Option<&Value>| Diff {
        version: version.into(),
        path: path.into(),
        key: key.into(),
        ours: ours.cloned(),
        upstream: upstream.cloned(),
    };
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        if a != b {
            diffs.push(diff("<schema>", Some(a), Some(b)));
        }
        return;
    };
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        let (x, y) = (a.get(key), b.get(key));
        match (key.as_str(), x, y) {
            ("description", _, _) => {}
            ("properties", Some(Value::Object(x)), Some(Value::Object(y))) => {
                let names: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                for name in names {
                    let sub = format!("{path}.{name}");
                    match (x.get(name), y.get(name)) {
                        (Some(p), Some(q)) => diff_schemas(version, &sub, p, q, diffs),
                        (p, q) => diffs.push(Diff {
                            version: version.into(),
                            path: sub,
                            key: "<property>".into(),
                            ours: p.map(|_| Value::from("present")),
                            upstream: q.map(|_| Value::from("present")),
                        }),
                    }
                }
            }
            ("items", Some(x), Some(y)) => diff_schemas(version, &format!("{path}[]"), x, y, diffs),
            ("additionalProperties", Some(x @ Value::Object(_)), Some(y @ Value::Object(_))) => {
                diff_schemas(version, &format!("{path}{{}}"), x, y, diffs)
            }
            ("anyOf" | "allOf" | "oneOf", Some(Value::Array(x)), Some(Value::Array(y))) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y).enumerate() {
                    diff_schemas(version, &format!("{path}/{key}[{i}]"), p, q, diffs);
                }
            }
            ("required", Some(Value::Array(x)), Some(Value::Array(y))) => {
                let set = |v: &Vec<Value>| v.iter().map(Value::to_string).collect::<BTreeSet<_>>();
                if set(x) != set(y) {
                    diffs.push(diff(key, a.get(key), b.get(key)));
                }
            }
            _ => {
                if x != y {
                    diffs.push(diff(key, x, y));
                }
            }
        }
    }
}

/// The version pinned in tests/reference/go.mod.
fn upstream_version() -> String {
    let go_mod = std::fs::read_to_string(repo_root().join("tests/reference/go.mod")).unwrap();
    go_mod
        .lines()
        .find_map(|line| match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["require", module, version] if module == UPSTREAM_MODULE => Some(version.to_string()),
            _ => None,
        })
        .expect("tests/reference/go.mod requires the upstream operator")
}

/// Reads one of upstream's CRD manifests by file name.
type ReadReference = Box<dyn Fn(&str) -> String>;

/// Where upstream's CRDs are read from, or why they cannot be.
fn reference_source() -> Result<ReadReference, String> {
    if let Some(dir) = std::env::var_os("STUNNER_REFERENCE_CRDS") {
        let dir = PathBuf::from(dir);
        return Ok(Box::new(move |name| read(&dir.join(name))));
    }
    let version = upstream_version();
    let cache = Command::new("go")
        .args(["env", "GOMODCACHE"])
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()));
    if let Some(cache) = cache {
        let dir = cache.join(format!("{UPSTREAM_MODULE}@{version}/config/crd/bases"));
        if dir.is_dir() {
            return Ok(Box::new(move |name| read(&dir.join(name))));
        }
    }
    if let Some(git_dir) = std::env::var_os("STUNNER_OPERATOR_GIT") {
        // A pseudo-version ends in the commit's 12-digit abbreviation.
        let commit = version.rsplit('-').next().unwrap().to_string();
        return Ok(Box::new(move |name| {
            let out = Command::new("git")
                .arg("--git-dir")
                .arg(&git_dir)
                .args(["show", &format!("{commit}:config/crd/bases/{name}")])
                .output()
                .expect("git runs");
            assert!(out.status.success(), "git show {commit}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        }));
    }
    Err(format!("{UPSTREAM_MODULE}@{version} is not in the Go module cache (run tests/reference/fetch.sh)"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn crds_match_upstream() {
    let read_reference = match reference_source() {
        Ok(read) => read,
        Err(why) => {
            external::unavailable(&why, "STUNNER_REQUIRE_REFERENCE");
            return;
        }
    };
    let mut unexpected = Vec::new();
    let mut used = BTreeSet::new();
    for (file, crd) in crd_files().iter().zip(crds()) {
        let upstream: Value = serde_yaml_ng::from_str(&read_reference(&file.name)).unwrap();
        let ours = numbers_as_floats(serde_json::to_value(&crd).unwrap());
        for diff in diff_crds(&ours, &numbers_as_floats(upstream)) {
            match allowed(&file.name, &diff) {
                Some(a) => {
                    used.insert(a.reason);
                }
                None => unexpected.push(format!("{} {diff}", file.name)),
            }
        }
    }
    let unused: Vec<_> = ALLOWED.iter().filter(|a| !used.contains(a.reason)).map(|a| a.reason).collect();
    assert!(unexpected.is_empty(), "{} differences from upstream:\n{}", unexpected.len(), unexpected.join("\n"));
    assert!(unused.is_empty(), "allowed differences that no longer occur: {unused:#?}");
}
