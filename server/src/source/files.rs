//! The standalone source: a directory of manifests, turned into index changes.
//!
//! Objects are stored as an API server would store them after `kubectl apply -f DIR -R`: a
//! namespaced object without a namespace lands in `default`, and an object without a
//! `metadata.uid` gets a stable one derived from its identity (owner references of the
//! objects the operator renders for a Gateway point at its uid). Objects are kept per file,
//! so a broken edit leaves that file's last good objects in force, and diffed against what
//! was applied before, so each rescan yields only the objects that really changed or went
//! away.

use super::Change;
use super::manifests::{Decoded, Document, ManifestSet, Rescan};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use stunner_gateway::index::{ObjRef, Resource, decode_value};

/// Where namespaced objects without a namespace go, as with kubectl's default context.
const DEFAULT_NAMESPACE: &str = "default";

pub struct FileSource {
    dir: PathBuf,
    manifests: ManifestSet<Resource>,
    applied: BTreeMap<ObjRef, Resource>,
}

impl FileSource {
    /// A source for `dir`; fails if it is not a readable directory.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        std::fs::read_dir(dir)?;
        Ok(FileSource { dir: dir.to_path_buf(), manifests: ManifestSet::default(), applied: BTreeMap::new() })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Re-reads the directory; returns what the rescan found and the index changes to make.
    pub fn rescan(&mut self) -> std::io::Result<(Rescan, Vec<Change>)> {
        let report = self.manifests.rescan(&self.dir, decode)?;
        if report.changed.is_empty() {
            return Ok((report, Vec::new()));
        }
        // Later files win over earlier ones for the same object, like repeated applies.
        let mut desired = BTreeMap::new();
        for (origin, resource) in self.manifests.objects() {
            if let Some((previous, _)) = desired.insert(resource.obj_ref(), (origin.clone(), resource.clone())) {
                tracing::warn!(at = %origin, earlier = %previous, object = ?resource.obj_ref(), "object defined twice; the later one wins");
            }
        }
        let mut changes: Vec<Change> =
            self.applied.keys().filter(|r| !desired.contains_key(*r)).map(|r| Change::Delete(r.clone())).collect();
        for (r, (_, resource)) in desired {
            if self.applied.get(&r) != Some(&resource) {
                changes.push(Change::Apply(Box::new(resource.clone())));
                self.applied.insert(r, resource);
            }
        }
        for change in &changes {
            if let Change::Delete(r) = change {
                self.applied.remove(r);
            }
        }
        Ok((report, changes))
    }
}

pub(crate) fn decode(doc: &Document) -> Result<Decoded<Resource>, String> {
    // What an API server would refuse is never served; the file's other objects are.
    if let Err(invalid) = stunner_gateway::validate::validate(&doc.value) {
        return Ok(Decoded::Skip(format!("rejected: {invalid}")));
    }
    let resource = match decode_value(doc.value.clone()) {
        Ok(r) => r,
        Err(e) if e.is_unknown_kind() => return Ok(Decoded::Skip(format!("skipped: {e}"))),
        Err(e) => return Err(e.to_string()),
    };
    if resource.meta().name.as_deref().unwrap_or("").is_empty() {
        return Err(format!("{:?} without metadata.name", resource.kind()));
    }
    let needs_namespace = !resource.kind().is_cluster_scoped() && resource.meta().namespace.is_none();
    if !needs_namespace && resource.meta().uid.is_some() {
        return Ok(Decoded::Object(resource));
    }
    let mut value = doc.value.clone();
    let meta = value.get_mut("metadata").and_then(Value::as_object_mut).ok_or("metadata is not a map")?;
    if needs_namespace {
        meta.insert("namespace".into(), DEFAULT_NAMESPACE.into());
    }
    if resource.meta().uid.is_none() {
        let namespace = meta.get("namespace").and_then(Value::as_str).unwrap_or("");
        meta.insert(
            "uid".into(),
            stable_uid(&format!("{:?}/{namespace}/{}", resource.kind(), resource.key().name)).into(),
        );
    }
    decode_value(value).map(Decoded::Object).map_err(|e| e.to_string())
}

