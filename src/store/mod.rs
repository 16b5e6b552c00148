//! Persistence: what JobFlow keeps in its database, behind four traits split by concern, each
//! small enough to fake in a test:
//!
//! - [`JobStore`]: job definitions, the change log other instances reload from, and the Nacos
//!   jobs document;
//! - [`FireStore`]: fires: their claims and rows written ahead, the admission of guarded
//!   fires at their instant, withdrawal, and what was fired when (misfire handling);
//! - [`ExecutionStore`]: execution rows: reads, the compare-and-set transitions every state
//!   change goes through, and the pages compensation sweeps;
//! - [`RetentionStore`]: the chunked purge of old history;
//! - [`BackfillStore`], [`LogStore`], [`TokenStore`] and [`AuditStore`]: backfills, handler
//!   logs, API tokens and the audit trail.
//!
//! [`Store`] is all of them plus migrations, and [`SqlStore`] implements it once, in plain Rust
//! over the portable SQL layer of [`sql`], for MySQL, MariaDB and SQLite (chosen by the
//! database URL scheme; the migrations are per backend, in `migrations/`).

mod admission;
mod audit;
mod backfills;
mod batch;
mod columns;
mod conflict;
mod executions;
mod fires;
mod jobs;
mod logs;
mod mysql;
mod retention;
mod sql;
mod sqlite;
mod steps;
mod tokens;
mod transition;

use std::collections::HashMap;
use std::sync::Arc;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use crate::config::DatabaseSettings;
use crate::jobs::{
    Execution, ExecutionStatus, JobChange, JobDefinition, JobDocument, JobSpec, NewExecution,
    OverlapPolicy, TriggerType,
};

pub use audit::{AuditFilter, AuditStore, record_audit};
pub use backfills::BackfillStore;
pub use logs::{LogEnd, LogLine, LogPage, LogStore};
pub use retention::PurgePace;
pub use sql::Backend;
pub use tokens::{StoredToken, TokenStore};
pub use transition::{Applied, ChildTrigger, Follow, Transition, fold_moves};

/// Rows per multi-row INSERT (17 bound values each stays far below every placeholder limit).
const MULTI_ROW: usize = 500;

/// How long the tombstone of a deleted job stays in the change log (a day). An engine that
/// has not caught up with the log for longer reloads every job.
/// How long before its instant a guarded cron fire is judged, and from when it counts as a
/// run of its job for every other admission (see [`FireStore::admit_ahead`]). Shorter than
/// the shortest interval between two instants of a job (a second), so a job's earlier fire
/// is always a run when its next is judged.
pub const ADMIT_AHEAD: chrono::Duration = chrono::Duration::milliseconds(250);

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
    /// The transaction no longer sees what it wrote: a Galera node aborted it for a
    /// conflicting write replicated from another node, between two of its statements. Run
    /// again like a transaction rolled back for a deadlock (`store/conflict.rs`).
    #[error("transaction aborted by a conflicting write: {0}")]
    Aborted(String),
}

/// Filters of `GET /api/v1/jobs`.
#[derive(Debug, Clone, Default)]
pub struct JobFilter {
    /// Only jobs of this namespace (`None`: every namespace).
    pub namespace: Option<crate::jobs::Namespace>,
    pub service_name: Option<String>,
    pub enabled: Option<bool>,
    pub name_prefix: Option<String>,
}

/// Filters of `GET /api/v1/executions`; every one that is set must match.
#[derive(Debug, Clone, Default)]
pub struct ExecutionFilter {
    /// Only executions of jobs of this namespace (`None`: every namespace).
    pub namespace: Option<crate::jobs::Namespace>,
    /// The job's key.
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

/// One page of a listing and how many items the whole listing has.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing<T> {
    pub items: Vec<T>,
    pub total: i64,
    /// Counting stopped at a cap: `total` is a lower bound.
    pub capped: bool,
}

/// The claim of one cron fire: at most one scheduler ever inserts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireClaim {
    pub job_name: String,
    pub fire_time: DateTime<Utc>,
    pub scheduler_instance: String,
    /// When the claim was written (before the instant when claimed ahead).
    pub claimed_at: DateTime<Utc>,
    /// A `FIXED_DELAY` job's interval in seconds: the claim is taken only when the job's
    /// latest fire has ended and its end, rounded up to the second, plus the interval is at
    /// or before this instant (one fire out at a time, whichever scheduler makes it).
    pub fixed_delay: Option<u32>,
}

/// One fire to record: its rows, with its claim when it is a cron fire.
#[derive(Debug, Clone)]
pub struct FireRecord {
    pub claim: Option<FireClaim>,
    pub rows: Vec<NewExecution>,
}

