//! Compiles proto/stunner/cds/v1/cds.proto into the prost message types of
//! `stunner_gateway::proto` (no service stubs: those need a network runtime and live in the
//! server and client crates), and saves the encoded descriptor set for gRPC reflection.
//! The .proto is parsed in Rust (protox): no protoc needed.

use protox::prost::Message as _;
use std::path::PathBuf;

const PROTO: &str = "proto/stunner/cds/v1/cds.proto";

fn main() {
    println!("cargo:rerun-if-changed={PROTO}");
    let fds = protox::compile([PROTO], ["proto"]).unwrap_or_else(|e| panic!("{PROTO}: {e}"));
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("cds_descriptor.bin"), fds.encode_to_vec()).expect("write descriptor set");
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .emit_rerun_if_changed(false)
        .compile_fds(fds)
        .expect("generate the CDS message types");
}
