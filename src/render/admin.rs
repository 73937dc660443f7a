//! The `admin` section (spec §3.5).

use super::class::ReadyClass;
use super::error::RenderError;
use crate::config::{AdminConfig, DEFAULT_HEALTH_CHECK_ENDPOINT, DEFAULT_LOG_LEVEL, DEFAULT_METRICS_ENDPOINT};

/// The dataplane name in legacy mode, where one config serves a whole class.
pub(crate) const LEGACY_NAME: &str = "stunner-daemon";

/// Renders and validates the admin section; `name` is the config id. The Dataplane (managed
/// mode only) decides metrics, health checks and offload.
pub(crate) fn render(class: &ReadyClass<'_>, name: String) -> Result<AdminConfig, RenderError> {
    let dp = class.dataplane.map(|d| &d.spec);
    let mut admin = AdminConfig {
        name,
        loglevel: class.config.spec.log_level.clone().unwrap_or_else(|| DEFAULT_LOG_LEVEL.into()),
        metrics_endpoint: match dp {
            Some(d) if d.enable_metrics_endpoint => DEFAULT_METRICS_ENDPOINT.into(),
            _ => String::new(),
        },
        healthcheck_endpoint: Some(match dp {
            Some(d) if d.disable_health_check => String::new(),
            _ => DEFAULT_HEALTH_CHECK_ENDPOINT.into(),
        }),
        // stunnerd refuses a user's allocation beyond this many with 486 (where its quota
        // handler is built in: see docs/compatibility.md).
        user_quota: class.config.spec.user_quota,
        offload_engine: dp.map(|d| d.offload_engine.clone()).unwrap_or_default(),
        offload_interfaces: dp.map(|d| d.offload_interfaces.clone()).unwrap_or_default(),
        ..Default::default()
    };
    admin.validate()?;
    Ok(admin)
}
