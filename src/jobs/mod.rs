//! The job domain: what a job is, and turning untrusted input into valid jobs.
//!
//! `JobRequest` is what the API receives; `JobSpec::parse` turns it into a `JobSpec` whose
//! fields are all valid domain values, collecting every problem with the field it concerns.
//! `JobDefinition` is a stored job (a spec plus identity and audit columns).

mod addr;
pub mod backfill;
mod book;
mod calendar;
mod document;
mod execution;
pub mod links;
pub mod log;
mod name;
mod policies;
mod schedule;
mod shard;
mod timing;

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

pub use addr::InstanceAddr;
pub use book::{ByName, JobBook, JobChange};
pub use calendar::{Calendar, Calendars, Schedule};
pub use document::{
    DocumentError, DocumentFormat, DocumentJob, EntryError, JobDocument, document_entries,
};
pub use execution::{
    Execution, ExecutionStatus, NewExecution, TriggerType, backfill_fire_id,
    broadcast_execution_id, child_execution_id, child_fire_id, execution_id, fire_key,
    first_attempt_id, new_trace_id, rerun_execution_id, retry_execution_id, scheduled_fire_key,
    triggered_execution_id,
};
pub use name::{JobName, Namespace, PathSegment, local_name, percent_encoded};
pub use policies::{
    CalendarName, ChannelName, MAX_ALERT_CHANNELS, MAX_CHILD_JOBS, OverlapPolicy, RouteStrategy,
    parse_alert_channels, parse_child_jobs,
};
pub use schedule::{CronSchedule, TimeZoneName};
pub use shard::{ShardParams, ShardStrategy};
pub use timing::{
    MAX_INTERVAL_SECONDS, ScheduleType, Timing, TimingFields, delay_restart, parse_instant,
    whole_second,
};

/// What happens to a fire that was missed (instance down, job just gained, late wake-up).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    ToSchema,
    Default,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum MisfirePolicy {
    /// Fire the most recent missed instant once, now.
    #[default]
    FireOnceNow,
    /// Skip missed fires; wait for the next scheduled one.
    DoNothing,
}

