//! Standalone mode has no API server to store the objects the operator renders for a Gateway
//! (its Service and Deployment), so they go straight into the index, as if written and watched
//! back. They are applied the way a server-side apply under one field manager would: the
//! rendered object is merged into the live one (the one the manifests hold, or the last merge),
//! so what others set stays, above all the Service's `status.loadBalancer`, which gives the
//! listeners their public address; and a field the operator set before and no longer renders
//! is removed.
//!
//! Maps merge key by key; lists are replaced as a whole (the renderer already carries over what
//! it keeps of a live list, such as allocated node ports).

use crate::pipeline::Change;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;
use stunner_gateway::index::{Dirty, Index, Kind, ObjRef, ObjectKey, Resource};
use stunner_gateway::render::{Owned, RenderOutput};

/// What the operator last applied to each owned object: the fields it owns.
///
/// Kept as JSON text, parsed only when the object is applied again: as a `Value` tree (a
/// map node and a `String` per field) a Deployment took ~30 KiB, with 1,000 Gateways most of
/// the operator's heap; as text it takes ~2 KiB.
#[derive(Debug, Default)]
pub struct OwnedObjects {
    last_applied: BTreeMap<ObjRef, Box<str>>,
}

impl OwnedObjects {
    /// Applies the owned objects of `output` to `index`; returns what that made dirty (rendered
    /// in the next pass). `earlier` is what the earlier passes of the same render applied
    /// (nothing else changed the index since): an object rendered the same again is applied
    /// already, and not merged a second time (at start-up, a second merge of every Service and
    /// Deployment only to find them unchanged).
    pub fn apply(&mut self, index: &mut Index, output: &RenderOutput, earlier: &RenderOutput) -> Dirty {
        let mut dirty = Dirty::default();
        for (key, gw) in &output.gateways {
            let before = earlier.gateways.get(key);
            let service = match before {
                Some(b) if b.service == gw.service => None,
                _ => self.change(index, &gw.service, Kind::Service, key, |i| i.services().get(key), Resource::Service),
            };
            let deployment = match before {
                Some(b) if b.deployment == gw.deployment => None,
                _ => self.change(
                    index,
                    &gw.deployment,
                    Kind::Deployment,
                    key,
                    |i| i.deployments().get(key),
                    Resource::Deployment,
                ),
            };
            let changes = [service, deployment];
            for change in changes.into_iter().flatten() {
                dirty.merge(match change {
                    Change::Apply(r) => index.apply(*r),
                    Change::Delete(r) => index.delete(r.kind, &r.key.namespace, &r.key.name),
                });
            }
        }
        dirty
    }

    /// The index change one owned-object decision amounts to; `None` if the index already
    /// holds the result.
    fn change<T: Serialize + DeserializeOwned + PartialEq + Clone>(
        &mut self,
        index: &Index,
        owned: &Owned<T>,
        kind: Kind,
        key: &ObjectKey,
        live: impl Fn(&Index) -> Option<&T>,
        wrap: fn(T) -> Resource,
    ) -> Option<Change> {
        let r = ObjRef::new(kind, key.clone());
        match owned {
            Owned::Apply(desired) => {
                let live = live(index);
                let body = serde_json::to_value(desired).expect("a rendered object serializes");
                let merged = match live {
                    Some(live) => {
                        let mut value = serde_json::to_value(live).expect("a stored object serializes");
                        let last = self
                            .last_applied
                            .get(&r)
                            .map(|text| serde_json::from_str::<Value>(text).expect("what was applied is JSON"));
                        merge(&mut value, last.as_ref(), &body);
                        match serde_json::from_value(value) {
                            Ok(merged) => merged,
                            Err(e) => {
                                // Cannot happen for objects of one type; if it did, the
                                // rendered object alone is still what the operator asks for.
                                tracing::warn!(object = %key, error = %e, "cannot merge into the stored object");
                                desired.clone()
                            }
                        }
                    }
                    // Nothing to merge into (every Gateway at start-up): the rendered object as is.
                    None => desired.clone(),
                };
                self.last_applied.insert(r, body.to_string().into_boxed_str());
                (live != Some(&merged)).then(|| Change::Apply(Box::new(wrap(merged))))
            }
            Owned::Delete => {
                self.last_applied.remove(&r);
                index.contains(&r).then_some(Change::Delete(r))
            }
            Owned::Keep => None,
        }
    }
}

