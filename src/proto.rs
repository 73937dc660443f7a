//! The messages of the typed config discovery API (`proto/stunner/cds/v1/cds.proto`), as prost
//! types generated at build time. Only messages: the gRPC service stubs live in the server
//! (`stunner_gateway_operator::grpc`) and client crates, which map the package onto this
//! module, so that the core stays free of any network runtime.

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod generated {
    include!(concat!(env!("OUT_DIR"), "/stunner.cds.v1.rs"));
}

pub use generated::*;

/// The encoded `FileDescriptorSet` of cds.proto, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/cds_descriptor.bin"));

/// The fully qualified gRPC service name.
pub const SERVICE_NAME: &str = "stunner.cds.v1.ConfigDiscovery";
