//! Bearer tokens of CDS clients checked by the API server (`--cds-token-review`): a
//! TokenReview says who the token is, a SubjectAccessReview whether that user may
//! [`CONFIG_VERB`] the Gateways the request is for. So a tool outside `kubectl port-forward`
//! is let in on RBAC, as it would be let in to the API server itself.
//!
//! Tokens are never logged, and never cached: each request (a watch is one request) costs two
//! API calls, at most [`MAX_CONCURRENT_REVIEWS`] at once, each within [`REVIEW_TIMEOUT`].
//!
//! What the reviews say becomes a [`Refusal`] of its kind: a token the TokenReview does not
//! authenticate is `Unauthenticated`, a user the SubjectAccessReview does not allow is
//! `Forbidden`, and a review that fails or does not finish in time (the API server is down,
//! or the operator may not create reviews) is `Unavailable`: the client retries.

use futures_util::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::api::PostParams;
use kube::{Api, Client};
use std::time::Duration;
use stunner_gateway_cds::Scope;
use stunner_gateway_cds::authz::{CONFIG_VERB, Identity, Refusal, TokenReviewer};
use tokio::sync::Semaphore;

/// Most reviews in flight: a flood of tokened requests must not become a flood of API calls.
pub(crate) const MAX_CONCURRENT_REVIEWS: usize = 32;
/// How long the two reviews of one request may take together.
pub(crate) const REVIEW_TIMEOUT: Duration = Duration::from_secs(5);

/// The Gateway API group and resource the verb is checked on.
const GATEWAY_GROUP: &str = "gateway.networking.k8s.io";
const GATEWAYS: &str = "gateways";

/// Reviews tokens with the API server the operator runs against.
pub struct KubeTokenReviewer {
    client: Client,
    permits: Semaphore,
}

impl std::fmt::Debug for KubeTokenReviewer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeTokenReviewer").finish_non_exhaustive()
    }
}

impl KubeTokenReviewer {
    pub fn new(client: Client) -> Self {
        KubeTokenReviewer { client, permits: Semaphore::new(MAX_CONCURRENT_REVIEWS) }
    }

    async fn check(&self, token: &str, scope: &Scope) -> Result<Identity, Refusal> {
        let _permit =
            self.permits.acquire().await.map_err(|_| Refusal::Unavailable("token reviews are shut down".into()))?;
        let unavailable = |what: &str, e: kube::Error| {
            tracing::warn!(error = %e, "{what} failed");
            Refusal::Unavailable(format!("the bearer token could not be checked ({what} failed)"))
        };
        let review =
            TokenReview { spec: TokenReviewSpec { token: token.to_string(), audiences: None }, ..Default::default() };
        let reviewed = Api::<TokenReview>::all(self.client.clone())
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| unavailable("TokenReview", e))?;
        let status = reviewed.status.unwrap_or_default();
        let user = match (status.authenticated, status.user) {
            (Some(true), Some(user)) => user,
            _ => return Err(Refusal::Unauthenticated("the bearer token is not valid".into())),
        };
        let name = user.username.clone().unwrap_or_default();
        let (namespace, gateway) = match scope {
            Scope::Config(id) => (Some(id.namespace.clone()), Some(id.name.clone())),
            Scope::Namespace(ns) => (Some(ns.clone()), None),
            Scope::All => (None, None),
        };
        let access = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: user.username,
                groups: user.groups,
                uid: user.uid,
                extra: user.extra,
                resource_attributes: Some(ResourceAttributes {
                    group: Some(GATEWAY_GROUP.into()),
                    resource: Some(GATEWAYS.into()),
                    verb: Some(CONFIG_VERB.into()),
                    namespace: namespace.clone(),
                    name: gateway.clone(),
                    ..Default::default()
                }),
                ..Default::default()
            },
            ..Default::default()
        };
        let decided = Api::<SubjectAccessReview>::all(self.client.clone())
            .create(&PostParams::default(), &access)
            .await
            .map_err(|e| unavailable("SubjectAccessReview", e))?;
        if decided.status.is_some_and(|s| s.allowed) {
            return Ok(Identity::User { name });
        }
        let on = match (namespace, gateway) {
            (Some(ns), Some(gw)) => format!("gateway {ns}/{gw}"),
            (Some(ns), None) => format!("the gateways of namespace {ns}"),
            _ => "gateways cluster-wide".to_string(),
        };
        Err(Refusal::Forbidden(format!("{name} may not {CONFIG_VERB} {on} ({GATEWAYS}.{GATEWAY_GROUP})")))
    }
}

impl TokenReviewer for KubeTokenReviewer {
    fn review<'a>(&'a self, token: &'a str, scope: &'a Scope) -> BoxFuture<'a, Result<Identity, Refusal>> {
        Box::pin(async move {
            tokio::time::timeout(REVIEW_TIMEOUT, self.check(token, scope))
                .await
                .unwrap_or_else(|_| Err(Refusal::Unavailable("the bearer token could not be checked in time".into())))
        })
    }
}
