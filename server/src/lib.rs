pub mod admin;
pub mod auth;
pub mod cli;
pub mod console;
#[doc(hidden)]
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod logs;
pub mod memory;
pub mod metrics;
pub mod pipeline;
pub mod pprof;
pub mod reconcile;
pub mod source;
pub mod status;
