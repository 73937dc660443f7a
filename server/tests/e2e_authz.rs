//! `--cds-authorization=pod` and `--cds-token-review` against a real kube-apiserver (issue
//! #17, items 1 and 2): the operator's pod watcher indexes a dataplane pod whose status the
//! test writes as the kubelet would (`status.podIPs` through the status subresource), and
//! bearer tokens of ServiceAccounts are checked by real TokenReviews and SubjectAccessReviews,
//! without and with a RoleBinding. Clients connect from other loopback addresses, which stand
//! for pod IPs. Each refusal says what went wrong: an invalid token 401 / UNAUTHENTICATED, a
//! client not allowed 403 / PERMISSION_DENIED, and, with the API server stopped, 503 with
//! `Retry-After` / UNAVAILABLE, counted apart, until it is back.

mod e2e;

mod pb {
    include!(concat!(env!("OUT_DIR"), "/test_client/stunner.cds.v1.rs"));
}

use e2e::*;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use kube::api::{Api, Patch, PatchParams, PostParams};
use pb::config_discovery_client::ConfigDiscoveryClient;
use serde_json::json;
use std::net::SocketAddr;
use std::time::Duration;
use stunner_gateway::cds::ApiError;
use stunner_gateway::proto::{ListRequest, WatchRequest, WatchStart, watch_request};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

const NS: &str = "stunner";
const GATEWAY: &str = "udp-gateway";
/// The address of the dataplane pod the test creates, and of a stranger.
const POD_IP: &str = "127.0.0.5";
const STRANGER: &str = "127.0.0.6";

/// GET from `source`, with a bearer token if given: (status code, body).
async fn get_from(source: &str, cds: SocketAddr, path: &str, token: Option<&str>) -> (u16, String) {
    let (code, _, body) = get_with_head(source, cds, path, token).await;
    (code, body)
}

