pub mod admin;
pub mod cds;
pub mod cli;
pub mod metrics;
pub mod reconcile;
pub mod source;
pub mod status;