impl MisfirePolicy {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Where a job is defined. The API changes and deletes only its own jobs; `NACOS` jobs follow
/// the jobs document in the Nacos config centre (`nacos.jobs_data_id`).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    ToSchema,
    Default,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum JobSource {
    #[default]
    Api,
    Nacos,
}

impl JobSource {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The value of an enum named by its `SCREAMING_SNAKE_CASE` name (in JSON, in the database),
/// or a message listing the names there are.
pub fn choose<T>(name: &str) -> Result<T, String>
where
    T: FromStr + strum::VariantNames,
{
    name.parse()
        .map_err(|_| format!("must be one of {}", T::VARIANTS.join(", ")))
}

/// A problem with one input field, named as the client sent it (camelCase).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Create or replace a job. Absent optional fields take their defaults.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct JobRequest {
    /// 1-100 letters or digits of any script (Unicode L and N), or `. _ : -`. Required on
    /// create; on update it may be omitted but must equal the path's name when given (jobs
    /// are not renamed).
    #[schema(example = "order-sync")]
    pub name: Option<String>,
    /// The job's namespace (default `default`): 1-40 of `a-z 0-9 -`. When the request also
    /// names one (`?namespace=`), the two must agree.
    #[schema(example = "payments")]
    pub namespace: Option<String>,
    /// The executor microservice, as registered in Nacos.
    #[schema(example = "order-service")]
    pub service_name: String,
    /// The Nacos group the service is registered in; null: `nacos.group`. 1-128 of
    /// `[A-Za-z0-9._:-]`. Standalone schedulers list static executors by service name only.
    #[schema(example = "payments")]
    pub service_group: Option<String>,
    /// Handler name: the executor is called at `{pathPrefix}/{handler}`.
    #[schema(example = "syncOrders")]
    pub handler: String,
    /// How the job fires by itself; default `CRON`.
    #[schema(value_type = Option<ScheduleType>, default = "CRON")]
    pub schedule_type: Option<String>,
    /// `CRON` only, and required there: Quartz (6/7 fields, seconds first) or Unix (5 fields)
    /// cron expression.
    #[schema(example = "0 0/5 * * * ?")]
    pub cron: Option<String>,
    /// `FIXED_RATE` only, and required there: seconds between instants.
    #[schema(minimum = 1, maximum = 31622400)]
    pub interval_seconds: Option<i64>,
    /// `FIXED_RATE`: the first instant (default: the job's creation, to the second); `ONCE`
    /// (required): the instant. RFC 3339; fractions of a second are dropped.
    #[schema(value_type = Option<String>, format = DateTime, example = "2026-12-24T18:00:00+08:00")]
    pub start_at: Option<String>,
    /// IANA time zone the cron is evaluated in; default `scheduler.timezone`.
    #[schema(example = "Asia/Shanghai")]
    pub timezone: Option<String>,
    pub enabled: Option<bool>,
    /// 1..=10000, default 1 (on `PUT`, the job's). Fixed: data-to-shard mapping never changes
    /// with executor count.
    #[schema(minimum = 1, maximum = 10000)]
    pub shard_count: Option<i64>,
    #[schema(value_type = Option<ShardStrategy>)]
    pub shard_strategy: Option<String>,
    /// RANGE: `{"start": 1, "end": 1000000}`; CUSTOM: `"0=Beijing,1=Shanghai"` or
    /// `{"0": "Beijing", "1": "Shanghai"}`; MOD_HASH: none.
    #[schema(value_type = Option<Value>)]
    pub shard_params: Option<Value>,
    /// Any JSON, passed to the executor as `jobParams`.
    #[schema(value_type = Option<Value>)]
    pub job_params: Option<Value>,
    /// 1..=86400, default 300.
    #[schema(minimum = 1, maximum = 86400)]
    pub timeout_seconds: Option<i64>,
    /// 0..=100, default 3.
    #[schema(minimum = 0, maximum = 100)]
    pub max_retry: Option<i64>,
    #[schema(value_type = Option<MisfirePolicy>)]
    pub misfire_policy: Option<String>,
    /// Free text, at most 500 characters.
    pub description: Option<String>,
    /// Which executor an unsharded job's fire goes to first (a sharded job's range `i` always
    /// goes to executor `i mod n` of the sorted list).
    #[schema(value_type = Option<RouteStrategy>, default = "ROUND_ROBIN")]
    pub route_strategy: Option<String>,
    /// A fire while the job still has a PENDING or RUNNING execution: `ALLOW` runs it,
    /// `SKIP` records it as SKIPPED, `COVER` cancels the running ones first.
    #[schema(value_type = Option<OverlapPolicy>, default = "ALLOW")]
    pub overlap_policy: Option<String>,
    /// Jobs triggered once (trigger type `CHILD`) when every range of a fire ends SUCCESS.
    /// Each must exist; cycles are rejected.
    #[schema(default = json!([]), example = json!(["order-report"]))]
    pub child_jobs: Option<Vec<String>>,
    /// Alert channels (names from `[[alerts.channels]]`); empty means
    /// `alerts.default_channels`.
    #[schema(default = json!([]), example = json!(["ops"]))]
    pub alert_channels: Option<Vec<String>>,
    /// A calendar from `[[calendars]]`: the job does not fire on its excluded dates (in the
    /// calendar's time zone). Null: every date.
    #[schema(example = "cn-holidays")]
    pub calendar: Option<String>,
}

impl JobRequest {
    /// The namespace the request addresses: the body's, else `query` (the `?namespace=`
    /// parameter), else `default`; a body that names another namespace than `query` is
    /// refused.
    pub fn namespace_in(&self, query: Option<&Namespace>) -> Result<Namespace, String> {
        let body = self
            .namespace
            .as_deref()
            .map(Namespace::parse)
            .transpose()?;
        match (body, query) {
            (Some(b), Some(q)) if &b != q => Err(format!(
                "must equal the request's namespace `{q}` (`?namespace=`)"
            )),
            (Some(b), _) => Ok(b),
            (None, Some(q)) => Ok(q.clone()),
            (None, None) => Ok(Namespace::default()),
        }
    }

