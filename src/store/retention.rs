//! [`RetentionStore`] over SQL: final executions deleted chunk by chunk along an index, with
//! rests between chunks, so the purge never holds the database for long.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::Sql;
use super::{RetentionStore, SqlStore, StoreError, ms};
use crate::jobs::ExecutionStatus;

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

#[async_trait]
impl RetentionStore for SqlStore {
    async fn purge_executions_before(
        &self,
        before: DateTime<Utc>,
        pace: PurgePace,
    ) -> Result<u64, StoreError> {
        self.purge_in_chunks(None, before, pace).await
    }

    async fn cap_job_executions(
        &self,
        job: &str,
        keep: u32,
        pace: PurgePace,
    ) -> Result<u64, StoreError> {
        // The newest row beyond the `keep` newest: it and everything older goes.
        let mut q = Sql::new("SELECT trigger_time, id FROM job_execution WHERE job_name = ");
        q.bind(job)
            .push(" ORDER BY trigger_time DESC, id DESC LIMIT 1 OFFSET ")
            .bind(keep as i64);
        let Some(row) = self.db.fetch_optional(q).await? else {
            return Ok(0);
        };
        let (t, id): (DateTime<Utc>, i64) = (row.at(0)?, row.at(1)?);
        // Everything up to (t, id) inclusive: strictly before (t, id + 1).
        self.purge_in_chunks(Some((job, id + 1)), t, pace).await
    }
}

type Key = (DateTime<Utc>, i64);

impl SqlStore {
    /// Deletes final rows ordered before (`before`, `before_id`) in (trigger_time, id) order,
    /// of one job when `job` is given, `pace.chunk` at a time with `pace`'s rest after each.
    /// A keyset cursor walks the index, so rows that stay (PENDING, RUNNING) are passed over
    /// once, not rescanned by every chunk. `before_id` None means "trigger_time < before".
    async fn purge_in_chunks(
        &self,
        job: Option<(&str, i64)>,
        before: DateTime<Utc>,
        pace: PurgePace,
    ) -> Result<u64, StoreError> {
        let before = ms(before);
        let chunk = pace.chunk.max(1);
        // The range being purged, and the cursor: rows after `from` only.
        let range = |q: &mut Sql, from: Option<Key>| {
            match job {
                Some((name, before_id)) => {
                    q.push(" job_name = ")
                        .bind(name)
                        .push(" AND (trigger_time < ")
                        .bind(before)
                        .push(" OR (trigger_time = ")
                        .bind(before)
                        .push(" AND id < ")
                        .bind(before_id)
                        .push("))");
                }
                None => {
                    q.push(" trigger_time < ").bind(before);
                }
            }
            if let Some((t, id)) = from {
                q.push(" AND (trigger_time > ")
                    .bind(t)
                    .push(" OR (trigger_time = ")
                    .bind(t)
                    .push(" AND id > ")
                    .bind(id)
                    .push("))");
            }
        };
        let finals = ExecutionStatus::ALL
            .into_iter()
            .filter(|s| s.is_final())
            .map(|s| s.as_str());
        // Handler logs go with their executions; a database that never stored one is not
        // asked for them chunk after chunk.
        let logs = self
            .db
            .fetch_optional(Sql::new(
                "SELECT trace_id FROM job_execution_log_batch LIMIT 1",
            ))
            .await?
            .is_some();
        let mut from: Option<Key> = None;
        let mut purged = 0;
        loop {
            let started = std::time::Instant::now();
            let mut q = Sql::new("SELECT trigger_time, id FROM job_execution WHERE");
            range(&mut q, from);
            q.push(" ORDER BY trigger_time, id LIMIT 1 OFFSET ")
                .bind(chunk as i64 - 1);
            let bound: Option<Key> = match self.db.fetch_optional(q).await? {
                Some(row) => Some((row.at(0)?, row.at(1)?)),
                None => None,
            };
            // This chunk: the final rows of the range up to the bound.
            let this_chunk = |q: &mut Sql| {
                range(q, from);
                if let Some((t, id)) = bound {
                    q.push(" AND (trigger_time < ")
                        .bind(t)
                        .push(" OR (trigger_time = ")
                        .bind(t)
                        .push(" AND id <= ")
                        .bind(id)
                        .push("))");
                }
                q.push(" AND status IN ").list(finals.clone());
            };
            if logs {
                for table in ["job_execution_log_batch", "job_execution_log_end"] {
                    let mut l = Sql::new(&format!(
                        "DELETE FROM {table} WHERE trace_id IN (SELECT trace_id FROM job_execution WHERE"
                    ));
                    this_chunk(&mut l);
                    l.push(")");
                    self.db.execute(l).await?;
                }
            }
            let mut d = Sql::new("DELETE FROM job_execution WHERE");
            this_chunk(&mut d);
            let n = self.db.execute(d).await?;
            pace.purged.increment(n);
            purged += n;
            match bound {
                Some(b) => from = Some(b),
                None => return Ok(purged),
            }
            tokio::time::sleep(pace.pause_after(started.elapsed())).await;
        }
    }
}
