//! The seeded plan of a campaign (jobs, API operations, faults) and its execution against the
//! API. The plan is drawn from the seed alone, before anything runs, so a seed always makes
//! the same operations at the same offsets; what the cluster answers is recorded, whatever it
//! is.

use std::time::Duration;

use chrono::Utc;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

use crate::cluster::Live;
use crate::executors::{BARE_SERVICE, SDK_SERVICE};
use crate::history::ApiCall;

/// A job definition the plan writes.
#[derive(Debug, Clone)]
pub struct Spec {
    pub name: String,
    pub service: &'static str,
    pub handler: &'static str,
    pub cron: &'static str,
    pub shard_count: u32,
    pub overlap: &'static str,
    pub max_retry: u32,
    pub timeout: u32,
    pub misfire: &'static str,
    pub route: &'static str,
    pub child_jobs: Vec<String>,
    pub enabled: bool,
    /// The version marker, in `jobParams`.
    pub v: u64,
    /// A `FIXED_DELAY` job's interval (its `cron` is then not sent).
    pub delay: Option<u32>,
}

impl Spec {
    pub fn body(&self, with_name: bool) -> Value {
        let mut b = json!({
            "serviceName": self.service, "handler": self.handler, "cron": self.cron,
            "shardCount": self.shard_count, "overlapPolicy": self.overlap,
            "maxRetry": self.max_retry, "timeoutSeconds": self.timeout,
            "misfirePolicy": self.misfire, "routeStrategy": self.route,
            "childJobs": self.child_jobs, "enabled": self.enabled,
            "jobParams": {"v": self.v},
        });
        if with_name {
            b["name"] = json!(self.name);
        }
        if let Some(seconds) = self.delay {
            let fields = b.as_object_mut().expect("an object");
            fields.remove("cron");
            fields.insert("scheduleType".into(), json!("FIXED_DELAY"));
            fields.insert("intervalSeconds".into(), json!(seconds));
        }
        b
    }
}

/// An API operation of the plan.
#[derive(Debug, Clone)]
pub enum Op {
    Create(Spec),
    Replace(Spec),
    SetEnabled(String, bool),
    Delete(String),
    /// A manual trigger with its own `jobParams` (`{"m": n}`).
    Trigger(String, u64),
    /// Cancel the `pick`-th RUNNING (or PENDING) execution of the job.
    Cancel(String, &'static str, u64),
    /// Retry the `pick`-th finished execution of the job in that status.
    Retry(String, &'static str, u64),
}

/// A fault of the plan.
#[derive(Debug, Clone)]
pub enum FaultOp {
    Kill9 {
        scheduler: usize,
        down: Duration,
    },
    Sigterm {
        scheduler: usize,
        down: Duration,
    },
    Sigstop {
        scheduler: usize,
        down: Duration,
    },
    /// `None`: every scheduler's link.
    DbCut {
        scheduler: Option<usize>,
        down: Duration,
    },
    DbStall {
        scheduler: Option<usize>,
        down: Duration,
    },
    NacosRestart {
        down: Duration,
    },
    ExecutorKill {
        executor: usize,
        down: Duration,
    },
    ExecutorSlow {
        executor: usize,
        down: Duration,
    },
    /// `kill -9` of Galera node `node` (1..3), restarted after `down`.
    DbNodeKill {
        node: usize,
        down: Duration,
    },
    /// Galera node `node` cut off the others for `down`, then healed.
    DbNodePartition {
        node: usize,
        down: Duration,
    },
}

impl FaultOp {
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Kill9 { .. } => "kill-9",
            Self::Sigterm { .. } => "sigterm",
            Self::Sigstop { .. } => "sigstop",
            Self::DbCut { .. } => "db-cut",
            Self::DbStall { .. } => "db-stall",
            Self::NacosRestart { .. } => "nacos-restart",
            Self::ExecutorKill { .. } => "executor-kill",
            Self::ExecutorSlow { .. } => "executor-slow",
            Self::DbNodeKill { .. } => "db-node-kill",
            Self::DbNodePartition { .. } => "db-node-partition",
        }
    }
}

/// Each planned step at its offset from the campaign's start, with the pick of the live
/// scheduler its API call goes to.
pub struct Plan {
    /// Created before the campaign starts, in order (children before their parents).
    pub initial: Vec<Spec>,
    pub ops: Vec<(Duration, u64, Op)>,
    /// Scheduler and infrastructure faults, one after another.
    pub faults: Vec<(Duration, FaultOp)>,
    /// Executor faults, one after another (beside the others).
    pub executor_faults: Vec<(Duration, FaultOp)>,
}

