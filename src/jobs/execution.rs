//! Executions: one row per shard range per fire (docs/design.md, "Dispatch" and "Data model").

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum ExecutionStatus {
    Pending,
    Running,
    Success,
    Failed,
    Timeout,
    /// Stopped by an operator (cancel API) or by a newer fire (overlap policy `COVER`).
    Cancelled,
    /// A fire that was recorded but not called (overlap policy `SKIP`).
    Skipped,
}

impl ExecutionStatus {
    pub const ALL: [Self; 7] = [
        Self::Pending,
        Self::Running,
        Self::Success,
        Self::Failed,
        Self::Timeout,
        Self::Cancelled,
        Self::Skipped,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }

    pub fn is_final(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    Serialize,
    Deserialize,
    ToSchema,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum TriggerType {
    Cron,
    Manual,
    Retry,
    Compensation,
    /// Triggered by a parent job whose fire ended SUCCESS in every range.
    Child,
    /// A past instant of the job's schedule, run again by a backfill.
    Backfill,
}

impl TriggerType {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// `{job}:{fire_time UTC yyyyMMddHHmmss}:{shard_start}-{shard_end}`: the id of a cron fire's
/// range, identical on every scheduler so a second dispatch collides on the unique key.
pub fn execution_id(
    job: &str,
    fire_time: DateTime<Utc>,
    shard_start: u32,
    shard_end: u32,
) -> String {
    format!(
        "{}:{shard_start}-{shard_end}",
        scheduled_fire_key(job, fire_time)
    )
}

/// The [`fire_key`] of `job`'s scheduled fire at `fire_time`: `{job}:{yyyyMMddHHmmss}`.
pub fn scheduled_fire_key(job: &str, fire_time: DateTime<Utc>) -> String {
    format!(
        "{job}:{}",
        jobflow_executor::protocol::instant::compact(fire_time)
    )
}

/// Every execution id is built here, so their formats cannot drift apart. Each is
/// `{fire}:{start}-{end}` and a suffix, where `{fire}` ([`fire_key`]) names the fire the
/// range belongs to, shared by its ranges and by every later attempt of them:
/// - cron fires: [`execution_id`], `{job}:{yyyyMMddHHmmss}`, the same on every scheduler (the
///   dedupe key);
/// - manual triggers: `{job}:MANUAL:{fire_id}:{start}-{end}`, one fresh id per trigger
///   ([`triggered_execution_id`]);
/// - child triggers: `{child}:CHILD:{digest of the parent's fire}:{start}-{end}`, the same on
///   every scheduler ([`child_execution_id`]);
/// - backfills: `{job}:BACKFILL:{digest of the backfill's id}-{instant}:{start}-{end}`, the
///   same whoever records the instant ([`backfill_fire_id`]);
/// - automatic retries: the attempt's id plus `#r{n}`, so attempt n of a range can be created
///   once only, whoever applies the retry policy ([`retry_execution_id`]);
/// - an operator's re-run: the first attempt's id plus `#x{trace_id}`, unique by its fresh
///   trace id ([`rerun_execution_id`]); its own automatic retries add `#r{n}` to that.
pub fn triggered_execution_id(
    job: &str,
    trigger: TriggerType,
    fire_id: &str,
    shard_start: u32,
    shard_end: u32,
) -> String {
    format!(
        "{job}:{}:{fire_id}:{shard_start}-{shard_end}",
        trigger.as_str()
    )
}

/// The fire id of a backfill's instant: a digest of its backfill's id and the instant, the same
/// whoever records it, so an instant of a backfill is recorded once
/// (`{job}:BACKFILL:{digest}-{yyyyMMddHHmmss}:{start}-{end}`).
pub fn backfill_fire_id(backfill_id: &str, instant: DateTime<Utc>) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(backfill_id.as_bytes());
    format!(
        "{}-{}",
        hex::encode(&digest[..8]),
        jobflow_executor::protocol::instant::compact(instant)
    )
}

/// The id of range `start-end` of child job `child` triggered by the parent fire whose
/// [`fire_key`] is `parent_fire`: the same on every scheduler, so a child is triggered once
/// per parent fire, and a different one for every parent fire (two manual runs of the parent
/// in one second, a cron fire and a manual run in one second). The parent is named by a
/// digest, which keeps the id within its 200 characters.
pub fn child_execution_id(
    child: &str,
    parent_fire: &str,
    shard_start: u32,
    shard_end: u32,
) -> String {
    triggered_execution_id(
        child,
        TriggerType::Child,
        &child_fire_id(parent_fire),
        shard_start,
        shard_end,
    )
}

/// The fire id of the children of the parent fire whose [`fire_key`] is `parent_fire`: a
/// digest of it (see [`child_execution_id`]). Planned under it, a child's rows are named
/// alike on every scheduler, its retries and broadcast rows included.
pub fn child_fire_id(parent_fire: &str) -> String {
    use sha2::Digest;
    let digest = sha2::Sha256::digest(parent_fire.as_bytes());
    hex::encode(&digest[..8])
}

/// The id of automatic retry `retry` of the attempt whose id is `previous`: the attempt's
/// series (its id without a `#r{n}` retry suffix) plus `#r{retry}`.
pub fn retry_execution_id(previous: &str, retry: u32) -> String {
    let series = match previous.rsplit_once("#r") {
        Some((series, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => series,
        _ => previous,
    };
    format!("{series}#r{retry}")
}

/// The id of an operator's re-run (with fresh `trace_id`) of the attempt whose id is
/// `finished`: the range's first attempt id plus `#x{trace_id}`, in the same fire.
pub fn rerun_execution_id(finished: &str, trace_id: &str) -> String {
    format!("{}#x{trace_id}", first_attempt_id(finished))
}

/// The id of the first attempt of the range an execution id belongs to: the id without its
/// retry and re-run suffixes (`#…`).
pub fn first_attempt_id(execution_id: &str) -> &str {
    execution_id.split('#').next().unwrap_or(execution_id)
}

/// The fire an execution id belongs to: the id without its suffixes (`#…`), its executor
/// (`@…`, a broadcast fire's) and its range (`:{start}-{end}`). Job names hold neither `#`
/// nor `@`, but may hold `:`, so the range is cut at the last one.
pub fn fire_key(execution_id: &str) -> &str {
    let first = first_attempt_id(execution_id);
    let first = first.split('@').next().unwrap_or(first);
    first.rsplit_once(':').map_or(first, |(fire, _)| fire)
}

/// The id of a broadcast fire's row for the executor `addr`: the range's id plus `@{addr}`,
/// so every executor's row of one fire is unique, and shares its [`fire_key`].
pub fn broadcast_execution_id(range_id: &str, addr: &str) -> String {
    format!("{range_id}@{addr}")
}

/// A W3C-compatible trace id: 32 lower-case hex digits, never all zero.
pub fn new_trace_id() -> String {
    loop {
        let v: u128 = rand::random();
        if v != 0 {
            return format!("{v:032x}");
        }
    }
}

/// A row to insert.
#[derive(Debug, Clone)]
pub struct NewExecution {
    pub execution_id: String,
    pub trace_id: String,
    pub job_name: String,
    pub trigger_type: TriggerType,
    pub fire_time: DateTime<Utc>,
    pub scheduler_instance: String,
    /// The executor the range is planned for (failover may change it).
    pub executor_instance: Option<String>,
    pub shard_start: u32,
    pub shard_end: u32,
    pub shard_count: u32,
    pub trigger_time: DateTime<Utc>,
    /// When the row may be dispatched (later than `trigger_time` for a backed-off retry).
    pub due_time: DateTime<Utc>,
    pub status: ExecutionStatus,
    pub retry_count: u32,
    pub parent_trace_id: Option<String>,
    pub error_message: Option<String>,
    /// This run's own `jobParams` (a manual trigger's), or `None` for the job's.
    pub job_params: Option<serde_json::Value>,
}

impl NewExecution {
    /// Records the row as SKIPPED, uncalled, for `why` (the overlap policy).
    pub fn skip(&mut self, why: &str) {
        self.status = ExecutionStatus::Skipped;
        self.error_message = Some(why.to_string());
    }

    /// The row as stored under `id` (times at the stored millisecond precision).
    pub fn recorded(self, id: i64) -> Execution {
        use chrono::SubsecRound;
        Execution {
            id,
            execution_id: self.execution_id,
            trace_id: self.trace_id,
            namespace: super::Namespace::of_key(&self.job_name).to_string(),
            job_name: self.job_name,
            trigger_type: self.trigger_type,
            fire_time: self.fire_time.trunc_subsecs(3),
            scheduler_instance: Some(self.scheduler_instance),
            executor_instance: self.executor_instance,
            shard_start: self.shard_start,
            shard_end: self.shard_end,
            shard_count: self.shard_count,
            trigger_time: self.trigger_time.trunc_subsecs(3),
            due_time: self.due_time.trunc_subsecs(3),
            start_time: None,
            finish_time: None,
            duration_ms: None,
            status: self.status,
            retry_count: self.retry_count,
            parent_trace_id: self.parent_trace_id,
            result_message: None,
            error_message: self.error_message,
            job_params: self.job_params,
        }
    }
}

/// A stored execution, as the API returns it.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Execution {
    pub id: i64,
    pub execution_id: String,
    pub trace_id: String,
    /// The job's name within its namespace. (In the scheduler this field holds the job's key,
    /// `namespace/name` outside `default`: see `JobName`.)
    #[serde(serialize_with = "super::name::serialize_local")]
    pub job_name: String,
    /// The job's namespace.
    pub namespace: String,
    pub trigger_type: TriggerType,
    /// The scheduled instant this execution belongs to (UTC).
    pub fire_time: DateTime<Utc>,
    pub scheduler_instance: Option<String>,
    pub executor_instance: Option<String>,
    pub shard_start: u32,
    pub shard_end: u32,
    pub shard_count: u32,
    pub trigger_time: DateTime<Utc>,
    pub due_time: DateTime<Utc>,
    pub start_time: Option<DateTime<Utc>>,
    pub finish_time: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    pub status: ExecutionStatus,
    pub retry_count: u32,
    pub parent_trace_id: Option<String>,
    pub result_message: Option<String>,
    pub error_message: Option<String>,
    /// The `jobParams` this run sends instead of the job's: a manual trigger's body, carried
    /// by its retries and reruns. `null`: the job's own (whatever they were when it was
    /// sent). On the row so that whoever sends it to an executor (compensation on another
    /// instance included) sends the run's params.
    pub job_params: Option<serde_json::Value>,
}

impl Execution {
    /// Its holder and the due time its lease began at (milliseconds, as stored): the guard
    /// of a change only its holder may make, which fails once the row was handed to another
    /// (see `Transition::held_by`).
    pub fn lease(&self) -> Option<(String, DateTime<Utc>)> {
        use chrono::SubsecRound;
        let due = self.due_time.trunc_subsecs(3);
        self.scheduler_instance.clone().map(|s| (s, due))
    }

    /// Whether an open run may have reached its executor: RUNNING, or the PENDING first attempt
    /// of a cron fire, which is called at its instant without taking its row first and writes
    /// RUNNING after the call. Other PENDING rows are taken by a compare-and-set before their
    /// call, so a cancel that wins keeps them from being called.
    pub fn may_have_been_called(&self) -> bool {
        self.status == ExecutionStatus::Running
            || (self.status == ExecutionStatus::Pending
                && self.trigger_type == TriggerType::Cron
                && self.retry_count == 0)
    }
}

/// A row of range 0 of job `j`'s fire now, for tests.
#[cfg(test)]
impl Execution {
    pub(crate) fn for_tests(status: ExecutionStatus, retry_count: u32) -> Self {
        let now = Utc::now();
        Execution {
            id: 1,
            execution_id: "j:20261130120000:0-0".into(),
            trace_id: "t".into(),
            job_name: "j".into(),
            namespace: "default".into(),
            trigger_type: TriggerType::Cron,
            fire_time: now,
            scheduler_instance: None,
            executor_instance: None,
            shard_start: 0,
            shard_end: 0,
            shard_count: 1,
            trigger_time: now,
            due_time: now,
            start_time: None,
            finish_time: None,
            duration_ms: None,
            status,
            retry_count,
            parent_trace_id: None,
            result_message: None,
            error_message: None,
            job_params: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn only_a_cron_fires_first_attempt_may_be_called_while_pending() {
        let row = |status, trigger_type, retry_count| Execution {
            trigger_type,
            ..Execution::for_tests(status, retry_count)
        };
        use ExecutionStatus::{Pending, Running, Success};
        use TriggerType::{Cron, Manual, Retry};
        // Called at its instant without taking its row: it may run while still PENDING.
        assert!(row(Pending, Cron, 0).may_have_been_called());
        assert!(row(Running, Manual, 0).may_have_been_called());
        // Taken by a compare-and-set before their call.
        assert!(!row(Pending, Manual, 0).may_have_been_called());
        assert!(!row(Pending, Cron, 1).may_have_been_called());
        assert!(!row(Pending, Retry, 1).may_have_been_called());
        assert!(!row(Success, Cron, 0).may_have_been_called());
    }

    #[test]
    fn execution_id_format() {
        let t = Utc.with_ymd_and_hms(2024, 3, 5, 7, 8, 9).unwrap();
        assert_eq!(
            execution_id("order-sync", t, 0, 33),
            "order-sync:20240305070809:0-33"
        );
    }

    #[test]
    fn retry_ids_count_from_the_first_attempt() {
        let first = "order-sync:20240305070809:0-33";
        assert_eq!(retry_execution_id(first, 1), format!("{first}#r1"));
        assert_eq!(
            retry_execution_id(&retry_execution_id(first, 1), 2),
            format!("{first}#r2")
        );
        assert_eq!(
            triggered_execution_id("a", TriggerType::Manual, "t", 0, 9),
            "a:MANUAL:t:0-9"
        );
    }

    #[test]
    fn a_rerun_and_its_retries_are_their_own_series_in_the_same_fire() {
        let retried = "order-sync:20240305070809:0-33#r2";
        let rerun = rerun_execution_id(retried, "abc");
        assert_eq!(rerun, "order-sync:20240305070809:0-33#xabc");
        assert_eq!(retry_execution_id(&rerun, 3), format!("{rerun}#r3"));
        assert_eq!(
            retry_execution_id(&retry_execution_id(&rerun, 3), 4),
            format!("{rerun}#r4")
        );
        // A trace id holding "r" followed by digits is not taken for a retry suffix.
        let rerun = rerun_execution_id(retried, "0r12");
        assert_eq!(retry_execution_id(&rerun, 1), format!("{rerun}#r1"));
    }

    #[test]
    fn every_attempt_of_every_range_names_its_fire() {
        let t = Utc.with_ymd_and_hms(2024, 3, 5, 7, 8, 9).unwrap();
        let cron = execution_id("ns:order-sync", t, 0, 33);
        assert_eq!(fire_key(&cron), "ns:order-sync:20240305070809");
        assert_eq!(
            fire_key(&retry_execution_id(&cron, 2)),
            "ns:order-sync:20240305070809"
        );
        assert_eq!(
            fire_key(&rerun_execution_id(&cron, "t")),
            "ns:order-sync:20240305070809"
        );
        let manual = triggered_execution_id("a", TriggerType::Manual, "f1", 34, 66);
        assert_eq!(fire_key(&manual), "a:MANUAL:f1");
        let child = child_execution_id("c", "a:MANUAL:f1", 0, 0);
        assert!(
            child.starts_with("c:CHILD:") && child.ends_with(":0-0"),
            "{child}"
        );
        assert_eq!(fire_key(&child), &child[..child.len() - 4]);
        // Two parent fires, two child fires.
        assert_ne!(child, child_execution_id("c", "a:MANUAL:f2", 0, 0));
    }

    #[test]
    fn trace_ids_are_w3c_shaped() {
        let t = new_trace_id();
        assert_eq!(t.len(), 32);
        assert!(
            t.chars()
                .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase())
        );
        assert_ne!(t, new_trace_id());
    }
}
