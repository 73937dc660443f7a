//! The typed config discovery API (gRPC, `proto/stunner/cds/v1/cds.proto`, docs/grpc.md),
//! served from the same [`ConfigStore`](super::ConfigStore) as the WebSocket API and on the
//! same port: the CDS listener hands requests with a `content-type: application/grpc*` to
//! [`routes`].
//!
//! Each version of a config is encoded into its `ConfigUpdate` once, on first use, and the
//! bytes are shared by every watcher of that version ([`Encoded`]).

mod codec;
mod convert;
mod encoded;
mod limits;
mod routes;
mod service;
mod settings;
mod stream;
mod stubs;

pub use encoded::Encoded;
pub use limits::ConnectionWatches;
pub use routes::routes;
pub use settings::Settings;
