//! Generates a plain gRPC client of proto/stunner/cds/v1/cds.proto into `$OUT_DIR/test_client/`
//! for the daemon's integration tests (the same as the client crate's; the server stubs are the
//! CDS crate's). The .proto is parsed in Rust (protox): no protoc.

use std::path::PathBuf;

const PROTO: &str = "../proto/stunner/cds/v1/cds.proto";

fn main() {
    println!("cargo:rerun-if-changed={PROTO}");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let fds = protox::compile([PROTO], ["../proto"]).unwrap_or_else(|e| panic!("{PROTO}: {e}"));
    let test_client = out.join("test_client");
    std::fs::create_dir_all(&test_client).expect("create test_client dir");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .build_transport(true)
        .emit_rerun_if_changed(false)
        .out_dir(&test_client)
        .extern_path(".stunner.cds.v1", "::stunner_gateway::proto")
        .compile_fds(fds)
        .expect("generate the CDS test client stubs");
}