    /// This request with a `FIXED_RATE` or `FIXED_DELAY` job's omitted `startAt` set to `created` (the job's
    /// creation): replacing a job keeps its grid of instants unless told otherwise.
    pub fn starting_at_creation(mut self, created: DateTime<Utc>) -> Self {
        if self.starts_at_creation() {
            self.start_at = Some(whole_second(created).to_rfc3339());
        }
        self
    }

    /// A `FIXED_RATE` or `FIXED_DELAY` job without `startAt`: its instants start at the
    /// job's creation.
    pub fn starts_at_creation(&self) -> bool {
        let kind = self.schedule_type.as_deref();
        [ScheduleType::FixedRate, ScheduleType::FixedDelay]
            .iter()
            .any(|t| kind == Some(t.as_str()))
            && self.start_at.is_none()
    }
}

/// A fully validated job, ready to be stored and scheduled.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSpec {
    pub name: JobName,
    pub service_name: PathSegment,
    /// The Nacos group of `service_name`; `None`: the configured `nacos.group`.
    pub service_group: Option<String>,
    pub handler: PathSegment,
    /// When the job fires by itself.
    pub timing: Timing,
    pub timezone: TimeZoneName,
    pub enabled: bool,
    pub shard_count: u32,
    pub shard_strategy: ShardStrategy,
    pub shard_params: ShardParams,
    pub job_params: Option<Value>,
    pub timeout_seconds: u32,
    pub max_retry: u32,
    pub misfire_policy: MisfirePolicy,
    pub description: Option<String>,
    pub route_strategy: RouteStrategy,
    pub overlap_policy: OverlapPolicy,
    /// Triggered once when every range of a fire ends SUCCESS; checked at save time
    /// (`links::check_references`): they exist and lead back to no job.
    pub child_jobs: Vec<JobName>,
    /// Where this job's alerts go; empty means `alerts.default_channels`.
    pub alert_channels: Vec<ChannelName>,
    /// Dates the job does not fire on (`[[calendars]]`, checked at save time).
    pub calendar: Option<CalendarName>,
}

/// The longest Nacos group name.
pub const MAX_SERVICE_GROUP: usize = 128;
/// [`parse_service_group`] as an ECMA-262 pattern (the OpenAPI document's).
pub const SERVICE_GROUP_PATTERN: &str = "^[A-Za-z0-9._:-]{1,128}$";

/// A Nacos group name as Nacos accepts it: 1-128 of `[A-Za-z0-9._:-]`.
pub fn parse_service_group(raw: &str) -> Result<String, String> {
    parse_plain(raw, MAX_SERVICE_GROUP)
}

/// A plain key: 1 to `max` of `[A-Za-z0-9._:-]`.
pub fn parse_plain(raw: &str, max: usize) -> Result<String, String> {
    if raw.is_empty() || raw.len() > max {
        return Err(format!("must be 1 to {max} characters long"));
    }
    if let Some(c) = raw
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(format!(
            "may only contain letters, digits and . _ : - (found {c:?})"
        ));
    }
    Ok(raw.to_string())
}

pub const MAX_SHARD_COUNT: i64 = 10_000;
/// The longest name of a `BROADCAST` job: its execution ids add the executor's address, and
/// must still fit their 200 characters with every suffix.
pub const MAX_BROADCAST_NAME: usize = 70;
pub const MAX_TIMEOUT_SECONDS: i64 = 86_400;
pub const MAX_RETRY: i64 = 100;
pub const MAX_DESCRIPTION: usize = 500;
/// What a MySQL `TEXT` column (`job_params`) holds: one byte more fails the write there.
pub const MAX_JOB_PARAMS_BYTES: usize = 65_535;

/// A `jobParams` value, a job's or one run's (a manual trigger's), must fit its column.
pub fn check_job_params(params: &Value) -> Result<(), String> {
    if params.to_string().len() > MAX_JOB_PARAMS_BYTES {
        return Err(format!(
            "must serialise to at most {MAX_JOB_PARAMS_BYTES} bytes"
        ));
    }
    Ok(())
}

/// Parses each field of a request, collecting the problem of every field that fails (named
/// as the client sent it), so one answer lists them all.
#[derive(Default)]
struct Fields {
    errors: Vec<FieldError>,
}

