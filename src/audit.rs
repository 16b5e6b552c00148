//! The audit trail (docs/api.md, "Audit trail"): who did what to which job, execution or
//! token, and when. Every write the API and the Nacos jobs document make is recorded after it
//! took effect, with its actor (a token's name, a proxied user, `nacos`, or `anonymous` with
//! authentication off), the namespace it acted in, its target and what it changed.
//!
//! An entry is written after the change it records, not in the change's transaction: the
//! trail never holds a write up or makes it fail. A write whose entry cannot be stored is
//! logged at ERROR with the entry and counted (`audit_write_failures_total`;
//! [`record`](crate::store::record_audit)).

use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

/// What was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AuditAction {
    JobCreated,
    JobUpdated,
    JobDeleted,
    JobEnabled,
    JobDisabled,
    JobTriggered,
    ExecutionRetried,
    ExecutionCancelled,
    BackfillStarted,
    BackfillCancelled,
    TokenCreated,
    TokenRotated,
    TokenRevoked,
    NacosDocumentApplied,
}

impl AuditAction {
    pub const ALL: [Self; 14] = [
        Self::JobCreated,
        Self::JobUpdated,
        Self::JobDeleted,
        Self::JobEnabled,
        Self::JobDisabled,
        Self::JobTriggered,
        Self::ExecutionRetried,
        Self::ExecutionCancelled,
        Self::BackfillStarted,
        Self::BackfillCancelled,
        Self::TokenCreated,
        Self::TokenRotated,
        Self::TokenRevoked,
        Self::NacosDocumentApplied,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::JobCreated => "JOB_CREATED",
            Self::JobUpdated => "JOB_UPDATED",
            Self::JobDeleted => "JOB_DELETED",
            Self::JobEnabled => "JOB_ENABLED",
            Self::JobDisabled => "JOB_DISABLED",
            Self::JobTriggered => "JOB_TRIGGERED",
            Self::ExecutionRetried => "EXECUTION_RETRIED",
            Self::ExecutionCancelled => "EXECUTION_CANCELLED",
            Self::BackfillStarted => "BACKFILL_STARTED",
            Self::BackfillCancelled => "BACKFILL_CANCELLED",
            Self::TokenCreated => "TOKEN_CREATED",
            Self::TokenRotated => "TOKEN_ROTATED",
            Self::TokenRevoked => "TOKEN_REVOKED",
            Self::NacosDocumentApplied => "NACOS_DOCUMENT_APPLIED",
        }
    }

    pub fn parse(raw: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|a| a.as_str() == raw)
            .ok_or_else(|| {
                let all: Vec<&str> = Self::ALL.iter().map(|a| a.as_str()).collect();
                format!("must be one of {}", all.join(", "))
            })
    }
}

/// The actor of changes the Nacos jobs document made.
pub const NACOS_ACTOR: &str = "nacos";

/// One entry of the trail.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AuditEntry {
    pub at: DateTime<Utc>,
    /// A token's name, a user named by the trusted proxy, `nacos`, or `anonymous` when
    /// authentication is off.
    pub actor: String,
    pub action: AuditAction,
    /// The namespace acted in; null for tokens and the Nacos document.
    pub namespace: Option<String>,
    /// The job's name, the execution's trace id, the token's name, or the document's data id.
    pub target: String,
    /// The change: a created job's definition, an update's changed fields as
    /// `{"field": {"from", "to"}}`, a trigger's trace ids, a token's role and namespaces.
    #[schema(value_type = Option<Object>)]
    pub detail: Option<Value>,
}

/// The fields that differ between two JSON objects (a job's definition before and after a
/// change), each as `{"from": before, "to": after}`; fields that only record the write itself
/// are left out.
pub fn changes(before: &Value, after: &Value) -> Value {
    const NOT_A_CHANGE: [&str; 4] = ["updatedAt", "updatedBy", "createdAt", "createdBy"];
    let empty = serde_json::Map::new();
    let (b, a) = (
        before.as_object().unwrap_or(&empty),
        after.as_object().unwrap_or(&empty),
    );
    let mut out = serde_json::Map::new();
    let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        if NOT_A_CHANGE.contains(&k.as_str()) {
            continue;
        }
        let (from, to) = (
            b.get(k).cloned().unwrap_or(Value::Null),
            a.get(k).cloned().unwrap_or(Value::Null),
        );
        if from != to {
            out.insert(k.clone(), serde_json::json!({"from": from, "to": to}));
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_action_reads_back_from_its_name() {
        for a in AuditAction::ALL {
            assert_eq!(AuditAction::parse(a.as_str()), Ok(a));
            assert_eq!(serde_json::to_value(a).unwrap(), json!(a.as_str()));
        }
        assert!(AuditAction::parse("JOB_RENAMED").is_err());
    }

    #[test]
    fn changes_name_each_changed_field_and_nothing_else() {
        let before =
            json!({"cron": "0 * * * * ?", "maxRetry": 3, "updatedAt": "a", "calendar": "x"});
        let after =
            json!({"cron": "0 0 * * * ?", "maxRetry": 3, "updatedAt": "b", "timezone": "UTC"});
        assert_eq!(
            changes(&before, &after),
            json!({
                "cron": {"from": "0 * * * * ?", "to": "0 0 * * * ?"},
                "calendar": {"from": "x", "to": null},
                "timezone": {"from": null, "to": "UTC"},
            })
        );
    }
}
