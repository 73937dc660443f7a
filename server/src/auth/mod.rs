//! The TURN credential API (`--auth-bind-address`), wire compatible with STUNner's
//! authentication service (l7mp/stunner-auth-service v1.x): WebRTC application servers ask
//! it for TURN credentials and ICE server configurations. Every replica serves it from the
//! configs it already holds (the CDS store), with no CDS round trip; the credentials are
//! computed by the core crate's `turn_auth`, which `stunnerctl auth` shares.
//!
//! [`params`] reads a request's query, [`answer`] computes the answer, [`http`] serves it,
//! [`metrics`] counts it.

pub mod answer;
pub mod http;
pub mod metrics;
pub mod params;

pub use http::{AuthApi, MAX_CONNECTIONS, router};
pub use metrics::AuthMetrics;