impl Fields {
    /// The parsed value, or `None` with the problem noted against `field`.
    fn take<T>(&mut self, field: &str, parsed: Result<T, String>) -> Option<T> {
        parsed
            .map_err(|m| self.errors.push(FieldError::new(field, m)))
            .ok()
    }

    /// A field with a default when absent, parsed from its text when given.
    fn choice<T>(&mut self, field: &str, raw: Option<&str>) -> Option<T>
    where
        T: Default + FromStr + strum::VariantNames,
    {
        match raw {
            None => Some(T::default()),
            Some(s) => self.take(field, choose(s)),
        }
    }

    fn check(&mut self, field: &str, ok: Result<(), String>) {
        self.take(field, ok);
    }
}

impl JobSpec {
    /// The job's instants: its schedule type's (a cron's in its time zone), minus the
    /// excluded dates of its calendar among `calendars` (a calendar no longer configured
    /// excludes nothing).
    pub fn schedule<'a>(&'a self, calendars: &'a Calendars) -> Schedule<'a> {
        Schedule {
            timing: &self.timing,
            tz: self.timezone.tz(),
            calendar: self
                .calendar
                .as_ref()
                .and_then(|c| calendars.get(c.as_str()))
                .map(|c| c.as_ref()),
            restart: None,
        }
    }

    /// Validates every field of `req`. `name` is the path name on update.
    pub fn parse(
        req: JobRequest,
        path_name: Option<&str>,
        namespace: Option<&Namespace>,
        default_tz: TimeZoneName,
        now: DateTime<Utc>,
    ) -> Result<Self, Vec<FieldError>> {
        let mut f = Fields::default();
        let namespace = f.take("namespace", req.namespace_in(namespace));
        let name = namespace.as_ref().and_then(|ns| {
            f.take(
                "name",
                Self::name_of(path_name, req.name.as_deref())
                    .and_then(|n| JobName::parse_in(ns, n.as_str())),
            )
        });
        let service_name = f.take("serviceName", PathSegment::parse(&req.service_name));
        let service_group = match req.service_group.as_deref() {
            None => Some(None),
            Some(g) => f.take("serviceGroup", parse_service_group(g).map(Some)),
        };
        let handler = f.take("handler", PathSegment::parse(&req.handler));
        let (timing, timezone) = Self::schedule_of(&mut f, &req, default_tz, now);
        let (shard_count, shard_strategy, shard_params) = Self::sharding_of(&mut f, &req);
        let job_params = req.job_params.filter(|v| !v.is_null());
        if let Some(p) = &job_params {
            f.check("jobParams", check_job_params(p));
        }
        let description = req.description.filter(|d| !d.is_empty());
        if description
            .as_ref()
            .is_some_and(|d| d.chars().count() > MAX_DESCRIPTION)
        {
            let too_long = format!("must be at most {MAX_DESCRIPTION} characters");
            f.check("description", Err(too_long));
        }
        let timeout = f.take(
            "timeoutSeconds",
            in_range(req.timeout_seconds.unwrap_or(300), 1, MAX_TIMEOUT_SECONDS),
        );
        let max_retry = f.take(
            "maxRetry",
            in_range(req.max_retry.unwrap_or(3), 0, MAX_RETRY),
        );
        let misfire_policy = f.choice("misfirePolicy", req.misfire_policy.as_deref());
        let route_strategy = f.choice("routeStrategy", req.route_strategy.as_deref());
        if route_strategy == Some(RouteStrategy::Broadcast)
            && name
                .as_ref()
                .is_some_and(|n| n.key().chars().count() > MAX_BROADCAST_NAME)
        {
            let why = format!(
                "BROADCAST needs a job name of at most {MAX_BROADCAST_NAME} characters with its namespace and a `/` outside `default` (its execution ids carry the executor's address)"
            );
            f.check("routeStrategy", Err(why));
        }
        let overlap_policy = f.choice("overlapPolicy", req.overlap_policy.as_deref());
        let child_jobs = namespace.as_ref().and_then(|ns| {
            f.take(
                "childJobs",
                parse_child_jobs(ns, req.child_jobs.as_deref().unwrap_or_default()),
            )
        });
        let alert_channels = f.take(
            "alertChannels",
            parse_alert_channels(req.alert_channels.as_deref().unwrap_or_default()),
        );
        let calendar = match req.calendar.as_deref() {
            None => Some(None),
            Some(c) => f.take("calendar", CalendarName::parse(c).map(Some)),
        };
        // Every field is parsed (and every problem noted) before any is required.
        let spec = (|| {
            Some(Self {
                name: name?,
                service_name: service_name?,
                service_group: service_group?,
                handler: handler?,
                timing: timing?,
                timezone: timezone?,
                enabled: req.enabled.unwrap_or(true),
                shard_count: shard_count? as u32,
                shard_strategy: shard_strategy?,
                shard_params: shard_params?,
                job_params,
                timeout_seconds: timeout? as u32,
                max_retry: max_retry? as u32,
                misfire_policy: misfire_policy?,
                description,
                route_strategy: route_strategy?,
                overlap_policy: overlap_policy?,
                child_jobs: child_jobs?,
                alert_channels: alert_channels?,
                calendar: calendar?,
            })
        })();
        match spec {
            Some(spec) if f.errors.is_empty() => Ok(spec),
            _ => Err(f.errors),
        }
    }

