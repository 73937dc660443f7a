//! The config discovery service (CDS): the server every `stunnerd` watches for its config
//! (spec: cds-protocol.md). Three layers, each using only the ones above it:
//!
//! 1. The store, which knows no transport: [`store`] keeps the latest snapshot per config id
//!    ([`version`] names it), [`watch`] turns it into what one client must be sent next,
//!    [`nodes`] holds the node addresses configs are patched with, [`clients`] is the table of
//!    connected watch clients, [`authz`] decides who may read what, [`metrics`] counts it all (and
//!    [`latency`] times it).
//! 2. The transports, each putting configs on the wire in an [`store::Encoding`] of its own:
//!    the upstream HTTP and WebSocket API ([`api`], [`handshake`], with frames of our own
//!    making, [`websocket`]; every rule of a watching connection is one state machine without
//!    I/O, [`watch_protocol`], which a few shard loops, [`fanout`], drive for every TCP watch,
//!    not a task each, and a task per watch, [`session`], for any other stream) and the gRPC
//!    API ([`grpc`]). What they know of the connection a request
//!    came on is in [`connection`]; the DNS rebinding guards every request passes first are
//!    in [`host`].
//! 3. The listener, [`serve`]: accepts connections ([`listener`], which the daemon's other
//!    servers share), hands each request to its transport, and owns every task, so shutdown
//!    waits for all of them.
//!
//! The crate depends on the core alone: it knows nothing of Kubernetes, flags or the render
//! loop. The daemon fills the store and supplies what authorization needs to know (the
//! dataplane pods, a token reviewer) through [`authz`]'s types.

pub mod api;
pub mod authz;
pub mod clients;
pub mod connection;
pub mod fanout;
pub mod grpc;
pub mod handshake;
pub mod host;
pub mod latency;
pub mod listener;
pub mod metrics;
pub mod nodes;
pub mod opening;
pub mod serve;
pub mod session;
pub mod store;
pub mod version;
pub mod watch;
pub mod watch_protocol;
pub mod websocket;

pub use metrics::CdsMetrics;
pub use opening::Opening;
pub use serve::{ServerSettings, serve};
pub use store::{ConfigStore, Scope, Snapshot};
pub use version::Version;

#[cfg(test)]
mod tests;
