//! The console's pages, rendered on the server from one [`State`] reading each: plain HTML
//! that reads in `curl` or a text browser; the embedded script only swaps in a fresh copy of
//! `<main>` when the state changes.

use super::charts;
use super::html::Html;
use super::mask;
use super::traffic;
use super::view::{Dataplane, GatewayRow, Programmed, State};
use stunner_gateway::cds::{Condition, ConfigId, ObjectStatus};
use stunner_gateway::proto;

/// Which page a link in the header marks as the current one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    Overview,
    Clients,
}

/// The document around a page's `<main>`.
fn page(title: &str, section: Section, main: Html) -> String {
    let mut h = Html::new();
    h.markup("<!doctype html>").open("html", &[("lang", "en")]).open("head", &[]);
    h.void("meta", &[("charset", "utf-8")]);
    h.void("meta", &[("name", "viewport"), ("content", "width=device-width, initial-scale=1")]);
    h.element("title", &[], &format!("{title} · STUNner gateway operator"));
    h.void("link", &[("rel", "stylesheet"), ("href", "/ui/assets/console.css")]);
    h.close("head").open("body", &[]);
    h.open("header", &[]).element("span", &[("class", "brand")], "STUNner gateway operator");
    h.open("nav", &[]);
    for (target, href, label) in [(Section::Overview, "/ui/", "Overview"), (Section::Clients, "/ui/clients", "Clients")]
    {
        let class = if target == section { "current" } else { "" };
        h.element("a", &[("href", href), ("class", class)], label);
    }
    h.close("nav");
    h.element("span", &[("id", "live"), ("data-state", "static"), ("title", "live updates")], "static");
    h.close("header");
    h.open("main", &[]).append(main).close("main");
    h.void("script", &[("src", "/ui/assets/console.js"), ("defer", "")]).close("script");
    h.close("body").close("html");
    h.into_string()
}

/// `/ui/`: every Gateway by namespace, then the latency charts.
pub fn overview(state: &State, charts: &charts::Charts) -> String {
    let mut h = Html::new();
    h.element("h1", &[], "Gateways");
    let rows = state.gateways();
    if rows.is_empty() {
        h.element("p", &[("class", "empty")], "No Gateways yet.");
    }
    let mut namespaces: Vec<&str> = rows.iter().map(|r| r.id.namespace.as_str()).collect();
    namespaces.dedup();
    for namespace in namespaces {
        h.open("section", &[("class", "namespace")]).element("h2", &[], &format!("Namespace {namespace}"));
        h.open("table", &[("class", "gateways")]).open("thead", &[]).open("tr", &[]);
        for column in ["Gateway", "Programmed", "Listeners", "Address", "Config version", "Dataplanes on it"] {
            h.element("th", &[], column);
        }
        h.close("tr").close("thead").open("tbody", &[]);
        for row in rows.iter().filter(|r| r.id.namespace == namespace) {
            gateway_row(&mut h, row, true);
        }
        h.close("tbody").close("table").close("section");
    }
    h.open("section", &[("class", "charts")]).element("h2", &[], "Latency");
    for (title, histogram) in charts.read() {
        charts::draw(&mut h, title, &histogram);
    }
    h.close("section");
    page("Overview", Section::Overview, h)
}

/// A Gateway's row of cells; `named`: with a first cell linking to its page.
fn gateway_row(h: &mut Html, row: &GatewayRow, named: bool) {
    h.open("tr", &[("data-gateway", &row.id.to_string())]);
    if named {
        h.open("td", &[]).element("a", &[("href", &gateway_href(&row.id))], &row.id.name).close("td");
    }
    programmed_cell(h, &row.programmed);
    h.element("td", &[("class", "num")], &row.listeners.to_string());
    h.element("td", &[], row.address.as_deref().unwrap_or("—"));
    h.element("td", &[("class", "version")], row.version.as_deref().unwrap_or("none"));
    let holders = row.holders;
    let text = if row.version.is_none() {
        "—".to_string()
    } else {
        format!("{} acked, {} sent of {}", holders.acked, holders.sent, holders.clients)
    };
    h.element("td", &[("class", "holders")], &text);
    h.close("tr");
}

fn programmed_cell(h: &mut Html, programmed: &Programmed) {
    match programmed {
        Programmed::Yes => h.element("td", &[("class", "ok")], "Programmed"),
        Programmed::No { reason, message } => h.element("td", &[("class", "bad"), ("title", message)], reason),
        Programmed::Unknown => h.element("td", &[("class", "unknown")], "no status"),
    };
}

