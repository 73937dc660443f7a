//! Cluster mode of `stunnerctl icetest` (no `--whip-server`): what upstream's icetest does
//! (github.com/l7mp/stunner `internal/icetester`), against the cluster of the kubeconfig. It
//! makes a namespace (`icetest` unless `-n` names one), a Dataplane, a GatewayClass and
//! GatewayConfig, a Gateway per TURN transport, a UDPRoute to an icetester pod and its Service
//! (`manifests`); waits, bounded, for the tester, the Gateways' public addresses and their
//! dataplane pods; takes credentials from the operator's credential API (`/ice`, on the
//! `app=stunner-auth` pods through a port-forward, or `--auth-server-address`); runs the ICE
//! tests of `icetest_cmd` through each Gateway to the tester, asymmetric then symmetric (the
//! tester allocating on the Gateway's Service, by its cluster DNS name), reaching the tester's
//! WHIP endpoint and `/config` through the API server's pod proxy; and removes what it made at the end, after a
//! failure, a timeout or Ctrl-C. Upstream's stages, in its words and order.

pub mod manifests;
mod objects;

use super::cli::IceTestArgs;
use super::icetest_cmd::{self, Failed, StageError, TurnServer, TurnTransport, stage};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use manifests::{BACKEND, DATAPLANE, DATAPLANE_KIND, GATEWAY_CLASS, GATEWAY_CLASS_KIND, NAMESPACE, TESTER_PORT};
use std::cell::RefCell;
use std::error::Error;
use std::time::{Duration, Instant};
use stunner_gateway_client::auth_api;
use stunner_gateway_client::cds::Timeouts;
use stunner_gateway_client::cluster::{self, ClusterOptions, PodHttpProxy, PortForward};

/// Upstream's bounds: the tester pod 30 s, a Gateway's public address and dataplane 60 s.
const TESTER_READY: Duration = Duration::from_secs(30);
const GATEWAY_READY: Duration = Duration::from_secs(60);
/// How long removing a leftover object (`--force-cleanup`) may take.
const REMOVAL: Duration = Duration::from_secs(60);

const DIAG_K8S: &str = "The Kubernetes configuration is unavailable or the API server is unreachable. Does kubectl \
                        work? Is the Kubernetes context set for the right cluster (--kubeconfig, --context)?";
const DIAG_NAMESPACE_EXISTS: &str = "The Kubernetes namespace to be used for the test already exists, most probably \
                                     due to an earlier unclean exit. The tester refuses to run in such cases in order \
                                     to avoid interference with existing workload. If you are sure about that the \
                                     namespace is unused use '--force-cleanup' to remove it before running the test.";
const DIAG_ARTIFACTS: &str = "Some Kubernetes resources needed for running the tests could not be queried or created. \
                              Typically, this occurs because the Gateway API custom resources or STUNner's own custom \
                              resources have not been installed, or the current Kubernetes user does not have enough \
                              rights to get or create the resource.";
const DIAG_TESTER: &str = "The ICE tester pod did not become ready: check the image (--ice-tester-image; the node must \
                           have it or be able to pull it) and `kubectl -n <namespace> describe pod icetest-backend`.";
const DIAG_AUTH: &str = "The operator's credential API is not found or not reachable: is the operator installed with \
                         it (the chart's stunner-auth Service, pods labelled app=stunner-auth)? Or give \
                         --auth-server-address.";
const DIAG_PUBLIC_ADDR: &str = "At least one Gateway could not be exposed on a public IP/port. This is the most typical \
                                problem with STUNner: it usually means that the load-balancer integration in your \
                                Kubernetes cluster does not work (the Gateway's LoadBalancer Service has no external \
                                IP), or the operator does not see it: check `stunnerctl gateway-status` and the \
                                Gateway's Service.";
const DIAG_DATAPLANE: &str = "The Gateway's dataplane pod is not running or not ready: check the Dataplane's image and \
                              resources and `kubectl -n <namespace> get pods -l app=stunner`.";
const DIAG_ICE: &str = "The operator's credential API did not give the Gateway's ICE servers: check that the operator \
                        runs and sees the Gateway (`stunnerctl gateway-status`).";

/// What this run made, for the cleanup: set as each is created.
#[derive(Default)]
struct Made {
    client: Option<Client>,
    namespace: bool,
    dataplane: bool,
    class: bool,
}

/// Runs the stages in `namespace`, within `--timeout` and until Ctrl-C, then removes what
/// they made whatever the outcome.
pub async fn run(args: &IceTestArgs, namespace: &str, cluster: &ClusterOptions) -> Result<(), Box<dyn Error>> {
    let transports = icetest_cmd::transports(&args.protocols)?;
    let deadline = Instant::now() + args.timeout;
    let made = RefCell::new(Made::default());
    let result = tokio::select! {
        result = stages(args, namespace, cluster, &transports, deadline, &made) => result,
        _ = tokio::time::sleep_until(tokio::time::Instant::from_std(deadline)) => {
            println!("\nICE tester timed out after {}", icetest_cmd::go_duration(args.timeout));
            Err(Failed.into())
        }
        _ = tokio::signal::ctrl_c() => {
            println!("\nICE tester stopped due to user interrupt");
            Err(Failed.into())
        }
    };
    cleanup(made.into_inner(), namespace).await;
    result
}