const OVERLAPS: [&str; 3] = ["ALLOW", "SKIP", "COVER"];
const ROUTES: [&str; 5] = [
    "ROUND_ROBIN",
    "FIRST",
    "RANDOM",
    "CONSISTENT_HASH",
    "LEAST_BUSY",
];
const YEARLY: &str = "0 0 3 1 1 ?";

struct Model {
    rng: StdRng,
    version: u64,
    jobs: Vec<(Spec, bool)>,
}

impl Model {
    fn next_v(&mut self) -> u64 {
        self.version += 1;
        self.version
    }

    fn handler(&mut self, overlap: &str) -> &'static str {
        // A handler slow to stop only where runs must not overlap (SKIP, COVER): under ALLOW
        // every second's fire would start another 4-30 s blocked thread.
        let choices: &[&'static str] = if overlap == "ALLOW" {
            &["fast", "fast", "slow", "flaky", "overrun"]
        } else {
            &["fast", "slow", "flaky", "overrun", "stubborn", "stubborn"]
        };
        choices[self.rng.random_range(0..choices.len())]
    }

    fn spec(&mut self, name: &str, cron: Option<&'static str>, children: Vec<String>) -> Spec {
        let overlap = OVERLAPS[self.rng.random_range(0..3)];
        let handler = self.handler(overlap);
        let v = self.next_v();
        Spec {
            name: name.into(),
            service: if self.rng.random_bool(0.25) {
                BARE_SERVICE
            } else {
                SDK_SERVICE
            },
            handler,
            cron: cron.unwrap_or(if self.rng.random_bool(0.6) {
                "*/1 * * * * ?"
            } else {
                "*/2 * * * * ?"
            }),
            shard_count: if self.rng.random_bool(0.5) {
                1
            } else {
                self.rng.random_range(2..=4)
            },
            overlap,
            max_retry: self.rng.random_range(0..=2),
            timeout: self.rng.random_range(2..=5),
            misfire: if self.rng.random_bool(0.7) {
                "FIRE_ONCE_NOW"
            } else {
                "DO_NOTHING"
            },
            route: ROUTES[self.rng.random_range(0..ROUTES.len())],
            child_jobs: children,
            enabled: true,
            v,
            delay: None,
        }
    }

    /// An edit of `old`: a new version, and now and then another policy, cron, shard count
    /// or handler.
    fn edit(&mut self, old: &Spec) -> Spec {
        let mut s = old.clone();
        s.v = self.next_v();
        if self.rng.random_bool(0.3) && s.name != "chain-p" {
            s.overlap = OVERLAPS[self.rng.random_range(0..3)];
            if s.overlap == "ALLOW" && s.handler == "stubborn" {
                s.handler = "slow";
            }
        }
        if s.cron != YEARLY && self.rng.random_bool(0.3) {
            s.cron = if s.cron == "*/1 * * * * ?" {
                "*/2 * * * * ?"
            } else {
                "*/1 * * * * ?"
            };
        }
        if self.rng.random_bool(0.3) {
            let least = if s.name.starts_with("chain-") { 2 } else { 1 };
            s.shard_count = self.rng.random_range(least..=4);
        }
        if self.rng.random_bool(0.2) {
            s.handler = self.handler(s.overlap);
        }
        if self.rng.random_bool(0.3) {
            s.max_retry = self.rng.random_range(0..=2);
        }
        s
    }

    /// A job index, favouring SKIP and COVER jobs (their edits, disables and deletes are
    /// where a fire recorded at its instant can outlive its definition).
    fn target(&mut self) -> usize {
        let weights: Vec<u32> = self
            .jobs
            .iter()
            .map(|(s, _)| if s.overlap == "ALLOW" { 1 } else { 3 })
            .collect();
        let total: u32 = weights.iter().sum();
        let mut x = self.rng.random_range(0..total);
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        unreachable!()
    }
}