/// Merges `desired` into `live`: `desired`'s fields are set, maps merged key by key, and a
/// field of `last` (what was applied before) that `desired` no longer has is removed.
fn merge(live: &mut Value, last: Option<&Value>, desired: &Value) {
    let (Value::Object(live_map), Value::Object(desired_map)) = (&mut *live, desired) else {
        *live = desired.clone();
        return;
    };
    if let Some(Value::Object(last_map)) = last {
        for (dropped, was) in last_map.iter().filter(|(k, _)| !desired_map.contains_key(*k)) {
            // Of a map, only the entries the operator set go; others' entries stay.
            if let Some(l @ Value::Object(_)) = live_map.get_mut(dropped)
                && was.is_object()
            {
                merge(l, Some(was), &Value::Object(Default::default()));
                if l.as_object().is_some_and(|m| !m.is_empty()) {
                    continue;
                }
            }
            live_map.remove(dropped);
        }
    }
    for (k, d) in desired_map {
        let last = last.and_then(|l| l.get(k));
        match live_map.get_mut(k) {
            Some(l) if l.is_object() && d.is_object() => merge(l, last, d),
            _ => {
                live_map.insert(k.clone(), d.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
    use serde_json::json;
    use stunner_gateway::render::GatewayOutput;

    /// Within one render the index changes only by these applies: what an earlier pass applied
    /// is in it, so an object rendered the same again is left alone (not merged and compared
    /// once more, which at start-up cost a second round trip of every Service and Deployment).
    #[test]
    fn an_object_an_earlier_pass_applied_is_not_merged_again() {
        let key = ObjectKey::new("ns", "gw");
        let labels = |owner: &str| Some([("owner".to_string(), owner.to_string())].into());
        let meta = ObjectMeta {
            name: Some("gw".into()),
            namespace: Some("ns".into()),
            labels: labels("operator"),
            ..Default::default()
        };
        let service = Service { metadata: meta, ..Default::default() };
        let gateway = GatewayOutput {
            config: Owned::Keep,
            status: None,
            service: Owned::Apply(service.clone()),
            deployment: Owned::Keep,
            delete_daemon_set: false,
        };
        let mut output = RenderOutput::default();
        output.gateways.insert(key.clone(), gateway);
        let (mut index, mut owned) = (Index::new(), OwnedObjects::default());
        owned.apply(&mut index, &output, &RenderOutput::default());
        assert_eq!(index.services().get(&key), Some(&service));

        // Had the second pass merged again, it would restore what the operator set; that no
        // one else changed the object in between is what lets it skip the merge.
        let mut changed = service.clone();
        changed.metadata.labels = labels("someone else");
        index.apply(Resource::Service(changed.clone()));
        assert!(owned.apply(&mut index, &output, &output).is_empty());
        assert_eq!(index.services().get(&key), Some(&changed), "not merged again");
    }

    fn service(annotations: &[(&str, &str)]) -> k8s_openapi::api::core::v1::Service {
        let annotations = annotations.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        k8s_openapi::api::core::v1::Service {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("gw".into()),
                namespace: Some("ns".into()),
                annotations: Some(annotations),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    /// What was applied is kept as text between applies, and still tells which fields the
    /// operator stopped setting.
    #[test]
    fn a_field_the_operator_stops_setting_goes_across_applies() {
        let mut owned = OwnedObjects::default();
        let mut index = Index::new();
        let key = ObjectKey::new("ns", "gw");
        let mut apply = |index: &mut Index, desired| {
            let change = owned.change(
                index,
                &Owned::Apply(desired),
                Kind::Service,
                &key,
                |i| i.services().get(&key),
                Resource::Service,
            );
            if let Some(Change::Apply(r)) = change {
                index.apply(*r);
            }
        };
        apply(&mut index, service(&[("mine", "1")]));
        let theirs = service(&[("mine", "1"), ("theirs", "x")]);
        index.apply(Resource::Service(theirs));
        apply(&mut index, service(&[("other", "2")]));
        let annotations = index.services().get(&key).and_then(|s| s.metadata.annotations.clone());
        let expected = [("other", "2"), ("theirs", "x")].map(|(k, v)| (k.to_string(), v.to_string()));
        assert_eq!(annotations, Some(BTreeMap::from(expected)));
    }

    #[test]
    fn merging_keeps_what_others_set_and_drops_what_the_operator_stopped_setting() {
        let mut live = json!({
            "metadata": {"name": "gw", "labels": {"team": "a"}, "annotations": {"mine": "1", "theirs": "x"}},
            "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 1, "nodePort": 30001}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
        });
        let last = json!({"metadata": {"name": "gw", "annotations": {"mine": "1"}}, "spec": {"ports": [{"port": 1}]}});
        let desired = json!({"metadata": {"name": "gw", "labels": {"owner": "op"}}, "spec": {"ports": [{"port": 2}]}});
        merge(&mut live, Some(&last), &desired);
        assert_eq!(
            live,
            json!({
                "metadata": {"name": "gw", "labels": {"team": "a", "owner": "op"}, "annotations": {"theirs": "x"}},
                "spec": {"clusterIP": "10.0.0.1", "ports": [{"port": 2}]},
                "status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}},
            })
        );
    }
}
