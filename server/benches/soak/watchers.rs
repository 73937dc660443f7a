//! The soak's CDS watchers: WebSocket watches of Gateways' configs, as dataplanes hold them,
//! each keeping the last config it received. While the churn runs each one hangs up after a
//! random while and reconnects, to the same Gateway or (half the time) to another; before and
//! after it, each stays on its connection.

use crate::rng::Rng;
use crate::world::{NAMESPACE, gateway_name};
use futures_util::StreamExt;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use stunner_gateway::config::StunnerConfig;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_tungstenite::tungstenite::Message;

/// Connection attempts before a watcher gives up (the CDS refuses none in a healthy run).
const CONNECT_ATTEMPTS: u32 = 100;

/// What one watcher holds now.
#[derive(Debug, Clone, Default)]
pub struct Watched {
    /// The slot of the Gateway it watches.
    pub gateway: usize,
    /// The last config received on the current connection.
    pub last: Option<StunnerConfig>,
    pub configs: u64,
    pub connects: u64,
}

pub struct Watchers {
    states: Vec<Arc<Mutex<Watched>>>,
    churning: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Watchers {
    /// `count` watchers spread over `gateways` slots, which reconnect after a random time in
    /// `lifetime` from [`Self::churn`] until [`Self::settle`].
    pub fn start(cds: SocketAddr, count: usize, gateways: usize, seed: u64, lifetime: Range<Duration>) -> Watchers {
        let (churning, rx) = watch::channel(false);
        let mut tasks = JoinSet::new();
        let states: Vec<_> = (0..count)
            .map(|w| {
                let state = Arc::new(Mutex::new(Watched { gateway: w * gateways / count, ..Watched::default() }));
                let watcher = Watcher {
                    cds,
                    state: state.clone(),
                    rng: Rng::new(seed ^ (w as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                    gateways,
                    lifetime: lifetime.clone(),
                    churning: rx.clone(),
                };
                tasks.spawn(watcher.run());
                state
            })
            .collect();
        Watchers { states, churning, tasks }
    }

    /// From now on every watcher hangs up and reconnects now and then.
    pub fn churn(&self) {
        self.churning.send_replace(true);
    }

    /// From now on every watcher stays on its connection.
    pub fn settle(&self) {
        self.churning.send_replace(false);
    }

    /// Fails if a watcher has ended (only a panic ends one): its state would be stale.
    pub fn assert_running(&mut self) {
        if let Some(ended) = self.tasks.try_join_next() {
            panic!("a watcher ended: {ended:?}");
        }
    }

    pub fn snapshot(&self) -> Vec<Watched> {
        self.states.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).clone()).collect()
    }
}

struct Watcher {
    cds: SocketAddr,
    state: Arc<Mutex<Watched>>,
    rng: Rng,
    gateways: usize,
    lifetime: Range<Duration>,
    churning: watch::Receiver<bool>,
}

impl Watcher {
    /// Runs until the task is aborted (when [`Watchers`] is dropped).
    async fn run(mut self) {
        let mut gateway = self.state.lock().unwrap().gateway;
        loop {
            let url = format!("ws://{}/api/v1/configs/{NAMESPACE}/{}?watch=true", self.cds, gateway_name(gateway));
            let mut ws = connect(&url).await;
            {
                let mut state = self.state.lock().unwrap();
                state.gateway = gateway;
                state.last = None;
                state.connects += 1;
            }
            let hang_up = tokio::time::sleep(self.lifetime());
            tokio::pin!(hang_up);
            loop {
                let churning = *self.churning.borrow_and_update();
                tokio::select! {
                    msg = ws.next() => match msg {
                        Some(Ok(Message::Text(text))) => {
                            let config: StunnerConfig = serde_json::from_str(&text).expect("a config");
                            let mut state = self.state.lock().unwrap();
                            state.last = Some(config);
                            state.configs += 1;
                        }
                        Some(Ok(_)) => {}
                        // Closed by the server: reconnect.
                        _ => break,
                    },
                    _ = &mut hang_up, if churning => break,
                    changed = self.churning.changed() => {
                        if changed.is_err() {
                            return; // the watchers are being dropped
                        }
                        // A churn that starts now: this connection's time starts now too.
                        hang_up.as_mut().reset(tokio::time::Instant::now() + self.lifetime());
                    }
                }
            }
            if *self.churning.borrow() && self.rng.chance(50) {
                gateway = self.rng.below(self.gateways as u64) as usize;
            }
        }
    }
}

impl Watcher {
    /// A random time within the watchers' lifetime.
    fn lifetime(&mut self) -> Duration {
        let span = (self.lifetime.end - self.lifetime.start).as_millis().max(1) as u64;
        self.lifetime.start + Duration::from_millis(self.rng.below(span))
    }
}

async fn connect(url: &str) -> crate::e2e::Ws {
    for _ in 0..CONNECT_ATTEMPTS {
        if let Ok((ws, _)) = tokio_tungstenite::connect_async(url).await {
            return ws;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the CDS refused {url} {CONNECT_ATTEMPTS} times");
}
