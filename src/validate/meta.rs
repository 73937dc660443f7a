//! The API server's rules for `metadata` (apimachinery's `ValidateObjectMeta`), which no CRD
//! schema states: the name's and the namespace's shape and length.

use super::errors::Errors;
use serde_json::Value;
use std::sync::LazyLock;

/// The shape a kind's names must have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain, at most 253 characters: most kinds, every custom resource.
    Subdomain,
    /// RFC 1123 label, at most 63 characters: Namespaces.
    Label,
    /// RFC 1035 label (starts with a letter), at most 63 characters: Services.
    Dns1035Label,
}

const LABEL: &str = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const DNS1035_LABEL: &str = "[a-z]([-a-z0-9]*[a-z0-9])?";

fn anchored(re: &str) -> regex::Regex {
    regex::Regex::new(&format!("^{re}$")).expect("a fixed regex")
}

static LABEL_RE: LazyLock<regex::Regex> = LazyLock::new(|| anchored(LABEL));
static DNS1035_RE: LazyLock<regex::Regex> = LazyLock::new(|| anchored(DNS1035_LABEL));
static SUBDOMAIN_RE: LazyLock<regex::Regex> = LazyLock::new(|| anchored(&format!(r"{LABEL}(\.{LABEL})*")));

impl NameRule {
    /// What is wrong with `name`, in the API server's words, if anything.
    pub(crate) fn problem(self, name: &str) -> Option<String> {
        let (max, re, what, example) = match self {
            NameRule::Subdomain => (
                253,
                &*SUBDOMAIN_RE,
                "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
                "example.com",
            ),
            NameRule::Label => (
                63,
                &*LABEL_RE,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
                "my-name",
            ),
            NameRule::Dns1035Label => (
                63,
                &*DNS1035_RE,
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
                "my-name",
            ),
        };
        let len = name.chars().count();
        if len > max {
            return Some(format!("must be no more than {max} characters (has {len})"));
        }
        (!re.is_match(name))
            .then(|| format!("{what} (e.g. '{example}', regex used for validation is '{}')", re.as_str()))
    }
}

/// Checks `metadata.name` and, for namespaced kinds, `metadata.namespace` (absent or empty is
/// fine: the loader puts such objects in `default`).
pub(crate) fn check(meta: Option<&Value>, rule: NameRule, namespaced: bool, errs: &mut Errors) {
    let Some(meta) = meta.and_then(Value::as_object) else {
        return errs.push("metadata", "Required value".into());
    };
    match meta.get("name") {
        None | Some(Value::Null) => errs.push("metadata.name", "Required value: name is required".into()),
        Some(Value::String(name)) => {
            if let Some(problem) = rule.problem(name) {
                let value = errs.quote("metadata.name", &Value::from(name.as_str()));
                errs.push("metadata.name", format!("Invalid value: {value}: {problem}"));
            }
        }
        Some(other) => {
            let value = errs.quote("metadata.name", other);
            errs.push("metadata.name", format!("Invalid value: {value}: must be a string"));
        }
    }
    match meta.get("namespace") {
        None | Some(Value::Null) => {}
        Some(Value::String(ns)) if ns.is_empty() || !namespaced => {}
        Some(Value::String(ns)) => {
            if let Some(problem) = NameRule::Label.problem(ns) {
                let value = errs.quote("metadata.namespace", &Value::from(ns.as_str()));
                errs.push("metadata.namespace", format!("Invalid value: {value}: {problem}"));
            }
        }
        Some(other) => {
            let value = errs.quote("metadata.namespace", other);
            errs.push("metadata.namespace", format!("Invalid value: {value}: must be a string"));
        }
    }
}
