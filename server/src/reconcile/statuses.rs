//! The statuses shown to people: recorded on the status board, logged once per change, and
//! forgotten with their object; and the objects held at their last valid version.

use super::Reconciler;
use super::publish::Publisher;
use stunner_gateway::cds::{Condition, ObjectStatus};
use stunner_gateway::index::{Held, Kind, ObjRef, ROUTE_KINDS};

impl Publisher<'_> {
    /// Records a status for people to read, and logs it when it changed; returns whether it did.
    pub(super) fn show_status(&self, kind: Kind, namespace: &str, name: &str, status: &impl serde::Serialize) -> bool {
        let api = kind.api();
        let entry = ObjectStatus {
            api_version: api.api_version,
            kind: api.kind.clone(),
            namespace: namespace.into(),
            name: name.into(),
            status: serde_json::to_value(status).unwrap_or_default(),
        };
        let summary = condition_summary(&entry);
        let changed = self.outputs.statuses.set(entry);
        if changed {
            let object = if namespace.is_empty() { name.to_string() } else { format!("{namespace}/{name}") };
            tracing::info!("{} {object}: {summary}", api.kind);
        }
        changed
    }
}

impl Reconciler {
    /// Shows the objects a source holds at their last valid version: on the status board,
    /// and counted in `stunner_gateway_operator_held_objects`.
    pub(super) fn show_held(&self, held: &[Held]) {
        let notes = held.iter().map(|h| {
            let api = h.object.kind.api();
            let key = &h.object.key;
            (api.api_version, api.kind, key.namespace.to_string(), key.name.to_string(), h.why.clone())
        });
        self.outputs.statuses.set_held(notes.collect());
        self.outputs.metrics.held_objects.set(i64::try_from(held.len()).unwrap_or(i64::MAX));
    }

    pub(super) fn forget_status(&self, r: &ObjRef) {
        if matches!(r.kind, Kind::Gateway | Kind::GatewayClass) || ROUTE_KINDS.contains(&r.kind) {
            let api = r.kind.api();
            self.outputs.statuses.remove(&api.api_version, &api.kind, &r.key.namespace, &r.key.name);
        }
    }
}

/// `Accepted=True, Programmed=False (AddressNotAssigned: ...)`, from a status's conditions and,
/// for routes, its parents' conditions.
fn condition_summary(status: &ObjectStatus) -> String {
    let describe = |c: &Condition| {
        if c.status == "True" {
            format!("{}=True", c.condition_type)
        } else {
            format!("{}={} ({}: {})", c.condition_type, c.status, c.reason, c.message)
        }
    };
    let mut parts: Vec<String> = status.conditions().iter().map(describe).collect();
    for parent in status.parents() {
        let name = &parent.parent_ref.name;
        parts.extend(parent.conditions.iter().map(|c| format!("parent {name}: {}", describe(c))));
    }
    if parts.is_empty() { "no conditions".into() } else { parts.join(", ") }
}