/// Draws a campaign of `seconds` from `seed`.
pub fn plan(seed: u64, seconds: u64) -> Plan {
    let mut m = Model {
        rng: StdRng::seed_from_u64(seed),
        version: 0,
        jobs: Vec::new(),
    };
    let mut initial = Vec::new();
    // A chain: parent → child → grandchild (the children fire only when triggered).
    let g = m.spec("chain-g", Some(YEARLY), vec![]);
    let mut c = m.spec("chain-c", Some(YEARLY), vec!["chain-g".into()]);
    let mut p = m.spec("chain-p", None, vec!["chain-c".into()]);
    // Sharded over the SDK executors, whose number changes as they are killed: the child's
    // ranges depend on it, and so does whether two ranges finishing together collide.
    for s in [&mut c, &mut p] {
        s.service = SDK_SERVICE;
        s.shard_count = s.shard_count.max(2);
        if s.handler == "stubborn" {
            s.handler = "fast";
        }
    }
    // The parent runs every fire (its edits keep it so), so the chain is busy.
    p.overlap = "ALLOW";
    for s in [g, c, p] {
        initial.push(s.clone());
        m.jobs.push((s, true));
    }
    for i in 0..10 {
        let s = m.spec(&format!("job-{i:02}"), None, vec![]);
        initial.push(s.clone());
        m.jobs.push((s, true));
    }
    let mut ops = Vec::new();
    let mut at = Duration::from_millis(500);
    let end = Duration::from_secs(seconds.saturating_sub(2));
    let mut manual = 0u64;
    while at < end {
        let pick: u64 = m.rng.random();
        let i = m.target();
        let (spec, exists) = m.jobs[i].clone();
        let name = spec.name.clone();
        let roll = m.rng.random_range(0..100);
        let op = if !exists {
            // Deleted: re-created under the same name, or left alone for now.
            if roll < 50 {
                let mut s = m.edit(&spec);
                s.enabled = true;
                m.jobs[i] = (s.clone(), true);
                Some(Op::Create(s))
            } else {
                None
            }
        } else if roll < 28 {
            let s = m.edit(&spec);
            m.jobs[i].0 = s.clone();
            Some(Op::Replace(s))
        } else if roll < 40 && name != "chain-p" {
            let enabled = !spec.enabled;
            m.jobs[i].0.enabled = enabled;
            Some(Op::SetEnabled(name, enabled))
        } else if roll < 46 && !name.starts_with("chain-") {
            m.jobs[i].1 = false;
            Some(Op::Delete(name))
        } else if roll < 62 {
            manual += 1;
            Some(Op::Trigger(name, manual))
        } else if roll < 85 {
            let status = if m.rng.random_bool(0.7) {
                "RUNNING"
            } else {
                "PENDING"
            };
            Some(Op::Cancel(name, status, m.rng.random()))
        } else {
            let statuses = ["FAILED", "TIMEOUT", "CANCELLED", "SUCCESS"];
            let status = statuses[m.rng.random_range(0..statuses.len())];
            Some(Op::Retry(name, status, m.rng.random()))
        };
        if let Some(op) = op {
            ops.push((at, pick, op));
        }
        at += Duration::from_millis(m.rng.random_range(300..1500));
    }
    let faults = scheduler_faults(&mut m.rng, seconds);
    let executor_faults = executor_faults(&mut m.rng, seconds);
    // Two FIXED_DELAY jobs, left alone by the operations (invariant 11 judges their fires by
    // their rows alone), drawn from no randomness so the rest of the plan stays the seed's.
    initial.extend([
        fixed_delay("delay-a", "flaky", 2, 1),
        fixed_delay("delay-b", "slow", 1, 2),
    ]);
    Plan {
        initial,
        ops,
        faults,
        executor_faults,
    }
}

/// A `FIXED_DELAY` job of the SDK executors: `shards` ranges, one retry, `interval` seconds
/// after each fire ends.
fn fixed_delay(name: &str, handler: &'static str, shards: u32, interval: u32) -> Spec {
    Spec {
        cron: "",
        shard_count: shards,
        max_retry: 1,
        delay: Some(interval),
        ..plain(name, SDK_SERVICE, handler)
    }
}

/// A one-second `ALLOW` job of `service`, one range, no retry, a 5 s timeout: the base of the
/// jobs drawn from no randomness.
fn plain(name: &str, service: &'static str, handler: &'static str) -> Spec {
    Spec {
        name: name.into(),
        service,
        handler,
        cron: "*/1 * * * * ?",
        shard_count: 1,
        overlap: "ALLOW",
        max_retry: 0,
        timeout: 5,
        misfire: "FIRE_ONCE_NOW",
        route: "ROUND_ROBIN",
        child_jobs: Vec::new(),
        enabled: true,
        v: 0,
        delay: None,
    }
}

