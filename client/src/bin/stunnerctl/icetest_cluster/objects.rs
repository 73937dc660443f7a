//! Creating, reading and deleting the test's objects by kind and name (dynamic objects: the
//! kinds are known here, so no discovery round trip), and waiting, bounded, for one to go.

use super::manifests::Kind;
use kube::Client;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, PostParams};
use serde_json::Value;
use std::time::{Duration, Instant};

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(250);

/// The API of `kind`, in `ns` when it is namespaced.
pub fn api(client: &Client, kind: Kind, ns: &str) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk(kind.group, kind.version, kind.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, kind.plural);
    if kind.namespaced {
        Api::namespaced_with(client.clone(), ns, &resource)
    } else {
        Api::all_with(client.clone(), &resource)
    }
}

/// Creates `object` (its namespace, if namespaced, is `ns`).
pub async fn create(client: &Client, kind: Kind, ns: &str, object: &Value) -> Result<(), String> {
    let name = object["metadata"]["name"].as_str().unwrap_or_default().to_string();
    let dynamic: DynamicObject =
        serde_json::from_value(object.clone()).map_err(|e| format!("{} {name}: {e}", kind.kind))?;
    api(client, kind, ns)
        .create(&PostParams::default(), &dynamic)
        .await
        .map(drop)
        .map_err(|e| format!("failed to create {} {name}: {e}", kind.kind))
}

/// The object, `None` if there is none by that name.
pub async fn get(client: &Client, kind: Kind, ns: &str, name: &str) -> Result<Option<Value>, String> {
    let found =
        api(client, kind, ns).get_opt(name).await.map_err(|e| format!("failed to get {} {name}: {e}", kind.kind))?;
    found.map(|o| serde_json::to_value(o).map_err(|e| e.to_string())).transpose()
}

/// Deletes the object if it is there (a namespace takes its content with it).
pub async fn delete(client: &Client, kind: Kind, ns: &str, name: &str) -> Result<(), String> {
    match api(client, kind, ns).delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(format!("failed to delete {} {name}: {e}", kind.kind)),
    }
}

/// Deletes the object and waits until it is gone, at most `bound`.
pub async fn remove(client: &Client, kind: Kind, ns: &str, name: &str, bound: Duration) -> Result<(), String> {
    delete(client, kind, ns, name).await?;
    let until = Instant::now() + bound;
    while get(client, kind, ns, name).await?.is_some() {
        if Instant::now() >= until {
            return Err(format!("{} {name} still there {bound:?} after its deletion", kind.kind));
        }
        tokio::time::sleep(POLL).await;
    }
    Ok(())
}

/// Polls `check` until it gives a value, an error, or `bound` passes (then `None`).
pub async fn eventually<T, F, Fut>(bound: Duration, mut check: F) -> Result<Option<T>, String>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    let until = Instant::now() + bound;
    loop {
        if let Some(value) = check().await? {
            return Ok(Some(value));
        }
        if Instant::now() >= until {
            return Ok(None);
        }
        tokio::time::sleep(POLL).await;
    }
}
