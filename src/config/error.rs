//! The error of config validation; a leaf, so every part of the config can name it.

/// A validation failure, with the dataplane's exact error text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);
