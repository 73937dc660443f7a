//! Which version of each Gateway API kind served in several the API server serves, decided
//! from discovery and followed while the operator runs.
//!
//! Gateway API v1.6 graduated UDPRoute and TCPRoute to `v1`; v1.7's standard channel serves
//! them as `v1` only, its experimental channel as `v1` and `v1alpha2`, and older bundles as
//! `v1alpha2` only. ReferenceGrant is `v1` since v1.5 and `v1beta1` before (both served for a
//! while). ListenerSet is `v1` since v1.5 (GEP-1713), and not served before: it is watched
//! only while served. All versions are views of one stored object, so a kind is watched through one
//! version at a time: the newest served, else not at all. Installing or
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

/// The kinds served in more than one version: each with its plural and its versions, the
/// preferred first.
const VERSIONED: [(Kind, &str, &[&str]); 4] = [
    (Kind::GatewayUdpRoute, "udproutes", &["v1", "v1alpha2"]),
    (Kind::GatewayTcpRoute, "tcproutes", &["v1", "v1alpha2"]),
    (Kind::ReferenceGrant, "referencegrants", &["v1", "v1beta1"]),
    (Kind::ListenerSet, "listenersets", &["v1"]),
];
/// Every group version discovery is asked about.
const VERSIONS: [&str; 3] = ["v1", "v1beta1", "v1alpha2"];

/// The version each versioned kind is watched and written through; a kind absent is not
/// served at all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Served(BTreeMap<Kind, &'static str>);

impl Served {
    /// Whether `kind` is one whose version is decided here.
    pub(crate) fn is_versioned(kind: Kind) -> bool {
        VERSIONED.iter().any(|(k, ..)| *k == kind)
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

    /// The preferred version of each versioned kind that `serves(version, plural)` says is
    /// served.
    fn of(serves: impl Fn(&str, &str) -> bool) -> Self {
        let preferred = |(kind, plural, versions): &(Kind, &str, &[&'static str])| {
            Some((*kind, *versions.iter().find(|v| serves(v, plural))?))
        };
        Served(VERSIONED.iter().filter_map(preferred).collect())
    }

    /// One line per kind whose version changed from `before`.
    fn changes(&self, before: &Served) -> Vec<String> {
        let show = |v: Option<&str>| v.map_or_else(|| "not served".to_string(), |v| format!("{GATEWAY_API_GROUP}/{v}"));
        VERSIONED
            .iter()
            .filter(|(k, ..)| self.version(*k) != before.version(*k))
            .map(|(k, ..)| format!("{}: {} (was {})", k.api().kind, show(self.version(*k)), show(before.version(*k))))
            .collect()
    }
}

/// Asks discovery which versions of the versioned kinds the API server serves. A group
/// version that is not installed answers 404: that is a "no", while other failures are errors.
pub(crate) async fn discover(client: &Client) -> Result<Served, kube::Error> {
    let mut plurals = BTreeMap::new();
    for version in VERSIONS {
        let resources = match client.list_api_group_resources(&format!("{GATEWAY_API_GROUP}/{version}")).await {
            Ok(list) => list.resources,
            Err(kube::Error::Api(e)) if e.code == 404 => continue,
            Err(e) => return Err(e),
        };
        plurals.insert(version, resources.into_iter().map(|r| r.name).collect::<Vec<_>>());
    }
    Ok(Served::of(|version, plural| plurals.get(version).is_some_and(|p| p.iter().any(|n| n == plural))))
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

    #[test]
    fn reference_grants_are_read_through_v1_when_served_else_v1beta1() {
        let of = |served: &[(&str, &str)]| Served::of(|v, p| served.contains(&(v, p)));
        let both = of(&[("v1", "referencegrants"), ("v1beta1", "referencegrants")]);
        assert_eq!(both.version(Kind::ReferenceGrant), Some("v1"));
        assert_eq!(both.api(Kind::ReferenceGrant).api_version, "gateway.networking.k8s.io/v1");
        let old = of(&[("v1beta1", "referencegrants"), ("v1alpha2", "udproutes")]);
        assert_eq!(old.version(Kind::ReferenceGrant), Some("v1beta1"));
        assert_eq!(old.version(Kind::GatewayUdpRoute), Some("v1alpha2"));
        assert_eq!(old.version(Kind::GatewayTcpRoute), None);
        assert_eq!(of(&[]).version(Kind::ReferenceGrant), None);
    }
}
