//! The id of a config: a leaf, named by the API bodies and the client table alike.

use std::fmt;

/// A config's id: the owning Gateway's `namespace/name`, also the config's `admin.name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConfigId {
    pub namespace: String,
    pub name: String,
}

impl ConfigId {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        ConfigId { namespace: namespace.into(), name: name.into() }
    }

    /// Splits on the first `/`; ids without one are not config ids (upstream drops them).
    pub fn parse(id: &str) -> Option<Self> {
        let (ns, name) = id.split_once('/')?;
        Some(Self::new(ns, name))
    }
}

impl fmt::Display for ConfigId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_split_on_the_first_slash() {
        assert_eq!(ConfigId::parse("a/b/c"), Some(ConfigId::new("a", "b/c")));
        assert_eq!(ConfigId::parse("nope"), None);
        assert_eq!(ConfigId::new("ns", "gw").to_string(), "ns/gw");
    }
}
