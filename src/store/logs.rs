//! [`LogStore`] over SQL: what handlers logged, per execution, as their executors ship it
//! (docs/api.md, "Execution logs").
//!
//! A line is numbered by the executor (`seq`, from 1, in the order the handler logged it).
//! Executors ship an execution's lines in order, one batch after the other, so what is
//! stored of an execution is always its lines up to some `seq`: a batch keeps only its lines
//! past that point (a batch shipped again after an answer that was lost writes nothing
//! twice) and is stored as **one row** holding those lines, keyed by `(trace_id, last_seq)`.
//! A row per line cost an index entry, a row header and a bound value per line: at a
//! thousand executions a second of ten lines each, MariaDB spent more on the lines than on
//! the fires (docs/benchmarks.md, "Execution logs"). Readers page forward by `seq` over the
//! rows whose `last_seq` is past their cursor. The executor's last batch carries the end:
//! how many lines it kept and how many bytes it dropped past its bound. Every instance reads
//! every log: nothing lives on the executor or on the instance that received it.
//!
//! Every running handler ships its lines, so at a thousand executions a second a thousand
//! batches arrive each second, spread over the second. Batches that arrive within
//! [`LOG_LINGER`] of each other are committed together (the store's group commit): one read
//! of their executions and of how far each log is stored, one statement for the rows, one
//! for the ends, one commit. Each batch is answered only once that commit is durable, so a
//! line acknowledged is a line stored.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::batch::{Queued, answer_all};
use super::conflict;
use super::sql::{Db, Sql};
use super::{MULTI_ROW, SqlStore, StoreError};

pub use crate::jobs::log::{CheckedLog, LogEnd, LogLine};

/// Lines after a cursor, and the end when the executor has sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogPage {
    pub lines: Vec<LogLine>,
    pub end: Option<LogEnd>,
}

#[async_trait]
pub trait LogStore: Send + Sync {
    /// Stores the lines of the execution `trace_id` and, when given, its end, atomically and
    /// durably before it returns, and counts them in the log metrics. A line stored already
    /// (same `seq`) is left as it is. The number of lines written; `None` when there is no
    /// such execution (nothing is stored).
    async fn append_log(&self, trace_id: &str, log: CheckedLog) -> Result<Option<u64>, StoreError>;
    /// The lines numbered after `after`, in order, at most `limit`, with the end.
    async fn read_log(&self, trace_id: &str, after: i64, limit: u32)
    -> Result<LogPage, StoreError>;
}

/// How long the first batch of a group waits for others: an executor is answered this much
/// later, and a thousand batches a second spread over the second share a commit by ten.
pub(crate) const LOG_LINGER: Duration = Duration::from_millis(10);

/// Rows a log read fetches at a time (each holds one batch's lines).
const READ_ROWS: u32 = 16;

