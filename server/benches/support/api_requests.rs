//! The API server's own count of the requests it served (`apiserver_request_total` on its
//! `/metrics`), by verb and by resource: it counts every client the same way, so an operator's
//! requests are the difference of two readings taken while it is the only client at work.
//! A WATCH is counted when it ends, so the watches an operator holds open are not in it.

#![allow(dead_code)] // each benchmark uses its own subset

use kube::Client;
use std::collections::BTreeMap;

/// The verbs that write.
pub const WRITE_VERBS: [&str; 6] = ["POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"];
/// Resources left out: the leader election's lease renewals, which go on while nothing changes,
/// and the IPAddress objects the API server writes itself for each ClusterIP it allocates.
const LEFT_OUT: [&str; 2] = ["leases", "ipaddresses"];

/// Requests served, by (verb, resource, subresource).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Requests(BTreeMap<(String, String, String), f64>);

impl Requests {
    /// The API server's counts now (read with `admin`, whose reads of `/metrics` are not
    /// resource requests and not counted).
    pub async fn read(admin: &Client) -> Requests {
        let request = http::Request::get("/metrics").body(Vec::new()).unwrap();
        let text = admin.request_text(request).await.expect("the API server's /metrics");
        let mut counts = BTreeMap::new();
        for line in text.lines().filter_map(|l| l.strip_prefix("apiserver_request_total")) {
            let Some((labels, value)) = line.rsplit_once(' ') else { continue };
            let (Some(verb), Some(resource)) = (label(labels, "verb"), label(labels, "resource")) else { continue };
            if resource.is_empty() || LEFT_OUT.contains(&resource) {
                continue;
            }
            let subresource = label(labels, "subresource").unwrap_or_default();
            let key = (verb.to_string(), resource.to_string(), subresource.to_string());
            *counts.entry(key).or_default() += value.parse::<f64>().unwrap_or(0.0);
        }
        Requests(counts)
    }

    /// What was served since `before`.
    pub fn since(&self, before: &Requests) -> Requests {
        let mut delta = BTreeMap::new();
        for (key, n) in &self.0 {
            let d = n - before.0.get(key).copied().unwrap_or(0.0);
            if d > 0.0 {
                delta.insert(key.clone(), d);
            }
        }
        Requests(delta)
    }

    /// Requests by verb.
    pub fn by_verb(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for ((verb, _, _), n) in &self.0 {
            *out.entry(verb.clone()).or_default() += n;
        }
        out
    }

    /// Writes by `resource` or `resource/subresource`.
    pub fn writes_by_resource(&self) -> BTreeMap<String, f64> {
        let mut out = BTreeMap::new();
        for ((verb, resource, sub), n) in &self.0 {
            if WRITE_VERBS.contains(&verb.as_str()) {
                let name = if sub.is_empty() { resource.clone() } else { format!("{resource}/{sub}") };
                *out.entry(name).or_default() += n;
            }
        }
        out
    }

    /// All writes.
    pub fn writes(&self) -> f64 {
        // (A sum of no f64 is -0.)
        self.writes_by_resource().values().fold(0.0, |sum, n| sum + n)
    }
}

/// The value of label `name` in `{a="x",b="y"}` (the API server's label values hold no comma).
fn label<'a>(labels: &'a str, name: &str) -> Option<&'a str> {
    let inner = labels.strip_prefix('{')?.strip_suffix('}')?;
    inner.split(',').find_map(|pair| pair.strip_prefix(name)?.strip_prefix("=\"")?.strip_suffix('"'))
}