fn secs(rng: &mut StdRng, lo: u64, hi: u64) -> Duration {
    Duration::from_millis(rng.random_range(lo * 1000..=hi * 1000))
}

fn scheduler_faults(rng: &mut StdRng, seconds: u64) -> Vec<(Duration, FaultOp)> {
    let mut out = Vec::new();
    let end = Duration::from_secs(seconds);
    let mut at = secs(rng, 1, 4);
    loop {
        let scheduler = rng.random_range(0..3);
        let one_or_all = if rng.random_bool(0.3) {
            None
        } else {
            Some(scheduler)
        };
        let (fault, busy) = match rng.random_range(0..12) {
            0..=2 => {
                let down = secs(rng, 1, 5);
                (
                    FaultOp::Kill9 { scheduler, down },
                    down + Duration::from_secs(3),
                )
            }
            3..=4 => {
                let down = secs(rng, 1, 5);
                (
                    FaultOp::Sigterm { scheduler, down },
                    down + Duration::from_secs(5),
                )
            }
            5..=6 => {
                let down = secs(rng, 2, 20);
                (FaultOp::Sigstop { scheduler, down }, down)
            }
            7..=8 => {
                let down = secs(rng, 2, 8);
                (
                    FaultOp::DbCut {
                        scheduler: one_or_all,
                        down,
                    },
                    down,
                )
            }
            9..=10 => {
                let down = secs(rng, 2, 10);
                (
                    FaultOp::DbStall {
                        scheduler: one_or_all,
                        down,
                    },
                    down,
                )
            }
            _ => {
                let down = secs(rng, 1, 3);
                (
                    FaultOp::NacosRestart { down },
                    down + Duration::from_secs(2),
                )
            }
        };
        if at + busy > end {
            break;
        }
        out.push((at, fault));
        at += busy + secs(rng, 2, 6);
    }
    out
}

fn executor_faults(rng: &mut StdRng, seconds: u64) -> Vec<(Duration, FaultOp)> {
    let mut out = Vec::new();
    let end = Duration::from_secs(seconds);
    let mut at = secs(rng, 2, 6);
    loop {
        let executor = rng.random_range(0..5);
        let (fault, busy) = if rng.random_bool(0.6) {
            let down = secs(rng, 1, 5);
            (
                FaultOp::ExecutorKill { executor, down },
                down + Duration::from_secs(1),
            )
        } else {
            let down = secs(rng, 5, 15);
            (FaultOp::ExecutorSlow { executor, down }, down)
        };
        if at + busy > end {
            break;
        }
        out.push((at, fault));
        at += busy + secs(rng, 3, 8);
    }
    out
}

/// The database node faults of a campaign on Galera, one after another (the next begins
/// 3-8 s after every node is Synced again, so two nodes always keep quorum). Drawn from their
/// own stream of the seed, so the rest of the seed's plan stays what it is on one server.
/// The writer behind the proxy (node 1) is the target of most: its loss is a failover.
pub fn database_faults(seed: u64, seconds: u64) -> Vec<(Duration, FaultOp)> {
    let mut rng = StdRng::seed_from_u64(seed ^ 0x6a1e_7a00_0000_0000);
    let mut out = Vec::new();
    let end = Duration::from_secs(seconds);
    let mut at = secs(&mut rng, 3, 8);
    loop {
        let node = if rng.random_bool(0.6) {
            1
        } else {
            rng.random_range(2..=3)
        };
        // A restart or a heal and the resync take about 5 s beyond `down`.
        let (fault, busy) = if rng.random_bool(0.6) {
            let down = secs(&mut rng, 2, 10);
            (FaultOp::DbNodeKill { node, down }, down)
        } else {
            let down = secs(&mut rng, 5, 15);
            (FaultOp::DbNodePartition { node, down }, down)
        };
        if at + busy + Duration::from_secs(5) > end {
            break;
        }
        out.push((at, fault));
        at += busy + Duration::from_secs(5) + secs(&mut rng, 3, 8);
    }
    out
}

