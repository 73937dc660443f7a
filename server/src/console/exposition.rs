//! A dataplane's figures read out of the Prometheus text exposition stunnerd serves on its
//! metrics endpoint (github.com/l7mp/stunner v1.2.1, internal/telemetry; docs/MONITORING.md
//! there): active allocations, and bytes and packets per listener and cluster and direction
//! (the `name` and `direction` labels), and a listener's connections. Every other family
//! and label (the OpenTelemetry scope's, `target_info`) is passed over; series that differ
//! only in such labels are added up.

use std::collections::BTreeMap;

/// Bytes and packets in one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Flow {
    pub bytes: f64,
    pub packets: f64,
}

/// What crossed one listener or cluster: received (`rx`) and sent (`tx`), as stunnerd counts
/// them there.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Traffic {
    pub rx: Flow,
    pub tx: Flow,
}

/// A listener's traffic and its downstream connections.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ListenerFigures {
    pub traffic: Traffic,
    /// `stunner_listener_connections`: open now.
    pub connections: f64,
    /// `stunner_listener_connections_total`: seen since stunnerd started.
    pub connections_total: f64,
}

/// One dataplane's figures, by listener and cluster name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Figures {
    /// `stunner_allocations_active`, if stunnerd exported it.
    pub allocations: Option<f64>,
    pub listeners: BTreeMap<String, ListenerFigures>,
    pub clusters: BTreeMap<String, Traffic>,
}

/// One sample line: its family, the two labels we read, and its value.
struct Sample<'a> {
    metric: &'a str,
    name: String,
    direction: String,
    value: f64,
}

impl Figures {
    /// Reads `text`, a text exposition; lines that are not samples of ours are skipped.
    pub fn parse(text: &str) -> Figures {
        let mut figures = Figures::default();
        for sample in text.lines().filter_map(sample) {
            figures.add(sample);
        }
        figures
    }

    fn add(&mut self, s: Sample<'_>) {
        let value = s.value;
        let (traffic, bytes) = match s.metric {
            "stunner_allocations_active" => return *self.allocations.get_or_insert(0.0) += value,
            "stunner_listener_connections" => return self.listener(s.name).connections += value,
            "stunner_listener_connections_total" => return self.listener(s.name).connections_total += value,
            "stunner_listener_bytes_total" => (&mut self.listener(s.name).traffic, true),
            "stunner_listener_packets_total" => (&mut self.listener(s.name).traffic, false),
            "stunner_cluster_bytes_total" => (self.clusters.entry(s.name).or_default(), true),
            "stunner_cluster_packets_total" => (self.clusters.entry(s.name).or_default(), false),
            _ => return,
        };
        let flow = match s.direction.as_str() {
            "rx" => &mut traffic.rx,
            "tx" => &mut traffic.tx,
            _ => return,
        };
        if bytes {
            flow.bytes += value;
        } else {
            flow.packets += value;
        }
    }

    fn listener(&mut self, name: String) -> &mut ListenerFigures {
        self.listeners.entry(name).or_default()
    }
}

/// A sample line `metric{label="value",...} value [timestamp]` of one of stunnerd's families.
fn sample(line: &str) -> Option<Sample<'_>> {
    let line = line.trim_start();
    if !line.starts_with("stunner_") {
        return None;
    }
    let metric_end = line.find(|c: char| c == '{' || c.is_ascii_whitespace())?;
    let metric = &line[..metric_end];
    let (labels, rest) = match line[metric_end..].strip_prefix('{') {
        Some(after) => labels(after)?,
        None => (Vec::new(), &line[metric_end..]),
    };
    let value = rest.split_whitespace().next()?.parse::<f64>().ok().filter(|v| v.is_finite())?;
    let label = |key: &str| labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.clone()).unwrap_or_default();
    Some(Sample { metric, name: label("name"), direction: label("direction"), value })
}