    /// The schedule (see [`Timing::parse`]) and the time zone.
    fn schedule_of(
        f: &mut Fields,
        req: &JobRequest,
        default_tz: TimeZoneName,
        now: DateTime<Utc>,
    ) -> (Option<Timing>, Option<TimeZoneName>) {
        let timezone = match req.timezone.as_deref() {
            None => Some(default_tz),
            Some(tz) => f.take("timezone", TimeZoneName::parse(tz)),
        };
        let given = TimingFields {
            schedule_type: req.schedule_type.as_deref(),
            cron: req.cron.as_deref(),
            interval_seconds: req.interval_seconds,
            start_at: req.start_at.as_deref(),
        };
        let timing = Timing::parse(given, timezone.map(TimeZoneName::tz), now)
            .map_err(|errors| f.errors.extend(errors))
            .ok();
        (timing, timezone)
    }

    /// The shard count, strategy and the strategy's parameters.
    fn sharding_of(
        f: &mut Fields,
        req: &JobRequest,
    ) -> (Option<i64>, Option<ShardStrategy>, Option<ShardParams>) {
        let count = f.take(
            "shardCount",
            in_range(req.shard_count.unwrap_or(1), 1, MAX_SHARD_COUNT),
        );
        let strategy = f.choice("shardStrategy", req.shard_strategy.as_deref());
        let params = match (strategy, count) {
            (Some(st), Some(n)) => f.take(
                "shardParams",
                ShardParams::parse(st, n as u32, req.shard_params.as_ref()),
            ),
            _ => None,
        };
        (count, strategy, params)
    }

    /// The job's name: the body's, the path's on update (the two must agree: jobs are not
    /// renamed).
    fn name_of(path: Option<&str>, body: Option<&str>) -> Result<JobName, String> {
        match (path, body) {
            (Some(p), Some(b)) if p != b => {
                Err("must equal the job name in the path (jobs cannot be renamed)".into())
            }
            (Some(n), _) | (None, Some(n)) => JobName::parse(n),
            (None, None) => Err("is required".into()),
        }
    }
}

fn in_range(v: i64, min: i64, max: i64) -> Result<i64, String> {
    if (min..=max).contains(&v) {
        Ok(v)
    } else {
        Err(format!("must be between {min} and {max}"))
    }
}

/// A stored job.
#[derive(Debug, Clone, PartialEq)]
pub struct JobDefinition {
    pub id: i64,
    pub spec: JobSpec,
    pub source: JobSource,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub updated_by: Option<String>,
    /// When the job was last switched on: instants before it are not owed to the job.
    pub enabled_since: DateTime<Utc>,
    /// The job revision (the change log's counter) of the write that made this definition:
    /// two definitions of a job are the same definition exactly when their revisions are.
    pub revision: i64,
}

impl JobDefinition {
    pub fn name(&self) -> &JobName {
        &self.spec.name
    }

