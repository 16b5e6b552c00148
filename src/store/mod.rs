//! Persistence behind one trait, with a MySQL and a SQLite implementation chosen from the
//! database URL scheme. The engine and the API only ever see `dyn Store`.
//!
//! Both backends run the same portable SQL (`sql_store!` in `sql.rs`); what differs is the
//! connection set-up and the migrations (`migrations/mysql`, `migrations/sqlite`).

#[macro_use]
mod sql;
mod batch;
mod mysql;
mod rows;
mod sqlite;

use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde::Serialize;

use crate::config::DatabaseSettings;
use crate::jobs::{
    Execution, ExecutionStatus, JobDefinition, JobDocument, JobSpec, NewExecution, TriggerType,
};

pub use mysql::MySqlStore;
pub use sqlite::SqliteStore;

/// Fire claims deleted per statement when purging.
const PURGE_CHUNK: i64 = 5000;

/// Rows per multi-row INSERT (17 bound values each stays far below every placeholder limit).
const MULTI_ROW: usize = 500;

/// How long the tombstone of a deleted job stays in the change log (a day). An engine that
/// has not caught up with the log for longer reloads every job.
pub const TOMBSTONE_KEEP_SECONDS: i64 = 24 * 3600;

/// Which unique key a write collided with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UniqueKey {
    JobName,
    ExecutionId,
    TraceId,
    Fire,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("duplicate {0:?}")]
    Duplicate(UniqueKey),
    #[error("stored data is invalid: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
    #[error(transparent)]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Another instance holds the migration lock for longer than we wait.
    #[error("{0}")]
    MigrationLock(String),
    /// A batched write failed; every write of the batch gets the database's message.
    #[error("batched write failed: {0}")]
    Batch(String),
}

/// Filters of `GET /api/v1/jobs`.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    pub service_name: Option<String>,
    pub enabled: Option<bool>,
    pub name_prefix: Option<String>,
}

/// Filters of `GET /api/v1/executions`; every one that is set must match.
#[derive(Debug, Clone, Default)]
pub struct ExecutionFilter {
    pub job_name: Option<String>,
    pub status: Option<ExecutionStatus>,
    pub trigger_type: Option<TriggerType>,
    /// `ip:port` of the executor instance.
    pub executor: Option<String>,
    /// Earliest `trigger_time`, inclusive.
    pub from: Option<DateTime<Utc>>,
    /// Latest `trigger_time`, inclusive.
    pub to: Option<DateTime<Utc>>,
}

/// An execution search counts matching rows up to this many (`totalElementsCapped` says
/// when it stopped there).
pub const MAX_COUNTED_EXECUTIONS: i64 = 100_000;

/// Zero-based page request.
#[derive(Debug, Clone, Copy)]
pub struct PageRequest {
    pub page: u32,
    pub size: u32,
}

impl PageRequest {
    pub fn offset(self) -> i64 {
        self.page as i64 * self.size as i64
    }
}

/// A page of results, shaped like Spring Data's `Page` JSON.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Page<T> {
    pub content: Vec<T>,
    /// Zero-based page number.
    pub number: u32,
    pub size: u32,
    pub total_elements: i64,
    pub total_pages: i64,
    /// Present (`true`) when counting stopped at a cap (execution search: 100,000), so
    /// `totalElements` and `totalPages` are lower bounds; narrow the search to count exactly.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub total_elements_capped: Option<bool>,
}

impl<T> Page<T> {
    pub fn new(content: Vec<T>, req: PageRequest, total: i64) -> Self {
        let size = req.size.max(1) as i64;
        Self {
            content,
            number: req.page,
            size: req.size,
            total_elements: total,
            total_pages: (total + size - 1) / size,
            total_elements_capped: None,
        }
    }

    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            content: self.content.into_iter().map(f).collect(),
            number: self.number,
            size: self.size,
            total_elements: self.total_elements,
            total_pages: self.total_pages,
            total_elements_capped: self.total_elements_capped,
        }
    }
}

/// The claim of one cron fire: at most one scheduler ever inserts it.
#[derive(Debug, Clone)]
pub struct FireClaim {
    pub job_name: String,
    pub fire_time: DateTime<Utc>,
    pub scheduler_instance: String,
}

#[derive(Debug)]
pub enum FireOutcome {
    /// The rows were inserted (all of them, atomically with the claim).
    Recorded(Vec<Execution>),
    /// Another scheduler already recorded this fire; nothing was written.
    AlreadyFired,
}

