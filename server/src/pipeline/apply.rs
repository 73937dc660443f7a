//! Where the operator's own objects (a Gateway's Service and dataplane, legacy mode's
//! ConfigMaps) and its statuses go: the mode, as the render loop sees it. The daemon builds an
//! [`Apply`] once, from its source, and every way the render loop differs between the modes is
//! a method here, the one place that matches on it.
//!
//! In a cluster the writer applies owned objects and statuses to the API server, and the
//! watchers bring the objects back as later changes; a Gateway's config waits for the Service
//! it asked for ([`ServiceWait`]). Standalone, no API server stores them: the owned objects go
//! straight into the index, merged as a server-side apply would ([`OwnedObjects`]), and no
//! apply body is ever built.

use super::owned::OwnedObjects;
use super::service_wait::{SERVICE_WAIT, ServiceWait};
use k8s_openapi::api::core::v1::Service;
use stunner_gateway::config::StunnerConfig;
use stunner_gateway::index::{Change, Index, ObjRef, ObjectKey, Resource};
use stunner_gateway::render::{GatewayOutput, Owned, RenderOutput, SerializedStatus};
use stunner_gateway_k8s::ops::{self, Op, Target};
use stunner_gateway_k8s::writer::Writer;
use tokio::time::Instant;

/// Where owned objects and statuses go. Its `Mode` is private: nothing outside this module
/// can ask which mode it is.
pub struct Apply(Mode);

/// The mode, and what each needs.
enum Mode {
    /// To the API server, through the writer's queue; configs wait for their Service.
    Cluster { writer: Writer, service_wait: ServiceWait },
    /// Into the index, as if applied and watched back.
    Standalone { owned: OwnedObjects },
}

impl Apply {
    /// Cluster mode: `writer` writes what the render loop queues.
    pub fn cluster(writer: Writer) -> Self {
        Apply(Mode::Cluster { writer, service_wait: ServiceWait::new(SERVICE_WAIT) })
    }

    /// Standalone mode.
    pub fn standalone() -> Self {
        Apply(Mode::Standalone { owned: OwnedObjects::default() })
    }

    /// `RenderSettings::held_deployments_only`: standalone mode runs no dataplane, so only a
    /// Deployment the manifests hold takes ours (see [`OwnedObjects`]).
    pub fn held_deployments_only(&self) -> bool {
        matches!(self.0, Mode::Standalone { .. })
    }

    /// What the watchers saw, each object as it is now (`None`: deleted), told before it
    /// reaches the index: the writer skips writes already in place (`Writer::observe`).
    pub(crate) fn observe<'a>(&self, seen: impl IntoIterator<Item = (ObjRef, Option<&'a Resource>)>) {
        if let Mode::Cluster { writer, .. } = &self.0 {
            writer.observe(seen);
        }
    }

    /// Just before a source's `change` reaches `index`: standalone, what the operator applied
    /// to the object is kept until others change it.
    pub(crate) fn before_change(&mut self, index: &Index, change: &Change) {
        if let Mode::Standalone { owned } = &mut self.0 {
            owned.before_outside_change(index, change);
        }
    }

    /// Appends to `changes` the index changes Gateway `key`'s owned objects amount to: only
    /// standalone, for in a cluster they come back through the watchers.
    pub(crate) fn owned_changes(
        &mut self,
        index: &Index,
        key: &ObjectKey,
        gw: &GatewayOutput,
        changes: &mut Vec<Change>,
    ) {
        if let Mode::Standalone { owned } = &mut self.0 {
            changes.extend(owned.changes(index, key, gw));
        }
    }

    /// Gateway `key`'s new `config`: `Some` to publish now. In a cluster it waits (`None`)
    /// while the Service the same render asked for is not in `index`, and its `status` waits
    /// with it (taken from `status`; see [`ServiceWait`]).
    pub(crate) fn admit(
        &mut self,
        key: &ObjectKey,
        config: StunnerConfig,
        service: &Owned<Service>,
        status: &mut Option<SerializedStatus>,
        index: &Index,
    ) -> Option<StunnerConfig> {
        let Mode::Cluster { service_wait, .. } = &mut self.0 else { return Some(config) };
        let admitted = service_wait.admit(key, config, service, index);
        if admitted.is_none()
            && let Some(held) = status.take()
        {
            *status = service_wait.hold_status(key, held);
        }
        admitted
    }

    /// Gateway `key` has no config any more.
    pub(crate) fn forget(&mut self, key: &ObjectKey) {
        if let Mode::Cluster { service_wait, .. } = &mut self.0 {
            service_wait.forget(key);
        }
    }

    /// Stages the writes `ops` builds, unless `index` shows them in place already; in a
    /// cluster only: standalone mode has no use for apply bodies, so they are not built.
    pub(crate) fn write<I>(&self, ops: impl FnOnce() -> I, index: &Index)
    where
        I: IntoIterator<Item = (Target, Op)>,
    {
        if let Mode::Cluster { writer, .. } = &self.0 {
            writer.stage(ops(), index);
        }
    }

    /// When the first config waiting for its Service is due.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        match &self.0 {
            Mode::Cluster { service_wait, .. } => service_wait.next_deadline(),
            Mode::Standalone { .. } => None,
        }
    }

    /// Hands each config whose wait for its Service ran out to `publish`, and stages the
    /// status held with it.
    pub(crate) fn publish_expired(&mut self, index: &Index, mut publish: impl FnMut(&ObjectKey, StunnerConfig)) {
        let Mode::Cluster { writer, service_wait } = &mut self.0 else { return };
        for (key, config, status) in service_wait.expired() {
            tracing::info!(gateway = %key, bound = ?SERVICE_WAIT, "the Gateway's Service did not come back in time");
            publish(&key, config);
            writer.stage(status.and_then(ops::status_op), index);
        }
    }

    /// Hands what the last render or expired wait staged to the writer, all together: the
    /// writer then writes its statuses before its objects (see `stunner_gateway_k8s`'s `queue.rs`).
    pub(crate) fn flush(&self) {
        if let Mode::Cluster { writer, .. } = &self.0 {
            writer.flush();
        }
    }

    /// `--enable-finalizer` at exit: in a cluster, queues what `finalize` renders (every class
    /// of ours invalidated, their dataplanes removed) for the writer.
    pub(crate) fn finalize(&self, index: &Index, finalize: impl FnOnce() -> RenderOutput) {
        if let Mode::Cluster { writer, .. } = &self.0 {
            let output = finalize();
            tracing::info!(
                gateways = output.gateways.len(),
                "finalizer: invalidating Gateways and removing dataplanes"
            );
            writer.submit(&output, index);
        }
    }
}
