//! The standalone source: a directory of manifests, turned into index changes.
//!
//! Objects are loaded as an API server would store them after `kubectl apply -f DIR -R` (see
//! [`stunner_gateway::manifest`]). They are kept per file, so a broken edit leaves that file's
//! last good objects in force, and diffed against what was applied before, so each rescan
//! yields only the objects that really changed or went away. An object that was applied and
//! whose document an API server would now refuse is held at its last valid version, as an API
//! server keeps an object whose update it refused: only removing its document (or its file)
//! removes it. An object that was never valid is never applied.

use super::manifests::{self, Budget, ManifestSet, Rescan};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use stunner_gateway::index::{Change, ObjRef};
use stunner_gateway::manifest::Origin;

pub struct FileSource {
    dir: PathBuf,
    budget: Budget,
    manifests: ManifestSet,
    /// The digest of what was last applied of each object ([`stunner_gateway::index::Resource::digest`]).
    applied: BTreeMap<ObjRef, u64>,
    /// The applied objects held at their last valid version, with where the invalid edit is.
    held: BTreeMap<ObjRef, Origin>,
}

impl FileSource {
    /// A source for `dir`; fails if it is not a readable directory.
    pub fn new(dir: &Path) -> std::io::Result<Self> {
        std::fs::read_dir(dir)?;
        Ok(FileSource {
            dir: dir.to_path_buf(),
            budget: Budget::default(),
            manifests: ManifestSet::default(),
            applied: BTreeMap::new(),
            held: BTreeMap::new(),
        })
    }

    /// The same source with another budget.
    pub fn with_budget(self, budget: Budget) -> Self {
        FileSource { budget, ..self }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The objects held at their last valid version, with where the invalid edit is.
    pub fn held(&self) -> &BTreeMap<ObjRef, Origin> {
        &self.held
    }

    /// Re-reads the directory; returns what the rescan found and the index changes to make.
    pub fn rescan(&mut self) -> std::io::Result<(Rescan, Vec<Change>)> {
        let (report, mut loaded) = self.manifests.rescan(&self.dir, self.budget)?;
        if report.changed.is_empty() && report.errors.is_empty() {
            return Ok((report, Vec::new()));
        }
        // Later files win over earlier ones for the same object, like repeated applies.
        let mut desired = BTreeMap::new();
        for (path, entry) in self.manifests.entries() {
            if let Some((earlier, previous)) = desired.insert(&entry.object, (path, entry)) {
                tracing::warn!(
                    at = %manifests::origin(path, entry),
                    earlier = %manifests::origin(earlier, previous),
                    object = ?entry.object,
                    "object defined twice; the later one wins"
                );
            }
        }
        // Held: applied, and either no valid document defines it any more, or the one that
        // does is the kept text of a file that now fails to load.
        let held: BTreeMap<ObjRef, Origin> = self
            .manifests
            .invalid_edits()
            .filter(|(object, at)| {
                self.applied.contains_key(*object) && desired.get(*object).is_none_or(|(path, _)| *path == at.path)
            })
            .map(|(object, at)| (object.clone(), at))
            .collect();
        let mut changes: Vec<Change> = self
            .applied
            .keys()
            .filter(|r| !desired.contains_key(*r) && !held.contains_key(*r))
            .map(|r| Change::Delete(r.clone()))
            .collect();
        for (object, (path, entry)) in desired {
            if self.applied.get(object) == Some(&entry.digest) {
                continue;
            }
            // Loaded by this rescan, or else (it was shadowed by a later file, now gone) from
            // its file's kept text.
            let resource = loaded
                .get_mut(path)
                .and_then(|objects| objects.remove(object))
                .or_else(|| self.manifests.reload(path, object));
            if let Some(resource) = resource {
                changes.push(Change::Apply(resource));
                self.applied.insert(object.clone(), entry.digest);
            }
        }
        for change in &changes {
            if let Change::Delete(r) = change {
                self.applied.remove(r);
            }
        }
        self.held = held;
        Ok((report, changes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stunner_gateway::index::Resource;

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
        let rejected: Vec<(usize, String)> =
            report.skipped.iter().map(|e| (e.origin.line, e.reason.to_string())).collect();
        assert_eq!(rejected.len(), 3, "{rejected:?}");
        let [(l1, m1), (l2, m2), (l3, m3)] = &rejected[..] else { unreachable!() };
        assert_eq!((*l1, *l2, *l3), (12, 23, 34));
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
        // Broken by an edit: held at its last valid version, as an API server keeps the last
        // version it accepted.
        std::fs::write(dir.join("gw.yaml"), file.replace("70000", "-1")).unwrap();
        let (report, changes) = src.rescan().unwrap();
        assert_eq!(summary(&changes), Vec::<String>::new());
        assert!(report.skipped[0].reason.to_string().contains("spec.listeners[0].port: Invalid value: -1"));
        let held: Vec<String> = src.held().iter().map(|(r, at)| format!("{} at {at}", r.key)).collect();
        assert_eq!(held, [format!("default/gw-port at {}:12", dir.join("gw.yaml").display())]);
        // Its document removed: deleted, held no more.
        std::fs::write(dir.join("gw.yaml"), GATEWAY).unwrap();
        let (_, changes) = src.rescan().unwrap();
        assert_eq!(summary(&changes), ["delete Gateway default/gw-port"]);
        assert!(src.held().is_empty());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_object_shadowed_by_a_later_file_comes_back_when_that_file_goes() {
        let dir = std::env::temp_dir().join(format!("files-source-shadowed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a.yaml"), GATEWAY).unwrap();
        std::fs::write(dir.join("b.yaml"), GATEWAY.replace("3478", "3479")).unwrap();
        let mut src = FileSource::new(&dir).unwrap();
        let (_, changes) = src.rescan().unwrap();
        let port = |changes: &[Change]| match changes {
            [Change::Apply(r)] => match r {
                Resource::Gateway(gw) => gw.spec.listeners[0].port,
                other => panic!("{other:?}"),
            },
            other => panic!("{:?}", summary(other)),
        };
        assert_eq!(port(&changes), 3479, "the later file wins");

        // b.yaml goes: a.yaml, not loaded again (unchanged), defines the Gateway once more.
        std::fs::remove_file(dir.join("b.yaml")).unwrap();
        let (_, changes) = src.rescan().unwrap();
        assert_eq!(port(&changes), 3478);
        // And the same content back in another file is no change.
        std::fs::write(dir.join("c.yaml"), GATEWAY).unwrap();
        assert!(src.rescan().unwrap().1.is_empty(), "an equal object is not applied again");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_missing_directory_is_an_error() {
        assert!(FileSource::new(Path::new("/nonexistent/stunner")).is_err());
    }
}
