//! The columns of `job_definition` and `job_execution` and how domain values map onto them,
//! each written once: a job's and a new row's columns as `(column, value)` pairs, which every
//! INSERT and UPDATE is built from, and the reading of a row back by column name. Stored data
//! is parsed like input: a row that no longer parses is reported, never silently used.

use chrono::{DateTime, Utc};
use serde_json::Value;

use super::StoreError;
use super::sql::{Arg, Row};
use crate::jobs::{
    CalendarName, CronSchedule, Execution, JobDefinition, JobName, JobSpec, MAX_INTERVAL_SECONDS,
    Namespace, NewExecution, PathSegment, ScheduleType, ShardParams, TimeZoneName, Timing, choose,
    parse_alert_channels, parse_child_jobs, parse_service_group,
};

/// The columns a job's spec is stored in, with their values: what creating a job inserts and
/// replacing it sets.
pub fn spec_columns(spec: &JobSpec) -> Vec<(&'static str, Arg)> {
    vec![
        ("service_name", spec.service_name.as_str().into()),
        ("service_group", spec.service_group.clone().into()),
        ("handler", spec.handler.as_str().into()),
        ("schedule_type", spec.timing.schedule_type().as_str().into()),
        ("cron", spec.timing.cron().map(|c| c.as_str()).into()),
        (
            "interval_seconds",
            spec.timing.interval_seconds().map(i64::from).into(),
        ),
        ("start_at", spec.timing.start_at().into()),
        ("timezone", spec.timezone.name().into()),
        ("enabled", spec.enabled.into()),
        ("shard_count", spec.shard_count.into()),
        ("shard_strategy", spec.shard_strategy.as_str().into()),
        (
            "shard_params",
            spec.shard_params.to_json().map(|v| v.to_string()).into(),
        ),
        (
            "job_params",
            spec.job_params.as_ref().map(Value::to_string).into(),
        ),
        ("timeout_seconds", spec.timeout_seconds.into()),
        ("max_retry", spec.max_retry.into()),
        ("misfire_policy", spec.misfire_policy.as_str().into()),
        ("description", spec.description.clone().into()),
        ("route_strategy", spec.route_strategy.as_str().into()),
        ("overlap_policy", spec.overlap_policy.as_str().into()),
        // A job's children are in its namespace: their names are kept without it.
        (
            "child_jobs",
            name_list(
                &spec
                    .child_jobs
                    .iter()
                    .map(JobName::local)
                    .collect::<Vec<_>>(),
            )
            .into(),
        ),
        ("alert_channels", name_list(&spec.alert_channels).into()),
        (
            "calendar",
            spec.calendar.as_ref().map(|c| c.as_str()).into(),
        ),
    ]
}

/// A job row read back.
pub fn job(row: &Row) -> Result<JobDefinition, StoreError> {
    let name: String = row.get("name")?;
    let err = |field: &str, m: String| corrupt(&format!("job `{name}`"), field, m);
    let uint = |field: &str| -> Result<u32, StoreError> {
        let v: i32 = row.get(field)?;
        u32::try_from(v).map_err(|e| err(field, e.to_string()))
    };
    let text = |field: &str| row.get::<String>(field);
    let shard_count = uint("shard_count")?;
    let strategy = choose(&text("shard_strategy")?).map_err(|m| err("shard_strategy", m))?;
    let shard_params = json(row.get("shard_params")?, &name, "shard_params")?;
    let key = JobName::from_key(&name).map_err(|m| err("name", m))?;
    let namespace = Namespace::parse(key.namespace()).map_err(|m| err("name", m))?;
    let spec = JobSpec {
        name: key,
        service_name: PathSegment::parse(&text("service_name")?)
            .map_err(|m| err("service_name", m))?,
        service_group: row
            .get::<Option<String>>("service_group")?
            .map(|g| parse_service_group(&g))
            .transpose()
            .map_err(|m| err("service_group", m))?,
        handler: PathSegment::parse(&text("handler")?).map_err(|m| err("handler", m))?,
        timing: timing(row).map_err(|(field, m)| err(field, m))?,
        timezone: TimeZoneName::parse(&text("timezone")?).map_err(|m| err("timezone", m))?,
        enabled: row.get("enabled")?,
        shard_count,
        shard_strategy: strategy,
        shard_params: ShardParams::parse(strategy, shard_count, shard_params.as_ref())
            .map_err(|m| err("shard_params", m))?,
        job_params: json(row.get("job_params")?, &name, "job_params")?,
        timeout_seconds: uint("timeout_seconds")?,
        max_retry: uint("max_retry")?,
        misfire_policy: choose(&text("misfire_policy")?).map_err(|m| err("misfire_policy", m))?,
        description: row.get("description")?,
        route_strategy: choose(&text("route_strategy")?).map_err(|m| err("route_strategy", m))?,
        overlap_policy: choose(&text("overlap_policy")?).map_err(|m| err("overlap_policy", m))?,
        child_jobs: parse_name_list(row.get("child_jobs")?)
            .and_then(|v| parse_child_jobs(&namespace, &v))
            .map_err(|m| err("child_jobs", m))?,
        alert_channels: parse_name_list(row.get("alert_channels")?)
            .and_then(|v| parse_alert_channels(&v))
            .map_err(|m| err("alert_channels", m))?,
        calendar: row
            .get::<Option<String>>("calendar")?
            .map(|c| CalendarName::parse(&c))
            .transpose()
            .map_err(|m| err("calendar", m))?,
    };
    let updated_at: DateTime<Utc> = row.get("updated_at")?;
    Ok(JobDefinition {
        id: row.get("id")?,
        spec,
        source: choose(&text("source")?).map_err(|m| err("source", m))?,
        created_at: row.get("created_at")?,
        updated_at,
        enabled_since: row
            .get::<Option<DateTime<Utc>>>("enabled_since")?
            .unwrap_or(updated_at),
        created_by: row.get("created_by")?,
        updated_by: row.get("updated_by")?,
        revision: row.get("revision")?,
    })
}