fn gateway_href(id: &ConfigId) -> String {
    let encode = |s: &str| form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    format!("/ui/gateways/{}/{}", encode(&id.namespace), encode(&id.name))
}

/// `/ui/gateways/<ns>/<name>`: one Gateway whole, with its dataplanes' `traffic` as read.
/// `reveal` shows the config's credentials.
pub fn gateway(state: &State, id: &ConfigId, reveal: bool, traffic: &traffic::Shown) -> Option<String> {
    let row = state.gateways().into_iter().find(|r| &r.id == id)?;
    let mut h = Html::new();
    h.element("h1", &[], &format!("Gateway {id}"));
    h.open("table", &[("class", "summary")]).open("thead", &[]).open("tr", &[]);
    for column in ["Programmed", "Listeners", "Address", "Config version", "Dataplanes on it"] {
        h.element("th", &[], column);
    }
    h.close("tr").close("thead").open("tbody", &[]);
    gateway_row(&mut h, &row, false);
    h.close("tbody").close("table");

    let snapshot = state.config(id);
    if let Some(snapshot) = snapshot {
        listeners(&mut h, &snapshot.config);
        clusters(&mut h, &snapshot.config);
    }
    h.element("h2", &[], "Statuses");
    for class in state.classes() {
        status_block(&mut h, class);
    }
    if let Some(status) = state.status("Gateway", id) {
        status_block(&mut h, status);
    }
    for route in state.routes_of(id) {
        status_block(&mut h, route);
    }
    dataplanes(&mut h, state.dataplanes(id), row.version.as_deref());
    traffic::section(&mut h, traffic);
    h.element("h2", &[], "Config");
    match snapshot {
        None => {
            h.element("p", &[("class", "empty")], "No config rendered for this Gateway.");
        }
        Some(snapshot) => {
            let mut config = serde_json::to_value(&snapshot.config).unwrap_or_default();
            let href = gateway_href(id);
            if reveal {
                h.open("p", &[]).text("Credentials shown. ").element("a", &[("href", &href)], "Mask them").close("p");
            } else {
                mask::mask(&mut config);
                h.open("p", &[]).text("Credentials masked. ");
                h.element("a", &[("href", &format!("{href}?reveal=1")), ("rel", "nofollow")], "Reveal them");
                h.close("p");
            }
            let pretty = serde_json::to_string_pretty(&config).unwrap_or_default();
            h.element("pre", &[("class", "config"), ("data-version", &snapshot.version.to_string())], &pretty);
        }
    }
    Some(page(&id.to_string(), Section::Overview, h))
}

fn listeners(h: &mut Html, config: &stunner_gateway::config::StunnerConfig) {
    h.element("h2", &[], "Listeners");
    h.open("table", &[("class", "listeners")]).open("thead", &[]).open("tr", &[]);
    for column in ["Name", "Protocol", "Address", "Public address", "Routes"] {
        h.element("th", &[], column);
    }
    h.close("tr").close("thead").open("tbody", &[]);
    for l in &config.listeners {
        h.open("tr", &[]).element("td", &[], &l.name).element("td", &[], &l.protocol);
        h.element("td", &[], &format!("{}:{}", l.addr, l.port));
        let public =
            if l.public_addr.is_empty() { "—".into() } else { format!("{}:{}", l.public_addr, l.public_port) };
        h.element("td", &[], &public).element("td", &[], &l.routes.join(", ")).close("tr");
    }
    h.close("tbody").close("table");
}

fn clusters(h: &mut Html, config: &stunner_gateway::config::StunnerConfig) {
    h.element("h2", &[], "Clusters");
    h.open("table", &[("class", "clusters")]).open("thead", &[]).open("tr", &[]);
    for column in ["Name", "Type", "Protocol", "Endpoints"] {
        h.element("th", &[], column);
    }
    h.close("tr").close("thead").open("tbody", &[]);
    for c in &config.clusters {
        h.open("tr", &[]).element("td", &[], &c.name).element("td", &[], &c.cluster_type);
        h.element("td", &[], &c.protocol).element("td", &[], &c.endpoints.join(", ")).close("tr");
    }
    h.close("tbody").close("table");
}

