//! [`LogStore`] over SQL: what handlers logged, per execution, as their executors ship it
//! (docs/api.md, "Execution logs").
//!
//! A line is keyed by `(trace_id, seq)`, the executor's own numbering of the lines of one
//! execution, so a batch shipped again after an answer that was lost writes nothing twice,
//! and readers page forward by `seq`. The executor's last batch carries the end: how many
//! lines it kept and how many bytes it dropped past its bound. Every instance reads every
//! log: nothing lives on the executor or on the instance that received it.
//!
//! Every running handler ships its lines, so at a thousand executions a second a thousand
//! batches arrive each second. Batches that arrive together are committed together (the
//! store's group commit): one existence check of their executions, one statement per batch
//! (for its own count of new lines), one statement for the ends, one commit. Each batch is
//! answered only once that commit is durable, so a line acknowledged is a line stored.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::batch::{Queued, answer_all};
use super::sql::{Db, Sql};
use super::{MULTI_ROW, SqlStore, StoreError};

/// One line a handler logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Its number in the execution, from 1, in the order it was logged.
    pub seq: i64,
    pub at: DateTime<Utc>,
    /// `TRACE`, `DEBUG`, `INFO`, `WARN` or `ERROR`.
    pub level: String,
    pub message: String,
}

/// The executor's last word on an execution's log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEnd {
    /// Lines it kept (and shipped).
    pub lines: i64,
    /// Bytes past its per-execution bound, not kept.
    pub dropped_bytes: i64,
    pub at: DateTime<Utc>,
}

/// Lines after a cursor, and the end when the executor has sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    pub end: Option<LogEnd>,
}

#[async_trait]
pub trait LogStore: Send + Sync {
    /// Stores `lines` of the execution `trace_id` and, when given, its end, atomically and
    /// durably before it returns. A line stored already (same `seq`) is left as it is. The
    /// number of lines written; `None` when there is no such execution (nothing is stored).
    async fn append_log(
        &self,
        trace_id: &str,
        lines: Vec<LogLine>,
        end: Option<LogEnd>,
    ) -> Result<Option<u64>, StoreError>;
    /// The lines numbered after `after`, in order, at most `limit`, with the end.
    async fn read_log(&self, trace_id: &str, after: i64, limit: u32)
    -> Result<LogPage, StoreError>;
}

#[async_trait]
impl LogStore for SqlStore {
    async fn append_log(
        &self,
        trace_id: &str,
        lines: Vec<LogLine>,
        end: Option<LogEnd>,
    ) -> Result<Option<u64>, StoreError> {
        let db = self.db.clone();
        let append = Append {
            trace_id: trace_id.to_string(),
            lines,
            end,
        };
        self.log_appends
            .submit(append, move |batch| write_appends(db.clone(), batch))
            .await
    }

    async fn read_log(
        &self,
        trace_id: &str,
        after: i64,
        limit: u32,
    ) -> Result<LogPage, StoreError> {
        // The end first: lines are all stored before it, so an end read before the lines
        // never claims a line this page missed.
        let mut q = Sql::new(
            "SELECT line_count, dropped_bytes, at FROM job_execution_log_end WHERE trace_id = ",
        );
        q.bind(trace_id);
        let end = match self.db.fetch_optional(q).await? {
            Some(row) => Some(LogEnd {
                lines: row.at(0)?,
                dropped_bytes: row.at(1)?,
                at: row.at(2)?,
            }),
            None => None,
        };
        let mut q =
            Sql::new("SELECT seq, at, level, message FROM job_execution_log WHERE trace_id = ");
        q.bind(trace_id)
            .push(" AND seq > ")
            .bind(after)
            .push(" ORDER BY seq LIMIT ")
            .bind(i64::from(limit));
        let lines = self
            .db
            .fetch_all(q)
            .await?
            .iter()
            .map(|row| {
                Ok(LogLine {
                    seq: row.at(0)?,
                    at: row.at(1)?,
                    level: row.at(2)?,
                    message: row.at(3)?,
                })
            })
            .collect::<Result<_, StoreError>>()?;
        Ok(LogPage { lines, end })
    }
}

/// One execution's batch waiting for its group commit.
pub(crate) struct Append {
    trace_id: String,
    lines: Vec<LogLine>,
    end: Option<LogEnd>,
}

/// Writes the batches of a group in one transaction and answers each.
async fn write_appends(db: Db, batch: Vec<Queued<Append, Option<u64>>>) {
    let appends: Vec<&Append> = batch.iter().map(|q| &q.write).collect();
    let answers = insert_appends(&db, &appends).await;
    answer_all(batch, answers);
}

async fn insert_appends(
    db: &Db,
    appends: &[&Append],
) -> Result<Vec<Result<Option<u64>, StoreError>>, StoreError> {
    let backend = db.backend();
    let mut tx = db.begin().await?;
    let mut known = std::collections::HashSet::new();
    for chunk in appends.chunks(MULTI_ROW) {
        let mut q = Sql::new("SELECT trace_id FROM job_execution WHERE trace_id IN ");
        q.list(chunk.iter().map(|a| a.trace_id.as_str()));
        for row in tx.fetch_all(q).await? {
            known.insert(row.at::<String>(0)?);
        }
    }
    let mut answers = Vec::with_capacity(appends.len());
    for a in appends {
        if !known.contains(&a.trace_id) {
            answers.push(Ok(None));
            continue;
        }
        let mut written = 0;
        for chunk in a.lines.chunks(MULTI_ROW) {
            let mut q = Sql::new(backend.insert_ignore());
            q.push("job_execution_log ").values(chunk.iter().map(|l| {
                vec![
                    ("trace_id", a.trace_id.as_str().into()),
                    ("seq", l.seq.into()),
                    ("at", l.at.into()),
                    ("level", l.level.as_str().into()),
                    ("message", l.message.as_str().into()),
                ]
            }));
            written += tx.execute(q).await?;
        }
        answers.push(Ok(Some(written)));
    }
    let ends: Vec<(&str, &LogEnd)> = appends
        .iter()
        .filter(|a| known.contains(&a.trace_id))
        .filter_map(|a| a.end.as_ref().map(|e| (a.trace_id.as_str(), e)))
        .collect();
    for chunk in ends.chunks(MULTI_ROW) {
        let mut q = Sql::new(backend.insert_ignore());
        q.push("job_execution_log_end ")
            .values(chunk.iter().map(|(trace_id, end)| {
                vec![
                    ("trace_id", (*trace_id).into()),
                    ("line_count", end.lines.into()),
                    ("dropped_bytes", end.dropped_bytes.into()),
                    ("at", end.at.into()),
                ]
            }));
        tx.execute(q).await?;
    }
    tx.commit().await?;
    Ok(answers)
}
