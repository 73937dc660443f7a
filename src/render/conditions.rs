//! Status conditions: building them, and keeping `lastTransitionTime` stable.
//!
//! Timestamps come from the `now` the caller passes in; a condition whose status did not change
//! keeps its stored transition time, so re-rendering unchanged input gives identical statuses.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// Upstream keeps at most this many conditions on a Gateway (spec §4.2).
const MAX_GATEWAY_CONDITIONS: usize = 7;

/// A condition of the owning object's `generation`, transitioning `now`.
pub(crate) fn build(
    type_: &str,
    status: &str,
    reason: &str,
    message: impl Into<String>,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: generation,
        last_transition_time: now.clone(),
    }
}

/// "Set by type" (apimachinery's `SetStatusCondition`): a condition of the same type is updated
/// in place, its transition time changing only with its status; other types are kept; new types
/// are appended.
pub(crate) fn set(conditions: &mut Vec<Condition>, new: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            let ltt =
                if old.status == new.status { old.last_transition_time.clone() } else { new.last_transition_time };
            *old = Condition { last_transition_time: ltt, ..new };
        }
        None => conditions.push(new),
    }
}

/// Drops the oldest Gateway conditions beyond upstream's limit.
pub(crate) fn prune(conditions: &mut Vec<Condition>) {
    if conditions.len() > MAX_GATEWAY_CONDITIONS {
        conditions.drain(..conditions.len() - MAX_GATEWAY_CONDITIONS);
    }
}

/// For lists rebuilt from scratch (listener and route parent conditions): a new condition equal
/// to a stored one of the same type in everything but time keeps the stored time.
pub(crate) fn keep_times(old: &[Condition], new: &mut [Condition]) {
    for c in new {
        let same = old.iter().find(|o| {
            o.type_ == c.type_
                && o.status == c.status
                && o.reason == c.reason
                && o.message == c.message
                && o.observed_generation == c.observed_generation
        });
        if let Some(o) = same {
            c.last_transition_time = o.last_transition_time.clone();
        }
    }
}
