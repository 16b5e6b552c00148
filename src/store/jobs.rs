//! [`JobStore`] over SQL: job definitions and their change log.
//!
//! Every job write takes the next value of the `job_revision` counter in its transaction and
//! stamps it on the rows it writes (`job_definition.revision`); a deletion leaves a tombstone.
//! The counter's row lock, held until the commit, orders the writers, so once an instance
//! sees revision R, every write up to R is visible: reloads read only what changed after the
//! revision they have.

use std::collections::{BTreeMap, HashMap, HashSet};

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::batch::{Queued, answer_all};
use super::columns::{job, spec_columns};
use super::conflict;
use super::sql::{Db, Sql, Tx};
use super::steps::read_changes;
use super::{
    DocumentApply, DocumentChanges, DocumentOutcome, JobChanges, JobFilter, JobStore, Listing,
    PageRequest, SqlStore, StoreError, TOMBSTONE_KEEP_SECONDS, ms,
};
use crate::jobs::{JobChange, JobDefinition, JobSource, JobSpec, Timing, whole_second};

#[async_trait]
impl JobStore for SqlStore {
    async fn create_job(
        &self,
        spec: &JobSpec,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<JobDefinition, StoreError> {
        let db = self.db.clone();
        let new = NewJob {
            spec: spec.clone(),
            actor: actor.map(str::to_string),
            now,
        };
        self.creates
            .submit(new, move |batch| write_creates(db.clone(), batch))
            .await
    }

    async fn update_job(
        &self,
        spec: &JobSpec,
        based_on: Option<i64>,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<JobDefinition>, StoreError> {
        conflict::retrying(|| async {
            let mut tx = self.db.begin().await?;
            let revision = next_revision(&mut tx).await?;
            if replace_job(&mut tx, spec, based_on, actor, now, revision).await? == 0 {
                // No such job: the revision taken stays unused.
                tx.rollback().await?;
                return Ok(None);
            }
            log_writes(&mut tx, revision, now).await?;
            let job = fetch_job(&mut tx, spec.name.as_str()).await?;
            tx.commit().await?;
            Ok(job)
        })
        .await
    }

    async fn set_job_enabled(
        &self,
        name: &str,
        enabled: bool,
        actor: Option<&str>,
        now: DateTime<Utc>,
    ) -> Result<Option<JobDefinition>, StoreError> {
        conflict::retrying(|| async {
            let mut tx = self.db.begin().await?;
            let revision = next_revision(&mut tx).await?;
            // `enabled_since` first: MySQL evaluates SET left to right, SQLite reads old values.
            let mut q = Sql::new(
                "UPDATE job_definition SET enabled_since = CASE WHEN enabled THEN enabled_since ELSE ",
            );
            q.bind(now).push(" END, ").set([
                ("enabled", enabled.into()),
                ("updated_at", now.into()),
                ("updated_by", actor.into()),
                ("revision", revision.into()),
            ]);
            q.push(" WHERE name = ").bind(name);
            if tx.execute(q).await? == 0 {
                tx.rollback().await?;
                return Ok(None);
            }
            log_writes(&mut tx, revision, now).await?;
            let job = fetch_job(&mut tx, name).await?;
            tx.commit().await?;
            Ok(job)
        })
        .await
    }

    async fn delete_job(&self, name: &str, now: DateTime<Utc>) -> Result<bool, StoreError> {
        conflict::retrying(|| async {
            let mut tx = self.db.begin().await?;
            let revision = next_revision(&mut tx).await?;
            let mut q = Sql::new("DELETE FROM job_definition WHERE name = ");
            q.bind(name);
            if tx.execute(q).await? == 0 {
                tx.rollback().await?;
                return Ok(false);
            }
            tombstone(&mut tx, name, revision, now).await?;
            prune_tombstones(&mut tx, now).await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn get_job(&self, name: &str) -> Result<Option<JobDefinition>, StoreError> {
        let mut q = Sql::new("SELECT * FROM job_definition WHERE name = ");
        q.bind(name);
        self.db
            .fetch_optional(q)
            .await?
            .as_ref()
            .map(job)
            .transpose()
    }

    async fn list_jobs(
        &self,
        filter: &JobFilter,
        page: PageRequest,
    ) -> Result<Listing<JobDefinition>, StoreError> {
        let mut count = Sql::new("SELECT COUNT(*) FROM job_definition WHERE 1 = 1");
        push_job_filter(&mut count, filter);
        let total: i64 = self.db.fetch_all(count).await?[0].at(0)?;
        let mut q = Sql::new("SELECT * FROM job_definition WHERE 1 = 1");
        push_job_filter(&mut q, filter);
        q.push(" ORDER BY name LIMIT ")
            .bind(page.size as i64)
            .push(" OFFSET ")
            .bind(page.offset());
        let items = self
            .db
            .fetch_all(q)
            .await?
            .iter()
            .map(job)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Listing {
            items,
            total,
            capped: false,
        })
    }

    async fn load_jobs(&self) -> Result<Vec<JobDefinition>, StoreError> {
        let rows = self
            .db
            .fetch_all(Sql::new("SELECT * FROM job_definition"))
            .await?;
        Ok(readable_jobs(&rows).0)
    }

    async fn job_names(&self) -> Result<Vec<String>, StoreError> {
        let q = Sql::new("SELECT name FROM job_definition ORDER BY name");
        self.db
            .fetch_all(q)
            .await?
            .iter()
            .map(|r| r.at(0))
            .collect()
    }

    async fn apply_job_document(
        &self,
        apply: &DocumentApply<'_>,
    ) -> Result<DocumentOutcome, StoreError> {
        conflict::retrying(|| apply_document(&self.db, apply)).await
    }

    async fn job_revision(&self) -> Result<i64, StoreError> {
        let q = Sql::new("SELECT revision FROM job_revision WHERE id = 1");
        self.db.fetch_all(q).await?[0].at(0)
    }

    async fn job_changes_since(&self, since: i64) -> Result<Option<JobChanges>, StoreError> {
        // One snapshot: the counter and the rows and tombstones up to it agree.
        let mut tx = self.db.begin().await?;
        let Some(revision) = log_revision(&mut tx, since).await? else {
            tx.commit().await?;
            return Ok(None);
        };
        let mut changes = JobChanges {
            revision,
            ..Default::default()
        };
        if since == revision {
            tx.commit().await?;
            return Ok(Some(changes));
        }
        let mut q = Sql::new("SELECT * FROM job_definition WHERE revision > ");
        q.bind(since);
        let rows = tx.fetch_all(q).await?;
        let deleted = tombstones_after(&mut tx, since).await?;
        let mut history = history_after(&mut tx, since).await?;
        tx.commit().await?;
        history.extend(deleted.iter().cloned());
        let (changed, unreadable) = readable_jobs(&rows);
        // A name both deleted and present was created again after its deletion.
        let present: HashSet<&str> = changed.iter().map(|j| j.name().as_str()).collect();
        let mut removed: Vec<JobChange> = deleted
            .into_iter()
            .filter(|d| !present.contains(d.name.as_str()))
            .collect();
        removed.extend(unreadable);
        removed.sort_by(|a, b| (&a.name, a.at).cmp(&(&b.name, b.at)));
        // The first deletion of each name stands for it.
        removed.dedup_by(|later, first| later.name == first.name);
        changes.changed = changed;
        changes.removed = removed;
        changes.history = history;
        Ok(Some(changes))
    }

    async fn jobs_changed_since(&self, since: i64) -> Result<Option<Vec<JobChange>>, StoreError> {
        let mut tx = self.db.begin().await?;
        if log_revision(&mut tx, since).await?.is_none() {
            tx.commit().await?;
            return Ok(None);
        }
        let mut q =
            Sql::new("SELECT name, revision, updated_at FROM job_definition WHERE revision > ");
        q.bind(since);
        let mut changes = read_changes(&mut tx, q).await?;
        changes.extend(tombstones_after(&mut tx, since).await?);
        changes.extend(history_after(&mut tx, since).await?);
        tx.commit().await?;
        Ok(Some(changes))
    }
}

/// The log's current revision, or `None` when it cannot answer from `since` (the tombstones
/// after it were pruned, or the database is behind `since`).
async fn log_revision(tx: &mut Tx, since: i64) -> Result<Option<i64>, StoreError> {
    let q = Sql::new("SELECT revision, pruned_revision FROM job_revision WHERE id = 1");
    let row = &tx.fetch_all(q).await?[0];
    let (revision, pruned): (i64, i64) = (row.at(0)?, row.at(1)?);
    Ok((pruned <= since && since <= revision).then_some(revision))
}

async fn tombstones_after(tx: &mut Tx, since: i64) -> Result<Vec<JobChange>, StoreError> {
    let mut q = Sql::new("SELECT name, revision, deleted_at FROM job_tombstone WHERE revision > ");
    q.bind(since);
    read_changes(tx, q).await
}

/// The job writes after revision `since` in the history (deletions are tombstones).
async fn history_after(tx: &mut Tx, since: i64) -> Result<Vec<JobChange>, StoreError> {
    let mut q = Sql::new("SELECT name, revision, changed_at FROM job_history WHERE revision > ");
    q.bind(since);
    read_changes(tx, q).await
}

async fn fetch_job(tx: &mut Tx, name: &str) -> Result<Option<JobDefinition>, StoreError> {
    let mut q = Sql::new("SELECT * FROM job_definition WHERE name = ");
    q.bind(name);
    tx.fetch_optional(q).await?.as_ref().map(job).transpose()
}

/// Takes the next job revision for this transaction's job writes, which stamp it on the rows
/// they write. The counter's row lock, held until the commit, orders the writers.
async fn next_revision(tx: &mut Tx) -> Result<i64, StoreError> {
    tx.execute(Sql::new(
        "UPDATE job_revision SET revision = revision + 1 WHERE id = 1",
    ))
    .await?;
    let q = Sql::new("SELECT revision FROM job_revision WHERE id = 1");
    tx.fetch_all(q).await?[0].at(0)
}

/// Logs this transaction's job writes (the rows stamped with `revision`) in the job history,
/// and forgets the entries older than tombstones are kept. The history tells when each
/// change was made, so a fire is judged against every change since it was planned, not only
/// against the last (see [`JobChange::overtakes`]).
async fn log_writes(tx: &mut Tx, revision: i64, now: DateTime<Utc>) -> Result<(), StoreError> {
    let mut q = Sql::new(
        "INSERT INTO job_history (revision, name, changed_at) \
         SELECT revision, name, updated_at FROM job_definition WHERE revision = ",
    );
    q.bind(revision);
    tx.execute(q).await?;
    let mut q = Sql::new("DELETE FROM job_history WHERE changed_at < ");
    q.bind(now - chrono::Duration::seconds(TOMBSTONE_KEEP_SECONDS));
    tx.execute(q).await?;
    Ok(())
}

/// A creation waiting for its batch.
pub(crate) struct NewJob {
    spec: JobSpec,
    actor: Option<String>,
    now: DateTime<Utc>,
}

/// Writes a batch of creations in one transaction and answers each (see `batch`). A
/// duplicate name fails only its own creation (the failed INSERT is rolled back alone, the
/// transaction goes on).
async fn write_creates(db: Db, batch: Vec<Queued<NewJob, JobDefinition>>) {
    let jobs: Vec<&NewJob> = batch.iter().map(|q| &q.write).collect();
    let answers = conflict::retrying(|| insert_batch(&db, &jobs)).await;
    answer_all(batch, answers);
}

async fn insert_batch(
    db: &Db,
    batch: &[&NewJob],
) -> Result<Vec<Result<JobDefinition, StoreError>>, StoreError> {
    let mut tx = db.begin().await?;
    let revision = next_revision(&mut tx).await?;
    let mut refused = HashMap::new();
    for (i, new) in batch.iter().enumerate() {
        // A duplicate fails its own statement only; the transaction goes on.
        match insert_job(&mut tx, &new.spec, new.actor.as_deref(), new.now, revision).await {
            Ok(()) => {}
            Err(StoreError::Duplicate(key)) => {
                refused.insert(i, key);
            }
            Err(e) => return Err(e),
        }
    }
    let mut stored: HashMap<String, JobDefinition> = HashMap::new();
    if refused.len() < batch.len() {
        let mut read = Sql::new("SELECT * FROM job_definition WHERE revision = ");
        read.bind(revision).push(" AND name IN ").list(
            batch
                .iter()
                .enumerate()
                .filter(|(i, _)| !refused.contains_key(i))
                .map(|(_, j)| j.spec.name.as_str()),
        );
        for row in tx.fetch_all(read).await? {
            let job = job(&row)?;
            stored.insert(job.name().to_string(), job);
        }
        let now = batch.iter().map(|j| j.now).max().unwrap_or_default();
        log_writes(&mut tx, revision, now).await?;
        tx.commit().await?;
    } else {
        // Nothing written: the revision taken stays unused.
        tx.rollback().await?;
    }
    Ok(batch
        .iter()
        .enumerate()
        .map(|(i, new)| match refused.get(&i) {
            Some(key) => Err(StoreError::Duplicate(*key)),
            None => stored
                .remove(new.spec.name.as_str())
                .ok_or_else(|| StoreError::Corrupt("inserted job not found".into())),
        })
        .collect())
}

async fn insert_job(
    tx: &mut Tx,
    spec: &JobSpec,
    actor: Option<&str>,
    now: DateTime<Utc>,
    revision: i64,
) -> Result<(), StoreError> {
    let mut row = vec![
        ("name", spec.name.as_str().into()),
        ("namespace", spec.name.namespace().into()),
    ];
    row.extend(spec_columns(spec));
    row.extend([
        ("created_at", now.into()),
        ("updated_at", now.into()),
        ("created_by", actor.into()),
        ("updated_by", actor.into()),
        ("enabled_since", now.into()),
        ("revision", revision.into()),
    ]);
    let mut q = Sql::new("INSERT INTO job_definition ");
    q.values([row]);
    tx.execute(q).await.map_err(StoreError::from_write)?;
    Ok(())
}

/// Replaces every field of the job named `spec.name` (stamping `revision`); the rows MySQL
/// counts as changed.
async fn replace_job(
    tx: &mut Tx,
    spec: &JobSpec,
    based_on: Option<i64>,
    actor: Option<&str>,
    now: DateTime<Utc>,
    revision: i64,
) -> Result<u64, StoreError> {
    // `enabled_since` first: MySQL evaluates SET left to right, SQLite reads old values.
    let mut q = Sql::new(
        "UPDATE job_definition SET enabled_since = CASE WHEN enabled THEN enabled_since ELSE ",
    );
    q.bind(now)
        .push(" END, ")
        .set(spec_columns(spec))
        .push(", ")
        .set([
            ("updated_at", now.into()),
            ("updated_by", actor.into()),
            ("revision", revision.into()),
        ]);
    q.push(" WHERE name = ").bind(spec.name.as_str());
    if let Some(r) = based_on {
        q.push(" AND revision = ").bind(r);
    }
    Ok(tx.execute(q).await?)
}

/// Leaves the tombstone of a deleted job for the engines' incremental reloads.
async fn tombstone(
    tx: &mut Tx,
    name: &str,
    revision: i64,
    now: DateTime<Utc>,
) -> Result<(), StoreError> {
    let mut q = Sql::new("INSERT INTO job_tombstone ");
    q.values([vec![
        ("revision", revision.into()),
        ("name", name.into()),
        ("deleted_at", now.into()),
    ]]);
    tx.execute(q).await?;
    Ok(())
}

/// Deletes the tombstones older than [`TOMBSTONE_KEEP_SECONDS`] and raises `pruned_revision`
/// past them: an engine behind it cannot learn of those deletions from the log any more, and
/// reloads every job instead. Runs in the transactions that write tombstones (which hold the
/// counter's lock already).
async fn prune_tombstones(tx: &mut Tx, now: DateTime<Utc>) -> Result<(), StoreError> {
    let before = ms(now - chrono::Duration::seconds(TOMBSTONE_KEEP_SECONDS));
    let mut q = Sql::new("SELECT MAX(revision) FROM job_tombstone WHERE deleted_at < ");
    q.bind(before);
    let pruned: Option<i64> = tx.fetch_all(q).await?[0].at(0)?;
    if let Some(pruned) = pruned {
        let mut q = Sql::new("DELETE FROM job_tombstone WHERE revision <= ");
        q.bind(pruned);
        tx.execute(q).await?;
        let mut q = Sql::new("UPDATE job_revision SET pruned_revision = ");
        q.bind(pruned)
            .push(" WHERE id = 1 AND pruned_revision < ")
            .bind(pruned);
        tx.execute(q).await?;
    }
    Ok(())
}

/// Parsed job rows, and the names of those that no longer parse (reported here, never
/// scheduled: one unreadable row must not stop the other jobs).
/// The rows that parse, and a change at `DateTime::MIN_UTC` for each that does not (it is
/// taken as deleted, before any instant).
fn readable_jobs(rows: &[super::sql::Row]) -> (Vec<JobDefinition>, Vec<JobChange>) {
    let mut unreadable = Vec::new();
    let jobs = rows
        .iter()
        .filter_map(|r| match job(r) {
            Ok(j) => Some(j),
            Err(e) => {
                tracing::error!(error = %e, "skipping unreadable job definition");
                unreadable.push(JobChange {
                    name: r.get::<String>("name").unwrap_or_default(),
                    revision: r.get::<i64>("revision").unwrap_or_default(),
                    at: DateTime::<Utc>::MIN_UTC,
                });
                None
            }
        })
        .collect();
    (jobs, unreadable)
}

fn push_job_filter(q: &mut Sql, f: &JobFilter) {
    if let Some(s) = &f.service_name {
        q.push(" AND service_name = ").bind(s);
    }
    if let Some(e) = f.enabled {
        q.push(" AND enabled = ").bind(e);
    }
    if let Some(ns) = &f.namespace {
        q.push(" AND namespace = ").bind(ns.as_str());
    }
    if let Some(p) = &f.name_prefix {
        // The prefix is of the name within the namespace: the key starts with the namespace.
        let p = match &f.namespace {
            Some(ns) if !ns.is_default() => format!("{ns}/{p}"),
            _ => p.clone(),
        };
        // `!` escapes LIKE wildcards the same way on every backend.
        let escaped = p.replace('!', "!!").replace('%', "!%").replace('_', "!_");
        q.push(" AND name LIKE ")
            .bind(format!("{escaped}%"))
            .push(" ESCAPE '!'");
    }
}

/// Makes the `NACOS` jobs match the document (see [`JobStore::apply_job_document`]).
async fn apply_document(db: &Db, apply: &DocumentApply<'_>) -> Result<DocumentOutcome, StoreError> {
    let now = ms(apply.now);
    // The row to compare and set exists before the transaction, so two instances never race
    // to insert it; the loser of this insert just finds it there.
    let mut create = Sql::new("INSERT INTO job_document ");
    create.values([vec![
        ("data_id", apply.data_id.into()),
        ("group_name", apply.group.into()),
        ("content_hash", "".into()),
        ("entry_hashes", "{}".into()),
        ("applied_at", now.into()),
        ("checked_at", now.into()),
    ]]);
    if let Err(e) = db.execute(create).await
        && !matches!(&e, sqlx::Error::Database(d) if d.is_unique_violation())
    {
        return Err(e.into());
    }
    let mut tx = db.begin().await?;
    let Some(previous) = compare_document(&mut tx, apply, now).await? else {
        tx.commit().await?;
        return Ok(DocumentOutcome::Unchanged);
    };
    // New content: its writes share one revision (unused when nothing changes).
    let revision = next_revision(&mut tx).await?;
    let existing: HashMap<String, String> = tx
        .fetch_all(Sql::new("SELECT name, source FROM job_definition"))
        .await?
        .iter()
        .map(|r| Ok((r.at(0)?, r.at(1)?)))
        .collect::<Result<_, StoreError>>()?;
    let mut changes = DocumentChanges::default();
    write_entries(&mut tx, apply, &previous, &existing, revision, &mut changes).await?;
    delete_unnamed(&mut tx, apply, &existing, revision, &mut changes).await?;
    let hashes: BTreeMap<&str, &str> = apply
        .document
        .jobs
        .iter()
        .map(|j| (j.spec.name.as_str(), j.fingerprint.as_str()))
        .collect();
    let mut save = Sql::new("UPDATE job_document SET ");
    save.set([
        ("content_hash", apply.content_hash.into()),
        (
            "entry_hashes",
            serde_json::to_string(&hashes)
                .expect("a map of strings serialises")
                .into(),
        ),
        ("applied_at", now.into()),
    ]);
    document_key(&mut save, apply);
    tx.execute(save).await?;
    log_writes(&mut tx, revision, now).await?;
    tx.commit().await?;
    Ok(DocumentOutcome::Applied(changes))
}

fn document_key(q: &mut Sql, apply: &DocumentApply<'_>) {
    q.push(" WHERE data_id = ")
        .bind(apply.data_id)
        .push(" AND group_name = ")
        .bind(apply.group);
}

/// Locks the document's row and compares its content hash: `None` when this content was
/// applied already, otherwise the fingerprints of the entries last applied.
async fn compare_document(
    tx: &mut Tx,
    apply: &DocumentApply<'_>,
    now: DateTime<Utc>,
) -> Result<Option<HashMap<String, String>>, StoreError> {
    // Writing the row first locks it until the commit: a second instance applying the same
    // push waits here, then finds the hash already set.
    let mut touch = Sql::new("UPDATE job_document SET checked_at = ");
    touch.bind(now);
    document_key(&mut touch, apply);
    tx.execute(touch).await?;
    let mut read = Sql::new("SELECT content_hash, entry_hashes FROM job_document");
    document_key(&mut read, apply);
    let row = &tx.fetch_all(read).await?[0];
    let (stored_hash, entry_hashes): (String, String) = (row.at(0)?, row.at(1)?);
    if stored_hash == apply.content_hash {
        return Ok(None);
    }
    serde_json::from_str(&entry_hashes)
        .map(Some)
        .map_err(|e| StoreError::Corrupt(format!("job_document.entry_hashes: {e}")))
}

/// Creates or replaces the jobs the document names (an entry unchanged since the last
/// applied document is left alone) and marks them `NACOS`.
async fn write_entries(
    tx: &mut Tx,
    apply: &DocumentApply<'_>,
    previous: &HashMap<String, String>,
    existing: &HashMap<String, String>,
    revision: i64,
    changes: &mut DocumentChanges,
) -> Result<(), StoreError> {
    let nacos = JobSource::Nacos.as_str();
    let now = ms(apply.now);
    for entry in &apply.document.jobs {
        let name = entry.spec.name.as_str();
        match existing.get(name) {
            None => {
                insert_job(tx, &entry.spec, Some(apply.actor), now, revision).await?;
                changes.created.push(name.to_string());
            }
            Some(source) if source == nacos && previous.get(name) == Some(&entry.fingerprint) => {}
            Some(_) => {
                let spec = if entry.starts_at_creation {
                    &starting_at_creation(tx, &entry.spec).await?
                } else {
                    &entry.spec
                };
                replace_job(tx, spec, None, Some(apply.actor), now, revision).await?;
                changes.updated.push(name.to_string());
            }
        }
        let mut mark = Sql::new("UPDATE job_definition SET source = ");
        mark.bind(nacos)
            .push(" WHERE name = ")
            .bind(name)
            .push(" AND source <> ")
            .bind(nacos);
        tx.execute(mark).await?;
    }
    Ok(())
}

/// `spec`, a `FIXED_RATE` or `FIXED_DELAY` job's, with its first instant at the stored job's creation.
async fn starting_at_creation(tx: &mut Tx, spec: &JobSpec) -> Result<JobSpec, StoreError> {
    let mut q = Sql::new("SELECT created_at FROM job_definition WHERE name = ");
    q.bind(spec.name.as_str());
    let created: DateTime<Utc> = tx.fetch_all(q).await?[0].at(0)?;
    let mut spec = spec.clone();
    if let Timing::FixedRate { start, .. } | Timing::FixedDelay { start, .. } = &mut spec.timing {
        *start = whole_second(created);
    }
    Ok(spec)
}

/// Deletes the `NACOS` jobs the document no longer names (their executions stay).
async fn delete_unnamed(
    tx: &mut Tx,
    apply: &DocumentApply<'_>,
    existing: &HashMap<String, String>,
    revision: i64,
    changes: &mut DocumentChanges,
) -> Result<(), StoreError> {
    let nacos = JobSource::Nacos.as_str();
    let named: HashSet<&str> = apply
        .document
        .jobs
        .iter()
        .map(|j| j.spec.name.as_str())
        .collect();
    let mut gone: Vec<&String> = existing
        .iter()
        .filter(|(name, source)| *source == nacos && !named.contains(name.as_str()))
        .map(|(name, _)| name)
        .collect();
    gone.sort();
    let now = ms(apply.now);
    for name in gone {
        let mut q = Sql::new("DELETE FROM job_definition WHERE name = ");
        q.bind(name);
        tx.execute(q).await?;
        tombstone(tx, name, revision, now).await?;
        changes.deleted.push(name.clone());
    }
    if !changes.deleted.is_empty() {
        prune_tombstones(tx, now).await?;
    }
    Ok(())
}
