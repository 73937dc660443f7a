//! Prometheus metrics of the config discovery service.
//!
//! Not in the Go operator (whose CDS exports nothing); named under the operator's
//! `stunner_gateway_operator_` prefix, labelled by transport (`websocket`, `grpc`).

use super::latency::{LatencyHistogram, PUSH_BUCKETS};
use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Transport {
    Websocket,
    Grpc,
}

impl Transport {
    /// The label value and the client table's name: `websocket` or `grpc`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Transport::Websocket => "websocket",
            Transport::Grpc => "grpc",
        }
    }
}

impl EncodeLabelValue for Transport {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, self.as_str())
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransportLabel {
    pub(crate) transport: Transport,
}

pub const WEBSOCKET: TransportLabel = TransportLabel { transport: Transport::Websocket };
pub const GRPC: TransportLabel = TransportLabel { transport: Transport::Grpc };

/// What a client said about a version it was sent (gRPC acknowledgements).
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq)]
pub(crate) enum AckResult {
    Applied,
    Rejected,
}

impl EncodeLabelValue for AckResult {
    fn encode(&self, encoder: &mut LabelValueEncoder<'_>) -> Result<(), std::fmt::Error> {
        std::fmt::Write::write_str(encoder, if *self == AckResult::Applied { "applied" } else { "rejected" })
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct AckLabel {
    pub(crate) result: AckResult,
}

/// Which API refused a request.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case words
pub(crate) enum Api {
    /// The HTTP API: config GETs, WebSocket watches, the client table, the console.
    http,
    grpc,
}

/// Why a request was refused ([`crate::authz::Refusal`]'s kind).
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case words
pub(crate) enum RefusalReason {
    /// An invalid bearer token (401 / UNAUTHENTICATED).
    unauthenticated,
    /// A client that may not read what it asked for (403 / PERMISSION_DENIED).
    forbidden,
    /// The API server did not review a token in time (503 / UNAVAILABLE): not the client's doing.
    unavailable,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct RefusedLabel {
    pub(crate) api: Api,
    pub(crate) reason: RefusalReason,
}

#[derive(Clone)]
pub struct CdsMetrics {
    /// Watch streams open now.
    pub clients: Family<TransportLabel, Gauge>,
    /// Config frames sent to watch clients.
    pub pushes: Family<TransportLabel, Counter>,
    /// Bytes of config frames sent to watch clients.
    pub(crate) push_bytes: Family<TransportLabel, Counter>,
    /// Watch clients disconnected because they did not take a frame within the write timeout
    /// or stopped answering keepalives.
    pub dropped_clients: Family<TransportLabel, Counter>,
    /// Connections refused because the connection limit was reached.
    pub rejected_connections: Counter,
    /// Acknowledgements received from watch clients (gRPC only), by result.
    pub(crate) client_acks: Family<AckLabel, Counter>,
    /// Watch clients on a config version other than the current one (sampled).
    pub(crate) stale_clients: Family<TransportLabel, Gauge>,
    /// Bytes waiting in the outboxes of WebSocket watch clients whose sockets would block.
    pub outbox_bytes: Gauge,
    /// Requests refused by `--cds-authorization`, by API and reason.
    pub(crate) refused_requests: Family<RefusedLabel, Counter>,
    /// From a version's store to its send to a client that was watching when it was stored.
    pub push_time: LatencyHistogram,
    /// From a version's store to a gRPC client's acknowledgement that it applied it, for the
    /// versions `push_time` times.
    pub ack_time: LatencyHistogram,
}

impl Default for CdsMetrics {
    fn default() -> Self {
        CdsMetrics {
            clients: Family::default(),
            pushes: Family::default(),
            push_bytes: Family::default(),
            dropped_clients: Family::default(),
            rejected_connections: Counter::default(),
            client_acks: Family::default(),
            stale_clients: Family::default(),
            outbox_bytes: Gauge::default(),
            refused_requests: Family::default(),
            push_time: LatencyHistogram::new(&PUSH_BUCKETS),
            ack_time: LatencyHistogram::new(&PUSH_BUCKETS),
        }
    }
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
        r.register(
            "client_acks",
            "Config versions watch clients acknowledged as applied or rejected (gRPC only)",
            self.client_acks.clone(),
        );
        r.register(
            "stale_clients",
            "Watch clients on a config version other than the current one: a WebSocket client by the version it \
             was last sent, a gRPC client by the one it last applied",
            self.stale_clients.clone(),
        );
        r.register(
            "outbox_bytes",
            "Bytes waiting to be written to WebSocket watch clients whose sockets would block: per client at most \
             the frame being written, one Pong, one version of each config and a Close",
            self.outbox_bytes.clone(),
        );
        // Every series from the start: a dashboard or an alert on them sees 0, not nothing.
        for label in [WEBSOCKET, GRPC] {
            let _ = self.clients.get_or_create(&label);
            let _ = self.pushes.get_or_create(&label);
            let _ = self.push_bytes.get_or_create(&label);
            let _ = self.dropped_clients.get_or_create(&label);
            let _ = self.stale_clients.get_or_create(&label);
        }
        for result in [AckResult::Applied, AckResult::Rejected] {
            let _ = self.client_acks.get_or_create(&AckLabel { result });
        }
        for api in [Api::http, Api::grpc] {
            for reason in [RefusalReason::unauthenticated, RefusalReason::forbidden, RefusalReason::unavailable] {
                let _ = self.refused_requests.get_or_create(&RefusedLabel { api, reason });
            }
        }
        r.register(
            "refused_requests",
            "Requests refused by the CDS authorization (--cds-authorization), by API and reason: unauthenticated \
             (an invalid token), forbidden (not allowed), unavailable (the token could not be reviewed in time)",
            self.refused_requests.clone(),
        );
        r.register(
            "push_time_seconds",
            "Time from a config version's store to its send to a watch client connected at the time",
            self.push_time.clone(),
        );
        r.register(
            "ack_time_seconds",
            "Time from a config version's store to a watch client's acknowledgement that it applied it (gRPC only)",
            self.ack_time.clone(),
        );
    }

    /// Counts a request `api` refused for `reason`.
    pub(crate) fn refused(&self, api: Api, reason: RefusalReason) {
        self.refused_requests.get_or_create(&RefusedLabel { api, reason }).inc();
    }
}
