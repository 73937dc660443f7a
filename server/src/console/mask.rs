//! Credentials out of a config before a page shows it: the fields the project's one list of
//! secrets names for a `StunnerConfig` (`stunner_gateway::resources::redact`: the TURN
//! credentials, a TLS listener's private key, the license). A page left open on a shared
//! screen, or its screenshot, must not hand them out; `?reveal=1` shows them (to whoever may
//! read the config lists anyway).

use serde_json::Value;
use stunner_gateway::resources::redact::{REDACTED, is_secret_field};

/// The kind [`is_secret_field`] knows the rendered config as.
const KIND: &str = "StunnerConfig";

/// Replaces every non-empty string in a secret field of `config` with [`REDACTED`].
pub fn mask(config: &mut Value) {
    mask_at(config, "");
}

fn mask_at(value: &mut Value, path: &str) {
    if !path.is_empty() && is_secret_field(KIND, path) {
        return mask_all(value);
    }
    match value {
        Value::Object(map) => {
            for (name, field) in map.iter_mut() {
                let path = if path.is_empty() { name.clone() } else { format!("{path}.{name}") };
                mask_at(field, &path);
            }
        }
        // List indices are left out of the paths, as the list of secrets writes them.
        Value::Array(items) => items.iter_mut().for_each(|item| mask_at(item, path)),
        _ => {}
    }
}

fn mask_all(value: &mut Value) {
    match value {
        Value::String(s) if !s.is_empty() => *s = REDACTED.into(),
        Value::Object(map) => map.values_mut().for_each(mask_all),
        Value::Array(items) => items.iter_mut().for_each(mask_all),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_credentials_keys_and_the_license_only() {
        let mut config = json!({
            "admin": {"name": "ns/gw", "license_config": {"key": "k", "hmac": "h"}},
            "auth": {"type": "static", "realm": "stunner.l7mp.io",
                     "credentials": {"username": "user-1", "password": "pass-1"}},
            "listeners": [{"name": "tls", "cert": "CERT", "key": "PRIVATE", "routes": ["ns/r"]},
                          {"name": "udp", "key": ""}]
        });
        mask(&mut config);
        assert_eq!(config["auth"]["credentials"], json!({"username": REDACTED, "password": REDACTED}));
        assert_eq!(config["auth"]["realm"], "stunner.l7mp.io");
        assert_eq!(config["listeners"][0]["key"], REDACTED);
        assert_eq!(config["listeners"][0]["cert"], "CERT", "a certificate is public");
        assert_eq!(config["listeners"][1]["key"], "", "an empty field says nothing");
        assert_eq!(config["admin"]["license_config"], json!({"key": REDACTED, "hmac": REDACTED}));
        assert_eq!(config["admin"]["name"], "ns/gw");
        assert!(!config.to_string().contains("pass-1"));
    }
}
