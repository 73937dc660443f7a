//! The core of the STUNner gateway operator: pure code, no network runtime.
//!
//! - [`config`]: the StunnerConfig document served to every dataplane.
//! - [`cds`]: the bodies of the config discovery HTTP API.
//! - [`resources`]: the Kubernetes resources: STUNner's CRD types, the Gateway API types consumed, the CRDs.

pub mod cds;
pub mod config;
pub mod resources;