/// The jobs changed after a revision (see [`Store::job_changes_since`]).
#[derive(Debug, Clone, Default)]
pub struct JobChanges {
    /// The revision this answer is complete up to: the next `since`.
    pub revision: i64,
    /// The jobs created or written after `since`, as they are now.
    pub changed: Vec<JobDefinition>,
    /// The jobs deleted after `since` (and not created again), and changed jobs whose row no
    /// longer parses: none of them is to be scheduled.
    pub removed: Vec<String>,
}

/// A parsed jobs document from the Nacos config centre, to be applied (see
/// [`Store::apply_job_document`]).
#[derive(Debug, Clone, Copy)]
pub struct DocumentApply<'a> {
    pub data_id: &'a str,
    pub group: &'a str,
    /// Hex SHA-256 of the document's content (of the empty text when it was removed).
    pub content_hash: &'a str,
    pub document: &'a JobDocument,
    /// Recorded as created_by / updated_by.
    pub actor: &'a str,
    pub now: DateTime<Utc>,
}

/// The jobs a document's application created, replaced and deleted, by name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocumentChanges {
    pub created: Vec<String>,
    pub updated: Vec<String>,
    pub deleted: Vec<String>,
}

impl DocumentChanges {
    pub fn is_empty(&self) -> bool {
        self.created.is_empty() && self.updated.is_empty() && self.deleted.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentOutcome {
    /// This content was applied already (by this instance or another): nothing was written.
    Unchanged,
    Applied(DocumentChanges),
}

/// A compare-and-set status change: applied only while the row is in one of `from` (and, when
/// given, still held by `held_by` for the lease that began at `held_since`).
#[derive(Debug, Clone)]
pub struct Transition {
    pub from: &'static [ExecutionStatus],
    pub to: ExecutionStatus,
    /// Guard: the row's `scheduler_instance` and `due_time` are still these (the lease of a
    /// PENDING row; see `dispatch`). Only single-row `transition` honours guards.
    pub held_by: Option<(String, DateTime<Utc>)>,
    /// Hands the row to another holder: new `scheduler_instance` and `due_time`.
    pub hand_to: Option<(String, DateTime<Utc>)>,
    pub executor_instance: Option<String>,
    pub start_time: Option<DateTime<Utc>>,
    pub finish_time: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    pub result_message: Option<String>,
    pub error_message: Option<String>,
    /// Inserted in the same transaction when this transition applies: the retry a failure
    /// earns is never lost between the failure and its row.
    pub retry: Option<NewExecution>,
}

impl Transition {
    pub fn to(from: &'static [ExecutionStatus], to: ExecutionStatus) -> Self {
        Self {
            from,
            to,
            held_by: None,
            hand_to: None,
            executor_instance: None,
            start_time: None,
            finish_time: None,
            duration_ms: None,
            result_message: None,
            error_message: None,
            retry: None,
        }
    }
}

/// How a retention purge walks the table: rows per DELETE, and a rest after each one so the
/// purge takes a bounded share of the database from the executions running beside it.
#[derive(Debug, Clone)]
pub struct PurgePace {
    /// Rows per DELETE statement (at least 1).
    pub chunk: u32,
    /// After each chunk the purge sleeps this many times as long as the chunk took: with
    /// 8 it holds a connection at most a ninth of the time, and it slows down by itself
    /// when the database is busy. 0 purges back to back.
    pub pause_factor: u32,
    /// Counts the rows as each chunk goes, so a pass of hours shows its progress.
    pub purged: metrics::Counter,
}

impl PurgePace {
    /// Back to back, `chunk` rows per statement, counted nowhere.
    pub fn unpaused(chunk: u32) -> Self {
        Self {
            chunk,
            pause_factor: 0,
            purged: metrics::Counter::noop(),
        }
    }

    /// The rest after a chunk that took `took`.
    pub fn pause_after(&self, took: std::time::Duration) -> std::time::Duration {
        took.saturating_mul(self.pause_factor)
    }
}

/// Executions triggered in a window, counted through the `(status, trigger_time)` index.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Activity {
    /// Distinct `(job, fire_time)` of first attempts: fires, whatever their shard count.
    pub fires: i64,
    /// Executions per status (absent statuses had none).
    pub by_status: Vec<(ExecutionStatus, i64)>,
    /// `(fire_time, start_time)` of the latest first-attempt cron executions (at most
    /// [`ACTIVITY_DELAY_SAMPLE`], newest first): how late fires start.
    pub cron_starts: Vec<(DateTime<Utc>, DateTime<Utc>)>,
}

/// How many recent cron starts [`Store::activity_since`] returns.
pub const ACTIVITY_DELAY_SAMPLE: i64 = 100;

/// The winning moves of a batch, one per row: a row that moves more than once ends in its
/// last move's status, and each column takes the last value any of its moves set (what
/// applying them one by one would leave). Guards and retries play no part in setting.
pub fn fold_moves(winners: &[&(String, Transition)]) -> Vec<(String, Transition)> {
    let mut order: Vec<(String, Transition)> = Vec::with_capacity(winners.len());
    let mut at: std::collections::HashMap<&str, usize> =
        std::collections::HashMap::with_capacity(winners.len());
    for (trace, t) in winners.iter().map(|w| (&w.0, &w.1)) {
        let next = Transition {
            from: t.from,
            to: t.to,
            held_by: None,
            hand_to: t.hand_to.clone(),
            executor_instance: t.executor_instance.clone(),
            start_time: t.start_time,
            finish_time: t.finish_time,
            duration_ms: t.duration_ms,
            result_message: t.result_message.clone(),
            error_message: t.error_message.clone(),
            retry: None,
        };
        match at.get(trace.as_str()) {
            Some(&i) => {
                let prev = &mut order[i].1;
                prev.to = next.to;
                prev.hand_to = next.hand_to.or(prev.hand_to.take());
                prev.executor_instance = next.executor_instance.or(prev.executor_instance.take());
                prev.start_time = next.start_time.or(prev.start_time);
                prev.finish_time = next.finish_time.or(prev.finish_time);
                prev.duration_ms = next.duration_ms.or(prev.duration_ms);
                prev.result_message = next.result_message.or(prev.result_message.take());
                prev.error_message = next.error_message.or(prev.error_message.take());
            }
            None => {
                at.insert(trace.as_str(), order.len());
                order.push((trace.clone(), next));
            }
        }
    }
    order
}

/// What one transition of a batch came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The row was not in a `from` state: someone else decided it.
    No,
    /// Applied; with the retry row when the transition carried one.
    Yes(Option<Box<Execution>>),
}

