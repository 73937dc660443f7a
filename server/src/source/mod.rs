//! Where the operator's view of the world comes from: a directory of manifests in
//! standalone mode ([`files`], built on [`manifests`] and [`watcher`]), sent to the render
//! loop as [`Change`](stunner_gateway::index::Change)s.

pub mod files;
pub mod manifests;
pub mod run;
pub mod scan;
pub mod watcher;
