//! The core of the STUNner gateway operator: pure code, no network runtime.
//!
//! - [`config`]: the StunnerConfig document served to every dataplane.
//! - [`cds`]: the bodies of the config discovery HTTP API.
//! - [`index`]: the in-memory store of watched objects, with reverse references.
//! - [`render`]: the pure renderer: configs, statuses and owned objects per Gateway.
//! - [`keys`]: well-known label and annotation keys.
//! - [`manifest`]: the manifest loader: files of YAML or JSON into objects with file and line.
//! - [`proto`]: the messages of the gRPC config discovery API (cds.proto).
//! - [`query`]: URL query strings decoded as Go's `net/url.ParseQuery`, for every HTTP port.
//! - [`resources`]: the Kubernetes resources: STUNner's CRD types, the Gateway API types consumed, the CRDs.
//! - [`turn_auth`]: TURN credentials and ICE server configs, for the credential API and `stunnerctl auth`.
//! - [`validate`]: manifests checked as the API server would (CRD schemas, metadata rules), for standalone mode.

#![forbid(unsafe_code)] // none needed (see [workspace.lints] in Cargo.toml)

pub mod cds;
pub mod config;
pub mod index;
pub mod keys;
pub mod manifest;
pub mod proto;
pub mod query;
pub mod render;
pub mod resources;
pub mod turn_auth;
pub mod validate;
