//! The core of the STUNner gateway operator: pure code, no network runtime.
//!
//! - [`config`]: the StunnerConfig document served to every dataplane.
//! - [`cds`]: the bodies of the config discovery HTTP API.

pub mod cds;
pub mod config;