/// [`get_from`] with the response's head (lower case) too.
async fn get_with_head(source: &str, cds: SocketAddr, path: &str, token: Option<&str>) -> (u16, String, String) {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(SocketAddr::new(source.parse().unwrap(), 0)).unwrap();
    let mut stream = socket.connect(cds).await.unwrap();
    let auth = token.map(|t| format!("Authorization: Bearer {t}\r\n")).unwrap_or_default();
    let req = format!("GET {path} HTTP/1.1\r\nHost: {cds}\r\n{auth}Connection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut buf = Vec::new();
    tokio::time::timeout(Duration::from_secs(30), stream.read_to_end(&mut buf)).await.unwrap().unwrap();
    let text = String::from_utf8(buf).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    (head.split(' ').nth(1).unwrap().parse().unwrap(), head.to_ascii_lowercase(), body.to_string())
}

/// The message of a refusal's [`ApiError`], whose code must be the status's.
fn refusal(code: u16, body: &str) -> String {
    let e: ApiError = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    assert_eq!(e.code, i32::from(code), "{body}");
    e.message
}

/// A pod as our Deployment's ReplicaSet creates it for the Gateway, then Running at
/// [`POD_IP`] (and an IPv6 address: dual-stack), as its kubelet reports it.
async fn create_dataplane_pod(c: &kube::Client) {
    let sas: Api<ServiceAccount> = Api::namespaced(c.clone(), NS);
    // No controller-manager here: the namespace's default ServiceAccount is made by hand.
    let sa = serde_json::from_value(json!({"metadata": {"name": "default"}})).unwrap();
    let _ = sas.create(&PostParams::default(), &sa).await;
    let pods: Api<Pod> = Api::namespaced(c.clone(), NS);
    let pod = serde_json::from_value(json!({
        "metadata": {
            "name": "udp-gateway-7c9d8-abcde",
            "labels": {
                "app": "stunner",
                "stunner.l7mp.io/related-gateway-name": GATEWAY,
                "stunner.l7mp.io/related-gateway-namespace": NS,
            },
            "ownerReferences": [{
                "apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "udp-gateway-7c9d8",
                "uid": "00000000-0000-0000-0000-000000000001", "controller": true,
            }],
        },
        "spec": {
            "automountServiceAccountToken": false,
            "nodeName": "node-1",
            "containers": [{"name": "stunnerd", "image": "docker.io/l7mp/stunnerd:latest"}],
        },
    }))
    .unwrap();
    pods.create(&PostParams::default(), &pod).await.expect("create the dataplane pod");
    let status = json!({"status": {
        "phase": "Running",
        "podIP": POD_IP,
        "podIPs": [{"ip": POD_IP}, {"ip": "fd00::5"}],
    }});
    pods.patch_status("udp-gateway-7c9d8-abcde", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write the pod's status as the kubelet would");
}

async fn service_account_token(c: &kube::Client, name: &str) -> String {
    let sas: Api<ServiceAccount> = Api::namespaced(c.clone(), NS);
    let sa = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    sas.create(&PostParams::default(), &sa).await.unwrap();
    let request = TokenRequest {
        spec: Some(TokenRequestSpec { expiration_seconds: Some(3600), ..Default::default() }),
        ..Default::default()
    };
    let created = sas.create_token_request(name, &PostParams::default(), &request).await.unwrap();
    created.status.and_then(|s| s.token).expect("a token")
}

#[tokio::test]
async fn pods_and_tokens_are_authorized_by_the_api_server() {
    let Some(mut cluster) = Cluster::start("authz").await else { return };
    let c = &cluster.admin.clone();
    apply_yaml(c, &namespace_yaml(NS)).await;
    apply_yaml(c, &quickstart_yaml()).await;
    let metrics = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let metrics_flag = format!("--metrics-bind-address={metrics}");
    let op = cluster.operator("authz", &["--cds-authorization=pod", "--cds-token-review", &metrics_flag]).await;
    let config_path = format!("/api/v1/configs/{NS}/{GATEWAY}");
    // Loopback (kubectl port-forward) is served as before.
    wait_for("the config, from loopback", || async { op.config(NS, GATEWAY).await }).await;

    // A stranger is refused, before and after the pod exists.
    let (code, body) = get_from(STRANGER, op.cds, &config_path, None).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(refusal(code, &body), format!("{STRANGER} is not a running dataplane pod of Gateway {NS}/{GATEWAY}"));
    create_dataplane_pod(c).await;
    wait_for("the dataplane pod served its config", || async {
        let (code, _) = get_from(POD_IP, op.cds, &config_path, None).await;
        (code == 200).then_some(())
    })
    .await;
    let (code, body) = get_from(POD_IP, op.cds, "/api/v1/configs", None).await;
    assert_eq!(code, 403, "a dataplane may not list: {body}");
    let (code, _) = get_from(STRANGER, op.cds, &config_path, None).await;
    assert_eq!(code, 403);

    // Tokens: an invalid one; a valid one without, then with, a binding.
    let (code, head, body) = get_with_head(STRANGER, op.cds, "/api/v1/configs/stunner", Some("not-a-token")).await;
    assert_eq!((code, refusal(code, &body).as_str()), (401, "the bearer token is not valid"));
    assert!(head.contains("\r\nwww-authenticate: bearer"), "{head}");
    let token = service_account_token(c, "tool").await;
    let (code, body) = get_from(STRANGER, op.cds, "/api/v1/configs/stunner", Some(&token)).await;
    assert_eq!(code, 403, "{body}");
    assert_eq!(
        refusal(code, &body),
        "system:serviceaccount:stunner:tool may not readconfig the gateways of namespace stunner (gateways.gateway.networking.k8s.io)"
    );
    apply_yaml(
        c,
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata:\n  name: cds-reader\n  namespace: stunner\nrules:\n- apiGroups: [gateway.networking.k8s.io]\n  resources: [gateways]\n  verbs: [readconfig]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: cds-reader\n  namespace: stunner\nroleRef:\n  apiGroup: rbac.authorization.k8s.io\n  kind: Role\n  name: cds-reader\nsubjects:\n- kind: ServiceAccount\n  name: tool\n  namespace: stunner\n",
    )
    .await;
    wait_for("the bound token lists the namespace", || async {
        let (code, body) = get_from(STRANGER, op.cds, "/api/v1/configs/stunner", Some(&token)).await;
        (code == 200).then_some(body)
    })
    .await;
    let (code, _) = get_from(STRANGER, op.cds, &config_path, Some(&token)).await;
    assert_eq!(code, 200, "the binding covers each Gateway of the namespace");
    let (code, body) = get_from(STRANGER, op.cds, "/api/v1/configs", Some(&token)).await;
    assert_eq!(code, 403, "a namespace binding is not cluster-wide: {body}");

    // The same token over gRPC, as metadata.
    let channel =
        tonic::transport::Endpoint::from_shared(format!("http://{}", op.cds)).unwrap().connect().await.unwrap();
    let mut grpc = ConfigDiscoveryClient::new(channel);
    let mut list = namespace_list();
    list.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    assert_eq!(grpc.list(list).await.unwrap().into_inner().configs.len(), 1);
    let mut all = tonic::Request::new(ListRequest { scope: None });
    all.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    assert_eq!(grpc.list(all).await.unwrap_err().code(), tonic::Code::PermissionDenied);
    let mut invalid = namespace_list();
    invalid.metadata_mut().insert("authorization", "Bearer not-a-token".parse().unwrap());
    assert_eq!(grpc.list(invalid).await.unwrap_err().code(), tonic::Code::Unauthenticated);

    // The API server stops: the token cannot be reviewed. Not "forbidden": "try again".
    cluster.api.stop();
    let (code, head, body) = get_with_head(STRANGER, op.cds, "/api/v1/configs/stunner", Some(&token)).await;
    assert_eq!(code, 503, "{body}");
    assert!(refusal(code, &body).starts_with("the bearer token could not be checked"), "{body}");
    assert!(head.contains("\r\nretry-after: 5"), "{head}");
    // The same on a WebSocket watch and the console (the HTTP API's decision), and on both
    // gRPC calls.
    for path in ["/api/v1/configs/stunner?watch=true", "/ui/"] {
        let (code, head, _) = get_with_head(STRANGER, op.cds, path, Some(&token)).await;
        assert!(code == 503 && head.contains("\r\nretry-after: 5"), "{path}: {head}");
    }
    let mut during = namespace_list();
    during.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    assert_eq!(grpc.list(during).await.unwrap_err().code(), tonic::Code::Unavailable);
    let start = WatchRequest {
        msg: Some(watch_request::Msg::Start(WatchStart {
            scope: namespace_list().into_inner().scope,
            ..Default::default()
        })),
    };
    // Held open, as a dataplane's is: the server answers after the start message.
    let requests = futures_util::StreamExt::chain(futures_util::stream::iter([start]), futures_util::stream::pending());
    let mut watch = tonic::Request::new(requests);
    watch.metadata_mut().insert("authorization", format!("Bearer {token}").parse().unwrap());
    assert_eq!(grpc.watch(watch).await.unwrap_err().code(), tonic::Code::Unavailable);
    let refused = async |reason: &str| {
        metric_sum(metrics, "stunner_gateway_operator_cds_refused_requests_total{", &format!("reason=\"{reason}\""))
            .await
    };
    assert_eq!(refused("unavailable").await, 5.0, "the outage's five requests, counted apart");
    assert_eq!(refused("unauthenticated").await, 2.0, "the invalid token, over HTTP and gRPC");
    assert!(refused("forbidden").await >= 5.0);

    // Back: the same token is let in again.
    cluster.api.restart().await;
    wait_for("the token is reviewed again once the API server is back", || async {
        let (code, _) = get_from(STRANGER, op.cds, "/api/v1/configs/stunner", Some(&token)).await;
        (code == 200).then_some(())
    })
    .await;
    assert!(!op.log_contains(&token), "tokens are never logged");
    op.stop().await;
}

/// A gRPC List of the test's namespace, to be given a token.
fn namespace_list() -> tonic::Request<ListRequest> {
    tonic::Request::new(ListRequest {
        scope: Some(stunner_gateway::proto::Scope {
            kind: Some(stunner_gateway::proto::scope::Kind::Namespace(NS.into())),
        }),
    })
}
