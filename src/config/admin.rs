//! `admin`: the dataplane's name, logging, metrics, health check and offload settings.

use super::error::ConfigError;
use super::go_compat::{check_url, quote};
use serde::{Deserialize, Serialize};

pub const DEFAULT_STUNNER_NAME: &str = "default-stunnerd";
pub const DEFAULT_LOG_LEVEL: &str = "all:INFO";
pub const DEFAULT_HEALTH_CHECK_ENDPOINT: &str = "http://:8086";
pub const DEFAULT_METRICS_ENDPOINT: &str = "http://:8080/metrics";

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AdminConfig {
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub loglevel: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub metrics_endpoint: String,
    /// Absent means the default endpoint; `Some("")` disables health checks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub healthcheck_endpoint: Option<String>,
    #[serde(skip_serializing_if = "is_zero")]
    pub user_quota: i64,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub offload_engine: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub offload_interfaces: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub license_config: Option<LicenseConfig>,
}

/// Licensing data for premium dataplanes; never set by the open-source operator.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LicenseConfig {
    pub key: String,
    pub hmac: String,
}

fn is_zero(n: &i64) -> bool {
    *n == 0
}

/// The offload engines stunnerd knows, in their canonical spelling.
const OFFLOAD_ENGINES: [&str; 4] = ["None", "XDP", "TC", "Auto"];

/// Matches an offload engine case-insensitively and returns its canonical spelling.
pub fn offload_engine(raw: &str) -> Result<&'static str, ConfigError> {
    OFFLOAD_ENGINES
        .into_iter()
        .find(|e| e.eq_ignore_ascii_case(raw))
        .ok_or_else(|| ConfigError(format!("unknown offload mode: {}", quote(raw))))
}

impl AdminConfig {
    /// Applies defaults and normalises, as stunnerd's `AdminConfig.Validate`.
    pub(crate) fn validate(&mut self) -> Result<(), ConfigError> {
        if self.loglevel.is_empty() {
            self.loglevel = DEFAULT_LOG_LEVEL.into();
        }
        if self.name.is_empty() {
            self.name = DEFAULT_STUNNER_NAME.into();
        }
        if !self.metrics_endpoint.is_empty() {
            check_url(&self.metrics_endpoint).map_err(|e| {
                ConfigError(format!("invalid metric server endpoint URL {}: {e}", self.metrics_endpoint))
            })?;
        }
        match &self.healthcheck_endpoint {
            None => self.healthcheck_endpoint = Some(DEFAULT_HEALTH_CHECK_ENDPOINT.into()),
            Some(ep) => {
                check_url(ep).map_err(|e| ConfigError(format!("invalid health-check server endpoint URL {ep}: {e}")))?
            }
        }
        self.user_quota = self.user_quota.max(0);
        let engine = if self.offload_engine.is_empty() { "None" } else { &self.offload_engine };
        self.offload_engine = offload_engine(engine)?.into();
        self.offload_interfaces.sort();
        Ok(())
    }
}