#[derive(Debug)]
pub enum FireOutcome {
    /// The rows were inserted (all of them, atomically with the claim).
    Recorded(Vec<Execution>),
    /// Another scheduler already recorded this fire; nothing was written.
    AlreadyFired,
    /// A `FIXED_DELAY` fire before its time: the job's latest fire, at this instant, has not
    /// ended, or not long enough ago (see [`FireClaim::fixed_delay`]). Nothing was written.
    Behind(DateTime<Utc>),
}

/// A recorded fire to take back before it is called: its claim, when it is a cron fire, and
/// its rows while they are still PENDING and held by the instance that recorded them.
#[derive(Debug, Clone)]
pub struct Withdrawal {
    pub instance: String,
    pub job: String,
    /// The claimed instant of a cron fire.
    pub claimed: Option<DateTime<Utc>>,
    pub traces: Vec<String>,
}

/// A recorded fire of a job whose overlap policy is not ALLOW, to be admitted at its instant
/// (see [`FireStore::admit`]).
#[derive(Debug, Clone)]
pub struct GuardedFire {
    pub job: String,
    /// The revision of the definition the fire was planned under; `None` admits it under any.
    pub revision: Option<i64>,
    pub policy: OverlapPolicy,
    /// The fire's rows, all PENDING when it was recorded.
    pub rows: Vec<Execution>,
    /// How to take the fire back if it is withdrawn.
    pub withdrawal: Withdrawal,
    /// Whether the fire is of a cron instant (so withdrawn when the job is disabled).
    pub scheduled: bool,
}

/// What the admission of one guarded fire came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Admitted {
    /// Its rows may be called (still PENDING: each attempt moves its own to RUNNING). Under
    /// COVER, `covered` are the runs it replaces, as they were found (cancelled for it, or
    /// cancelled before and still stopping), which must have stopped before the calls.
    Run {
        rows: Vec<Execution>,
        covered: Vec<Execution>,
    },
    /// The job still runs `running`: the fire's `rows` are SKIPPED, uncalled.
    Skipped {
        rows: Vec<Execution>,
        running: Vec<String>,
    },
    /// The job was deleted, disabled or changed after the fire was planned: its claim and
    /// rows are deleted.
    Withdrawn,
    /// Its rows were not PENDING any more (cancelled, or taken over by compensation).
    Gone,
}

/// The jobs changed after a revision (see [`JobStore::job_changes_since`]).
#[derive(Debug, Clone, Default)]
pub struct JobChanges {
    /// The revision this answer is complete up to: the next `since`.
    pub revision: i64,
    /// The jobs created or written after `since`, as they are now.
    pub changed: Vec<JobDefinition>,
    /// The jobs deleted after `since` (and not created again), and changed jobs whose row no
    /// longer parses (at `DateTime::MIN_UTC`): none of them is to be scheduled.
    pub removed: Vec<JobChange>,
    /// Every write and deletion after `since`, each with its revision and time (as far as
    /// the history still holds them): a fire is overtaken by any change made after its
    /// definition and up to its instant, which may not be the last one.
    pub history: Vec<JobChange>,
}

/// A parsed jobs document from the Nacos config centre, to be applied (see
/// [`JobStore::apply_job_document`]).
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

/// How many recent cron starts [`ExecutionStore::activity_since`] returns.
pub const ACTIVITY_DELAY_SAMPLE: i64 = 100;

/// Where a keyset page of executions continues: after this sort key and id.
pub type Cursor = Option<(DateTime<Utc>, i64)>;

/// A row of a sweep that does not read as an execution (a status a newer version wrote, a
/// damaged value): reported and passed over, never allowed to stop the sweep.
#[derive(Debug, Clone, PartialEq)]
pub struct Unreadable {
    pub id: i64,
    pub trace_id: String,
    /// The row's sort key in its sweep, so the sweep can go on after it.
    pub key: DateTime<Utc>,
    pub error: String,
}

/// One row of a sweep page.
pub type Swept = Result<Execution, Unreadable>;

/// The counters a launcher reads at an instant (see [`FireStore::instant_counters`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstantCounters {
    pub job_revision: i64,
    pub cancels: i64,
}

/// A run cancelled while its handler may still go on at its executor: it counts as a run of
/// its job for guarded admission until the stop is confirmed (see
/// [`ExecutionStore::stops_confirmed`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Stopping {
    pub trace_id: String,
    pub job_name: String,
    /// When the stop was asked for.
    pub requested_at: DateTime<Utc>,
    /// Its row; `None` once the row is gone (purged) or does not read.
    pub run: Option<Execution>,
}

