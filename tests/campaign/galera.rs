//! The campaign on a MariaDB Galera cluster (`JOBFLOW_CAMPAIGN_GALERA=proxy|multi-primary`):
//! the three nodes and HAProxy of `scripts/galera.sh`, started here if they are not up, and
//! the database node faults, applied through the same script.
//!
//! - `proxy`: every scheduler reaches the cluster through HAProxy, which sends all traffic to
//!   one writer (node 1, then the first healthy backup): the single-writer deployment. Killing
//!   or cutting off the writer is a proxy failover, and its return a second one.
//! - `multi-primary`: scheduler `i` writes to node `i + 1`, so every node takes writes and
//!   conflicting transactions meet at certification.
//!
//! A node fault is one of: `kill -9` of the node's server mid-burst, then its restart (it
//! rejoins by IST and the fault ends once it is Synced); or the node cut off the others'
//! replication traffic (its SQL port keeps answering, with error 1047 once it is out of the
//! Primary component), then healed, ending once every node is Synced again. One fault at a
//! time, so two nodes of three always keep quorum.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

/// How the schedulers reach the cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topology {
    /// Through HAProxy to one writer node.
    Proxy,
    /// Scheduler `i` to node `i + 1`.
    MultiPrimary,
}

impl Topology {
    /// `JOBFLOW_CAMPAIGN_GALERA`; `None` when unset (one MariaDB server).
    pub fn from_env() -> Option<Self> {
        match std::env::var("JOBFLOW_CAMPAIGN_GALERA").as_deref() {
            Err(_) | Ok("") => None,
            Ok("proxy") => Some(Self::Proxy),
            Ok("multi-primary") => Some(Self::MultiPrimary),
            Ok(other) => panic!("JOBFLOW_CAMPAIGN_GALERA={other}: expected proxy or multi-primary"),
        }
    }

    /// The name a history records (`History::database`).
    pub fn name(self) -> &'static str {
        match self {
            Self::Proxy => "galera-proxy",
            Self::MultiPrimary => "galera-multi-primary",
        }
    }
}

/// The running cluster's server URLs (without a database).
#[derive(Debug, Clone)]
pub struct Galera {
    pub topology: Topology,
    /// Nodes 1 to 3.
    pub nodes: Vec<String>,
    pub proxy: String,
}

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/galera.sh")
}

/// Runs `scripts/galera.sh args…`, panicking with its output if it fails; its stdout.
fn run(args: &[&str]) -> String {
    let out = Command::new(script())
        .args(args)
        .output()
        .expect("scripts/galera.sh runs");
    assert!(
        out.status.success(),
        "scripts/galera.sh {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn run_async(args: &[&str]) -> String {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    tokio::task::spawn_blocking(move || run(&args.iter().map(String::as_str).collect::<Vec<_>>()))
        .await
        .unwrap()
}

impl Galera {
    /// Starts the cluster (a no-op when it is up and every node Synced) and reads its URLs.
    pub async fn start(topology: Topology) -> Self {
        let out = run_async(&["start"]).await;
        let url = |name: &str| {
            out.lines()
                .find_map(|l| l.strip_prefix(&format!("{name} ")))
                .unwrap_or_else(|| panic!("galera.sh start names {name}: {out}"))
                .trim()
                .to_string()
        };
        Self {
            topology,
            nodes: (1..=3).map(|n| url(&format!("node{n}"))).collect(),
            proxy: url("proxy"),
        }
    }

    /// The server scheduler `i` writes to.
    pub fn server_of(&self, i: usize) -> &str {
        match self.topology {
            Topology::Proxy => &self.proxy,
            Topology::MultiPrimary => &self.nodes[i % 3],
        }
    }

    /// Whether all three nodes are up, Synced, in a cluster of three, and the proxy runs.
    fn synced() -> bool {
        let out = run(&["status"]);
        let nodes = out
            .lines()
            .filter(|l| l.starts_with("node") && l.contains("state=Synced size=3"))
            .count();
        nodes == 3
            && out
                .lines()
                .any(|l| l.starts_with("proxy") && !l.contains("pid=-"))
    }

    /// Waits until every node is Synced again (after a restart or a heal). Asked once a
    /// second: each look runs the script, which queries every node, on the cores the
    /// campaign shares.
    pub async fn wait_synced(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(180);
        while !tokio::task::spawn_blocking(Self::synced).await.unwrap() {
            assert!(
                tokio::time::Instant::now() < deadline,
                "every Galera node Synced within 180 s"
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    /// `kill -9` of node `n` (1..3), `down` of waiting, its restart, and every node Synced.
    pub async fn kill_and_restart(&self, n: usize, down: Duration) {
        run_async(&["kill", &n.to_string()]).await;
        tokio::time::sleep(down).await;
        run_async(&["restart", &n.to_string()]).await;
        self.wait_synced().await;
    }

    /// Node `n` cut off the others' replication traffic for `down`, then healed, and every
    /// node Synced.
    pub async fn partition_and_heal(&self, n: usize, down: Duration) {
        run_async(&["partition", &n.to_string()]).await;
        tokio::time::sleep(down).await;
        run_async(&["heal"]).await;
        self.wait_synced().await;
    }
}
