//! [`AuditStore`] over SQL: the audit trail (see [`crate::audit`]), read newest first and
//! purged by age in chunks like executions.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::sql::{Row, Sql};
use super::{Listing, PageRequest, SqlStore, StoreError, ms};
use crate::audit::{AuditAction, AuditEntry};

/// Filters of `GET /api/v1/audit`; every one that is set must match.
#[derive(Debug, Clone, Default)]
pub struct AuditFilter {
    pub actor: Option<String>,
    pub action: Option<AuditAction>,
    pub namespace: Option<String>,
    pub target: Option<String>,
    /// Entries at or after this instant.
    pub from: Option<DateTime<Utc>>,
    /// Entries before this instant.
    pub to: Option<DateTime<Utc>>,
}

/// The audit trail.
#[async_trait]
pub trait AuditStore: Send + Sync {
    async fn record_audit(&self, entry: &AuditEntry) -> Result<(), StoreError>;
    /// A page of the entries that match, newest first.
    async fn list_audit(
        &self,
        filter: &AuditFilter,
        page: PageRequest,
    ) -> Result<Listing<AuditEntry>, StoreError>;
    /// Deletes the entries before `before`, `chunk` at a time; how many.
    async fn purge_audit_before(
        &self,
        before: DateTime<Utc>,
        chunk: u32,
    ) -> Result<u64, StoreError>;
}

#[async_trait]
impl AuditStore for SqlStore {
    async fn record_audit(&self, e: &AuditEntry) -> Result<(), StoreError> {
        let mut q = Sql::new("INSERT INTO audit_log ");
        q.values([vec![
            ("at", e.at.into()),
            ("actor", e.actor.as_str().into()),
            ("action", e.action.as_str().into()),
            ("namespace", e.namespace.as_deref().into()),
            ("target", truncated(&e.target, 255).into()),
            ("detail", e.detail.as_ref().map(|d| d.to_string()).into()),
        ]]);
        self.db.execute(q).await?;
        Ok(())
    }

    async fn list_audit(
        &self,
        f: &AuditFilter,
        page: PageRequest,
    ) -> Result<Listing<AuditEntry>, StoreError> {
        let mut count = Sql::new("SELECT COUNT(*) FROM audit_log WHERE 1 = 1");
        push_filter(&mut count, f);
        let total: i64 = self.db.fetch_all(count).await?[0].at(0)?;
        let mut q = Sql::new("SELECT * FROM audit_log WHERE 1 = 1");
        push_filter(&mut q, f);
        q.push(" ORDER BY at DESC, id DESC LIMIT ")
            .bind(i64::from(page.size))
            .push(" OFFSET ")
            .bind(page.offset());
        let items = self
            .db
            .fetch_all(q)
            .await?
            .iter()
            .map(entry)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Listing {
            items,
            total,
            capped: false,
        })
    }

    async fn purge_audit_before(
        &self,
        before: DateTime<Utc>,
        chunk: u32,
    ) -> Result<u64, StoreError> {
        let mut purged = 0;
        loop {
            let mut ids = Sql::new("SELECT id FROM audit_log WHERE at < ");
            ids.bind(ms(before))
                .push(" ORDER BY id LIMIT ")
                .bind(i64::from(chunk.max(1)));
            let ids: Vec<i64> = self
                .db
                .fetch_all(ids)
                .await?
                .iter()
                .map(|r| r.at(0))
                .collect::<Result<_, _>>()?;
            if ids.is_empty() {
                return Ok(purged);
            }
            let mut q = Sql::new("DELETE FROM audit_log WHERE id IN ");
            q.list(ids);
            purged += self.db.execute(q).await?;
        }
    }
}

/// Stores `entry`; a failure is logged with the entry and counted
/// (`audit_write_failures_total`), never returned: the trail never fails the change it records.
pub async fn record_audit(store: &dyn AuditStore, entry: &AuditEntry) {
    if let Err(e) = store.record_audit(entry).await {
        metrics::counter!("audit_write_failures_total").increment(1);
        let shown = serde_json::to_string(entry).unwrap_or_default();
        tracing::error!(error = %e, entry = %shown, "cannot record an audit entry");
    }
}

fn push_filter(q: &mut Sql, f: &AuditFilter) {
    if let Some(a) = &f.actor {
        q.push(" AND actor = ").bind(a);
    }
    if let Some(a) = f.action {
        q.push(" AND action = ").bind(a.as_str());
    }
    if let Some(n) = &f.namespace {
        q.push(" AND namespace = ").bind(n);
    }
    if let Some(t) = &f.target {
        q.push(" AND target = ").bind(t);
    }
    if let Some(t) = f.from {
        q.push(" AND at >= ").bind(t);
    }
    if let Some(t) = f.to {
        q.push(" AND at < ").bind(t);
    }
}

fn truncated(text: &str, max: usize) -> String {
    text.chars().take(max).collect()
}

fn entry(row: &Row) -> Result<AuditEntry, StoreError> {
    let id: i64 = row.get("id")?;
    let corrupt = |field: &str, m: String| {
        StoreError::Corrupt(format!("audit entry {id}: column {field}: {m}"))
    };
    let action =
        AuditAction::parse(&row.get::<String>("action")?).map_err(|m| corrupt("action", m))?;
    let detail = row
        .get::<Option<String>>("detail")?
        .map(|t| serde_json::from_str(&t))
        .transpose()
        .map_err(|e| corrupt("detail", e.to_string()))?;
    Ok(AuditEntry {
        at: row.get("at")?,
        actor: row.get("actor")?,
        action,
        namespace: row.get("namespace")?,
        target: row.get("target")?,
        detail,
    })
}
