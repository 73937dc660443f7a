//! Which version of each Gateway API route kind the API server serves, decided from discovery
//! and followed while the operator runs.
//!
//! Gateway API v1.6 graduated UDPRoute and TCPRoute to `v1`; v1.7's standard channel serves
//! them as `v1` only, its experimental channel as `v1` and `v1alpha2`, and older bundles as
//! `v1alpha2` only. Both versions are views of one stored object, so a kind is watched through
//! one version at a time: `v1` where served, else `v1alpha2`, else not at all. Installing or
//! upgrading the CRDs under a running operator changes the answer; [`follow`] notices within
//! [`POLL_PERIOD`] (at once when a watch asks, see [`Recheck`]) and says what changed in one
//! log line, and the watchers and the writer switch versions (see `source`, `writer`).

use kube::Client;
use std::collections::BTreeMap;
use std::time::Duration;
use stunner_gateway::index::{GATEWAY_API_GROUP, Kind};
use tokio::sync::{Notify, watch};
use tokio_util::sync::CancellationToken;

/// How often discovery is asked again.
pub(crate) const POLL_PERIOD: Duration = Duration::from_secs(5);

/// The kinds served in more than one version: each with its plural, and its versions in order
/// of preference.
const VERSIONED: [(Kind, &str); 2] = [(Kind::GatewayUdpRoute, "udproutes"), (Kind::GatewayTcpRoute, "tcproutes")];
const VERSIONS: [&str; 2] = ["v1", "v1alpha2"];

/// The version each versioned kind is watched and written through; a kind absent is not
/// served at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Served(BTreeMap<Kind, &'static str>);

impl Served {
    /// Whether `kind` is one whose version is decided here.
    pub(crate) fn is_versioned(kind: Kind) -> bool {
        VERSIONED.iter().any(|(k, _)| *k == kind)
    }

    /// The version `kind` is served as, if it is versioned and served.
    pub(crate) fn version(&self, kind: Kind) -> Option<&'static str> {
        self.0.get(&kind).copied()
    }

    /// The API names of `kind` as served: the kind table's, at the served version.
    pub(crate) fn api(&self, kind: Kind) -> kube::core::ApiResource {
        let mut api = kind.api();
        if let Some(version) = self.version(kind) {
            api.api_version = format!("{}/{version}", api.group);
            api.version = version.into();
        }
        api
    }

    /// One line per kind whose version changed from `before`.
    fn changes(&self, before: &Served) -> Vec<String> {
        let show = |v: Option<&str>| v.map_or_else(|| "not served".to_string(), |v| format!("{GATEWAY_API_GROUP}/{v}"));
        VERSIONED
            .iter()
            .filter(|(k, _)| self.version(*k) != before.version(*k))
            .map(|(k, _)| format!("{}: {} (was {})", k.api().kind, show(self.version(*k)), show(before.version(*k))))
            .collect()
    }
}

/// Asks discovery which versions of the versioned kinds the API server serves. A group
/// version that is not installed answers 404: that is a "no", while other failures are errors.
pub(crate) async fn discover(client: &Client) -> Result<Served, kube::Error> {
    let mut served = Served::default();
    for version in VERSIONS.iter().rev() {
        let resources = match client.list_api_group_resources(&format!("{GATEWAY_API_GROUP}/{version}")).await {
            Ok(list) => list.resources,
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => return Err(e),
        };
        for (kind, plural) in VERSIONED {
            if resources.iter().any(|r| r.name == plural) {
                // Later (preferred) versions overwrite earlier ones.
                served.0.insert(kind, version);
            }
        }
    }
    Ok(served)
}

/// A watcher's request to ask discovery again now (its watch failed as if its version went).
#[derive(Debug, Clone, Default)]
pub(crate) struct Recheck(std::sync::Arc<Notify>);

impl Recheck {
    pub(crate) fn request(&self) {
        self.0.notify_one();
    }
}

/// Keeps `tx` at what discovery says, every [`POLL_PERIOD`] or on a [`Recheck`], until
/// `shutdown`. A failed discovery keeps the last answer (and is logged once per failure streak).
pub(crate) async fn follow(client: Client, tx: watch::Sender<Served>, recheck: Recheck, shutdown: CancellationToken) {
    let mut failing = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = tokio::time::sleep(POLL_PERIOD) => {}
            _ = recheck.0.notified() => {}
        }
        match discover(&client).await {
            Ok(now) => {
                failing = false;
                let changes = now.changes(&tx.borrow());
                if !changes.is_empty() {
                    tracing::info!(changes = %changes.join("; "), "served Gateway API route versions changed");
                    tx.send_replace(now);
                }
            }
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(error = %e, "Gateway API discovery failed; keeping the route versions known so far");
            }
            Err(e) => tracing::debug!(error = %e, "Gateway API discovery failed again"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_served_version_names_the_api_and_changes_are_told_per_kind() {
        let none = Served::default();
        let v1 = Served([(Kind::GatewayUdpRoute, "v1"), (Kind::GatewayTcpRoute, "v1")].into());
        let v1alpha2 = Served([(Kind::GatewayUdpRoute, "v1alpha2")].into());
        let api = v1.api(Kind::GatewayUdpRoute);
        assert_eq!((api.api_version.as_str(), api.plural.as_str()), ("gateway.networking.k8s.io/v1", "udproutes"));
        assert_eq!(none.api(Kind::GatewayTcpRoute).api_version, "gateway.networking.k8s.io/v1alpha2");
        assert_eq!(
            v1.changes(&v1alpha2),
            [
                "UDPRoute: gateway.networking.k8s.io/v1 (was gateway.networking.k8s.io/v1alpha2)",
                "TCPRoute: gateway.networking.k8s.io/v1 (was not served)"
            ]
        );
        assert!(v1.changes(&v1.clone()).is_empty());
        assert!(Served::is_versioned(Kind::GatewayTcpRoute) && !Served::is_versioned(Kind::UdpRoute));
    }
}