#[async_trait]
impl LogStore for SqlStore {
    async fn append_log(&self, trace_id: &str, log: CheckedLog) -> Result<Option<u64>, StoreError> {
        let db = self.db.clone();
        let append = Append {
            trace_id: trace_id.to_string(),
            bytes: log.bytes(),
            lines: log.lines,
            end: log.end,
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
        let limit = limit as usize;
        let mut lines: Vec<LogLine> = Vec::new();
        let mut through = after;
        while lines.len() < limit {
            let mut q =
                Sql::new("SELECT last_seq, body FROM job_execution_log_batch WHERE trace_id = ");
            q.bind(trace_id)
                .push(" AND last_seq > ")
                .bind(through)
                .push(" ORDER BY last_seq LIMIT ")
                .bind(i64::from(READ_ROWS));
            let rows = self.db.fetch_all(q).await?;
            for row in &rows {
                through = row.at(0)?;
                let body: String = row.at(1)?;
                lines.extend(decode(&body)?.into_iter().filter(|l| l.seq > after));
            }
            if rows.len() < READ_ROWS as usize {
                break;
            }
        }
        lines.truncate(limit);
        Ok(LogPage { lines, end })
    }
}

/// One execution's batch waiting for its group commit.
pub(crate) struct Append {
    trace_id: String,
    /// Message bytes of its lines (what the metrics count).
    bytes: u64,
    lines: Vec<LogLine>,
    end: Option<LogEnd>,
}

/// Writes the batches of a group in one transaction and answers each.
async fn write_appends(db: Db, batch: Vec<Queued<Append, Option<u64>>>) {
    let appends: Vec<&Append> = batch.iter().map(|q| &q.write).collect();
    let answers = conflict::retrying(|| insert_appends(&db, &appends)).await;
    if let Ok(answers) = &answers {
        for (append, answer) in appends.iter().zip(answers) {
            if let Ok(Some(written)) = answer {
                metrics::counter!("scheduler_execution_log_lines_total").increment(*written);
                metrics::counter!("scheduler_execution_log_bytes_total").increment(append.bytes);
            }
        }
    }
    answer_all(batch, answers);
}

/// A stored batch: its lines as `[[seq, at (Unix milliseconds), level, message], …]`, the
/// form the migration that introduced these rows wrote too.
type Stored<'a> = (i64, i64, &'a str, &'a str);

fn encode(lines: &[&LogLine]) -> String {
    let rows: Vec<Stored> = lines
        .iter()
        .map(|l| {
            (
                l.seq,
                l.at.timestamp_millis(),
                l.level.as_str(),
                l.message.as_str(),
            )
        })
        .collect();
    serde_json::to_string(&rows).expect("log lines serialise")
}

fn decode(body: &str) -> Result<Vec<LogLine>, StoreError> {
    let rows: Vec<(i64, i64, String, String)> = serde_json::from_str(body)
        .map_err(|e| StoreError::Corrupt(format!("a stored log batch: {e}")))?;
    rows.into_iter()
        .map(|(seq, at, level, message)| {
            let at = DateTime::<Utc>::from_timestamp_millis(at)
                .ok_or_else(|| StoreError::Corrupt(format!("a stored log line's time: {at}")))?;
            Ok(LogLine {
                seq,
                at,
                level,
                message,
            })
        })
        .collect()
}

async fn insert_appends(
    db: &Db,
    appends: &[&Append],
) -> Result<Vec<Result<Option<u64>, StoreError>>, StoreError> {
    let backend = db.backend();
    let mut tx = db.begin().await?;
    // Each known execution, and the seq its stored log reaches (0 for none yet).
    let mut through: HashMap<String, i64> = HashMap::new();
    for chunk in appends.chunks(MULTI_ROW) {
        let mut q = Sql::new(
            "SELECT e.trace_id, (SELECT MAX(b.last_seq) FROM job_execution_log_batch b \
             WHERE b.trace_id = e.trace_id) FROM job_execution e WHERE e.trace_id IN ",
        );
        q.list(chunk.iter().map(|a| a.trace_id.as_str()));
        for row in tx.fetch_all(q).await? {
            let max: Option<i64> = row.at(1)?;
            through.insert(row.at(0)?, max.unwrap_or(0));
        }
    }
    let mut answers = Vec::with_capacity(appends.len());
    let mut rows: Vec<(&str, i64, i64, String)> = Vec::new();
    for a in appends {
        let Some(max) = through.get(a.trace_id.as_str()).copied() else {
            answers.push(Ok(None));
            continue;
        };
        let mut lines: Vec<&LogLine> = a.lines.iter().collect();
        lines.sort_by_key(|l| l.seq);
        lines.dedup_by_key(|l| l.seq);
        let runs = match lines.first() {
            None => Vec::new(),
            // In order, as executors ship: every line is new.
            Some(first) if first.seq > max => vec![lines],
            // Shipped again, or out of order: only the lines no stored batch holds.
            Some(first) => {
                let mut q = Sql::new(
                    "SELECT first_seq, last_seq FROM job_execution_log_batch WHERE trace_id = ",
                );
                q.bind(a.trace_id.as_str())
                    .push(" AND last_seq >= ")
                    .bind(first.seq);
                let mut held = Vec::new();
                for row in tx.fetch_all(q).await? {
                    held.push((row.at::<i64>(0)?, row.at::<i64>(1)?));
                }
                held.extend(
                    rows.iter()
                        .filter(|r| r.0 == a.trace_id)
                        .map(|r| (r.1, r.2)),
                );
                unheld_runs(lines, &held)
            }
        };
        let mut written = 0;
        for run in runs {
            let (first, last) = (run[0].seq, run[run.len() - 1].seq);
            written += run.len() as u64;
            rows.push((a.trace_id.as_str(), first, last, encode(&run)));
            through.insert(a.trace_id.clone(), max.max(last));
        }
        answers.push(Ok(Some(written)));
    }
    for chunk in statements(&rows) {
        let mut q = Sql::new(backend.insert_ignore());
        q.push("job_execution_log_batch ").values(chunk.iter().map(
            |(trace_id, first, last, body)| {
                vec![
                    ("trace_id", (*trace_id).into()),
                    ("last_seq", (*last).into()),
                    ("first_seq", (*first).into()),
                    ("body", body.as_str().into()),
                ]
            },
        ));
        tx.execute(q).await?;
    }
    let ends: Vec<(&str, &LogEnd)> = appends
        .iter()
        .filter(|a| through.contains_key(a.trace_id.as_str()))
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

/// The most a statement carries of log text: batches are up to 1 MiB each, and a server
/// refuses a statement past its `max_allowed_packet` (16 MiB by default on MariaDB).
const STATEMENT_BYTES: usize = 4 << 20;

/// `rows` cut into statements of at most [`MULTI_ROW`] rows and about [`STATEMENT_BYTES`].
fn statements<'r, 'a>(
    rows: &'r [(&'a str, i64, i64, String)],
) -> impl Iterator<Item = &'r [(&'a str, i64, i64, String)]> {
    let mut rest = rows;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let mut bytes = 0;
        let n = rest
            .iter()
            .take(MULTI_ROW)
            .take_while(|r| {
                let fits = bytes == 0 || bytes + r.3.len() <= STATEMENT_BYTES;
                bytes += r.3.len();
                fits
            })
            .count();
        let (this, next) = rest.split_at(n);
        rest = next;
        Some(this)
    })
}

