//! Cluster mode: a Gateway's config waits for the Service the same render asked for.
//!
//! A new Gateway, or a new listener, is rendered before its Service (or the Service's new
//! port) exists, so that render has no public address for it; the Service comes back through
//! the watchers a moment later and the next render has the address. Publishing the first
//! render would hand every dataplane a config that the next one replaces. So while the live
//! Service lacks what was asked for, the Gateway's config is held (the latest one replaces a
//! held one), until the Service is seen as asked or [`SERVICE_WAIT`] passes, whichever comes
//! first. The bound keeps a Service that never comes back as asked (no leader writing, a
//! field the API server rewrites) from holding the config forever; for the same asked-for
//! Service the wait is then not started again.
//!
//! The Gateway's status waits with its config: rendered without the address the Service
//! brings, it would be written once without and once more with it. Held, it is written once
//! (by the render the Service's return triggers), or as held when the wait runs out.

use super::mode::PublicationGate;
use k8s_openapi::api::core::v1::Service;
use std::collections::BTreeMap;
use std::time::Duration;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Index, ObjectKey};
use stunner_gateway::render::{Owned, SerializedStatus, owned_key};
use stunner_gateway_k8s::live;
use tokio::time::Instant;

/// How long a config waits for its Gateway's Service at most (documented in
/// docs/compatibility.md).
pub const SERVICE_WAIT: Duration = Duration::from_secs(5);

/// A held config and when it is published anyway.
#[derive(Debug)]
struct Held {
    config: StunnerConfig,
    until: Instant,
    /// The Service asked for, as JSON.
    service: serde_json::Value,
    /// The Gateway's latest status, not written while held.
    status: Option<SerializedStatus>,
}

/// The held configs, at most one per Gateway.
#[derive(Debug)]
pub struct ServiceWait {
    bound: Duration,
    held: BTreeMap<ObjectKey, Held>,
    /// Per Gateway, the asked-for Service whose wait ran out: not waited for again.
    given_up: BTreeMap<ObjectKey, serde_json::Value>,
}

impl ServiceWait {
    pub fn new(bound: Duration) -> Self {
        ServiceWait { bound, held: BTreeMap::new(), given_up: BTreeMap::new() }
    }
}

impl PublicationGate for ServiceWait {
    /// `None` while the config waits for the Service the same render asked for in `index`.
    fn admit(
        &mut self,
        key: &ObjectKey,
        config: StunnerConfig,
        service: &Owned<Service>,
        status: &mut Option<SerializedStatus>,
        index: &Index,
    ) -> Option<StunnerConfig> {
        let asked = match service {
            Owned::Apply(s) => serde_json::to_value(s).ok(),
            _ => None,
        };
        let pending = asked.filter(|asked| !in_place(index, key, asked));
        let Some(asked) = pending else {
            self.forget(key);
            return Some(config);
        };
        if self.given_up.get(key) == Some(&asked) {
            return Some(config);
        }
        let (until, held_status) = match self.held.remove(key) {
            Some(h) => (h.until, h.status),
            None => (Instant::now() + self.bound, None),
        };
        // The newest status is held; without one, the one held before stays.
        let status = status.take().or(held_status);
        self.held.insert(key.clone(), Held { config, until, service: asked, status });
        None
    }

    /// Gateway `key` has no config any more, or its Service is in place.
    fn forget(&mut self, key: &ObjectKey) {
        self.held.remove(key);
        self.given_up.remove(key);
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.held.values().map(|h| h.until).min()
    }

    fn expired(&mut self) -> Vec<(ObjectKey, StunnerConfig, Option<SerializedStatus>)> {
        let now = Instant::now();
        let due: Vec<ObjectKey> = self.held.iter().filter(|(_, h)| h.until <= now).map(|(k, _)| k.clone()).collect();
        let mut out = Vec::with_capacity(due.len());
        for key in due {
            if let Some(h) = self.held.remove(&key) {
                tracing::info!(gateway = %key, bound = ?self.bound, "the Gateway's Service did not come back in time");
                self.given_up.insert(key.clone(), h.service);
                out.push((key, h.config, h.status));
            }
        }
        out
    }
}

/// Whether the live Service of `key` already has everything `asked` sets (what the writer
/// also takes for "already written").
fn in_place(index: &Index, key: &ObjectKey, asked: &serde_json::Value) -> bool {
    let live = index.services().get(&owned_key(key)).and_then(|s| serde_json::to_value(s).ok());
    live.is_some_and(|live| live::contains(&live, asked))
}