/// The labels after a sample's `{` up to its `}`, and what follows; `None` if malformed.
fn labels(mut text: &str) -> Option<(Vec<(&str, String)>, &str)> {
    let mut labels = Vec::new();
    loop {
        text = text.trim_start_matches([',', ' ']);
        if let Some(rest) = text.strip_prefix('}') {
            return Some((labels, rest));
        }
        let (key, after) = text.split_once('=')?;
        let (value, rest) = quoted(after.strip_prefix('"')?)?;
        labels.push((key.trim(), value));
        text = rest;
    }
}

/// A label value up to its closing quote, unescaped (`\\`, `\"`, `\n`), and what follows.
fn quoted(text: &str) -> Option<(String, &str)> {
    let mut value = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Some((value, &text[i + 1..])),
            '\\' => match chars.next()?.1 {
                'n' => value.push('\n'),
                other => value.push(other),
            },
            c => value.push(c),
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As stunnerd v1.2.1's exporter writes it (its scope labels, its `target_info`).
    const EXPOSITION: &str = r#"# HELP stunner_allocations_active Number of active allocations
# TYPE stunner_allocations_active gauge
stunner_allocations_active{otel_scope_name="stunner",otel_scope_version=""} 2
# TYPE stunner_listener_bytes_total counter
stunner_listener_bytes_total{direction="rx",name="ns/gw/udp",otel_scope_name="stunner",otel_scope_version=""} 1200
stunner_listener_bytes_total{direction="tx",name="ns/gw/udp",otel_scope_name="stunner",otel_scope_version=""} 1.5e+03
stunner_listener_packets_total{direction="rx",name="ns/gw/udp",otel_scope_name="stunner",otel_scope_version=""} 12
stunner_listener_connections{name="ns/gw/udp",otel_scope_name="stunner",otel_scope_version=""} 1
stunner_listener_connections_total{name="ns/gw/udp",otel_scope_name="stunner",otel_scope_version=""} 3
stunner_cluster_bytes_total{direction="tx",name="ns/route",otel_scope_name="stunner",otel_scope_version=""} 800
stunner_cluster_packets_total{direction="rx",name="ns/route",otel_scope_name="stunner",otel_scope_version=""} 7
stunner_cluster_packets_total{direction="rx",name="ns/route",otel_scope_name="other",otel_scope_version=""} 1
target_info{service_name="stunner"} 1
"#;

    #[test]
    fn reads_stunnerds_families_by_name_and_direction() {
        let f = Figures::parse(EXPOSITION);
        assert_eq!(f.allocations, Some(2.0));
        let udp = f.listeners["ns/gw/udp"];
        assert_eq!(udp.traffic.rx, Flow { bytes: 1200.0, packets: 12.0 });
        assert_eq!(udp.traffic.tx, Flow { bytes: 1500.0, packets: 0.0 });
        assert_eq!((udp.connections, udp.connections_total), (1.0, 3.0));
        let route = f.clusters["ns/route"];
        assert_eq!((route.tx.bytes, route.rx.packets), (800.0, 8.0), "series apart only by scope are added");
        assert_eq!(f.listeners.len() + f.clusters.len(), 2);
    }

    #[test]
    fn escaped_and_malformed_lines() {
        let f = Figures::parse(
            "stunner_listener_bytes_total{name=\"a\\\"b\\\\c\",direction=\"rx\"} 5\n\
             stunner_listener_bytes_total{name=\"unterminated,direction=\"rx\"} 5\n\
             stunner_listener_bytes_total{name=\"x\",direction=\"rx\"} NaN\n\
             stunner_allocations_active 1 1700000000000\n",
        );
        assert_eq!(f.listeners.keys().collect::<Vec<_>>(), ["a\"b\\c"]);
        assert_eq!(f.allocations, Some(1.0));
        assert_eq!(Figures::parse("# nothing\nother_metric 3\n"), Figures::default());
    }
}