/// A job row's schedule type and the columns that type takes; the problem and its column when
/// they do not make one.
fn timing(row: &Row) -> Result<Timing, (&'static str, String)> {
    let read = |field: &'static str, e: StoreError| (field, e.to_string());
    let kind: ScheduleType = choose(
        &row.get::<String>("schedule_type")
            .map_err(|e| read("schedule_type", e))?,
    )
    .map_err(|m| ("schedule_type", m))?;
    let start = || {
        row.get::<Option<DateTime<Utc>>>("start_at")
            .map_err(|e| read("start_at", e))?
            .ok_or(("start_at", format!("is NULL for {kind}")))
    };
    Ok(match kind {
        ScheduleType::Cron => {
            let text = row
                .get::<Option<String>>("cron")
                .map_err(|e| read("cron", e))?
                .ok_or(("cron", "is NULL for CRON".to_string()))?;
            Timing::Cron(CronSchedule::parse(&text).map_err(|m| ("cron", m))?)
        }
        ScheduleType::FixedRate | ScheduleType::FixedDelay => {
            let interval: Option<i32> = row
                .get("interval_seconds")
                .map_err(|e| read("interval_seconds", e))?;
            let interval = interval
                .filter(|i| (1..=MAX_INTERVAL_SECONDS).contains(&i64::from(*i)))
                .ok_or(("interval_seconds", format!("{interval:?} is out of range")))?;
            let (interval, start) = (interval as u32, start()?);
            if kind == ScheduleType::FixedRate {
                Timing::FixedRate { interval, start }
            } else {
                Timing::FixedDelay { interval, start }
            }
        }
        ScheduleType::Once => Timing::Once(start()?),
        ScheduleType::None => Timing::None,
    })
}

/// The columns of a new execution row, with their values.
pub fn new_execution_columns(r: &NewExecution) -> Vec<(&'static str, Arg)> {
    vec![
        ("execution_id", r.execution_id.as_str().into()),
        ("trace_id", r.trace_id.as_str().into()),
        ("job_name", r.job_name.as_str().into()),
        ("trigger_type", r.trigger_type.as_str().into()),
        ("fire_time", r.fire_time.into()),
        ("scheduler_instance", r.scheduler_instance.as_str().into()),
        ("executor_instance", r.executor_instance.clone().into()),
        ("shard_start", r.shard_start.into()),
        ("shard_end", r.shard_end.into()),
        ("shard_count", r.shard_count.into()),
        ("trigger_time", r.trigger_time.into()),
        ("due_time", r.due_time.into()),
        ("status", r.status.as_str().into()),
        ("retry_count", r.retry_count.into()),
        ("parent_trace_id", r.parent_trace_id.clone().into()),
        ("error_message", r.error_message.clone().into()),
        (
            "job_params",
            r.job_params.as_ref().map(Value::to_string).into(),
        ),
    ]
}

/// An execution row read back.
pub fn execution(row: &Row) -> Result<Execution, StoreError> {
    let trace_id: String = row.get("trace_id")?;
    let at = format!("execution `{trace_id}`");
    let uint = |field: &str| -> Result<u32, StoreError> {
        let v: i32 = row.get(field)?;
        u32::try_from(v).map_err(|e| corrupt(&at, field, e))
    };
    let parsed = |field: &str| -> Result<String, StoreError> { row.get(field) };
    let job_name: String = row.get("job_name")?;
    Ok(Execution {
        namespace: Namespace::of_key(&job_name).to_string(),
        id: row.get("id")?,
        trigger_type: choose(&parsed("trigger_type")?)
            .map_err(|m| corrupt(&at, "trigger_type", m))?,
        status: choose(&parsed("status")?).map_err(|m| corrupt(&at, "status", m))?,
        shard_start: uint("shard_start")?,
        shard_end: uint("shard_end")?,
        shard_count: uint("shard_count")?,
        retry_count: uint("retry_count")?,
        job_params: json(row.get("job_params")?, &at, "job_params")?,
        execution_id: row.get("execution_id")?,
        job_name,
        fire_time: row.get("fire_time")?,
        scheduler_instance: row.get("scheduler_instance")?,
        executor_instance: row.get("executor_instance")?,
        trigger_time: row.get("trigger_time")?,
        due_time: row.get("due_time")?,
        start_time: row.get("start_time")?,
        finish_time: row.get("finish_time")?,
        duration_ms: row.get("duration_ms")?,
        parent_trace_id: row.get("parent_trace_id")?,
        result_message: row.get("result_message")?,
        error_message: row.get("error_message")?,
        trace_id,
    })
}

/// A list of names as stored: a JSON array, NULL when empty.
fn name_list<T: std::fmt::Display>(names: &[T]) -> Option<String> {
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