    /// A job as stored from the API body `body` at `at` (UTC), for unit tests.
    #[cfg(test)]
    pub(crate) fn stored(body: Value, at: DateTime<Utc>) -> Self {
        let req: JobRequest = serde_json::from_value(body).expect("a job body");
        let spec = JobSpec::parse(req, None, None, TimeZoneName::parse("UTC").unwrap(), at)
            .expect("a valid job");
        Self {
            id: 1,
            spec,
            source: Default::default(),
            created_at: at,
            updated_at: at,
            created_by: None,
            updated_by: None,
            enabled_since: at,
            revision: at.timestamp_millis(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn req(v: Value) -> JobRequest {
        serde_json::from_value(v).unwrap()
    }

    fn parse(v: Value) -> Result<JobSpec, Vec<FieldError>> {
        JobSpec::parse(
            req(v),
            None,
            None,
            TimeZoneName::parse("UTC").unwrap(),
            Utc::now(),
        )
    }

    #[test]
    fn defaults_apply() {
        let s = parse(
            json!({"name": "a", "serviceName": "svc", "handler": "h", "cron": "0 0 2 * * ?"}),
        )
        .unwrap();
        assert!(s.enabled);
        assert_eq!((s.shard_count, s.timeout_seconds, s.max_retry), (1, 300, 3));
        assert_eq!(s.shard_strategy, ShardStrategy::ModHash);
        assert_eq!(s.misfire_policy, MisfirePolicy::FireOnceNow);
        assert_eq!(s.timezone.name(), "UTC");
        assert_eq!(s.route_strategy, RouteStrategy::RoundRobin);
        assert_eq!(s.overlap_policy, OverlapPolicy::Allow);
        assert!(s.child_jobs.is_empty() && s.alert_channels.is_empty());
    }

    #[test]
    fn production_fields_parse() {
        let s = parse(json!({
            "name": "a", "serviceName": "svc", "handler": "h", "cron": "0 0 2 * * ?",
            "routeStrategy": "LEAST_BUSY", "overlapPolicy": "COVER",
            "childJobs": ["b", "c"], "alertChannels": ["ops"]
        }))
        .unwrap();
        assert_eq!(s.route_strategy, RouteStrategy::LeastBusy);
        assert_eq!(s.overlap_policy, OverlapPolicy::Cover);
        assert_eq!(
            s.child_jobs,
            [JobName::parse("b").unwrap(), JobName::parse("c").unwrap()]
        );
        assert_eq!(s.alert_channels, [ChannelName::parse("ops").unwrap()]);
    }

    #[test]
    fn every_bad_field_is_named() {
        let errs = parse(json!({
            "name": "bad name", "serviceName": "../x", "handler": "a/b", "cron": "nope",
            "timezone": "Nowhere/City", "shardCount": 0, "shardStrategy": "ROUND_ROBIN",
            "timeoutSeconds": 86401, "maxRetry": -1, "misfirePolicy": "LATER",
            "routeStrategy": "NEAREST", "overlapPolicy": "QUEUE", "childJobs": ["x", "x"],
            "alertChannels": ["no way"]
        }))
        .unwrap_err();
        let fields: Vec<_> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "name",
                "serviceName",
                "handler",
                "timezone",
                "cron",
                "shardCount",
                "shardStrategy",
                "timeoutSeconds",
                "maxRetry",
                "misfirePolicy",
                "routeStrategy",
                "overlapPolicy",
                "childJobs",
                "alertChannels"
            ]
        );
    }

    #[test]
    fn cron_must_fire_in_the_future() {
        let errs = parse(
            json!({"name": "a", "serviceName": "s", "handler": "h", "cron": "0 0 0 1 1 ? 2001"}),
        )
        .unwrap_err();
        assert_eq!(errs[0].field, "cron");
    }

    #[test]
    fn update_cannot_rename() {
        let r =
            req(json!({"name": "b", "serviceName": "s", "handler": "h", "cron": "0 * * * * ?"}));
        let errs = JobSpec::parse(
            r,
            Some("a"),
            None,
            TimeZoneName::parse("UTC").unwrap(),
            Utc::now(),
        )
        .unwrap_err();
        assert_eq!(errs[0].field, "name");
    }
}