/// Job definitions, the change log, the Nacos jobs document.
#[async_trait]
pub trait JobStore: Send + Sync {
    async fn create_job(
        &self,
        spec: &JobSpec,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<JobDefinition, StoreError>;
    /// Replaces the job named `spec.name`; `None` when there is no such job, or when
    /// `based_on` is given and the job is no longer at that revision (someone else changed it
    /// since it was read).
    async fn update_job(
        &self,
        spec: &JobSpec,
        based_on: Option<i64>,
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
    ) -> Result<Listing<JobDefinition>, StoreError>;
    /// Every job, for the scheduling engine.
    async fn load_jobs(&self) -> Result<Vec<JobDefinition>, StoreError>;
    /// The names of every job, sorted.
    async fn job_names(&self) -> Result<Vec<String>, StoreError>;
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
    /// Just the writes and deletions of jobs after revision `since`, each with its revision
    /// and time (`None` as for [`JobStore::job_changes_since`]).
    async fn jobs_changed_since(&self, since: i64) -> Result<Option<Vec<JobChange>>, StoreError>;
}

/// Fires: claims, rows written ahead, admission, withdrawal, and the fire history misfire
/// handling reads.
#[async_trait]
pub trait FireStore: Send + Sync {
    /// Records fires in one transaction (one commit): each fire's rows, with its claim when
    /// it has one, all-or-nothing per fire. A cron fire another scheduler claimed already is
    /// `AlreadyFired` and writes nothing; the others are still recorded.
    async fn record_fires(&self, fires: &[FireRecord]) -> Result<Vec<FireOutcome>, StoreError>;
    /// Records one fire: with a claim, as [`FireStore::record_fires`]; without, its rows are
    /// inserted atomically and a row whose ids exist already fails it with `Duplicate`.
    async fn record_fire(
        &self,
        claim: Option<&FireClaim>,
        rows: &[NewExecution],
    ) -> Result<FireOutcome, StoreError>;
    /// Admits guarded fires at their instant `now`, in one transaction that locks their jobs'
    /// rows first, so the guarded fires of a job, on any instance, are decided one after the
    /// other, each seeing the decisions before it. A fire whose job is gone, disabled (for a
    /// scheduled fire) or at another revision is withdrawn. Otherwise the job's runs are
    /// read (RUNNING rows; PENDING rows except first attempts of cron fires more than
    /// [`ADMIT_AHEAD`] from their instant, later instants of a cron fire's own job, and the
    /// fire's own; cancelled runs still [`Stopping`]): under SKIP with any run, the
    /// fire's rows become SKIPPED; under COVER the open runs are cancelled (those that may
    /// have been called become stopping) and all are returned to be stopped. An admitted
    /// fire's rows stay PENDING, a run of their job from then on; admitting writes nothing
    /// for a fire that simply runs.
    async fn admit(
        &self,
        fires: &[GuardedFire],
        now: DateTime<Utc>,
    ) -> Result<Vec<Admitted>, StoreError>;
    /// Judges guarded cron fires shortly before their instant (at most [`ADMIT_AHEAD`]
    /// before it; a fire further away is judged `false`), as [`FireStore::admit`] would
    /// under the same locks, but writing nothing: `true` for a
    /// fire that would simply run (its job at the fire's revision and enabled, its rows
    /// PENDING, no other run), which is then called at its instant with nothing more to
    /// admit; `false` for every other, admitted at its instant. A judged fire is safe because
    /// from `ADMIT_AHEAD` before its instant a cron fire is a run of its job for every
    /// admission.
    async fn admit_ahead(
        &self,
        fires: &[GuardedFire],
        now: DateTime<Utc>,
    ) -> Result<Vec<bool>, StoreError>;
    /// Records a new fire of a guarded job (a manual run) and admits it in the same
    /// transaction, as [`FireStore::admit`] would: no other admission sees its rows before
    /// they are judged.
    async fn record_guarded(
        &self,
        policy: OverlapPolicy,
        rows: &[NewExecution],
        now: DateTime<Utc>,
    ) -> Result<Admitted, StoreError>;
    /// What a launcher reads at an instant, in one row: the job revision and the count of
    /// cancels of rows that may be called ([`Transition::stopping`]).
    async fn instant_counters(&self) -> Result<InstantCounters, StoreError>;
    /// Of `traces`, those no longer PENDING (cancelled, or taken over, since they were
    /// recorded).
    async fn no_longer_pending(&self, traces: &[String]) -> Result<Vec<String>, StoreError>;
    /// Takes back recorded fires that were not called, in one transaction: each claim (by its
    /// instance) and its rows, so the instants can be fired again (under an edited
    /// definition) or not at all. A fire one of whose rows is no longer PENDING and held by
    /// its instance (compensation took it over after its lease) stands: `false` for it.
    async fn withdraw_fires(&self, fires: &[Withdrawal]) -> Result<Vec<bool>, StoreError>;
    /// Of the scheduled `fires` (job, instant), those that have ended, each with its end:
    /// every row of the fire (its ranges, their retries and re-runs) is final, and the end
    /// is the latest finish among them (`None` when the fire has no rows left: withdrawn,
    /// pruned, or never recorded). What a `FIXED_DELAY` job waits for.
    async fn fire_ends(
        &self,
        fires: &[(String, DateTime<Utc>)],
    ) -> Result<Vec<FireEnd>, StoreError>;
    /// The most recent claimed fire of a job (misfire detection).
    async fn last_fire_time(&self, job: &str) -> Result<Option<DateTime<Utc>>, StoreError>;
    /// The most recent claimed fire of every job fired at or after `since`.
    async fn recent_fires(
        &self,
        since: DateTime<Utc>,
    ) -> Result<HashMap<String, DateTime<Utc>>, StoreError>;
    /// Deletes the claims of instants before `before` (in chunks); the number deleted.
    async fn purge_fire_claims(&self, before: DateTime<Utc>) -> Result<u64, StoreError>;
}

/// A scheduled fire that has ended (see [`FireStore::fire_ends`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FireEnd {
    pub job: String,
    pub fire_time: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
}