/// `n` one-second jobs (`fast`, ALLOW, no retry), of the SDK and the bare executors in turn:
/// the burst of fires in flight when a database node is lost. Left alone by the operations, and drawn from no
/// randomness, so the rest of the plan stays the seed's.
pub fn burst(n: usize) -> Vec<Spec> {
    (0..n)
        .map(|i| {
            let service = if i % 2 == 0 {
                SDK_SERVICE
            } else {
                BARE_SERVICE
            };
            plain(&format!("burst-{i:03}"), service, "fast")
        })
        .collect()
}

/// Sends API calls and records each with its answer.
#[derive(Clone)]
pub struct Api {
    client: reqwest::Client,
    pub calls: std::sync::Arc<std::sync::Mutex<Vec<ApiCall>>>,
}

impl Api {
    pub fn new() -> Self {
        Self {
            // Longer than a cancel takes: it waits up to 5 s for the executor's answer.
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(12))
                .build()
                .unwrap(),
            calls: Default::default(),
        }
    }

    pub fn calls(&self) -> Vec<ApiCall> {
        self.calls.lock().unwrap().clone()
    }

    /// One request to `scheduler`, recorded; the answer's status and body.
    pub async fn send(
        &self,
        scheduler: &str,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> (Option<u16>, Option<Value>) {
        let url = format!("http://{scheduler}{path}");
        let mut req = self.client.request(method.parse().unwrap(), &url);
        if let Some(b) = &body {
            req = req.json(b);
        }
        let sent = Utc::now();
        let (status, response) = match req.send().await {
            Ok(r) => {
                let status = r.status().as_u16();
                match r.bytes().await {
                    Ok(b) => (
                        Some(status),
                        Some(serde_json::from_slice(&b).unwrap_or_else(|_| {
                            Value::String(String::from_utf8_lossy(&b).into_owned())
                        })),
                    ),
                    Err(_) => (None, None),
                }
            }
            Err(_) => (None, None),
        };
        let answered = status.map(|_| Utc::now());
        self.calls.lock().unwrap().push(ApiCall {
            scheduler: scheduler.into(),
            method: method.into(),
            path: path.into(),
            body,
            sent,
            answered,
            status,
            response: response.clone(),
        });
        (status, response)
    }

    /// Runs one operation against the live scheduler at `pick`.
    pub async fn run(&self, live: &Live, pick: u64, op: &Op) {
        let Some(s) = live.pick(pick) else {
            return;
        };
        match op {
            Op::Create(spec) => {
                self.send(&s, "POST", "/api/v1/jobs", Some(spec.body(true)))
                    .await;
            }
            Op::Replace(spec) => {
                let path = format!("/api/v1/jobs/{}", spec.name);
                self.send(&s, "PUT", &path, Some(spec.body(false))).await;
            }
            Op::SetEnabled(name, enabled) => {
                let path = format!("/api/v1/jobs/{name}/enabled?enabled={enabled}");
                self.send(&s, "PATCH", &path, None).await;
            }
            Op::Delete(name) => {
                self.send(&s, "DELETE", &format!("/api/v1/jobs/{name}"), None)
                    .await;
            }
            Op::Trigger(name, n) => {
                let path = format!("/api/v1/jobs/{name}/trigger");
                self.send(&s, "POST", &path, Some(json!({"jobParams": {"m": n}})))
                    .await;
            }
            Op::Cancel(name, status, pick) | Op::Retry(name, status, pick) => {
                let path = format!("/api/v1/executions?jobName={name}&status={status}&size=50");
                let (_, page) = self.send(&s, "GET", &path, None).await;
                let traces: Vec<String> = page
                    .and_then(|p| p["content"].as_array().cloned())
                    .unwrap_or_default()
                    .iter()
                    .filter_map(|e| e["traceId"].as_str().map(String::from))
                    .collect();
                if traces.is_empty() {
                    return;
                }
                let trace = &traces[(*pick % traces.len() as u64) as usize];
                let what = if matches!(op, Op::Cancel(..)) {
                    "cancel"
                } else {
                    "retry"
                };
                let path = format!("/api/v1/jobs/executions/{trace}/{what}");
                self.send(&s, "POST", &path, None).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_seed_always_plans_the_same_campaign() {
        let show = |p: &super::Plan| {
            format!(
                "{:?} {:?} {:?} {:?}",
                p.initial, p.ops, p.faults, p.executor_faults
            )
        };
        assert_eq!(show(&super::plan(7, 60)), show(&super::plan(7, 60)));
        assert_ne!(show(&super::plan(7, 60)), show(&super::plan(8, 60)));
    }
}
