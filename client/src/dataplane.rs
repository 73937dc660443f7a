//! stunnerd's own status: `GET /status` on its health-check endpoint (`http://:8086` by
//! default), the JSON of upstream's `StunnerStatus`, which `stunnerctl status` shows.

use crate::cds::Timeouts;
use crate::cds::http::fetch;
use hyper::StatusCode;
use serde::Deserialize;
use std::fmt::Write;
use stunner_gateway::config::go_compat::quote;
use stunner_gateway::config::{AuthConfig, ClusterConfig, ListenerConfig};
use url::Url;

#[derive(Debug, thiserror::Error)]
pub enum DataplaneError {
    #[error("cannot reach stunnerd at {addr}: {reason}")]
    Unreachable { addr: String, reason: String },

    #[error("stunnerd at {addr} answered GET /status with {status}")]
    Status { addr: String, status: String },

    #[error("stunnerd at {addr} sent a status that is not a JSON object: {reason}")]
    Decode { addr: String, reason: String },
}

/// A status as stunnerd sent it: the JSON text (printed as is, like upstream re-encodes the
/// same struct stunnerd encoded) and what the summary needs of it.
#[derive(Debug, Clone)]
pub struct DataplaneStatus {
    pub json: String,
    pub value: serde_json::Value,
    pub status: StunnerdStatus,
}

/// The parts of upstream's `StunnerStatus` the summary shows. Listeners and clusters carry
/// their config fields inline, next to their offload stats.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StunnerdStatus {
    pub admin: AdminStatus,
    pub auth: AuthConfig,
    pub listeners: Vec<WithStats<ListenerConfig>>,
    pub clusters: Vec<WithStats<ClusterConfig>>,
    #[serde(rename = "allocationCount")]
    pub allocation_count: i64,
    pub status: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct AdminStatus {
    pub name: String,
    pub loglevel: String,
    pub metrics_endpoint: String,
    pub healthcheck_endpoint: String,
    pub quota: serde_json::Value,
    pub offload: String,
    pub licensing_info: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct WithStats<T> {
    #[serde(flatten)]
    pub config: T,
    #[serde(default)]
    pub stats: OffloadStats,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct OffloadStats {
    pub rx: Counters,
    pub tx: Counters,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[serde(default)]
pub struct Counters {
    pub pkts: u64,
    pub bytes: u64,
}

impl StunnerdStatus {
    /// Upstream's `StunnerStatus.Summary()`: admin, auth, listeners, clusters, then
    /// allocations and the daemon's state, tab-indented.
    pub fn summary(&self) -> String {
        let listeners: Vec<String> = self.listeners.iter().map(|l| with_stats(&l.config, l.stats)).collect();
        let clusters: Vec<String> = self.clusters.iter().map(|c| with_stats(&c.config, c.stats)).collect();
        format!(
            "{}\n\t{}\n\tlisteners:{}\n\tclusters:{}\n\tallocs:{}/status={}",
            self.admin.summary(),
            self.auth,
            listeners.join(","),
            clusters.join(","),
            self.allocation_count,
            self.status
        )
    }
}

impl AdminStatus {
    /// Upstream's `AdminStatus.String()`.
    fn summary(&self) -> String {
        let mut parts = vec![format!("id={}", quote(&self.name))];
        for (key, value) in [
            ("logLevel", &self.loglevel),
            ("metrics", &self.metrics_endpoint),
            ("health-check", &self.healthcheck_endpoint),
        ] {
            if !value.is_empty() {
                parts.push(format!("{key}={}", quote(value)));
            }
        }
        let quota = match &self.quota {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Null => String::new(),
            other => other.to_string(),
        };
        parts.push(format!("quota={quota}"));
        if !self.licensing_info.is_empty() {
            parts.push(format!("license-info={}", self.licensing_info));
        }
        if !self.offload.is_empty() {
            parts.push(format!("offload={}", self.offload));
        }
        format!("admin:{{{}}}", parts.join(","))
    }
}

fn with_stats(config: &impl std::fmt::Display, s: OffloadStats) -> String {
    let mut out = config.to_string();
    let _ = write!(out, ",offload(rx/tx): {}/{} pkts {}/{} bytes", s.rx.pkts, s.tx.pkts, s.rx.bytes, s.tx.bytes);
    out
}

/// GETs `/status` from the stunnerd whose health check listens on `addr` (`host:port`).
pub async fn status(addr: &str, timeouts: Timeouts) -> Result<DataplaneStatus, DataplaneError> {
    let url = Url::parse(&format!("http://{addr}/status"))
        .map_err(|e| DataplaneError::Unreachable { addr: addr.into(), reason: e.to_string() })?;
    let resp = fetch(addr, &url, timeouts)
        .await
        .map_err(|f| DataplaneError::Unreachable { addr: addr.into(), reason: f.reason() })?;
    if resp.status != StatusCode::OK {
        return Err(DataplaneError::Status { addr: addr.into(), status: resp.status.to_string() });
    }
    let decode = |reason: String| DataplaneError::Decode { addr: addr.into(), reason };
    let text = std::str::from_utf8(&resp.body).map_err(|e| decode(e.to_string()))?.trim().to_string();
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|e| decode(e.to_string()))?;
    if !value.is_object() {
        return Err(decode("not an object".into()));
    }
    let status = serde_json::from_value(value.clone()).map_err(|e| decode(e.to_string()))?;
    Ok(DataplaneStatus { json: text, value, status })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_reads_like_upstream() {
        let json = r#"{"version":"v1","admin":{"name":"stunner/udp-gateway","loglevel":"all:INFO",
          "healthcheck_endpoint":"http://:8086","quota":"0"},
          "auth":{"type":"static","realm":"stunner.l7mp.io","credentials":{"username":"u","password":"p"}},
          "listeners":[{"name":"stunner/udp-gateway/udp","protocol":"TURN-UDP","address":"10.0.0.1","port":3478,
             "routes":["stunner/media"],"stats":{"rx":{"pkts":1,"bytes":2},"tx":{"pkts":3,"bytes":4}}}],
          "clusters":[{"name":"stunner/media","type":"STATIC","protocol":"udp","endpoints":["10.0.0.2"]}],
          "allocationCount":2,"status":"READY"}"#;
        let s: StunnerdStatus = serde_json::from_str(json).unwrap();
        assert_eq!(
            s.summary(),
            "admin:{id=\"stunner/udp-gateway\",logLevel=\"all:INFO\",health-check=\"http://:8086\",quota=0}\n\t\
             static-auth:{realm=\"stunner.l7mp.io\",username=\"<SECRET>\",password=\"<SECRET>\"}\n\t\
             listeners:\"stunner/udp-gateway/udp\":{turn://10.0.0.1:3478?transport=TURN-UDP,public=-:-,cert/key=-/-,routes=[stunner/media]},offload(rx/tx): 1/3 pkts 2/4 bytes\n\t\
             clusters:\"stunner/media\":{type=\"STATIC\",protocol=\"udp\",endpoints=[10.0.0.2]},offload(rx/tx): 0/0 pkts 0/0 bytes\n\t\
             allocs:2/status=READY"
        );
    }
}