/// Execution rows: reads, compare-and-set transitions, sweeps.
#[async_trait]
pub trait ExecutionStore: Send + Sync {
    async fn get_execution(&self, trace_id: &str) -> Result<Option<Execution>, StoreError>;
    async fn list_executions(
        &self,
        job: &str,
        status: Option<ExecutionStatus>,
        page: PageRequest,
    ) -> Result<Listing<Execution>, StoreError>;
    /// How many RUNNING rows name each executor instance (`ip:port`): the calls in flight
    /// across the cluster.
    async fn running_per_executor(&self) -> Result<HashMap<String, i64>, StoreError>;
    /// The newest execution (trigger time, then id) of each of `jobs` that has one.
    async fn latest_executions(&self, jobs: &[&str]) -> Result<Vec<Execution>, StoreError>;
    /// Executions of all jobs matching `filter`, newest first (trigger time, then id).
    /// Counts at most `count_cap` matches (then the listing is `capped`).
    async fn search_executions(
        &self,
        filter: &ExecutionFilter,
        page: PageRequest,
        count_cap: i64,
    ) -> Result<Listing<Execution>, StoreError>;
    /// Compare-and-set (with its guards). A retry the transition carries is inserted with it.
    async fn transition(&self, trace_id: &str, t: &Transition) -> Result<Applied, StoreError>;
    /// Several transitions in one transaction (one commit), decided in order as if applied
    /// one by one, with the retry and child rows of those that apply. Guards are not
    /// supported here.
    async fn transitions(&self, batch: &[(String, Transition)])
    -> Result<Vec<Applied>, StoreError>;
    /// PENDING rows whose `due_time` is before `due_before` (their holder's lease ran out),
    /// in the order they were triggered, continuing after `after` (keyset paging over
    /// `(trigger_time, id)`).
    async fn pending_before(
        &self,
        due_before: DateTime<Utc>,
        after: Cursor,
        limit: u32,
    ) -> Result<Vec<Swept>, StoreError>;
    /// RUNNING rows started before `started_before` (a row without a start time counts from
    /// its due time), in `(trigger_time, id)` order after `after`.
    async fn running_before(
        &self,
        started_before: DateTime<Utc>,
        after: Cursor,
        limit: u32,
    ) -> Result<Vec<Swept>, StoreError>;
    /// Every execution of `job`'s fire whose [`crate::jobs::fire_key`] is `fire`: its ranges,
    /// their retries and re-runs, in insertion order.
    async fn fire_executions(&self, job: &str, fire: &str) -> Result<Vec<Execution>, StoreError>;
    /// What was triggered at or after `since`, for the console's overview.
    async fn activity_since(&self, since: DateTime<Utc>) -> Result<Activity, StoreError>;
    /// The runs recorded as stopping, oldest request first, at most `limit`.
    async fn stopping(&self, limit: u32) -> Result<Vec<Stopping>, StoreError>;
    /// Their executors confirmed these runs stopped (or they can run no longer): they stop
    /// counting as runs of their jobs.
    async fn stops_confirmed(&self, trace_ids: &[String]) -> Result<(), StoreError>;
}