async fn stages(
    args: &IceTestArgs,
    ns: &str,
    cluster: &ClusterOptions,
    transports: &[TurnTransport],
    deadline: Instant,
    made: &RefCell<Made>,
) -> Result<(), Box<dyn Error>> {
    let timeouts = Timeouts { connect: Duration::from_secs(10), request: Duration::from_secs(30) };
    let client = stage("Initializing", None, initialize(args, ns, cluster, made)).await?;
    let (whip, auth) = stage("Checking installation", None, install(&client, args, ns, transports, made)).await?;
    stage("Checking Gateway", None, gateways_ready(&client, &auth.address, ns, transports, timeouts)).await?;
    let servers =
        stage("Obtaining ICE server configuration", None, ice_servers(&auth.address, ns, transports, timeouts)).await?;
    let whip_url = format!("http://{}/whip", whip.local_addr());
    let servers: Vec<_> = transports.iter().copied().zip(servers).collect();
    // The tester, in the cluster, reaches each Gateway through its Service by name.
    let tester_servers =
        |transport, server: &TurnServer| vec![server.ice_server(transport, &manifests::service_host(transport, ns))];
    icetest_cmd::ice_tests(args, &whip_url, &servers, tester_servers, timeouts, deadline).await
}

/// A Kubernetes client, the namespace (a leftover one removed with `--force-cleanup`), and
/// the test's Dataplane.
async fn initialize(
    args: &IceTestArgs,
    ns: &str,
    cluster: &ClusterOptions,
    made: &RefCell<Made>,
) -> Result<Client, StageError> {
    let client = cluster.client().await.map_err(|e| StageError::new(e, DIAG_K8S))?;
    made.borrow_mut().client = Some(client.clone());
    let artifacts = |e: String| StageError::new(e, DIAG_ARTIFACTS);
    if objects::get(&client, NAMESPACE, "", ns).await.map_err(|e| StageError::new(e, DIAG_K8S))?.is_some() {
        if !args.force_cleanup {
            return Err(StageError::new(format!("namespace {ns} already exists, halting test"), DIAG_NAMESPACE_EXISTS));
        }
        objects::remove(&client, NAMESPACE, "", ns, REMOVAL).await.map_err(|e| {
            StageError::new(
                format!("failed to clean up tester namespace {ns} (--force-cleanup enforced): {e}"),
                DIAG_ARTIFACTS,
            )
        })?;
    }
    objects::create(&client, NAMESPACE, "", &manifests::namespace(ns)).await.map_err(artifacts)?;
    made.borrow_mut().namespace = true;
    let default = objects::get(&client, DATAPLANE_KIND, "", "default")
        .await
        .map_err(artifacts)?
        .ok_or_else(|| artifacts("failed to query default Dataplane: not found".into()))?;
    objects::remove(&client, DATAPLANE_KIND, "", DATAPLANE, REMOVAL).await.map_err(artifacts)?;
    objects::create(&client, DATAPLANE_KIND, "", &manifests::dataplane(&default)).await.map_err(artifacts)?;
    made.borrow_mut().dataplane = true;
    Ok(client)
}

/// The credential API as this run reaches it, and the port-forward it goes through (held
/// for the run) when it was found in the cluster.
struct AuthServer {
    address: String,
    _forward: Option<PortForward>,
}

/// The CRDs, the test's objects, the tester ready; the tester's WHIP endpoint and the
/// credential API reachable from here.
async fn install(
    client: &Client,
    args: &IceTestArgs,
    ns: &str,
    transports: &[TurnTransport],
    made: &RefCell<Made>,
) -> Result<(PodHttpProxy, AuthServer), StageError> {
    let artifacts = |e: String| StageError::new(e, DIAG_ARTIFACTS);
    let crds = manifests::Kind {
        group: "apiextensions.k8s.io",
        version: "v1",
        kind: "CustomResourceDefinition",
        plural: "customresourcedefinitions",
        namespaced: false,
    };
    for crd in manifests::CRDS {
        if objects::get(client, crds, "", crd).await.map_err(artifacts)?.is_none() {
            return Err(artifacts(format!("failed to query CRD {crd}: not found")));
        }
    }
    let image = args.ice_tester_image.clone().unwrap_or_else(manifests::default_ice_tester_image);
    for (kind, object) in manifests::resources(ns, &image, transports) {
        if kind == GATEWAY_CLASS_KIND {
            // Cluster-scoped: a leftover of an earlier run goes first, as upstream's does.
            objects::remove(client, kind, "", GATEWAY_CLASS, REMOVAL).await.map_err(artifacts)?;
        }
        objects::create(client, kind, ns, &object).await.map_err(artifacts)?;
        if kind == GATEWAY_CLASS_KIND {
            made.borrow_mut().class = true;
        }
    }
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let ready = objects::eventually(TESTER_READY, || async {
        let pod = pods.get_opt(BACKEND).await.map_err(|e| e.to_string())?;
        Ok(pod.filter(cluster::is_ready))
    })
    .await
    .map_err(|e| StageError::new(e, DIAG_TESTER))?;
    if ready.is_none() {
        return Err(StageError::new(
            format!("ICE tester backend {ns}/{BACKEND} not running or ready after {TESTER_READY:?}"),
            DIAG_TESTER,
        ));
    }
    let whip = PodHttpProxy::start(client.clone(), ns, BACKEND, TESTER_PORT)
        .await
        .map_err(|e| StageError::new(format!("error reaching the ICE tester backend: {e}"), DIAG_TESTER))?;
    let auth = match &args.auth_server_address {
        Some(address) => AuthServer { address: address.clone(), _forward: None },
        None => {
            let searching =
                |e: cluster::ClusterError| StageError::new(format!("error searching for auth service: {e}"), DIAG_AUTH);
            let pod = cluster::auth_pod(client).await.map_err(searching)?;
            let forward = PortForward::start(client.clone(), &pod, auth_api::DEFAULT_PORT).await.map_err(searching)?;
            AuthServer { address: forward.local_addr().to_string(), _forward: Some(forward) }
        }
    };
    Ok((whip, auth))
}

