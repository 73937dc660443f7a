//! Generates the gRPC service stubs of proto/stunner/cds/v1/cds.proto for the daemon. The
//! messages come from the core crate (`stunner_gateway::proto`), except `ConfigUpdate` and
//! `ListResponse` on the server side: the server sends them pre-encoded (`cds::grpc::Encoded`), so
//! that every watcher of a version shares one encoding. The stubs use `cds::grpc::codec`'s codec,
//! whose per-call buffers are smaller than tonic's default (a watch holds them while it lives).
//! A plain client (for the integration tests; the same as the client crate's) is generated
//! into `$OUT_DIR/test_client/`. The .proto is parsed in Rust (protox): no protoc.

use std::path::PathBuf;

const PROTO: &str = "../proto/stunner/cds/v1/cds.proto";

fn main() {
    println!("cargo:rerun-if-changed={PROTO}");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let fds = || protox::compile([PROTO], ["../proto"]).unwrap_or_else(|e| panic!("{PROTO}: {e}"));
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .emit_rerun_if_changed(false)
        .extern_path(".stunner.cds.v1", "::stunner_gateway::proto")
        .extern_path(".stunner.cds.v1.ConfigUpdate", "crate::cds::grpc::Encoded")
        .extern_path(".stunner.cds.v1.ListResponse", "crate::cds::grpc::Encoded")
        .codec_path("crate::cds::grpc::codec::SmallBufferCodec")
        .compile_fds(fds())
        .expect("generate the CDS server stubs");
    let test_client = out.join("test_client");
    std::fs::create_dir_all(&test_client).expect("create test_client dir");
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(false)
        .build_transport(true)
        .emit_rerun_if_changed(false)
        .out_dir(&test_client)
        .extern_path(".stunner.cds.v1", "::stunner_gateway::proto")
        .compile_fds(fds())
        .expect("generate the CDS test client stubs");
}