impl Applied {
    pub fn applied(&self) -> bool {
        matches!(self, Self::Yes(_))
    }
}

/// Where a keyset page of executions continues: after this sort key and id.
pub type Cursor = Option<(DateTime<Utc>, i64)>;

/// Says why a guarded fire's rows are to be recorded SKIPPED, given the job's open
/// executions (see [`Store::record_guarded_fire`]); `None` records them as they are.
pub type OverlapJudge<'j> = dyn for<'a> Fn(&'a [Execution]) -> Option<String> + Send + Sync + 'j;

#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// `mysql` or `sqlite`.
    fn backend(&self) -> &'static str;
    async fn migrate(&self) -> Result<(), StoreError>;
    async fn ping(&self) -> Result<(), StoreError>;

    async fn create_job(
        &self,
        spec: &JobSpec,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<JobDefinition, StoreError>;
    /// Replaces the job named `spec.name`; `None` when there is no such job.
    async fn update_job(
        &self,
        spec: &JobSpec,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<JobDefinition>, StoreError>;
    async fn set_job_enabled(
        &self,
        name: &str,
        enabled: bool,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<JobDefinition>, StoreError>;
    /// Deletes the job, leaving a tombstone in the change log.
    async fn delete_job(&self, name: &str, now: DateTime<Utc>) -> Result<bool, StoreError>;
    async fn get_job(&self, name: &str) -> Result<Option<JobDefinition>, StoreError>;
    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest,
    ) -> Result<Page<JobDefinition>, StoreError>;
    /// Every job, for the scheduling engine.
    async fn load_jobs(&self) -> Result<Vec<JobDefinition>, StoreError>;
    /// Makes the `NACOS` jobs match `apply.document`, in one transaction that compares and
    /// sets the document's content hash: of several instances applying the same content,
    /// exactly one writes, and the result depends only on the content and the stored jobs.
    /// Jobs the document names are created, or replaced and marked `NACOS` (an `API` job of
    /// the same name is taken over); an entry unchanged since the last applied document is
    /// left alone; `NACOS` jobs it no longer names are deleted (their executions stay).
    async fn apply_job_document(
        &self,
        apply: &DocumentApply<'_>,
    ) -> Result<DocumentOutcome, StoreError>;
    /// A counter bumped by every job change, on any instance: the revision of the latest.
    async fn job_revision(&self) -> Result<i64, StoreError>;
    /// The change log: what changed in the jobs after revision `since`, read in one snapshot.
    /// `None` when the log cannot tell (the tombstones after `since` were pruned, or `since`
    /// is ahead of the store): then reload every job.
    async fn job_changes_since(&self, since: i64) -> Result<Option<JobChanges>, StoreError>;

    /// Inserts `rows` atomically, together with the fire claim when one is given. A claim
    /// that exists already yields `AlreadyFired` and writes nothing.
    async fn record_fire(
        &self,
        claim: Option<&FireClaim>,
        rows: &[NewExecution],
    ) -> Result<FireOutcome, StoreError>;
    /// Records a fire of `job` whose overlap policy is not ALLOW (with its claim when it is a
    /// cron fire), judging the overlap under a lock on the job's row: the guarded fires of a
    /// job, on any instance, are recorded one after another, each seeing the rows of those
    /// before it. A claim that exists already yields `AlreadyFired` before anything is read.
    /// `judge` gets the job's open (PENDING and RUNNING) executions and says why the rows are
    /// to be recorded SKIPPED, if they are. Returns the outcome and the open executions judged.
    async fn record_guarded_fire(
        &self,
        job: &str,
        claim: Option<&FireClaim>,
        rows: &[NewExecution],
        judge: &OverlapJudge<'_>,
    ) -> Result<(FireOutcome, Vec<Execution>), StoreError>;
    /// Records several cron fires in one transaction (one commit). Each fire, its claim and
    /// its rows, is all-or-nothing on its own (a savepoint each): a fire another scheduler
    /// claimed already is `AlreadyFired` and the others are still recorded.
    async fn record_cron_fires(
        &self,
        fires: &[(FireClaim, Vec<NewExecution>)],
    ) -> Result<Vec<FireOutcome>, StoreError>;
    /// The most recent claimed fire of a job (misfire detection).
    async fn last_fire_time(&self, job: &str) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// The most recent claimed fire of every job fired at or after `since`.
    async fn recent_fires(
        &self,
        since: DateTime<Utc>,
    ) -> Result<std::collections::HashMap<String, DateTime<Utc>>, StoreError>;
    /// Deletes the claims of instants before `before` (in chunks); the number deleted.
    async fn purge_fire_claims(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;

    async fn get_execution(&self, trace_id: &str) -> Result<Option<Execution>, StoreError>;
    async fn list_executions(
        &self,
        job: &str,
        status: Option<ExecutionStatus>,
        page: PageRequest,
    ) -> Result<Page<Execution>, StoreError>;
    /// Executions of all jobs matching `filter`, newest first (trigger time, then id).
    /// Counts at most `count_cap` matches (then `total_elements_capped` is set).
    async fn search_executions(
        &self,
        filter: &ExecutionFilter,
        page: PageRequest,
        count_cap: i64,
    ) -> Result<Page<Execution>, StoreError>;
    /// Compare-and-set (with its guards); `true` when this call changed the row. A retry the
    /// transition carries is inserted with it.
    async fn transition(&self, trace_id: &str, t: &Transition) -> Result<Applied, StoreError>;
    /// Several transitions in one transaction (one commit), decided in order as if applied
    /// one by one, with the retry rows of those that apply. Guards are not supported here.
    async fn transitions(&self, batch: &[(String, Transition)])
    -> Result<Vec<Applied>, StoreError>;
    /// PENDING rows whose `due_time` is before `due_before` (their holder's lease ran out),
    /// oldest first, continuing after `after` (keyset paging over `(due_time, id)`).
    async fn pending_before(
        &self,
        due_before: DateTime<Utc>,
        after: Cursor,
        limit: u32,
    ) -> Result<Vec<Execution>, StoreError>;
    /// RUNNING rows started before `started_before`, in `(trigger_time, id)` order after
    /// `after` (keyset paging along the status index).
    async fn running_before(
        &self,
        started_before: DateTime<Utc>,
        after: Cursor,
        limit: u32,
    ) -> Result<Vec<Execution>, StoreError>;

    /// Takes back cron fires claimed ahead of their instant and not called: each claim (by
    /// its instance) and its PENDING rows (by trace id), in one transaction, so the instants
    /// can be fired again (under an edited definition) or not at all. Returns the number of
    /// rows removed.
    async fn withdraw_fires(&self, fires: &[(FireClaim, Vec<String>)]) -> Result<u64, StoreError>;

    /// Every execution of `job`'s fire whose [`crate::jobs::fire_key`] is `fire`: its ranges,
    /// their retries and re-runs (child jobs), in insertion order.
    async fn fire_executions(&self, job: &str, fire: &str) -> Result<Vec<Execution>, StoreError>;

    /// What was triggered at or after `since`, for the console's overview.
    async fn activity_since(&self, since: DateTime<Utc>) -> Result<Activity, StoreError>;

    /// Retention: deletes final executions (not PENDING or RUNNING) triggered before
    /// `before`, chunk by chunk along the trigger_time index as `pace` says; the number deleted.
    async fn purge_executions_before(
        &self,
        before: DateTime<Utc>,
        pace: PurgePace,
    ) -> Result<u64, StoreError>;
    /// Retention: deletes the final executions of `job` beyond its newest `keep` (by
    /// trigger time, then id), chunk by chunk along (job_name, trigger_time) as `pace` says.
    async fn cap_job_executions(
        &self,
        job: &str,
        keep: u32,
        pace: PurgePace,
    ) -> Result<u64, StoreError>;
    /// The names of every job, sorted.
    async fn job_names(&self) -> Result<Vec<String>, StoreError>;
}

/// Opens the store named by `database.url` (without migrating).
pub async fn connect(settings: &DatabaseSettings) -> Result<Arc<dyn Store>, StoreError> {
    let url = settings.url.expose();
    if url.starts_with("sqlite:") {
        Ok(Arc::new(SqliteStore::connect(url).await?))
    } else {
        let password = settings.password.as_ref().map(|p| p.expose());
        Ok(Arc::new(
            MySqlStore::connect(url, password, settings.max_connections.get()).await?,
        ))
    }
}

/// Classifies a unique-key violation by the key named in the database's message.
fn unique_key(err: &sqlx::Error) -> Option<UniqueKey> {
    let sqlx::Error::Database(db) = err else {
        return None;
    };
    if !db.is_unique_violation() {
        return None;
    }
    let msg = db.message();
    // MySQL: "Duplicate entry '…' for key 'uk_trace_id'"; SQLite: "UNIQUE constraint failed:
    // job_execution.trace_id". Only the key part is inspected: the entry echoes user data.
    let key = msg
        .rsplit_once("for key")
        .map(|(_, k)| k)
        .or_else(|| msg.split_once("failed:").map(|(_, k)| k))?;
    if key.contains("uk_job_name") || key.contains("job_definition.name") {
        Some(UniqueKey::JobName)
    } else if key.contains("execution_id") {
        Some(UniqueKey::ExecutionId)
    } else if key.contains("trace_id") {
        Some(UniqueKey::TraceId)
    } else if key.contains("PRIMARY") || key.contains("job_fire") {
        Some(UniqueKey::Fire)
    } else {
        None
    }
}

impl StoreError {
    fn from_write(err: sqlx::Error) -> Self {
        match unique_key(&err) {
            Some(k) => Self::Duplicate(k),
            None => Self::Database(err),
        }
    }
}

/// Milliseconds are the stored precision; truncating (not rounding) keeps a fire_time
/// exactly equal wherever it is computed.
pub(crate) fn ms(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::SubsecRound;
    t.trunc_subsecs(3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExecutionStatus::{Pending, Running, Success};

    #[test]
    fn a_row_that_moves_twice_in_a_batch_is_set_once_with_both_moves_columns() {
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let started = (
            "a".to_string(),
            Transition {
                executor_instance: Some("10.0.0.1:8080".into()),
                start_time: Some(at),
                ..Transition::to(&[Pending], Running)
            },
        );
        let other = ("b".to_string(), Transition::to(&[Pending], Running));
        let finished = (
            "a".to_string(),
            Transition {
                finish_time: Some(at),
                result_message: Some("done".into()),
                ..Transition::to(&[Pending, Running], Success)
            },
        );
        let folded = fold_moves(&[&started, &other, &finished]);
        assert_eq!(folded.len(), 2);
        let (trace, a) = &folded[0];
        assert_eq!(trace, "a");
        assert_eq!(a.to, Success);
        assert_eq!(a.executor_instance.as_deref(), Some("10.0.0.1:8080"));
        assert_eq!((a.start_time, a.finish_time), (Some(at), Some(at)));
        assert_eq!(a.result_message.as_deref(), Some("done"));
        assert_eq!((folded[1].0.as_str(), folded[1].1.to), ("b", Running));
    }
}