/// An object's conditions (and a Gateway's listeners', a route's per parent).
fn status_block(h: &mut Html, status: &ObjectStatus) {
    h.open("section", &[("class", "status"), ("data-kind", &status.kind)]);
    h.element("h3", &[], &format!("{} {}", status.kind, status.key()));
    conditions(h, "", &status.conditions());
    for listener in status.listeners() {
        conditions(h, &format!("listener {}", listener.name), &listener.conditions);
    }
    for parent in status.parents() {
        let section = parent.parent_ref.section_name.map(|s| format!(" ({s})")).unwrap_or_default();
        conditions(h, &format!("parent {}{section}", parent.parent_ref.name), &parent.conditions);
    }
    h.close("section");
}

fn conditions(h: &mut Html, of: &str, conditions: &[Condition]) {
    if conditions.is_empty() {
        return;
    }
    h.open("table", &[("class", "conditions")]);
    if !of.is_empty() {
        h.element("caption", &[], of);
    }
    h.open("thead", &[]).open("tr", &[]);
    for column in ["Condition", "Status", "Reason", "Message"] {
        h.element("th", &[], column);
    }
    h.close("tr").close("thead").open("tbody", &[]);
    for c in conditions {
        // `Conflicted` is the one condition of ours that is good when False.
        let good = if c.condition_type == "Conflicted" { "False" } else { "True" };
        let class = if c.status == good { "ok" } else { "bad" };
        h.open("tr", &[]).element("td", &[], &c.condition_type).element("td", &[("class", class)], &c.status);
        h.element("td", &[("class", "reason")], &c.reason).element("td", &[], &c.message).close("tr");
    }
    h.close("tbody").close("table");
}

fn dataplanes<'a>(h: &mut Html, dataplanes: impl Iterator<Item = Dataplane<'a>>, current: Option<&str>) {
    h.element("h2", &[], "Dataplanes");
    let dataplanes: Vec<_> = dataplanes.collect();
    if dataplanes.is_empty() {
        h.element("p", &[("class", "empty")], "No dataplane watches this config.");
        return;
    }
    h.open("table", &[("class", "dataplanes")]).open("thead", &[]).open("tr", &[]);
    for column in ["Client", "Transport", "Address", "Node", "Identity", "Connected", "Sent", "Acked", "Rejected"] {
        h.element("th", &[], column);
    }
    h.close("tr").close("thead").open("tbody", &[]);
    for Dataplane { client, config } in dataplanes {
        h.open("tr", &[]).element("td", &[], or_dash(&client.client_name));
        h.element("td", &[], &client.transport).element("td", &[], or_dash(&client.remote_address));
        h.element("td", &[], or_dash(&client.node)).element("td", &[], &client.identity);
        h.open("td", &[]);
        age(h, &client.connected_since).close("td");
        let state = |version: &str| match version {
            "" => "none",
            v if Some(v) == current => "current",
            _ => "stale",
        };
        h.open("td", &[("class", "sent"), ("data-state", state(&config.version_sent))]);
        stamped_version(h, &config.version_sent, &config.sent_at).close("td");
        h.open("td", &[("class", "acked"), ("data-state", state(&config.version_acked))]);
        stamped_version(h, &config.version_acked, &config.acked_at).close("td");
        h.open("td", &[("class", "rejected")]);
        if !config.version_rejected.is_empty() {
            stamped_version(h, &config.version_rejected, &config.rejected_at).text(": ").text(&config.error);
        }
        h.close("td").close("tr");
    }
    h.close("tbody").close("table");
}

/// A version and, beneath it, how long ago (the time itself on hover); a dash for none.
fn stamped_version<'h>(h: &'h mut Html, version: &str, at: &str) -> &'h mut Html {
    if version.is_empty() {
        return h.text("—");
    }
    h.element("span", &[("class", "version")], version);
    if !at.is_empty() {
        age(h, at);
    }
    h
}

/// How long ago `at` (RFC 3339) was, as a `<time>` the script keeps current between updates.
fn age<'h>(h: &'h mut Html, at: &str) -> &'h mut Html {
    h.element("time", &[("class", "age"), ("datetime", at), ("title", at)], &ago(at))
}

