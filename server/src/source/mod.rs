//! Where the operator's view of the world comes from: a directory of manifests in
//! standalone mode ([`files`], built on [`manifests`] and [`watcher`]).

pub mod files;
pub mod manifests;
pub mod owned;
pub mod run;
pub mod scan;
pub mod watcher;

use stunner_gateway::index::{ObjRef, Resource};

/// One change a source asks of the index.
#[derive(Debug, Clone)]
pub enum Change {
    /// Boxed: objects are large, and a batch mostly holds a few of them.
    Apply(Box<Resource>),
    Delete(ObjRef),
}