/// A UUID-shaped id that is the same for the same object on every run (FNV-1a over its
/// identity), so restarts do not change owner references.
fn stable_uid(identity: &str) -> String {
    let hash = |seed: u64| identity.bytes().fold(seed, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3));
    let (a, b) = (hash(0xcbf2_9ce4_8422_2325), hash(0x8422_2325_cbf2_9ce4));
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xffff,
        b >> 48,
        b & 0xffff_ffff_ffff
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const GATEWAY: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: Gateway\nmetadata:\n  name: gw\nspec:\n  gatewayClassName: stunner\n  listeners:\n  - name: udp\n    port: 3478\n    protocol: UDP\n";
    const CLASS: &str = "apiVersion: gateway.networking.k8s.io/v1\nkind: GatewayClass\nmetadata:\n  name: stunner\nspec:\n  controllerName: stunner.l7mp.io/gateway-operator\n";

    fn summary(changes: &[Change]) -> Vec<String> {
        changes
            .iter()
            .map(|c| match c {
                Change::Apply(r) => format!("apply {:?} {}", r.kind(), r.key()),
                Change::Delete(r) => format!("delete {:?} {}", r.kind, r.key),
            })
            .collect()
    }

    #[test]
    fn applies_changes_and_deletes_what_disappears() {
        let dir = std::env::temp_dir().join(format!("files-source-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("gw.yaml"),
            format!("{GATEWAY}---\n{CLASS}---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"),
        )
        .unwrap();
        let mut src = FileSource::new(&dir).unwrap();
        let (report, changes) = src.rescan().unwrap();
        assert_eq!(summary(&changes), ["apply GatewayClass /stunner", "apply Gateway default/gw"]);
        assert_eq!(report.skipped.len(), 1, "the ConfigMap is skipped with a reason");
        assert!(src.rescan().unwrap().1.is_empty(), "nothing changed");

        // A broken edit keeps the file's objects.
        std::fs::write(dir.join("gw.yaml"), "kind: [\n").unwrap();
        let (report, changes) = src.rescan().unwrap();
        assert!(changes.is_empty());
        assert_eq!(report.errors.len(), 1);

        // The Gateway moves to another file unchanged; the class goes away.
        std::fs::write(dir.join("gw.yaml"), GATEWAY).unwrap();
        std::fs::write(dir.join("more.yaml"), GATEWAY.replace("name: gw", "name: gw2")).unwrap();
        let (_, changes) = src.rescan().unwrap();
        assert_eq!(summary(&changes), ["delete GatewayClass /stunner", "apply Gateway default/gw2"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn objects_get_a_namespace_and_a_stable_uid() {
        let doc = |text: &str| Document {
            origin: super::super::manifests::Origin { path: "x.yaml".into(), line: 1 },
            value: serde_yaml_ng::from_str(text).unwrap(),
        };
        let Ok(Decoded::Object(gw)) = decode(&doc(GATEWAY)) else { panic!() };
        assert_eq!(gw.meta().namespace.as_deref(), Some("default"));
        let uid = gw.meta().uid.clone().unwrap();
        assert_eq!(uid.len(), 36);
        let Ok(Decoded::Object(again)) = decode(&doc(GATEWAY)) else { panic!() };
        assert_eq!(again.meta().uid.as_deref(), Some(uid.as_str()), "stable across reads");
        let Ok(Decoded::Object(other)) = decode(&doc(&GATEWAY.replace("name: gw", "name: gw2"))) else { panic!() };
        assert_ne!(other.meta().uid.as_deref(), Some(uid.as_str()));
        let Ok(Decoded::Object(class)) = decode(&doc(CLASS)) else { panic!() };
        assert_eq!(class.meta().namespace, None, "cluster-scoped objects stay without a namespace");
    }

    #[test]
    fn invalid_objects_are_rejected_with_their_line_and_spare_the_rest_of_the_file() {
        let dir = std::env::temp_dir().join(format!("files-source-invalid-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let bad_port = GATEWAY.replace("name: gw", "name: gw-port").replace("3478", "70000");
        let bad_name = GATEWAY.replace("name: gw", "name: ../x");
        let bad_namespace = GATEWAY.replace("name: gw", "name: gw\n  namespace: a/b");
        let file = format!("{GATEWAY}---\n{bad_port}---\n{bad_name}---\n{bad_namespace}");
        std::fs::write(dir.join("gw.yaml"), &file).unwrap();
        let mut src = FileSource::new(&dir).unwrap();
        let (report, changes) = src.rescan().unwrap();
        assert_eq!(summary(&changes), ["apply Gateway default/gw"], "only the valid object is served");
        let rejected: Vec<(usize, &str)> = report.skipped.iter().map(|e| (e.origin.line, e.message.as_str())).collect();
        assert_eq!(rejected.len(), 3, "{rejected:?}");
        let [(l1, m1), (l2, m2), (l3, m3)] = rejected[..] else { unreachable!() };
        assert_eq!((l1, l2, l3), (12, 23, 34));
        assert!(m1.contains("spec.listeners[0].port: Invalid value: 70000"), "{m1}");
        assert!(m2.contains(r#"metadata.name: Invalid value: "../x""#), "{m2}");
        assert!(m3.contains(r#"metadata.namespace: Invalid value: "a/b""#), "{m3}");
        assert!(
            report.skipped[0]
                .to_string()
                .starts_with(&format!("{}:12: rejected: Gateway", dir.join("gw.yaml").display()))
        );

        // Fixed in place: served from the next rescan on.
        std::fs::write(dir.join("gw.yaml"), file.replace("70000", "3479")).unwrap();
        let (_, changes) = src.rescan().unwrap();
        assert_eq!(summary(&changes), ["apply Gateway default/gw-port"]);
        // Broken by an edit: withdrawn (an API server would keep the last accepted version).
        std::fs::write(dir.join("gw.yaml"), file.replace("70000", "-1")).unwrap();
        let (report, changes) = src.rescan().unwrap();
        assert_eq!(summary(&changes), ["delete Gateway default/gw-port"]);
        assert!(report.skipped[0].message.contains("spec.listeners[0].port: Invalid value: -1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        assert!(FileSource::new(Path::new("/nonexistent/stunner")).is_err());
    }
}