/// `/ui/clients`: every watch client and what it holds.
pub fn clients(clients: &proto::ListClientsResponse) -> String {
    let mut h = Html::new();
    h.element("h1", &[], &format!("Clients ({})", clients.clients.len()));
    h.open("table", &[("class", "clients")]).open("thead", &[]).open("tr", &[]);
    for column in ["Client", "Transport", "Address", "Node", "Identity", "Scope", "Connected", "Configs (sent / acked)"]
    {
        h.element("th", &[], column);
    }
    h.close("tr").close("thead").open("tbody", &[]);
    for c in &clients.clients {
        h.open("tr", &[]).element("td", &[], or_dash(&c.client_name)).element("td", &[], &c.transport);
        h.element("td", &[], or_dash(&c.remote_address)).element("td", &[], or_dash(&c.node));
        h.element("td", &[], &c.identity).element("td", &[], &c.scope);
        h.open("td", &[]);
        age(&mut h, &c.connected_since).close("td");
        h.open("td", &[]).open("ul", &[]);
        for config in &c.configs {
            let id = config.id.as_ref().map(|id| format!("{}/{}", id.namespace, id.name)).unwrap_or_default();
            let line = format!("{id}: {} / {}", or_dash(&config.version_sent), or_dash(&config.version_acked));
            h.element("li", &[], &line);
        }
        h.close("ul").close("td").close("tr");
    }
    h.close("tbody").close("table");
    page("Clients", Section::Clients, h)
}

fn or_dash(s: &str) -> &str {
    if s.is_empty() { "—" } else { s }
}

/// How long ago an RFC 3339 time was, in the largest whole unit (as console.js says it).
fn ago(rfc3339: &str) -> String {
    let Ok(then) = rfc3339.parse::<k8s_openapi::jiff::Timestamp>() else { return rfc3339.to_string() };
    let seconds = (k8s_openapi::jiff::Timestamp::now().as_second() - then.as_second()).max(0);
    match seconds {
        s if s < 60 => format!("{s}s ago"),
        s if s < 3600 => format!("{}m ago", s / 60),
        s if s < 86400 => format!("{}h ago", s / 3600),
        s => format!("{}d ago", s / 86400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ago_reads_the_client_tables_times() {
        let now = k8s_openapi::jiff::Timestamp::now();
        let earlier = now.checked_sub(k8s_openapi::jiff::SignedDuration::from_secs(125)).unwrap();
        assert_eq!(ago(&earlier.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()), "2m ago");
        assert_eq!(ago("not a time"), "not a time");
    }

    #[test]
    fn a_dataplane_shows_its_versions_and_how_long_ago() {
        let store = stunner_gateway_cds::ConfigStore::new(Default::default());
        store.upsert(stunner_gateway::config::StunnerConfig::zero("ns/gw"));
        let id = ConfigId::new("ns", "gw");
        let current = store.get(&id).unwrap();
        let v = current.version.to_string();
        let earlier = k8s_openapi::jiff::Timestamp::now() - k8s_openapi::jiff::SignedDuration::from_secs(3 * 60);
        let earlier = earlier.strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
        let state = State {
            configs: vec![current],
            statuses: Default::default(),
            clients: proto::ListClientsResponse {
                clients: vec![proto::Client {
                    client_name: "dp-1".into(),
                    configs: vec![proto::ClientConfig {
                        id: Some(proto::ConfigId { namespace: "ns".into(), name: "gw".into() }),
                        version_sent: v.clone(),
                        sent_at: earlier.clone(),
                        version_acked: "00000000000000aa".into(),
                        acked_at: earlier.clone(),
                        version_rejected: v.clone(),
                        rejected_at: earlier.clone(),
                        error: "port <in> use".into(),
                    }],
                    ..Default::default()
                }],
            },
        };
        let page = gateway(&state, &id, false, &traffic::Shown::Standalone).unwrap();
        let age = format!("<time class=\"age\" datetime=\"{earlier}\" title=\"{earlier}\">3m ago</time>");
        for cell in [
            format!("<td class=\"sent\" data-state=\"current\"><span class=\"version\">{v}</span>{age}</td>"),
            format!(
                "<td class=\"acked\" data-state=\"stale\"><span class=\"version\">00000000000000aa</span>{age}</td>"
            ),
            format!("<td class=\"rejected\"><span class=\"version\">{v}</span>{age}: port &lt;in&gt; use</td>"),
        ] {
            assert!(page.contains(&cell), "no {cell} in\n{page}");
        }
    }

    #[test]
    fn names_are_escaped_and_links_encoded() {
        let id = ConfigId::new("ns", "<gw>");
        assert_eq!(gateway_href(&id), "/ui/gateways/ns/%3Cgw%3E");
        let table = proto::ListClientsResponse {
            clients: vec![proto::Client { client_name: "<script>".into(), ..Default::default() }],
        };
        let page = clients(&table);
        assert!(page.contains("&lt;script&gt;") && !page.contains("<script>alert"));
    }
}
