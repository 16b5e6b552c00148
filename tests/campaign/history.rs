//! What a campaign records, and all the checker reads: every API call with its answer, every
//! handler run at the executors with its true start and end, the alerts the webhook received,
//! the faults, the executors' lives, and the database rows read at the end. Serialisable, so a
//! run's history can be written to a file and checked again later
//! (`JOBFLOW_CAMPAIGN_RECHECK=path`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct History {
    pub seed: u64,
    /// Length of the fault phase, in seconds.
    pub seconds: u64,
    /// Where the database ran: `mariadb` (one server), `galera-proxy` or
    /// `galera-multi-primary`.
    #[serde(default)]
    pub database: String,
    /// When the workload and the faults began.
    pub started: DateTime<Utc>,
    /// When the last fault ended and the workload stopped: the quiet tail starts here.
    pub quiet: DateTime<Utc>,
    /// When the database was read.
    pub ended: DateTime<Utc>,
    pub api: Vec<ApiCall>,
    pub runs: Vec<Run>,
    pub alerts: Vec<AlertEvent>,
    pub faults: Vec<Fault>,
    /// Every life of every executor (a restart starts a new one).
    pub lives: Vec<ExecutorLife>,
    /// Every life of every scheduler process, by its instance id (`ip:port`).
    pub scheduler_lives: Vec<SchedulerLife>,
    pub rows: Vec<ExecRow>,
    pub fires: Vec<FireRow>,
}

/// One request to the JobFlow API and what came back.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiCall {
    /// `ip:port` of the scheduler asked.
    pub scheduler: String,
    pub method: String,
    pub path: String,
    pub body: Option<Value>,
    pub sent: DateTime<Utc>,
    /// When the answer arrived; `None` when none did (timeout, connection error).
    pub answered: Option<DateTime<Utc>>,
    pub status: Option<u16>,
    pub response: Option<Value>,
}

impl ApiCall {
    /// A write whose effect is unknown: no answer, a 5xx or a 408. A 4xx other than 408
    /// changed nothing.
    pub fn uncertain(&self) -> bool {
        match self.status {
            None => true,
            Some(s) => s >= 500 || s == 408,
        }
    }
}

/// One run of a handler at an executor: what the call said and when the work really started
/// and stopped.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Run {
    /// `sdk-1`, `bare-2`, ...
    pub executor: String,
    /// Whether the executor is built on the SDK (status, cancel, memory) or bare.
    pub sdk: bool,
    /// Which life of the executor ran it (0, 1, ...: it restarted in between).
    pub life: u32,
    pub trace_id: String,
    pub execution_id: String,
    pub job_name: String,
    pub handler: String,
    pub trigger_type: String,
    pub fire_time: DateTime<Utc>,
    pub shard_start: u32,
    pub shard_end: u32,
    pub retry_count: u32,
    pub job_params: Value,
    pub start: DateTime<Utc>,
    /// When the work stopped (finished, aborted, or died with its executor); `None` while it
    /// still ran when the history was taken.
    pub end: Option<DateTime<Utc>>,
    /// SUCCESS, FAILED, ABORTED (stopped by the SDK: timeout or cancel), KILLED, RUNNING.
    pub outcome: String,
}

impl Run {
    /// The range's key: the execution id without its `#…` suffix, shared by every attempt of
    /// one range of one fire.
    pub fn range_key(&self) -> &str {
        range_key(&self.execution_id)
    }

    /// The fire's key: the range key without its range.
    pub fn fire_key(&self) -> &str {
        fire_key(&self.execution_id)
    }

    /// The `v` marker of the job definition the call was made under (absent for manual runs
    /// with their own parameters).
    pub fn version(&self) -> Option<u64> {
        self.job_params.get("v").and_then(Value::as_u64)
    }
}

pub fn range_key(execution_id: &str) -> &str {
    execution_id.split('#').next().unwrap_or(execution_id)
}

pub fn fire_key(execution_id: &str) -> &str {
    let first = range_key(execution_id);
    first.rsplit_once(':').map_or(first, |(fire, _)| fire)
}

/// An alert as the webhook received it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlertEvent {
    pub event: String,
    pub job_name: String,
    pub fire_time: DateTime<Utc>,
    pub trace_id: Option<String>,
    pub received: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fault {
    /// `kill-9`, `sigterm`, `sigstop`, `db-cut`, `db-stall`, `nacos-restart`,
    /// `executor-kill`, `executor-slow`.
    pub kind: String,
    /// What it hit: a scheduler id, `all`, an executor name, `nacos`.
    pub target: String,
    pub start: DateTime<Utc>,
    /// When the fault was undone (restarted, resumed, restored).
    pub end: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecutorLife {
    pub executor: String,
    pub life: u32,
    pub start: DateTime<Utc>,
    /// When it was killed; `None` if it lived to the end.
    pub end: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SchedulerLife {
    pub id: String,
    pub start: DateTime<Utc>,
    /// When it was killed or stopped; `None` if it lived to the end.
    pub end: Option<DateTime<Utc>>,
    /// The SIGSTOP pauses of this life, `(stopped, continued)`.
    pub pauses: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

/// A `job_execution` row as read at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExecRow {
    pub execution_id: String,
    pub trace_id: String,
    pub job_name: String,
    pub trigger_type: String,
    pub fire_time: DateTime<Utc>,
    pub scheduler_instance: Option<String>,
    pub executor_instance: Option<String>,
    pub shard_start: u32,
    pub shard_end: u32,
    pub trigger_time: DateTime<Utc>,
    pub due_time: DateTime<Utc>,
    pub start_time: Option<DateTime<Utc>>,
    pub finish_time: Option<DateTime<Utc>>,
    pub status: String,
    pub retry_count: u32,
    pub parent_trace_id: Option<String>,
    pub error_message: Option<String>,
    pub job_params: Option<String>,
}

impl ExecRow {
    pub fn range_key(&self) -> &str {
        range_key(&self.execution_id)
    }

    pub fn fire_key(&self) -> &str {
        fire_key(&self.execution_id)
    }

    pub fn is_final(&self) -> bool {
        !matches!(self.status.as_str(), "PENDING" | "RUNNING")
    }

    /// A first attempt of a range (not a retry, not an operator's re-run).
    pub fn first_attempt(&self) -> bool {
        self.retry_count == 0 && !self.execution_id.contains('#')
    }
}

/// A `job_fire` claim as read at the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FireRow {
    pub job_name: String,
    pub fire_time: DateTime<Utc>,
    pub scheduler_instance: String,
}
