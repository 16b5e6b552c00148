//! [`BackfillStore`] over SQL: backfills, and the instants they record with their cursor in
//! one transaction (see [`backfill`](crate::jobs::backfill)).

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::executions::insert_executions;
use super::sql::{Row, Sql};
use super::{SqlStore, StoreError};
use crate::jobs::backfill::{Backfill, BackfillStatus};
use crate::jobs::{Execution, NewExecution, choose};

/// Backfills of past instants.
#[async_trait]
pub trait BackfillStore: Send + Sync {
    /// Starts `b`; when the job has a backfill of that id already, answers it as it is and
    /// starts nothing (`false`).
    async fn start_backfill(&self, b: &Backfill) -> Result<(Backfill, bool), StoreError>;
    async fn get_backfill(&self, job: &str, id: &str) -> Result<Option<Backfill>, StoreError>;
    /// The job's backfills, newest first (at most `limit`).
    async fn list_backfills(&self, job: &str, limit: u32) -> Result<Vec<Backfill>, StoreError>;
    /// Every `RUNNING` backfill.
    async fn running_backfills(&self) -> Result<Vec<Backfill>, StoreError>;
    /// Ends a `RUNNING` backfill as `CANCELLED`; the backfill as it is then (`None`: no such
    /// backfill).
    async fn cancel_backfill(
        &self,
        job: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Backfill>, StoreError>;
    /// Records `rows` (the instants from `b.next` on, `instants` of them) and moves the
    /// cursor to `next` (`None`: every instant recorded, the backfill `DONE`), in one
    /// transaction, only while the backfill is still `RUNNING` at `b.next`. The rows as
    /// recorded; `None` when the backfill moved or ended meanwhile (nothing is written).
    async fn record_backfill(
        &self,
        b: &Backfill,
        next: Option<DateTime<Utc>>,
        instants: u32,
        rows: &[NewExecution],
        now: DateTime<Utc>,
    ) -> Result<Option<Vec<Execution>>, StoreError>;
}

#[async_trait]
impl BackfillStore for SqlStore {
    async fn start_backfill(&self, b: &Backfill) -> Result<(Backfill, bool), StoreError> {
        let mut insert = Sql::new(self.db.backend().insert_ignore());
        insert.push("job_backfill ").values([vec![
            ("job_name", b.job_name.as_str().into()),
            ("backfill_id", b.backfill_id.as_str().into()),
            ("from_time", b.from.into()),
            ("to_time", b.to.into()),
            ("max_per_second", b.max_per_second.into()),
            ("fires", b.fires.into()),
            ("done", b.done.into()),
            ("next_time", b.next.into()),
            ("status", b.status.as_str().into()),
            ("created_at", b.created_at.into()),
            ("created_by", b.created_by.as_deref().into()),
            ("updated_at", b.updated_at.into()),
        ]]);
        let created = self.db.execute(insert).await? == 1;
        let stored = self
            .get_backfill(&b.job_name, &b.backfill_id)
            .await?
            .ok_or_else(|| StoreError::Corrupt("a backfill just written is gone".into()))?;
        Ok((stored, created))
    }

    async fn get_backfill(&self, job: &str, id: &str) -> Result<Option<Backfill>, StoreError> {
        let mut q = Sql::new("SELECT * FROM job_backfill WHERE job_name = ");
        q.bind(job).push(" AND backfill_id = ").bind(id);
        self.db
            .fetch_optional(q)
            .await?
            .as_ref()
            .map(backfill)
            .transpose()
    }

    async fn list_backfills(&self, job: &str, limit: u32) -> Result<Vec<Backfill>, StoreError> {
        let mut q = Sql::new("SELECT * FROM job_backfill WHERE job_name = ");
        q.bind(job)
            .push(" ORDER BY created_at DESC, backfill_id LIMIT ")
            .bind(limit);
        self.db.fetch_all(q).await?.iter().map(backfill).collect()
    }

    async fn running_backfills(&self) -> Result<Vec<Backfill>, StoreError> {
        let q = Sql::new("SELECT * FROM job_backfill WHERE status = 'RUNNING' ORDER BY created_at");
        self.db.fetch_all(q).await?.iter().map(backfill).collect()
    }

    async fn cancel_backfill(
        &self,
        job: &str,
        id: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<Backfill>, StoreError> {
        let mut q = Sql::new("UPDATE job_backfill SET ");
        q.set([
            ("status", BackfillStatus::Cancelled.as_str().into()),
            ("updated_at", now.into()),
        ]);
        q.push(" WHERE job_name = ")
            .bind(job)
            .push(" AND backfill_id = ")
            .bind(id)
            .push(" AND status = 'RUNNING'");
        self.db.execute(q).await?;
        self.get_backfill(job, id).await
    }

    async fn record_backfill(
        &self,
        b: &Backfill,
        next: Option<DateTime<Utc>>,
        instants: u32,
        rows: &[NewExecution],
        now: DateTime<Utc>,
    ) -> Result<Option<Vec<Execution>>, StoreError> {
        let Some(at) = b.next else {
            return Ok(None);
        };
        let status = match next {
            Some(_) => BackfillStatus::Running,
            None => BackfillStatus::Done,
        };
        let mut tx = self.db.begin().await?;
        let mut cursor = Sql::new("UPDATE job_backfill SET ");
        cursor.set([
            ("next_time", next.into()),
            ("status", status.as_str().into()),
            ("updated_at", now.into()),
        ]);
        cursor
            .push(", done = done + ")
            .bind(instants)
            .push(" WHERE job_name = ")
            .bind(&b.job_name)
            .push(" AND backfill_id = ")
            .bind(&b.backfill_id)
            .push(" AND status = 'RUNNING' AND next_time = ")
            .bind(at);
        if tx.execute(cursor).await? == 0 {
            tx.rollback().await?;
            return Ok(None);
        }
        let rows: Vec<&NewExecution> = rows.iter().collect();
        let recorded = insert_executions(&mut tx, &rows).await?;
        tx.commit().await?;
        Ok(Some(recorded))
    }
}

fn backfill(row: &Row) -> Result<Backfill, StoreError> {
    let uint = |field: &str| -> Result<u32, StoreError> {
        let v: i32 = row.get(field)?;
        u32::try_from(v).map_err(|e| StoreError::Corrupt(format!("job_backfill.{field}: {e}")))
    };
    let status: String = row.get("status")?;
    Ok(Backfill {
        job_name: row.get("job_name")?,
        backfill_id: row.get("backfill_id")?,
        from: row.get("from_time")?,
        to: row.get("to_time")?,
        max_per_second: uint("max_per_second")?,
        fires: uint("fires")?,
        done: uint("done")?,
        next: row.get("next_time")?,
        status: choose(&status)
            .map_err(|m| StoreError::Corrupt(format!("job_backfill.status: {m}")))?,
        created_at: row.get("created_at")?,
        created_by: row.get("created_by")?,
        updated_at: row.get("updated_at")?,
    })
}
