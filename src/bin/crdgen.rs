//! Writes the CRD manifests generated from the Rust types to `deploy/crds/` (or the directory
//! given as the only argument): `cargo run -p stunner-gateway --bin crdgen`.
//!
//! A binary of the core crate rather than an xtask: the CRDs are a pure function of the core's
//! types ([`stunner_gateway::resources::crd_files`]), the same function the drift test checks
//! `deploy/crds/` against, so generator and check cannot disagree and no extra crate is needed.

#![forbid(unsafe_code)] // none needed (see [workspace.lints] in Cargo.toml)

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = match std::env::args_os().nth(1) {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("deploy/crds"),
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("crdgen: {}: {e}", dir.display());
        return ExitCode::FAILURE;
    }
    for file in stunner_gateway::resources::crd_files() {
        let path = dir.join(&file.name);
        if let Err(e) = std::fs::write(&path, &file.yaml) {
            eprintln!("crdgen: {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
        println!("{}", path.display());
    }
    ExitCode::SUCCESS
}