/// Each Gateway has a public address in its ICE config and a ready dataplane pod.
async fn gateways_ready(
    client: &Client,
    auth: &str,
    ns: &str,
    transports: &[TurnTransport],
    timeouts: Timeouts,
) -> Result<(), StageError> {
    for t in transports {
        let gw = manifests::gateway_name(*t);
        let last = RefCell::new(String::from("no answer yet"));
        let exposed = objects::eventually(GATEWAY_READY, || async {
            match auth_api::ice_config(auth, ns, Some(gw), timeouts).await {
                // Without a public address the URI carries 0.0.0.0 (upstream's fallback).
                Ok(ice) => match icetest_cmd::turn_servers(&ice, &[*t]) {
                    Ok(servers) if servers.iter().all(|s| !s.addr.ip().is_unspecified()) => Ok(Some(())),
                    Ok(_) => {
                        *last.borrow_mut() = format!("no public address yet (the {t} URI has 0.0.0.0)");
                        Ok(None)
                    }
                    Err(e) => {
                        *last.borrow_mut() = e.error;
                        Ok(None)
                    }
                },
                Err(e) => {
                    *last.borrow_mut() = e.to_string();
                    Ok(None)
                }
            }
        })
        .await
        .map_err(|e| StageError::new(e, DIAG_PUBLIC_ADDR))?;
        if exposed.is_none() {
            return Err(StageError::new(
                format!("failed to find public address for Gateway {ns}/{gw}: {}", last.into_inner()),
                DIAG_PUBLIC_ADDR,
            ));
        }
        let running = objects::eventually(GATEWAY_READY, || async {
            let pods = cluster::dataplane_pods(client, Some(ns), Some(gw), None).await.map_err(|e| e.to_string())?;
            Ok(pods.iter().any(cluster::is_ready).then_some(()))
        })
        .await
        .map_err(|e| StageError::new(e, DIAG_DATAPLANE))?;
        if running.is_none() {
            return Err(StageError::new(
                format!("dataplane pod for Gateway {ns}/{gw} not running or ready after {GATEWAY_READY:?}"),
                DIAG_DATAPLANE,
            ));
        }
    }
    Ok(())
}

/// Each Gateway's TURN server and credentials, from `/ice`.
async fn ice_servers(
    auth: &str,
    ns: &str,
    transports: &[TurnTransport],
    timeouts: Timeouts,
) -> Result<Vec<TurnServer>, StageError> {
    let mut servers = Vec::with_capacity(transports.len());
    for t in transports {
        let gw = manifests::gateway_name(*t);
        let ice = auth_api::ice_config(auth, ns, Some(gw), timeouts).await.map_err(|e| {
            StageError::new(format!("could not obtain ICE server config for Gateway {ns}/{gw}: {e}"), DIAG_ICE)
        })?;
        servers.extend(icetest_cmd::turn_servers(&ice, &[*t])?);
    }
    Ok(servers)
}

/// Removes what the run made, whatever stopped it (its own bound: the run's may be spent).
/// The namespace takes the Gateways, the route and the tester with it.
async fn cleanup(made: Made, ns: &str) {
    let Some(client) = made.client else { return };
    let mut doomed = Vec::new();
    if made.class {
        doomed.push((GATEWAY_CLASS_KIND, GATEWAY_CLASS));
    }
    if made.dataplane {
        doomed.push((DATAPLANE_KIND, DATAPLANE));
    }
    if made.namespace {
        doomed.push((NAMESPACE, ns));
    }
    for (kind, name) in doomed {
        let deleted = tokio::time::timeout(REMOVAL, objects::delete(&client, kind, "", name)).await;
        match deleted {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("error cleaning up: {e}"),
            Err(_) => eprintln!("error cleaning up: deleting {} {name} took over {REMOVAL:?}", kind.kind),
        }
    }
}
