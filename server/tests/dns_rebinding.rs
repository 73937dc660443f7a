//! The DNS rebinding guard (docs/security.md) on the real daemon, on every port that serves
//! configs or credentials: a request over loopback naming a foreign `Host` (what a browser
//! sends for a page whose name was rebound to 127.0.0.1) is refused before anything is read,
//! on the CDS REST API, a WebSocket watch, gRPC, the console's pages, `?reveal=1` and event
//! stream, the credential API and the metrics; the names `kubectl port-forward` and the
//! dataplanes use are served. A cross-site request is refused `?reveal=1` and the events.

#[path = "support/daemon.rs"]
mod daemon;
#[path = "../../tests/support/ports.rs"]
mod ports;

use daemon::pb::config_discovery_client::ConfigDiscoveryClient;
use daemon::{Daemon, quickstart_copy};
use std::time::Duration;
use stunner_gateway::proto::ListRequest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What a rebinding page's requests carry: its own name, at the port it was told.
const FOREIGN: &str = "attacker.example:13478";

/// An answer: the status, the head (lower case) and the body (by `Content-Length`; none for a
/// stream or an upgrade, which are read up to their head only).
struct Answer {
    status: u16,
    head: String,
    body: String,
}

/// `GET path` to `addr` with `Host: host` and `headers`, over a fresh connection.
async fn get(addr: &str, host: &str, path: &str, headers: &[(&str, &str)]) -> Answer {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let extra: String = headers.iter().map(|(k, v)| format!("{k}: {v}\r\n")).collect();
    let request = format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let io = async {
        let mut raw = Vec::new();
        let mut byte = [0u8; 1];
        while !raw.ends_with(b"\r\n\r\n") {
            assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "the answer ended in its head: {raw:?}");
            raw.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&raw).to_ascii_lowercase();
        let length = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |n| n.trim().parse::<usize>().unwrap());
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        Answer { status, head, body: String::from_utf8_lossy(&body).into_owned() }
    };
    tokio::time::timeout(Duration::from_secs(20), io).await.expect("an answer in time")
}

const WEBSOCKET: &[(&str, &str)] = &[
    ("Connection", "Upgrade"),
    ("Upgrade", "websocket"),
    ("Sec-WebSocket-Version", "13"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
];

/// A gRPC List over loopback naming `authority`: the number of configs or the error's code.
async fn grpc_list(addr: &str, authority: &str) -> Result<usize, tonic::Code> {
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
        .unwrap()
        .origin(format!("http://{authority}").parse().unwrap());
    let mut client = ConfigDiscoveryClient::new(endpoint.connect().await.unwrap());
    match client.list(ListRequest { scope: None }).await {
        Ok(list) => Ok(list.into_inner().configs.len()),
        Err(status) => {
            if status.code() == tonic::Code::PermissionDenied {
                assert!(status.message().contains("DNS rebinding"), "{}", status.message());
            }
            Err(status.code())
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_port_refuses_a_foreign_host_over_loopback_and_serves_its_own_names() {
    let dir = quickstart_copy("dns-rebinding");
    let auth = format!("127.0.0.1:{}", ports::free_ports(1)[0]);
    let d = Daemon::start(&dir, ports::free_ports(1)[0], &["--auth-bind-address", &auth]).await;
    let cds = d.addr.as_str();
    let port = cds.rsplit_once(':').unwrap().1;
    let page = "/ui/gateways/stunner/udp-gateway";

    // What a rebinding page reaches: refused, 421, saying why, nothing of a config.
    for (addr, path, headers) in [
        (cds, "/api/v1/configs", &[][..]),
        (cds, "/api/v1/configs/stunner/udp-gateway", &[]),
        (cds, "/api/v1/configs/stunner/udp-gateway?watch=true", WEBSOCKET),
        (cds, "/api/v1/clients", &[]),
        (cds, "/ui/", &[]),
        (cds, page, &[]),
        (cds, &format!("{page}?reveal=1"), &[]),
        (cds, "/ui/events", &[]),
        (&auth, "/ice?service=turn", &[]),
        (&auth, "/?service=turn", &[]),
        (&d.metrics, "/metrics", &[]),
    ] {
        let a = get(addr, FOREIGN, path, headers).await;
        assert_eq!(a.status, 421, "{addr}{path}: {}{}", a.head, a.body);
        assert!(a.body.contains("not for host \"attacker.example:13478\" (DNS rebinding guard"), "{}", a.body);
        assert!(!a.body.contains("pass-1") && !a.body.contains("udp-gateway"), "{}", a.body);
    }
    assert_eq!(grpc_list(cds, FOREIGN).await, Err(tonic::Code::PermissionDenied));

    // What port-forward (localhost, 127.0.0.1, [::1]) and the dataplanes (the CDS Service's
    // names) send: served.
    let service = format!("stunner-config-discovery.stunner-system.svc:{port}");
    for host in [format!("localhost:{port}"), cds.to_string(), format!("[::1]:{port}"), service.clone()] {
        let a = get(cds, &host, "/api/v1/configs/stunner/udp-gateway", &[]).await;
        assert_eq!(a.status, 200, "{host}: {}", a.body);
        assert!(a.body.contains("pass-1"), "{host}: {}", a.body);
        let a = get(cds, &host, "/api/v1/configs/stunner/udp-gateway?watch=true", WEBSOCKET).await;
        assert_eq!(a.status, 101, "{host}: {}", a.head);
        assert_eq!(get(cds, &host, &format!("{page}?reveal=1"), &[]).await.status, 200, "{host}");
        assert_eq!(get(cds, &host, "/ui/events", &[]).await.status, 200, "{host}");
        assert_eq!(get(&auth, &host, "/ice?service=turn", &[]).await.status, 200, "{host}");
        assert_eq!(grpc_list(cds, &host).await, Ok(1), "{host}");
    }
    let full = format!("stunner-config-discovery.stunner-system.svc.cluster.local:{port}");
    assert_eq!(get(cds, &full, "/api/v1/configs", &[]).await.status, 200);
    assert_eq!(get(&d.metrics, &d.metrics, "/metrics", &[]).await.status, 200);

    // A cross-site request, from an allowed host: no credentials in the clear, no events.
    let own_origin = format!("http://{cds}");
    for (headers, what) in [
        (&[("Sec-Fetch-Site", "cross-site")][..], "cross-site"),
        (&[("Sec-Fetch-Site", "same-site")][..], "same-site: another port of 127.0.0.1"),
        (&[("Origin", "http://attacker.example")][..], "another origin"),
        (&[("Origin", "http://127.0.0.1:8080")][..], "another port"),
    ] {
        for path in [format!("{page}?reveal=1"), "/ui/events".to_string()] {
            let a = get(cds, cds, &path, headers).await;
            assert_eq!(a.status, 403, "{what} on {path}: {}", a.body);
            assert!(a.body.contains("credentials are not shown to a cross-site request"), "{}", a.body);
            assert!(!a.body.contains("pass-1"));
        }
    }
    let same_origin = [("Sec-Fetch-Site", "same-origin"), ("Origin", own_origin.as_str())];
    let a = get(cds, cds, &format!("{page}?reveal=1"), &same_origin).await;
    assert!(a.status == 200 && a.body.contains("pass-1"), "the console's own link: {}", a.status);
    assert_eq!(get(cds, cds, "/ui/events", &same_origin).await.status, 200, "the console's own script");
    assert_eq!(get(cds, cds, page, &[("Sec-Fetch-Site", "cross-site")]).await.status, 200, "a masked page is a link");
    std::fs::remove_dir_all(&dir).unwrap();
}
