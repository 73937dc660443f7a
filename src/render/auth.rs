//! The `auth` section from a GatewayConfig, inline or from an `authRef` Secret (spec §3.6).

use super::error::{Reason, RenderError};
use crate::config::{AuthConfig, AuthType, DEFAULT_REALM};
use crate::index::{Index, ObjectKey};
use crate::resources::{GatewayConfig, SecretObjectReference};
use std::collections::BTreeMap;

/// Upstream's aliases, matched case-sensitively; absent means `static`.
fn auth_type(raw: Option<&str>) -> Result<AuthType, RenderError> {
    match raw.unwrap_or("static") {
        "static" | "plaintext" => Ok(AuthType::Static),
        "ephemeral" | "timewindowed" | "longterm" => Ok(AuthType::Ephemeral),
        "none" => Ok(AuthType::None),
        _ => Err(RenderError::new(Reason::InvalidAuthType)),
    }
}

/// The credentials a mode needs, from a lookup in the inline fields or the Secret's data.
fn credentials(
    t: AuthType,
    get: impl Fn(&str) -> Option<String>,
    secret_keys: &[&str],
) -> Result<BTreeMap<String, String>, RenderError> {
    let mut creds = BTreeMap::new();
    match t {
        AuthType::None => {}
        AuthType::Static => {
            let (Some(u), Some(p)) = (get("username"), get("password")) else {
                return Err(RenderError::new(Reason::InvalidUsernamePassword));
            };
            creds.insert("username".to_string(), u);
            creds.insert("password".to_string(), p);
        }
        AuthType::Ephemeral => {
            let secret =
                secret_keys.iter().find_map(|k| get(k)).ok_or(RenderError::new(Reason::InvalidSharedSecret))?;
            creds.insert("secret".to_string(), secret);
        }
    }
    Ok(creds)
}

/// Renders and validates the auth section. An `authRef` overrides every inline field.
/// `stunMode` turns authentication off, and with it TURN: stunnerd then answers STUN binding
/// requests and refuses every allocation (401 without credentials, 400 with them); the
/// credentials configured are neither needed nor read.
pub(crate) fn render(index: &Index, config: &GatewayConfig) -> Result<AuthConfig, RenderError> {
    let spec = &config.spec;
    let (t, creds) = match &spec.auth_ref {
        _ if spec.stun_mode => (AuthType::None, BTreeMap::new()),
        None => {
            let t = auth_type(spec.auth_type.as_deref()).map_err(|e| e.at("spec.authType"))?;
            let inline = |k: &str| match k {
                "username" => spec.username.clone(),
                "password" => spec.password.clone(),
                _ => spec.shared_secret.clone(),
            };
            let fields = if t == AuthType::Ephemeral { "spec.sharedSecret" } else { "spec.userName, spec.password" };
            (t, credentials(t, inline, &["secret"]).map_err(|e| e.at(fields))?)
        }
        // Whatever is wrong comes from the referenced Secret.
        Some(r) => from_secret(index, config, r).map_err(|e| e.at("spec.authRef"))?,
    };
    let mut auth = AuthConfig {
        auth_type: t.as_str().into(),
        realm: spec.realm.clone().unwrap_or_else(|| DEFAULT_REALM.into()),
        credentials: creds,
    };
    auth.validate().map_err(|_| RenderError::new(Reason::InvalidAuthConfig))?;
    Ok(auth)
}

/// The type and credentials from the `authRef` Secret.
fn from_secret(
    index: &Index,
    config: &GatewayConfig,
    r: &SecretObjectReference,
) -> Result<(AuthType, BTreeMap<String, String>), RenderError> {
    let not_found = || RenderError::new(Reason::ExternalAuthCredentialsNotFound);
    let group_ok = matches!(r.group.as_deref(), None | Some("" | "v1"));
    let kind_ok = r.kind.as_deref().is_none_or(|k| k == "Secret");
    if !group_ok || !kind_ok {
        return Err(not_found());
    }
    let ns = r.namespace.clone().or_else(|| config.metadata.namespace.clone()).unwrap_or_default();
    let secret = index.secrets().get(&ObjectKey::new(ns, &r.name)).ok_or_else(not_found)?;
    let data = secret.data.clone().unwrap_or_default();
    let get = |k: &str| data.get(k).map(|v| String::from_utf8_lossy(&v.0).into_owned());
    let t = auth_type(get("type").as_deref())?;
    Ok((t, credentials(t, get, &["secret", "sharedSecret"])?))
}
