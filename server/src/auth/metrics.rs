//! The credential API's requests by endpoint and result, beside the operator's metrics.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

/// Which answer was asked for.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)] // label values are lower-case words
pub enum Endpoint {
    /// `GET /`.
    turn,
    /// `GET /ice`.
    ice,
    /// Any other path.
    other,
}

/// How a request ended.
#[derive(Debug, Clone, Copy, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Result {
    /// 200: credentials handed out.
    success,
    /// 400 (a parameter refused) or 414 (a query over the bound).
    bad_request,
    /// 404: no listener matched, or no such path.
    not_found,
    /// 405: a method other than GET.
    method_not_allowed,
    /// 500: no Gateway config to answer from yet.
    no_config,
}

impl Result {
    pub fn of_status(status: u16) -> Self {
        match status {
            200 => Result::success,
            404 => Result::not_found,
            405 => Result::method_not_allowed,
            500 => Result::no_config,
            _ => Result::bad_request,
        }
    }
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: Endpoint,
    pub result: Result,
}

#[derive(Clone, Default)]
pub struct AuthMetrics {
    pub requests: Family<RequestLabels, Counter>,
}

impl AuthMetrics {
    pub fn count(&self, endpoint: Endpoint, status: u16) {
        self.requests.get_or_create(&RequestLabels { endpoint, result: Result::of_status(status) }).inc();
    }

    /// Registers the counters, each answer's series at zero from the start.
    pub fn register(&self, registry: &mut Registry) {
        for endpoint in [Endpoint::turn, Endpoint::ice] {
            for result in [Result::success, Result::bad_request, Result::not_found, Result::no_config] {
                let _ = self.requests.get_or_create(&RequestLabels { endpoint, result });
            }
        }
        registry.sub_registry_with_prefix("stunner_gateway_operator").register(
            "auth_requests",
            "Requests to the TURN credential API by endpoint and result",
            self.requests.clone(),
        );
    }
}
