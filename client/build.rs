//! Generates the gRPC client stub of proto/stunner/cds/v1/cds.proto into
//! `$OUT_DIR/stunner.cds.v1.rs` (module `config_discovery_client`, included by src/cds/grpc.rs);
//! the messages come from the core crate (`stunner_gateway::proto`). The .proto is parsed in
//! Rust (protox): no protoc.

const PROTO: &str = "../proto/stunner/cds/v1/cds.proto";

fn main() {
    println!("cargo:rerun-if-changed={PROTO}");
    let fds = protox::compile([PROTO], ["../proto"]).unwrap_or_else(|e| panic!("{PROTO}: {e}"));
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .build_transport(true)
        .emit_rerun_if_changed(false)
        .extern_path(".stunner.cds.v1", "::stunner_gateway::proto")
        .compile_fds(fds)
        .expect("generate the CDS client stub");
}
