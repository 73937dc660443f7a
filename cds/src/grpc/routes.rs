//! The gRPC services of the CDS port, ready for the listener to hand requests to.

use super::service::ConfigDiscovery;
use super::settings::Settings;
use super::stubs::config_discovery_server::ConfigDiscoveryServer;
use crate::authz::Authorizer;
use crate::clients::ClientTable;
use crate::metrics::CdsMetrics;
use crate::store::ConfigStore;
use std::sync::Arc;
use stunner_gateway::proto;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The gRPC services of the CDS port: ConfigDiscovery, grpc.health.v1 (SERVING until
/// shutdown) and server reflection (v1 and v1alpha). Their tasks go on `tasks`, the
/// listener's, which shutdown waits for.
pub async fn routes(
    store: Arc<ConfigStore>,
    metrics: CdsMetrics,
    clients: Arc<ClientTable>,
    authorizer: Arc<Authorizer>,
    settings: Settings,
    shutdown: CancellationToken,
    tasks: TaskTracker,
) -> tonic::service::Routes {
    let limit = settings.max_request_bytes;
    let cds = ConfigDiscoveryServer::new(ConfigDiscovery::new(
        store,
        metrics,
        clients,
        authorizer,
        settings,
        shutdown.clone(),
        tasks.clone(),
    ))
    .max_decoding_message_size(limit);
    let (reporter, health) = tonic_health::server::health_reporter();
    reporter.set_service_status("", tonic_health::ServingStatus::Serving).await;
    reporter.set_service_status(proto::SERVICE_NAME, tonic_health::ServingStatus::Serving).await;
    tasks.spawn(async move {
        shutdown.cancelled().await;
        reporter.set_service_status("", tonic_health::ServingStatus::NotServing).await;
        reporter.set_service_status(proto::SERVICE_NAME, tonic_health::ServingStatus::NotServing).await;
    });
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection().build_v1().expect("valid descriptor sets").max_decoding_message_size(limit);
    let reflection_v1alpha =
        reflection().build_v1alpha().expect("valid descriptor sets").max_decoding_message_size(limit);
    tonic::service::Routes::new(cds)
        .add_service(health.max_decoding_message_size(limit))
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .prepare()
}
