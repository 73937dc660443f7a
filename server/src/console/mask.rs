//! Credentials out of a config before a page shows it: the TURN credentials
//! (`auth.credentials`), a TLS listener's private key and the license key and HMAC. A page
//! left open on a shared screen, or its screenshot, must not hand them out; `?reveal=1`
//! shows them (to whoever may read the config lists anyway).

use serde_json::Value;

/// What a masked value reads as.
pub const MASK: &str = "********";

/// Fields holding a secret wherever they appear in a config.
const SECRET_FIELDS: [&str; 3] = ["key", "hmac", "password"];

/// Fields whose every value is a secret (`auth.credentials`: `username`, `password`, `secret`).
const SECRET_MAPS: [&str; 1] = ["credentials"];

/// Replaces every non-empty secret string in `value` with [`MASK`].
pub fn mask(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for (name, field) in map.iter_mut() {
                if SECRET_FIELDS.contains(&name.as_str()) {
                    mask_string(field);
                } else if SECRET_MAPS.contains(&name.as_str()) {
                    if let Value::Object(secrets) = field {
                        secrets.values_mut().for_each(mask_string);
                    }
                } else {
                    mask(field);
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(mask),
        _ => {}
    }
}

fn mask_string(value: &mut Value) {
    if value.as_str().is_some_and(|s| !s.is_empty()) {
        *value = Value::String(MASK.into());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn masks_credentials_keys_and_license_secrets_only() {
        let mut config = json!({
            "admin": {"name": "ns/gw", "licenseConfig": {"key": "k", "hmac": "h"}},
            "auth": {"type": "static", "realm": "stunner.l7mp.io",
                     "credentials": {"username": "user-1", "password": "pass-1"}},
            "listeners": [{"name": "tls", "cert": "CERT", "key": "PRIVATE", "routes": ["ns/r"]},
                          {"name": "udp", "key": ""}]
        });
        mask(&mut config);
        assert_eq!(config["auth"]["credentials"], json!({"username": MASK, "password": MASK}));
        assert_eq!(config["auth"]["realm"], "stunner.l7mp.io");
        assert_eq!(config["listeners"][0]["key"], MASK);
        assert_eq!(config["listeners"][0]["cert"], "CERT", "a certificate is public");
        assert_eq!(config["listeners"][1]["key"], "", "an empty field says nothing");
        assert_eq!(config["admin"]["licenseConfig"], json!({"key": MASK, "hmac": MASK}));
        assert!(!config.to_string().contains("pass-1"));
    }
}
