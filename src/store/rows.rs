//! Row shapes shared by both backends and their conversion into domain values. Stored data is
//! parsed like input: a row that no longer parses is reported, never silently used.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::StoreError;
use crate::jobs::{
    CronSchedule, Execution, JobDefinition, JobName, JobSpec, PathSegment, ShardParams,
    TimeZoneName, parse_alert_channels, parse_child_jobs,
};

#[derive(Debug, sqlx::FromRow)]
pub struct JobRow {
    pub id: i64,
    pub name: String,
    pub service_name: String,
    pub handler: String,
    pub cron: String,
    pub timezone: String,
    pub enabled: bool,
    pub shard_count: i32,
    pub shard_strategy: String,
    pub shard_params: Option<String>,
    pub job_params: Option<String>,
    pub timeout_seconds: i32,
    pub max_retry: i32,
    pub misfire_policy: String,
    pub description: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub updated_by: Option<String>,
    pub route_strategy: String,
    pub overlap_policy: String,
    pub child_jobs: Option<String>,
    pub alert_channels: Option<String>,
    pub source: String,
    pub enabled_since: Option<DateTime<Utc>>,
}

/// A list of names as stored: a JSON array, NULL when empty.
pub fn name_list<T: std::fmt::Display>(names: &[T]) -> Option<String> {
    (!names.is_empty()).then(|| {
        Value::Array(names.iter().map(|n| Value::String(n.to_string())).collect()).to_string()
    })
}

fn parse_name_list(text: Option<String>) -> Result<Vec<String>, String> {
    text.map(|t| serde_json::from_str::<Vec<String>>(&t).map_err(|e| e.to_string()))
        .transpose()
        .map(Option::unwrap_or_default)
}

fn corrupt(row: &str, field: &str, msg: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{row}.{field}: {msg}"))
}

fn json(text: Option<String>, row: &str, field: &str) -> Result<Option<Value>, StoreError> {
    text.map(|t| serde_json::from_str(&t).map_err(|e| corrupt(row, field, e)))
        .transpose()
}

impl TryFrom<JobRow> for JobDefinition {
    type Error = StoreError;

    fn try_from(r: JobRow) -> Result<Self, StoreError> {
        let n = r.name.clone();
        let err = |field: &str, m: String| corrupt(&format!("job `{n}`"), field, m);
        let shard_count =
            u32::try_from(r.shard_count).map_err(|e| err("shard_count", e.to_string()))?;
        let strategy = r
            .shard_strategy
            .parse()
            .map_err(|m| err("shard_strategy", m))?;
        let shard_params_json = json(r.shard_params, &n, "shard_params")?;
        let spec = JobSpec {
            name: JobName::parse(&r.name).map_err(|m| err("name", m))?,
            service_name: PathSegment::parse(&r.service_name)
                .map_err(|m| err("service_name", m))?,
            handler: PathSegment::parse(&r.handler).map_err(|m| err("handler", m))?,
            cron: CronSchedule::parse(&r.cron).map_err(|m| err("cron", m))?,
            timezone: TimeZoneName::parse(&r.timezone).map_err(|m| err("timezone", m))?,
            enabled: r.enabled,
            shard_count,
            shard_strategy: strategy,
            shard_params: ShardParams::parse(strategy, shard_count, shard_params_json.as_ref())
                .map_err(|m| err("shard_params", m))?,
            job_params: json(r.job_params, &n, "job_params")?,
            timeout_seconds: u32::try_from(r.timeout_seconds)
                .map_err(|e| err("timeout_seconds", e.to_string()))?,
            max_retry: u32::try_from(r.max_retry).map_err(|e| err("max_retry", e.to_string()))?,
            misfire_policy: r
                .misfire_policy
                .parse()
                .map_err(|m| err("misfire_policy", m))?,
            description: r.description,
            route_strategy: r
                .route_strategy
                .parse()
                .map_err(|m| err("route_strategy", m))?,
            overlap_policy: r
                .overlap_policy
                .parse()
                .map_err(|m| err("overlap_policy", m))?,
            child_jobs: parse_name_list(r.child_jobs)
                .and_then(|v| parse_child_jobs(&v))
                .map_err(|m| err("child_jobs", m))?,
            alert_channels: parse_name_list(r.alert_channels)
                .and_then(|v| parse_alert_channels(&v))
                .map_err(|m| err("alert_channels", m))?,
        };
        Ok(Self {
            id: r.id,
            spec,
            source: r.source.parse().map_err(|m| err("source", m))?,
            created_at: r.created_at,
            updated_at: r.updated_at,
            enabled_since: r.enabled_since.unwrap_or(r.updated_at),
            created_by: r.created_by,
            updated_by: r.updated_by,
        })
    }
}

#[derive(Debug, sqlx::FromRow)]
pub struct ExecutionRow {
    pub id: i64,
    pub execution_id: String,
    pub trace_id: String,
    pub job_name: String,
    pub trigger_type: String,
    pub fire_time: DateTime<Utc>,
    pub scheduler_instance: Option<String>,
    pub executor_instance: Option<String>,
    pub shard_start: i32,
    pub shard_end: i32,
    pub shard_count: i32,
    pub trigger_time: DateTime<Utc>,
    pub due_time: DateTime<Utc>,
    pub start_time: Option<DateTime<Utc>>,
    pub finish_time: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    pub status: String,
    pub retry_count: i32,
    pub parent_trace_id: Option<String>,
    pub result_message: Option<String>,
    pub error_message: Option<String>,
    pub job_params: Option<String>,
}

impl TryFrom<ExecutionRow> for Execution {
    type Error = StoreError;

    fn try_from(r: ExecutionRow) -> Result<Self, StoreError> {
        let row = format!("execution `{}`", r.trace_id);
        let uint = |field: &str, v: i32| u32::try_from(v).map_err(|e| corrupt(&row, field, e));
        Ok(Self {
            id: r.id,
            trigger_type: r
                .trigger_type
                .parse()
                .map_err(|m| corrupt(&row, "trigger_type", m))?,
            status: r.status.parse().map_err(|m| corrupt(&row, "status", m))?,
            shard_start: uint("shard_start", r.shard_start)?,
            shard_end: uint("shard_end", r.shard_end)?,
            shard_count: uint("shard_count", r.shard_count)?,
            retry_count: uint("retry_count", r.retry_count)?,
            job_params: json(r.job_params, &row, "job_params")?,
            execution_id: r.execution_id,
            trace_id: r.trace_id,
            job_name: r.job_name,
            fire_time: r.fire_time,
            scheduler_instance: r.scheduler_instance,
            executor_instance: r.executor_instance,
            trigger_time: r.trigger_time,
            due_time: r.due_time,
            start_time: r.start_time,
            finish_time: r.finish_time,
            duration_ms: r.duration_ms,
            parent_trace_id: r.parent_trace_id,
            result_message: r.result_message,
            error_message: r.error_message,
        })
    }
}
