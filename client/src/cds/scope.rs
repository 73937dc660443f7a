//! Which configs a request is about: the three config routes of the API.

use stunner_gateway::cds::ConfigId;

/// Which configs to get or watch: the three config routes of the API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigScope {
    /// `/api/v1/configs`
    All,
    /// `/api/v1/configs/{namespace}`
    Namespace(String),
    /// `/api/v1/configs/{namespace}/{name}`; with a `node`, the server patches the config for
    /// that node (relay address discovery). Only this route takes a node.
    Gateway { id: ConfigId, node: Option<String> },
}

impl ConfigScope {
    pub(super) fn segments(&self) -> Vec<&str> {
        let mut s = vec!["api", "v1", "configs"];
        match self {
            ConfigScope::All => {}
            ConfigScope::Namespace(ns) => s.push(ns),
            ConfigScope::Gateway { id, .. } => s.extend([id.namespace.as_str(), id.name.as_str()]),
        }
        s
    }

    /// The query of a GET; a watch adds `watch=true` after it (Go sorts `node` first).
    pub(super) fn query(&self) -> Vec<(&'static str, &str)> {
        match self {
            ConfigScope::Gateway { node: Some(node), .. } if !node.is_empty() => vec![("node", node.as_str())],
            _ => Vec::new(),
        }
    }
}
