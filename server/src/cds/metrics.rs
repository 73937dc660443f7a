//! Prometheus metrics of the config discovery service.
//!
//! Not in the Go operator (whose CDS exports nothing); named under the operator's
//! `stunner_gateway_operator_` prefix, labelled by transport so gRPC can join WebSocket.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
pub enum Transport {
    Websocket,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransportLabel {
    pub transport: Transport,
}

pub const WEBSOCKET: TransportLabel = TransportLabel { transport: Transport::Websocket };

#[derive(Clone, Default)]
pub struct CdsMetrics {
    /// Watch streams open now.
    pub clients: Family<TransportLabel, Gauge>,
    /// Config frames sent to watch clients.
    pub pushes: Family<TransportLabel, Counter>,
    /// Bytes of config frames sent to watch clients.
    pub push_bytes: Family<TransportLabel, Counter>,
    /// Watch clients disconnected because they did not take a frame within the write timeout
    /// or stopped answering keepalives.
    pub dropped_clients: Family<TransportLabel, Counter>,
    /// Connections refused because the connection limit was reached.
    pub rejected_connections: Counter,
}

impl CdsMetrics {
    pub fn register(&self, registry: &mut Registry) {
        let r = registry.sub_registry_with_prefix("stunner_gateway_operator_cds");
        r.register("clients", "Config discovery watch streams currently open", self.clients.clone());
        r.register("pushes", "Config frames sent to watch clients", self.pushes.clone());
        r.register("push_bytes", "Bytes of config frames sent to watch clients", self.push_bytes.clone());
        r.register(
            "dropped_clients",
            "Watch clients disconnected for not reading (write timeout) or not answering keepalives",
            self.dropped_clients.clone(),
        );
        r.register(
            "rejected_connections",
            "Connections refused because the connection limit was reached",
            self.rejected_connections.clone(),
        );
    }
}
