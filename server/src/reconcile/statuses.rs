//! The statuses shown to people: recorded on the status board, logged once per change, and
//! forgotten with their object; and the objects held at their last valid version.

use super::Reconciler;
use super::publish::Publisher;
use stunner_gateway::cds::{Condition, ObjectStatus};
use stunner_gateway::index::{Held, Kind, ObjRef, ROUTE_KINDS};
use stunner_gateway::render::SerializedStatus;

impl Publisher<'_> {
    /// Records a status for people to read, and logs it when it changed; returns whether it did.
    pub(super) fn show_status(&self, status: &SerializedStatus) -> bool {
        let changed = self.outputs.statuses.set(status);
        if changed {
            let ObjRef { kind, key } = &status.object;
            let object = if key.namespace.is_empty() { key.name.to_string() } else { key.to_string() };
            tracing::info!("{} {object}: {}", kind.api().kind, condition_summary(&status.status));
        }
        changed
    }
}

impl Reconciler {
    /// Shows the objects a source holds at their last valid version: on the status board,
    /// and counted in `stunner_gateway_operator_held_objects`.
    pub(super) fn show_held(&self, held: &[Held]) {
        self.outputs.statuses.set_held(held);
        self.outputs.metrics.held_objects.set(i64::try_from(held.len()).unwrap_or(i64::MAX));
    }

    pub(super) fn forget_status(&self, r: &ObjRef) {
        if matches!(r.kind, Kind::Gateway | Kind::GatewayClass) || ROUTE_KINDS.contains(&r.kind) {
            self.outputs.statuses.remove(r);
        }
    }
}

/// `Accepted=True, Programmed=False (AddressNotAssigned: ...)`, from a status's conditions and,
/// for routes, its parents' conditions.
fn condition_summary(status: &serde_json::Value) -> String {
    let status = ObjectStatus { status: status.clone(), ..ObjectStatus::default() };
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
