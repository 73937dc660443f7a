//! Clients of the STUNner config discovery service (CDS).
//!
//! [`cds`] is the typed client library (one-shot GETs and reconnecting watches); the
//! `stunnerctl` binary is built on it. This crate talks to the operator only over the wire
//! protocol (cds-protocol.md): it never depends on the server crate.

pub mod cds;
