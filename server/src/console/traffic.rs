//! The Gateway page's "Dataplane traffic": each of its dataplanes' figures (active
//! allocations, bytes and packets per listener and cluster and direction, connections), read
//! by [`Scraper`] from the pod's metrics endpoint: the address the pod watches the CDS from
//! (its pod IP in a cluster), the port and path its config's `admin.metrics_endpoint` names
//! (the Dataplane's `enableMetricsEndpoint`: `http://:8080/metrics`). In a cluster only: in
//! standalone mode the dataplanes are not the operator's pods, and the page says so.

use super::exposition::{Figures, Traffic};
use super::html::Html;
use super::scrape::{Reading, Scraper, Target};
use super::view::State;
use std::net::SocketAddr;
use stunner_gateway::cds::ConfigId;

/// What the page shows of a Gateway's dataplanes' traffic.
pub enum Shown {
    /// Standalone mode: nothing is read.
    Standalone,
    NoConfig,
    /// Its config serves no metrics (the Dataplane's `enableMetricsEndpoint` is off).
    EndpointOff,
    /// Its config's metrics endpoint is not one the console reads.
    Unreadable(String),
    Read {
        pods: Vec<Pod>,
        limits: super::scrape::Limits,
    },
}

/// One dataplane: its client name, and where and what was read.
pub struct Pod {
    pub client: String,
    /// `None`: the client table has no address for it.
    pub read: Option<(Target, Reading)>,
}

/// Reads the figures of every dataplane of `id` (all at once, each within the scraper's
/// bounds); `scraper` is `None` in standalone mode.
pub async fn read(scraper: Option<&Scraper>, state: &State, id: &ConfigId) -> Shown {
    let Some(scraper) = scraper else { return Shown::Standalone };
    let Some(snapshot) = state.config(id) else { return Shown::NoConfig };
    let endpoint = snapshot.config.admin.metrics_endpoint.as_str();
    if endpoint.is_empty() {
        return Shown::EndpointOff;
    }
    if Target::on(std::net::Ipv4Addr::UNSPECIFIED.into(), endpoint).is_none() {
        return Shown::Unreadable(endpoint.to_string());
    }
    let reads = state.dataplanes(id).map(|d| {
        let client = if d.client.client_name.is_empty() { &d.client.remote_address } else { &d.client.client_name };
        let target = d
            .client
            .remote_address
            .parse::<SocketAddr>()
            .ok()
            .and_then(|a| Target::on(a.ip().to_canonical(), endpoint));
        async move {
            let read = match target {
                Some(target) => Some((target.clone(), scraper.read(&target).await)),
                None => None,
            };
            Pod { client: client.clone(), read }
        }
    });
    Shown::Read { pods: futures_util::future::join_all(reads).await, limits: scraper.limits() }
}

/// The section itself.
pub fn section(h: &mut Html, shown: &Shown) {
    h.element("h2", &[], "Dataplane traffic");
    let note = |h: &mut Html, text: &str| {
        h.element("p", &[("class", "empty"), ("id", "traffic-note")], text);
    };
    let pods = match shown {
        Shown::Standalone => {
            return note(
                h,
                "Read in cluster mode only: in standalone mode the dataplanes are not the operator's pods, so it does \
                 not read their metrics endpoints (read stunnerd's own, its config's admin.metrics_endpoint).",
            );
        }
        Shown::NoConfig => return note(h, "No config rendered for this Gateway."),
        Shown::EndpointOff => {
            return note(h, "Its dataplanes serve no metrics: the Dataplane's enableMetricsEndpoint is off.");
        }
        Shown::Unreadable(endpoint) => {
            return note(h, &format!("Its config's metrics endpoint {endpoint} is not an http:// URL with a port."));
        }
        Shown::Read { pods, .. } if pods.is_empty() => return note(h, "No dataplane watches this config."),
        Shown::Read { pods, limits } => {
            note(
                h,
                &format!(
                    "Read from each dataplane's metrics endpoint at its address, at most {} at a time, {:?} each, a \
                     reading shown for {:?}.",
                    limits.concurrent, limits.timeout, limits.ttl
                ),
            );
            pods
        }
    };
    for pod in pods {
        h.open("section", &[("class", "traffic"), ("data-dataplane", &pod.client)]);
        let Some((target, reading)) = &pod.read else {
            h.element("h3", &[], &pod.client);
            h.element("p", &[("class", "bad")], "Not read: the client table has no address for it.");
            h.close("section");
            continue;
        };
        h.element("h3", &[], &format!("{} at {}", pod.client, target.url()));
        match &reading.figures {
            Err(e) => {
                h.element("p", &[("class", "bad"), ("data-error", "")], &format!("Not read: {e}."));
            }
            Ok(figures) => pod_figures(h, figures, &reading.at.to_string()),
        }
        h.close("section");
    }
}

fn pod_figures(h: &mut Html, figures: &Figures, at: &str) {
    h.open("p", &[]).text("Allocations active: ");
    let allocations = figures.allocations.map_or("—".to_string(), count);
    h.element("span", &[("class", "allocations")], &allocations);
    h.text(", read at ").element("time", &[("class", "read-at"), ("datetime", at)], at).close("p");
    let directions = ["Bytes rx", "Bytes tx", "Packets rx", "Packets tx"];
    h.open("table", &[("class", "listener-traffic")]).open("thead", &[]).open("tr", &[]);
    for column in ["Listener"].iter().chain(&directions).chain(&["Connections open", "Connections total"]) {
        h.element("th", &[], column);
    }
    h.close("tr").close("thead").open("tbody", &[]);
    for (name, l) in &figures.listeners {
        h.open("tr", &[("data-listener", name)]).element("td", &[], name);
        flows(h, &l.traffic);
        h.element("td", &[("class", "num"), ("data-figure", "connections")], &count(l.connections));
        h.element("td", &[("class", "num"), ("data-figure", "connections-total")], &count(l.connections_total));
        h.close("tr");
    }
    h.close("tbody").close("table");
    h.open("table", &[("class", "cluster-traffic")]).open("thead", &[]).open("tr", &[]);
    for column in ["Cluster"].iter().chain(&directions) {
        h.element("th", &[], column);
    }
    h.close("tr").close("thead").open("tbody", &[]);
    for (name, traffic) in &figures.clusters {
        h.open("tr", &[("data-cluster", name)]).element("td", &[], name);
        flows(h, traffic);
        h.close("tr");
    }
    h.close("tbody").close("table");
}

fn flows(h: &mut Html, t: &Traffic) {
    for (figure, value) in
        [("bytes-rx", t.rx.bytes), ("bytes-tx", t.tx.bytes), ("packets-rx", t.rx.packets), ("packets-tx", t.tx.packets)]
    {
        h.element("td", &[("class", "num"), ("data-figure", figure)], &count(value));
    }
}

/// A counter or gauge as a whole number.
fn count(value: f64) -> String {
    format!("{value:.0}")
}
