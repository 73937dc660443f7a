//! One client's view of the store: what to send it first and what to send it next.
//!
//! A `Watch` remembers what its client already holds, so it sends each change once and
//! skips any version that was superseded before the client was ready for it.

use super::store::{ConfigStore, Frame, Scope, Snapshot};
use super::version::Version;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use stunner_gateway::cds::ConfigId;
use stunner_gateway::config::StunnerConfig;
use tokio::sync::watch;

/// The store went away (the server is shutting down).
#[derive(Debug)]
pub struct StoreClosed;

pub struct Watch {
    store: Arc<ConfigStore>,
    feed: Feed,
}

enum Feed {
    /// One config id, optionally patched for the client's node.
    One {
        id: ConfigId,
        node: Option<String>,
        rx: watch::Receiver<Option<Arc<Snapshot>>>,
        node_rx: Option<watch::Receiver<Option<IpAddr>>>,
        last_sent: Option<Frame>,
    },
    /// Every config in a namespace, or all of them; never patched.
    Many { scope: Scope, rx: watch::Receiver<()>, sent: BTreeMap<ConfigId, Version> },
}

impl Watch {
    /// Subscribes to `scope` and returns the watch with the initial snapshot to send first:
    /// one frame per stored config in scope (none if a single id does not exist yet).
    pub fn new(store: Arc<ConfigStore>, scope: Scope, node: Option<String>) -> (Self, Vec<Frame>) {
        let (feed, initial) = match scope {
            Scope::Config(id) => {
                let node_rx = node.as_deref().map(|n| store.nodes.subscribe(n));
                let (rx, current) = store.subscribe_id(&id);
                let initial: Vec<Frame> = current.iter().map(|s| s.frame_for(node.as_deref(), &store.nodes)).collect();
                let last_sent = initial.first().cloned();
                (Feed::One { id, node, rx, node_rx, last_sent }, initial)
            }
            scope => {
                let mut rx = store.subscribe_changes();
                rx.borrow_and_update();
                let current = store.list(&scope);
                let sent = current.iter().map(|s| (s.id.clone(), s.version)).collect();
                let initial = current.iter().map(|s| s.json.clone()).collect();
                (Feed::Many { scope, rx, sent }, initial)
            }
        };
        (Watch { store, feed }, initial)
    }

    /// Waits for the next change in scope and returns the frames to send for it.
    pub async fn next(&mut self) -> Result<Vec<Frame>, StoreClosed> {
        loop {
            let frames = match &mut self.feed {
                Feed::One { node, rx, node_rx, last_sent, .. } => {
                    match node_rx {
                        Some(node_rx) => tokio::select! {
                            r = rx.changed() => r.map_err(|_| StoreClosed)?,
                            r = node_rx.changed() => r.map_err(|_| StoreClosed)?,
                        },
                        None => rx.changed().await.map_err(|_| StoreClosed)?,
                    }
                    let latest = rx.borrow_and_update().clone();
                    latest
                        .map(|s| s.frame_for(node.as_deref(), &self.store.nodes))
                        .filter(|f| last_sent.as_ref().map(Frame::as_str) != Some(f.as_str()))
                        .inspect(|b| *last_sent = Some(b.clone()))
                        .into_iter()
                        .collect()
                }
                Feed::Many { scope, rx, sent } => {
                    rx.changed().await.map_err(|_| StoreClosed)?;
                    rx.borrow_and_update();
                    diff(&self.store.list(scope), sent)
                }
            };
            if !frames.is_empty() {
                return Ok(frames);
            }
        }
    }
}

/// Frames that bring a list client from `sent` to `current`, updating `sent`: changed and new
/// configs, then the zero config of each id that disappeared.
fn diff(current: &[Arc<Snapshot>], sent: &mut BTreeMap<ConfigId, Version>) -> Vec<Frame> {
    let mut frames: Vec<Frame> = current
        .iter()
        .filter(|s| sent.insert(s.id.clone(), s.version) != Some(s.version))
        .map(|s| s.json.clone())
        .collect();
    if sent.len() > current.len() {
        let mut live = current.iter().map(|s| &s.id).peekable();
        sent.retain(|id, _| {
            // Both sides are sorted by id: walk them together.
            while live.peek().is_some_and(|l| *l < id) {
                live.next();
            }
            let keep = live.peek() == Some(&id);
            if !keep {
                frames.push(Frame::from(StunnerConfig::zero(&id.to_string()).to_json()));
            }
            keep
        });
    }
    frames
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Feed::One { id, node, rx, node_rx, .. } = &mut self.feed {
            // Drop our receivers before asking the store to clean up after the last one.
            *rx = watch::channel(None).1;
            *node_rx = None;
            self.store.release_id(id);
            if let Some(node) = node {
                self.store.nodes.release(node);
            }
        }
    }
}