/// The purge of old execution history.
#[async_trait]
pub trait RetentionStore: Send + Sync {
    /// Deletes final executions (not PENDING or RUNNING) triggered before `before`, chunk by
    /// chunk along the trigger_time index as `pace` says; the number deleted.
    async fn purge_executions_before(
        &self,
        before: DateTime<Utc>,
        pace: PurgePace,
    ) -> Result<u64, StoreError>;
    /// Deletes the final executions of `job` beyond its newest `keep` (by trigger time, then
    /// id), chunk by chunk along (job_name, trigger_time) as `pace` says.
    async fn cap_job_executions(
        &self,
        job: &str,
        keep: u32,
        pace: PurgePace,
    ) -> Result<u64, StoreError>;
}

/// Everything JobFlow keeps, and the schema it keeps it in.
#[async_trait]
pub trait Store:
    JobStore
    + FireStore
    + ExecutionStore
    + RetentionStore
    + BackfillStore
    + LogStore
    + TokenStore
    + AuditStore
    + 'static
{
    /// `mysql` or `sqlite`.
    fn backend(&self) -> &'static str;
    /// This database through a pool of its own (see [`connect_beside`]).
    async fn beside(
        &self,
        settings: &DatabaseSettings,
        connections: u32,
    ) -> Result<Arc<dyn Store>, StoreError>;
    async fn migrate(&self) -> Result<(), StoreError>;
    async fn ping(&self) -> Result<(), StoreError>;
}

/// The store over a SQL database: one implementation, in plain Rust, for every backend.
pub struct SqlStore {
    db: sql::Db,
    creates: batch::GroupCommit<jobs::NewJob, JobDefinition>,
    log_appends: batch::GroupCommit<logs::Append, Option<u64>>,
}

/// Opens the store named by `database.url` (without migrating), with the scheduling path's
/// pool (`database.max_connections`).
pub async fn connect(settings: &DatabaseSettings) -> Result<Arc<dyn Store>, StoreError> {
    open(settings, settings.max_connections.get()).await
}

/// The same database through a pool of its own of `connections`, for work that must not
/// queue behind the fire path's batches: the API (`database.api_connections`), the check at
/// each instant (one). On MySQL the pool opens each connection when it is first asked for,
/// on the runtime that asks (the API's own, see `mysql::beside`). SQLite keeps one writer per
/// process, so there the pool is of read-only connections for plain reads, and writes go
/// through `scheduling`'s writer.
pub async fn connect_beside(
    settings: &DatabaseSettings,
    scheduling: &Arc<dyn Store>,
    connections: u32,
) -> Result<Arc<dyn Store>, StoreError> {
    scheduling.beside(settings, connections).await
}

async fn open(settings: &DatabaseSettings, connections: u32) -> Result<Arc<dyn Store>, StoreError> {
    let url = settings.url.expose();
    let db = if url.starts_with("sqlite:") {
        sqlite::connect(url).await?
    } else {
        let password = settings.password.as_ref().map(|p| p.expose());
        mysql::connect(url, password, connections).await?
    };
    Ok(Arc::new(SqlStore::new(db)))
}

impl SqlStore {
    fn new(db: sql::Db) -> Self {
        Self {
            db,
            creates: Default::default(),
            log_appends: batch::GroupCommit::lingering(logs::LOG_LINGER),
        }
    }
}

#[async_trait]
impl Store for SqlStore {
    fn backend(&self) -> &'static str {
        self.db.backend().name()
    }

    async fn beside(
        &self,
        settings: &DatabaseSettings,
        connections: u32,
    ) -> Result<Arc<dyn Store>, StoreError> {
        match &self.db {
            sql::Db::Sqlite { writer, .. } => {
                let db = sqlite::beside(settings.url.expose(), writer, connections).await?;
                Ok(Arc::new(SqlStore::new(db)))
            }
            sql::Db::MySql { returning, .. } => {
                let password = settings.password.as_ref().map(|p| p.expose());
                let db = mysql::beside(settings.url.expose(), password, connections, *returning)?;
                Ok(Arc::new(SqlStore::new(db)))
            }
        }
    }

    async fn migrate(&self) -> Result<(), StoreError> {
        // Each backend guards concurrent start-ups in its own way.
        match &self.db {
            sql::Db::MySql { pool, .. } => mysql::migrate(pool).await,
            sql::Db::Sqlite { writer, .. } => sqlite::migrate(writer).await,
        }
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.db.execute(sql::Sql::new("SELECT 1")).await?;
        Ok(())
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
