//! Clients of the STUNner config discovery service (CDS) and of the dataplane.
//!
//! [`cds`] is the typed client library (one-shot GETs and reconnecting watches); [`cluster`]
//! finds the operator and the dataplane pods in a cluster and port-forwards to them, as kubectl
//! does; [`dataplane`] reads a stunnerd's status (TURN credentials come from the core crate's
//! `turn_auth`, which the operator's credential API shares, and [`auth_api`] asks that API);
//! [`ice`] is the WebRTC peer of the
//! ICE test. The `stunnerctl` and `icetester` binaries are built on them.
//! This crate talks to the operator only over the wire protocol (cds-protocol.md): it never
//! depends on the server crate.

#![forbid(unsafe_code)] // none needed (see [workspace.lints] in Cargo.toml)

pub mod auth_api;
pub mod cds;
pub mod cluster;
pub mod dataplane;
pub mod ice;
