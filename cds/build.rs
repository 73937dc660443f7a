//! Generates the gRPC service stubs of proto/stunner/cds/v1/cds.proto. The messages come from
//! the core crate (`stunner_gateway::proto`), except `ConfigUpdate` and `ListResponse`: the
//! server sends them pre-encoded (`grpc::Encoded`), so that every watcher of a version shares one
//! encoding. The stubs use `grpc::codec`'s codec, whose per-call buffers are smaller than tonic's
//! default (a watch holds them while it lives). The .proto is parsed in Rust (protox): no protoc.

const PROTO: &str = "../proto/stunner/cds/v1/cds.proto";

fn main() {
    println!("cargo:rerun-if-changed={PROTO}");
    let fds = protox::compile([PROTO], ["../proto"]).unwrap_or_else(|e| panic!("{PROTO}: {e}"));
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(true)
        .emit_rerun_if_changed(false)
        .extern_path(".stunner.cds.v1", "::stunner_gateway::proto")
        .extern_path(".stunner.cds.v1.ConfigUpdate", "crate::grpc::Encoded")
        .extern_path(".stunner.cds.v1.ListResponse", "crate::grpc::Encoded")
        .codec_path("crate::grpc::codec::SmallBufferCodec")
        .compile_fds(fds)
        .expect("generate the CDS server stubs");
}