/// The lines (in `seq` order) that no held batch (`(first_seq, last_seq)`, disjoint) covers,
/// in runs that no held batch falls inside, so the batches stored stay disjoint.
fn unheld_runs<'a>(lines: Vec<&'a LogLine>, held: &[(i64, i64)]) -> Vec<Vec<&'a LogLine>> {
    let mut runs: Vec<Vec<&LogLine>> = Vec::new();
    let mut previous: Option<i64> = None;
    for line in lines {
        if held.iter().any(|&(f, l)| (f..=l).contains(&line.seq)) {
            continue;
        }
        let split = match (previous, runs.last()) {
            (Some(p), Some(_)) => held.iter().any(|&(f, _)| p < f && f < line.seq),
            _ => true,
        };
        if split {
            runs.push(Vec::new());
        }
        runs.last_mut().expect("a run").push(line);
        previous = Some(line.seq);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(seq: i64) -> LogLine {
        LogLine {
            seq,
            at: DateTime::<Utc>::from_timestamp_millis(1_796_000_000_123).unwrap(),
            level: "INFO".into(),
            message: format!("line {seq}"),
        }
    }

    fn seqs(runs: &[Vec<&LogLine>]) -> Vec<Vec<i64>> {
        runs.iter()
            .map(|r| r.iter().map(|l| l.seq).collect())
            .collect()
    }

    #[test]
    fn a_batch_keeps_the_lines_no_stored_batch_holds_in_runs_between_them() {
        let lines: Vec<LogLine> = (1..=12).map(line).collect();
        let held = [(3, 4), (8, 10)];
        let runs = unheld_runs(lines.iter().collect(), &held);
        assert_eq!(seqs(&runs), vec![vec![1, 2], vec![5, 6, 7], vec![11, 12]]);
        assert!(unheld_runs(lines.iter().collect(), &[(1, 12)]).is_empty());
        assert_eq!(seqs(&unheld_runs(lines.iter().collect(), &[])).len(), 1);
    }

    #[test]
    fn statements_stay_under_the_packet_bound() {
        let row = |len: usize| ("t", 1, 1, "x".repeat(len));
        let rows = vec![row(3 << 20), row(1 << 20), row(1), row(4 << 20), row(10)];
        let sizes: Vec<usize> = statements(&rows).map(<[_]>::len).collect();
        assert_eq!(sizes, [2, 1, 1, 1]);
        let many: Vec<_> = (0..1200).map(|_| row(10)).collect();
        let sizes: Vec<usize> = statements(&many).map(<[_]>::len).collect();
        assert_eq!(sizes, [500, 500, 200]);
    }

    #[test]
    fn a_stored_batch_reads_back_as_it_was_shipped() {
        let lines: Vec<LogLine> = vec![
            line(1),
            LogLine {
                message: "订单 \"17\"\nskipped".into(),
                level: "WARN".into(),
                ..line(2)
            },
        ];
        let body = encode(&lines.iter().collect::<Vec<_>>());
        assert_eq!(decode(&body).unwrap(), lines);
    }

    #[test]
    fn batches_the_migration_carried_over_read_back() {
        // What MariaDB's and SQLite's JSON_ARRAY write for a line stored one to a row.
        let body = r#"[[7, 1796000000123, "ERROR", "boom"]]"#;
        assert_eq!(
            decode(body).unwrap(),
            vec![LogLine {
                level: "ERROR".into(),
                message: "boom".into(),
                ..line(7)
            }]
        );
    }
}
