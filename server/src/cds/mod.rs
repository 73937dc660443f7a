//! The config discovery service (CDS): the server every `stunnerd` watches for its config
//! (spec: cds-protocol.md).
//!
//! [`store`] keeps the latest snapshot per config id; [`watch`] turns it into what one client
//! must be sent next; [`api`], [`handshake`] and [`session`] speak the upstream HTTP and
//! WebSocket protocol, with frames of our own making ([`websocket`]); [`clients`] is the table of connected watch clients; [`authz`] decides who may read what; [`serve`] runs the
//! listener, which also hands gRPC requests to [`crate::grpc`].

pub mod api;
pub mod authz;
pub mod clients;
pub mod handshake;
pub mod metrics;
pub mod nodes;
pub mod serve;
pub mod session;
pub mod store;
pub mod version;
pub mod watch;
pub mod websocket;

pub use metrics::CdsMetrics;
pub use serve::{ServerSettings, serve};
pub use store::{ConfigStore, Scope, Snapshot};
pub use version::Version;

#[cfg(test)]
mod tests;
