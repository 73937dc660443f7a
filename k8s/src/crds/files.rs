//! STUNner's CRDs read from a directory of manifests (`--crd-dir`): the Helm chart mounts its
//! own `crds/` there as a ConfigMap, so that `helm upgrade` to a chart with changed CRDs
//! brings the new schemas even though Helm never upgrades `crds/` itself. Bounded: a file, and
//! the directory, may hold only so much.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use std::path::{Path, PathBuf};
use stunner_gateway::manifest::raw_documents;

/// The group every CRD the operator installs must be of.
pub const STUNNER_GROUP: &str = "stunner.l7mp.io";
/// The most bytes one manifest file may hold (the generated Dataplane CRD is about 190 KB).
const MAX_FILE_BYTES: u64 = 4 << 20;
/// The most manifest files the directory may hold.
const MAX_FILES: usize = 64;

/// Why the directory gave no usable CRDs.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error("cannot read {}", .0.display())]
    Io(PathBuf, #[source] std::io::Error),
    #[error("{}: larger than {} bytes", .0.display(), MAX_FILE_BYTES)]
    TooLarge(PathBuf),
    #[error("{}: more than {} manifest files", .0.display(), MAX_FILES)]
    TooMany(PathBuf),
    #[error("{}: not YAML", .0.display())]
    NotYaml(PathBuf),
    #[error("{}: {why}", .path.display())]
    NotStunnerCrd { path: PathBuf, why: String },
    #[error("{}: no CustomResourceDefinition", .0.display())]
    Empty(PathBuf),
}

/// The CRDs of every `*.yaml`/`*.yml` file of `dir` (not hidden ones: a ConfigMap volume keeps
/// its versions in `..`-directories), sorted by name. Every document must be a CRD of
/// [`STUNNER_GROUP`]: the operator's RBAC lets it write those alone.
pub fn read_dir(dir: &Path) -> Result<Vec<CustomResourceDefinition>, ReadError> {
    let entries = std::fs::read_dir(dir).map_err(|e| ReadError::Io(dir.to_path_buf(), e))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry.map_err(|e| ReadError::Io(dir.to_path_buf(), e))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or_default();
        let manifest = !name.starts_with('.') && (name.ends_with(".yaml") || name.ends_with(".yml"));
        if manifest && path.is_file() {
            files.push(path);
            if files.len() > MAX_FILES {
                return Err(ReadError::TooMany(dir.to_path_buf()));
            }
        }
    }
    files.sort();
    let mut crds = Vec::new();
    for path in files {
        crds.extend(read_file(&path)?);
    }
    if crds.is_empty() {
        return Err(ReadError::Empty(dir.to_path_buf()));
    }
    crds.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    Ok(crds)
}

fn read_file(path: &Path) -> Result<Vec<CustomResourceDefinition>, ReadError> {
    let io = |e| ReadError::Io(path.to_path_buf(), e);
    if std::fs::metadata(path).map_err(io)?.len() > MAX_FILE_BYTES {
        return Err(ReadError::TooLarge(path.to_path_buf()));
    }
    let text = std::fs::read_to_string(path).map_err(io)?;
    let docs = raw_documents(&text).ok_or_else(|| ReadError::NotYaml(path.to_path_buf()))?;
    let refuse = |why: String| ReadError::NotStunnerCrd { path: path.to_path_buf(), why };
    let mut crds = Vec::new();
    for doc in docs.into_iter().filter(|d| !d.is_null()) {
        if doc["kind"] != "CustomResourceDefinition" {
            return Err(refuse(format!("a {} is not a CustomResourceDefinition", doc["kind"])));
        }
        let crd: CustomResourceDefinition =
            serde_json::from_value(doc).map_err(|e| refuse(format!("not a valid CustomResourceDefinition: {e}")))?;
        if crd.spec.group != STUNNER_GROUP {
            return Err(refuse(format!("CRD {:?} is of group {}", crd.metadata.name, crd.spec.group)));
        }
        crds.push(crd);
    }
    Ok(crds)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("crd-files-{test}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_the_generated_crds_and_skips_hidden_files() {
        let dir = scratch("generated");
        for file in stunner_gateway::resources::crd_files() {
            std::fs::write(dir.join(&file.name), &file.yaml).unwrap();
        }
        std::fs::write(dir.join("..data"), "not: a manifest").unwrap();
        std::fs::write(dir.join("README"), "not a manifest").unwrap();
        let crds = read_dir(&dir).unwrap();
        let expected = stunner_gateway::resources::crds();
        assert_eq!(crds, expected);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn refuses_other_groups_other_kinds_and_nothing() {
        let dir = scratch("refused");
        assert!(matches!(read_dir(&dir), Err(ReadError::Empty(_))));
        let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: gateways.gateway.networking.k8s.io\nspec:\n  group: gateway.networking.k8s.io\n  names: {kind: Gateway, plural: gateways}\n  scope: Namespaced\n  versions: []\n";
        std::fs::write(dir.join("a.yaml"), crd).unwrap();
        let err = read_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("gateway.networking.k8s.io"), "{err}");
        std::fs::write(dir.join("a.yaml"), "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n").unwrap();
        let err = read_dir(&dir).unwrap_err().to_string();
        assert!(err.contains("ConfigMap"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
