//! `stunnerctl clients`: the server's client table, as a kubectl-style table (one row per
//! client and config) or the whole body in JSON/YAML.

use stunner_gateway_client::cds::{ClientInfo, ClientList};

const HEADER: [&str; 10] =
    ["TRANSPORT", "REMOTE", "IDENTITY", "NODE", "SCOPE", "NAME", "SINCE", "CONFIG", "SENT", "ACKED/REJECTED"];

/// The table in a stable order whatever order the server keeps: by transport, then by remote
/// address (configs by id).
pub fn sorted(mut list: ClientList) -> ClientList {
    list.clients.sort_by(|a, b| (&a.transport, &a.remote_address).cmp(&(&b.transport, &b.remote_address)));
    for c in &mut list.clients {
        c.configs.sort_by(|a, b| a.id.cmp(&b.id));
    }
    list
}

/// Columns padded to their widest cell, three spaces apart, as kubectl prints them; empty
/// cells read `<none>`. A client holding no config yet still gets a row.
pub fn table(list: &ClientList) -> String {
    if list.clients.is_empty() {
        return "No clients connected.\n".into();
    }
    let mut rows: Vec<[String; 10]> = vec![HEADER.map(String::from)];
    for c in &list.clients {
        if c.configs.is_empty() {
            rows.push(row(c, "", "", String::new()));
        }
        for cfg in &c.configs {
            let mut answer = cfg.version_acked.clone();
            if !cfg.version_rejected.is_empty() {
                let rejected = format!("rejected {}: {}", cfg.version_rejected, cfg.error);
                answer = if answer.is_empty() { rejected } else { format!("{answer}, {rejected}") };
            }
            rows.push(row(c, &cfg.id.to_string(), &cfg.version_sent, answer));
        }
    }
    let mut widths = [0usize; 10];
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for r in &rows {
        let mut line = String::new();
        for (i, cell) in r.iter().enumerate() {
            if i + 1 == r.len() {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', widths[i] - cell.chars().count() + 3));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn row(c: &ClientInfo, config: &str, sent: &str, answer: String) -> [String; 10] {
    let cell = |s: &str| if s.is_empty() { "<none>".to_string() } else { s.to_string() };
    [
        cell(&c.transport),
        cell(&c.remote_address),
        cell(&c.identity),
        cell(&c.node),
        cell(&c.scope),
        cell(&c.client_name),
        cell(&c.connected_since),
        cell(config),
        cell(sent),
        cell(&answer),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use stunner_gateway::cds::ConfigId;
    use stunner_gateway_client::cds::ClientConfigState;

    #[test]
    fn one_row_per_client_and_config() {
        let list = ClientList {
            clients: vec![
                ClientInfo {
                    transport: "websocket".into(),
                    remote_address: "127.0.0.1:2".into(),
                    scope: "*".into(),
                    connected_since: "2026-11-29T22:00:00Z".into(),
                    ..Default::default()
                },
                ClientInfo {
                    transport: "grpc".into(),
                    remote_address: "127.0.0.1:1".into(),
                    node: "n1".into(),
                    scope: "ns/gw".into(),
                    client_name: "pod".into(),
                    identity: "pod:ns/gw-1".into(),
                    connected_since: "2026-11-29T22:00:01Z".into(),
                    configs: vec![ClientConfigState {
                        id: ConfigId::new("ns", "gw"),
                        version_sent: "00000000000000bb".into(),
                        version_acked: "00000000000000aa".into(),
                        version_rejected: "00000000000000bb".into(),
                        error: "bad".into(),
                        ..Default::default()
                    }],
                },
            ],
        };
        let want = "\
TRANSPORT   REMOTE        IDENTITY      NODE     SCOPE   NAME     SINCE                  CONFIG   SENT               ACKED/REJECTED
grpc        127.0.0.1:1   pod:ns/gw-1   n1       ns/gw   pod      2026-11-29T22:00:01Z   ns/gw    00000000000000bb   00000000000000aa, rejected 00000000000000bb: bad
websocket   127.0.0.1:2   <none>        <none>   *       <none>   2026-11-29T22:00:00Z   <none>   <none>             <none>
";
        assert_eq!(table(&sorted(list)), want);
        assert_eq!(table(&ClientList::default()), "No clients connected.\n");
    }
}
