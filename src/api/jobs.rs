//! `/api/v1/jobs`: job definitions (CRUD, enable/disable, next fire times).

use std::collections::HashMap;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::auth::{Admin, NamespaceParam, Operator, Scoped, Viewer};
use super::error::{ApiError, Problem};
use super::extract::{Path, Query, ValidJson, from_document};
use super::page::Page;
use super::{AppState, PageParams};
use crate::audit::{AuditAction, changes};
use crate::jobs::{
    Execution, JobDefinition, JobRequest, JobSource, JobSpec, MisfirePolicy, OverlapPolicy,
    RouteStrategy, ScheduleType, ShardStrategy, links, percent_encoded,
};
use crate::store::{JobFilter, StoreError};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_job, list_jobs))
        .routes(routes!(get_job, update_job, patch_job, delete_job))
        .routes(routes!(set_enabled))
        .routes(routes!(next_fire_times))
}

/// A job as the API returns it.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobView {
    pub id: i64,
    /// The name within the namespace.
    pub name: String,
    pub namespace: String,
    pub service_name: String,
    /// The Nacos group of the service; null: `nacos.group`.
    pub service_group: Option<String>,
    pub handler: String,
    pub schedule_type: ScheduleType,
    /// `CRON` jobs' expression; null for the other types.
    pub cron: Option<String>,
    /// `FIXED_RATE` jobs' seconds between instants, `FIXED_DELAY` jobs' seconds from the end
    /// of a fire to the next; null for the other types.
    pub interval_seconds: Option<u32>,
    /// `FIXED_RATE` and `FIXED_DELAY` jobs' first instant, `ONCE` jobs' instant; null for
    /// the other types.
    pub start_at: Option<DateTime<Utc>>,
    pub timezone: String,
    pub enabled: bool,
    pub shard_count: u32,
    pub shard_strategy: ShardStrategy,
    #[schema(value_type = Option<Value>)]
    pub shard_params: Option<Value>,
    #[schema(value_type = Option<Value>)]
    pub job_params: Option<Value>,
    pub timeout_seconds: u32,
    pub max_retry: u32,
    pub misfire_policy: MisfirePolicy,
    pub description: Option<String>,
    pub route_strategy: RouteStrategy,
    pub overlap_policy: OverlapPolicy,
    /// Triggered once (trigger type `CHILD`) when every range of a fire ends SUCCESS.
    pub child_jobs: Vec<String>,
    /// Alert channels; empty means `alerts.default_channels`.
    pub alert_channels: Vec<String>,
    /// The calendar whose excluded dates the job does not fire on; null: every date.
    pub calendar: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub created_by: Option<String>,
    pub updated_by: Option<String>,
    /// `NACOS`: defined by the jobs document in the Nacos config centre; the API refuses to
    /// change or delete it (enabling, disabling and triggering stay allowed).
    pub source: JobSource,
}

impl From<JobDefinition> for JobView {
    fn from(j: JobDefinition) -> Self {
        let s = j.spec;
        Self {
            id: j.id,
            name: s.name.local().to_string(),
            namespace: s.name.namespace().to_string(),
            service_name: s.service_name.to_string(),
            service_group: s.service_group,
            handler: s.handler.to_string(),
            schedule_type: s.timing.schedule_type(),
            cron: s.timing.cron().map(|c| c.as_str().to_string()),
            interval_seconds: s.timing.interval_seconds(),
            start_at: s.timing.start_at(),
            timezone: s.timezone.name().to_string(),
            enabled: s.enabled,
            shard_count: s.shard_count,
            shard_strategy: s.shard_strategy,
            shard_params: s.shard_params.to_json(),
            job_params: s.job_params,
            timeout_seconds: s.timeout_seconds,
            max_retry: s.max_retry,
            misfire_policy: s.misfire_policy,
            description: s.description,
            route_strategy: s.route_strategy,
            overlap_policy: s.overlap_policy,
            child_jobs: s.child_jobs.iter().map(|c| c.local().to_string()).collect(),
            alert_channels: s.alert_channels.iter().map(ToString::to_string).collect(),
            calendar: s.calendar.map(|c| c.to_string()),
            created_at: j.created_at,
            updated_at: j.updated_at,
            created_by: j.created_by,
            updated_by: j.updated_by,
            source: j.source,
        }
    }
}

/// Rejects unknown child jobs, child cycles, unknown alert channels and an unknown calendar,
/// naming the field.
async fn check_references(state: &AppState, spec: &JobSpec) -> Result<(), ApiError> {
    let channels = state.settings.alerts.channel_names();
    let calendars: Vec<&str> = state.calendars.keys().map(String::as_str).collect();
    let configured = links::Configured {
        channels: &channels,
        calendars: &calendars,
    };
    let store = state.store.clone();
    let errors = links::check_references(spec, configured, |name| {
        let store = store.clone();
        async move { Ok::<_, StoreError>(store.get_job(&name).await?.map(|j| j.spec.child_jobs)) }
    })
    .await?;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::Validation(errors))
    }
}

/// Create a job.
#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs", request_body = JobRequest,
    security(("bearerAuth" = ["admin"])), params(NamespaceParam),
    responses(
        (status = 201, description = "Created", body = JobView),
        (status = 400, description = "Invalid input; `errors` names the fields", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "A job with this name exists", body = Problem, content_type = "application/problem+json"),
        (status = 413, description = "Body over 1 MiB", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_job(
    scope: Scoped<Admin>,
    State(state): State<AppState>,
    ValidJson(req): ValidJson<JobRequest>,
) -> Result<impl IntoResponse, ApiError> {
    let query = scope.named.then_some(&scope.namespace);
    let spec = JobSpec::parse(req, None, query, state.default_tz, state.clock.now())
        .map_err(ApiError::Validation)?;
    // The body may name the namespace instead of the query: the token must act in that one.
    let namespace = crate::jobs::Namespace::parse(spec.name.namespace())
        .map_err(|m| ApiError::field("namespace", m))?;
    if !scope.principal.may_act_in(&namespace) {
        return Err(ApiError::Forbidden(format!(
            "this token may not act in namespace `{namespace}`"
        )));
    }
    check_references(&state, &spec).await?;
    let job = state
        .store
        .create_job(&spec, scope.actor(), state.clock.now())
        .await?;
    state.job_saved(&job);
    let view = JobView::from(job.clone());
    state
        .audit(
            &scope.principal,
            AuditAction::JobCreated,
            Some(job.name().namespace()),
            job.name().local(),
            serde_json::to_value(&view).ok(),
        )
        .await;
    let mut headers = HeaderMap::new();
    let mut location = format!("/api/v1/jobs/{}", percent_encoded(job.name().local()));
    if !namespace.is_default() {
        location.push_str(&format!("?namespace={namespace}"));
    }
    if let Ok(v) = HeaderValue::from_str(&location) {
        headers.insert(header::LOCATION, v);
    }
    Ok((StatusCode::CREATED, headers, axum::Json(view)))
}

#[derive(Debug, Deserialize, IntoParams)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct JobListParams {
    /// The namespace (1-40 of `a-z 0-9 -`); absent: `default`.
    #[allow(dead_code)] // read by `Scoped`
    namespace: Option<String>,
    /// Only jobs of this executor service.
    service_name: Option<String>,
    enabled: Option<bool>,
    /// Only jobs whose name starts with this.
    name_prefix: Option<String>,
    /// Zero-based page number.
    page: Option<u32>,
    /// Page size, 1..=200 (default 20).
    size: Option<u32>,
    /// `true`: each job also carries its `summary` (next fire time, last execution), so a
    /// list page needs no call per job.
    summary: Option<bool>,
}

/// A job of a list, with its summary when it was asked for.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobListItem {
    #[serde(flatten)]
    pub job: JobView,
    /// Present with `summary=true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub summary: Option<JobSummary>,
}

/// Where a job stands: when it fires next and how it last ran.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct JobSummary {
    /// The next instant of its schedule; null while it is disabled, or when its schedule has
    /// no instant left.
    pub next_fire_time: Option<DateTime<Utc>>,
    /// Its newest execution (by trigger time); null before its first.
    pub last_execution: Option<Execution>,
}

/// List jobs, filtered and paged.
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs", params(JobListParams),
    responses(
        (status = 200, description = "A page of jobs", body = Page<JobListItem>),
        (status = 400, description = "Invalid parameter", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_jobs(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    Query(p): Query<JobListParams>,
) -> Result<axum::Json<Page<JobListItem>>, ApiError> {
    let page = PageParams {
        page: p.page,
        size: p.size,
    }
    .parse()?;
    for (field, v) in [
        ("serviceName", &p.service_name),
        ("namePrefix", &p.name_prefix),
    ] {
        if v.as_ref()
            .is_some_and(|v| v.chars().count() > MAX_FILTER_LEN)
        {
            return Err(ApiError::field(
                field,
                format!("must be at most {MAX_FILTER_LEN} characters"),
            ));
        }
    }
    let filter = JobFilter {
        namespace: Some(scope.namespace.clone()),
        service_name: p.service_name,
        enabled: p.enabled,
        name_prefix: p.name_prefix,
    };
    let jobs = state.store.list_jobs(&filter, page).await?;
    let mut summaries = match p.summary {
        Some(true) => summaries(&state, &jobs.items).await?,
        _ => HashMap::new(),
    };
    Ok(axum::Json(Page::of(jobs, page, |job| JobListItem {
        summary: summaries.remove(job.name().as_str()),
        job: JobView::from(job),
    })))
}

/// The summary of each of `jobs`: next fire times from their schedules, last executions in
/// one read.
async fn summaries(
    state: &AppState,
    jobs: &[JobDefinition],
) -> Result<HashMap<String, JobSummary>, ApiError> {
    let names: Vec<&str> = jobs.iter().map(|j| j.name().as_str()).collect();
    let mut last: HashMap<String, Execution> = state
        .store
        .latest_executions(&names)
        .await?
        .into_iter()
        .map(|e| (e.job_name.clone(), e))
        .collect();
    let now = state.clock.now();
    let mut out = HashMap::with_capacity(jobs.len());
    for j in jobs {
        let next = match j.spec.enabled {
            true => upcoming(state, j, now, 1).await?,
            false => Vec::new(),
        };
        let summary = JobSummary {
            next_fire_time: next.first().copied(),
            last_execution: last.remove(j.name().as_str()),
        };
        out.insert(j.name().to_string(), summary);
    }
    Ok(out)
}

/// Up to `count` of `job`'s next instants after `now`. A `FIXED_DELAY` job's depend on when
/// its fires end: while its last fire runs there is none yet; once it ended, only the next
/// one is known (the end plus the interval, or later when it passed unfired).
async fn upcoming(
    state: &AppState,
    job: &JobDefinition,
    now: DateTime<Utc>,
    count: usize,
) -> Result<Vec<DateTime<Utc>>, ApiError> {
    let schedule = job.spec.schedule(&state.calendars);
    if !job.spec.timing.waits_for_the_previous_fire() {
        return Ok(schedule.upcoming(now, count));
    }
    let name = job.name().as_str();
    let Some(last) = state.store.last_fire_time(name).await? else {
        return Ok(schedule.upcoming(now, count.min(1)));
    };
    let ended = state.store.fire_ends(&[(name.to_string(), last)]).await?;
    let Some(end) = ended.first() else {
        return Ok(Vec::new());
    };
    let restart = job.spec.timing.after_fire_ended(end.end.unwrap_or(last));
    Ok(restart
        .map(|at| schedule.restarted(at).upcoming(now, count.min(1)))
        .unwrap_or_default())
}

/// Get one job.
#[utoipa::path(get, path = "/api/v1/jobs/{name}", tag = "jobs", params(("name" = String, Path, description = "Job name"), NamespaceParam),
    responses(
        (status = 200, description = "The job", body = JobView),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_job(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<axum::Json<JobView>, ApiError> {
    let job = state
        .store
        .get_job(scope.job(&name)?.key())
        .await?
        .ok_or_else(|| ApiError::job_not_found(&name))?;
    Ok(axum::Json(job.into()))
}

/// Replace a job's definition (all fields; absent optional fields take their defaults,
/// except `shardCount`, which keeps the job's; a `FIXED_RATE` job's `startAt` defaults to the
/// job's creation).
#[utoipa::path(put, path = "/api/v1/jobs/{name}", tag = "jobs", request_body = JobRequest,
    security(("bearerAuth" = ["admin"])),
    params(("name" = String, Path, description = "Job name"), NamespaceParam),
    responses(
        (status = 200, description = "Updated", body = JobView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job comes from the Nacos jobs document; change it there", body = Problem, content_type = "application/problem+json"),
    ))]
async fn update_job(
    scope: Scoped<Admin>,
    State(state): State<AppState>,
    Path(name): Path<String>,
    ValidJson(req): ValidJson<JobRequest>,
) -> Result<axum::Json<JobView>, ApiError> {
    save_over(&state, &scope, &name, |current| {
        let mut req = req.clone();
        // The ranges' ids depend on it: never changed by an omission.
        req.shard_count = req.shard_count.or(Some(current.spec.shard_count.into()));
        Ok(req)
    })
    .await
}

/// Change some fields of a job: a JSON merge patch (RFC 7396) of the job's definition, as
/// `PUT` takes it. Fields the patch leaves out keep their values; `null` resets a field to
/// its default.
#[utoipa::path(patch, path = "/api/v1/jobs/{name}", tag = "jobs",
    request_body(content = Object, content_type = "application/merge-patch+json",
        description = "The fields to change, as in `JobRequest`; `application/json` is accepted too"),
    security(("bearerAuth" = ["admin"])),
    params(("name" = String, Path, description = "Job name"), NamespaceParam),
    responses(
        (status = 200, description = "Updated", body = JobView),
        (status = 400, description = "Invalid input", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job comes from the Nacos jobs document; change it there", body = Problem, content_type = "application/problem+json"),
    ))]
async fn patch_job(
    scope: Scoped<Admin>,
    State(state): State<AppState>,
    Path(name): Path<String>,
    ValidJson(patch): ValidJson<serde_json::Map<String, Value>>,
) -> Result<axum::Json<JobView>, ApiError> {
    save_over(&state, &scope, &name, |current| {
        let mut doc = request_document(current);
        // Every field of a job's request is in its document, null or not: a member the
        // document lacks is no field of a job. Named even when it is null, which a merge
        // patch would otherwise take as the removal of nothing: a misspelt `"cronn": null`
        // is refused, not answered 200 with nothing changed.
        if let Some(unknown) = patch.keys().find(|k| doc.get(k.as_str()).is_none()) {
            return Err(ApiError::field(unknown, "unknown field"));
        }
        merge_patch(&mut doc, &Value::Object(patch.clone()));
        forget_other_schedule_fields(&mut doc, current, &patch);
        from_document(doc)
    })
    .await
}

/// Writes the definition `request` makes of the stored job, unless the job changed since it
/// was read (then reads it and makes it again), so concurrent partial updates of different
/// fields both land.
async fn save_over(
    state: &AppState,
    scope: &Scoped<Admin>,
    name: &str,
    request: impl Fn(&JobDefinition) -> Result<JobRequest, ApiError>,
) -> Result<axum::Json<JobView>, ApiError> {
    const ATTEMPTS: usize = 5;
    let key = scope.job(name)?;
    for _ in 0..ATTEMPTS {
        let Some(current) = state.store.get_job(key.key()).await? else {
            return Err(ApiError::job_not_found(name));
        };
        refuse_nacos_job(state, &current)?;
        let spec = JobSpec::parse(
            request(&current)?.starting_at_creation(current.created_at),
            Some(name),
            Some(&scope.namespace),
            state.default_tz,
            state.clock.now(),
        )
        .map_err(ApiError::Validation)?;
        check_references(state, &spec).await?;
        let saved = state
            .store
            .update_job(
                &spec,
                Some(current.revision),
                scope.actor(),
                state.clock.now(),
            )
            .await?;
        if let Some(job) = saved {
            state.job_saved(&job);
            let (before, after) = (JobView::from(current), JobView::from(job));
            let change = changes(
                &serde_json::to_value(&before).unwrap_or_default(),
                &serde_json::to_value(&after).unwrap_or_default(),
            );
            state
                .audit(
                    &scope.principal,
                    AuditAction::JobUpdated,
                    Some(key.namespace()),
                    key.local(),
                    Some(change),
                )
                .await;
            return Ok(axum::Json(after));
        }
    }
    Err(ApiError::Conflict(format!(
        "job {name} kept changing while it was saved; try again"
    )))
}

/// The stored job as the body of a `PUT` that would leave it as it is.
fn request_document(job: &JobDefinition) -> Value {
    let mut doc = serde_json::to_value(JobView::from(job.clone())).unwrap_or_default();
    if let Value::Object(fields) = &mut doc {
        for view_only in [
            "id",
            "createdAt",
            "updatedAt",
            "createdBy",
            "updatedBy",
            "source",
        ] {
            fields.remove(view_only);
        }
    }
    doc
}

/// A patch that changes the schedule type drops the fields only the old type takes (`cron`,
/// `intervalSeconds`, `startAt`) unless it names them: `{"scheduleType": "FIXED_RATE",
/// "intervalSeconds": 60}` is all it takes to turn a cron job into a fixed-rate one.
fn forget_other_schedule_fields(
    doc: &mut Value,
    current: &JobDefinition,
    patch: &serde_json::Map<String, Value>,
) {
    let now = current.spec.timing.schedule_type().as_str();
    let Value::Object(fields) = doc else {
        return;
    };
    let then = fields
        .get("scheduleType")
        .and_then(Value::as_str)
        .unwrap_or(ScheduleType::default().as_str());
    if then != now {
        for field in ["cron", "intervalSeconds", "startAt"] {
            if !patch.contains_key(field) {
                fields.remove(field);
            }
        }
    }
}

/// Applies a JSON merge patch (RFC 7396) to `target`.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(changes) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(serde_json::Map::new());
    }
    let Value::Object(fields) = target else {
        return;
    };
    for (key, change) in changes {
        if change.is_null() {
            fields.remove(key);
        } else {
            merge_patch(fields.entry(key.clone()).or_insert(Value::Null), change);
        }
    }
}

/// Delete a job. Its execution history is kept.
#[utoipa::path(delete, path = "/api/v1/jobs/{name}", tag = "jobs", params(("name" = String, Path, description = "Job name"), NamespaceParam),
    security(("bearerAuth" = ["admin"])),
    responses(
        (status = 204, description = "Deleted"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "The job comes from the Nacos jobs document; remove it there", body = Problem, content_type = "application/problem+json"),
    ))]
async fn delete_job(
    scope: Scoped<Admin>,
    State(state): State<AppState>,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    let key = scope.job(&name)?;
    let current = state.store.get_job(key.key()).await?;
    if let Some(current) = &current {
        refuse_nacos_job(&state, current)?;
    }
    let at = state.clock.now();
    if !state.store.delete_job(key.key(), at).await? {
        return Err(ApiError::job_not_found(&name));
    }
    state.job_deleted(key.key(), at);
    let detail = current.and_then(|j| serde_json::to_value(JobView::from(j)).ok());
    state
        .audit(
            &scope.principal,
            AuditAction::JobDeleted,
            Some(key.namespace()),
            key.local(),
            detail,
        )
        .await;
    Ok(StatusCode::NO_CONTENT)
}

/// Jobs from the Nacos jobs document are changed there, not through the API.
fn refuse_nacos_job(state: &AppState, job: &JobDefinition) -> Result<(), ApiError> {
    if job.source != JobSource::Nacos {
        return Ok(());
    }
    let nacos = &state.settings.nacos;
    Err(ApiError::Conflict(format!(
        "job `{}` is defined in the Nacos config centre (data id `{}`, group `{}`, source NACOS): change or remove it there; enabling, disabling and triggering stay allowed",
        job.name(),
        nacos.jobs_data_id,
        nacos.jobs_group
    )))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EnabledParams {
    /// `true` to schedule the job, `false` to stop scheduling it.
    enabled: bool,
}

/// Enable or disable a job.
#[utoipa::path(patch, path = "/api/v1/jobs/{name}/enabled", tag = "jobs",
    security(("bearerAuth" = ["operator"])),
    params(("name" = String, Path, description = "Job name"), EnabledParams, NamespaceParam),
    responses(
        (status = 200, description = "The job after the change", body = JobView),
        (status = 400, description = "Missing or invalid `enabled`", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
    ))]
async fn set_enabled(
    scope: Scoped<Operator>,
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(p): Query<EnabledParams>,
) -> Result<axum::Json<JobView>, ApiError> {
    let key = scope.job(&name)?;
    let job = state
        .store
        .set_job_enabled(key.key(), p.enabled, scope.actor(), state.clock.now())
        .await?
        .ok_or_else(|| ApiError::job_not_found(&name))?;
    state.job_saved(&job);
    let action = match p.enabled {
        true => AuditAction::JobEnabled,
        false => AuditAction::JobDisabled,
    };
    state
        .audit(
            &scope.principal,
            action,
            Some(key.namespace()),
            key.local(),
            None,
        )
        .await;
    Ok(axum::Json(job.into()))
}

/// The longest `serviceName` / `namePrefix` filter, in characters.
pub const MAX_FILTER_LEN: usize = 100;

/// The most fire times a preview lists.
pub const MAX_FIRE_TIMES: u32 = 100;

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CountParams {
    /// How many fire times, 1..=100 (default 10).
    count: Option<u32>,
}

/// The next fire times of a job.
#[derive(Debug, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NextFireTimes {
    pub schedule_type: ScheduleType,
    /// The cron expression of a `CRON` schedule; null for the other types.
    pub cron: Option<String>,
    pub timezone: String,
    /// UTC instants.
    pub fire_times: Vec<DateTime<Utc>>,
    /// The same instants as wall-clock time in `timezone` (RFC 3339 with offset).
    pub local_fire_times: Vec<String>,
}

impl NextFireTimes {
    /// The next `count` instants of `schedule` (its type's instants, a cron's in `tz`, minus
    /// its calendar's excluded dates).
    pub fn compute(
        schedule: crate::jobs::Schedule<'_>,
        tz: crate::jobs::TimeZoneName,
        count: Option<u32>,
        now: DateTime<Utc>,
    ) -> Result<Self, ApiError> {
        let mut count = Self::count(count)?;
        if schedule.timing.waits_for_the_previous_fire() {
            // Only the first: each later one follows the end of the fire before it.
            count = 1;
        }
        let times = schedule.upcoming(now, count);
        Ok(Self::of(schedule, tz, times))
    }

    /// The `count` asked for (default 10), checked.
    pub fn count(count: Option<u32>) -> Result<usize, ApiError> {
        let count = count.unwrap_or(10);
        if !(1..=MAX_FIRE_TIMES).contains(&count) {
            return Err(ApiError::field(
                "count",
                format!("must be between 1 and {MAX_FIRE_TIMES}"),
            ));
        }
        Ok(count as usize)
    }

    /// `times`, `schedule`'s instants, as the answer shows them.
    pub fn of(
        schedule: crate::jobs::Schedule<'_>,
        tz: crate::jobs::TimeZoneName,
        times: Vec<DateTime<Utc>>,
    ) -> Self {
        Self {
            schedule_type: schedule.timing.schedule_type(),
            cron: schedule.timing.cron().map(|c| c.as_str().to_string()),
            timezone: tz.name().to_string(),
            local_fire_times: times
                .iter()
                .map(|t| t.with_timezone(&tz.tz()).to_rfc3339())
                .collect(),
            fire_times: times,
        }
    }
}

/// Preview the next fire times of a job.
#[utoipa::path(get, path = "/api/v1/jobs/{name}/next-fire-times", tag = "jobs",
    params(("name" = String, Path, description = "Job name"), CountParams, NamespaceParam),
    responses(
        (status = 200, description = "Upcoming fire times", body = NextFireTimes),
        (status = 400, description = "Invalid count", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "No such job", body = Problem, content_type = "application/problem+json"),
    ))]
async fn next_fire_times(
    scope: Scoped<Viewer>,
    State(state): State<AppState>,
    Path(name): Path<String>,
    Query(p): Query<CountParams>,
) -> Result<axum::Json<NextFireTimes>, ApiError> {
    let job = state
        .store
        .get_job(scope.job(&name)?.key())
        .await?
        .ok_or_else(|| ApiError::job_not_found(&name))?;
    let now = state.clock.now();
    let count = NextFireTimes::count(p.count)?;
    let times = upcoming(&state, &job, now, count).await?;
    Ok(axum::Json(NextFireTimes::of(
        job.spec.schedule(&state.calendars),
        job.spec.timezone,
        times,
    )))
}

#[cfg(test)]
mod tests {
    use super::merge_patch;
    use serde_json::json;

    #[test]
    fn a_merge_patch_changes_what_it_names_and_removes_what_it_nulls() {
        // RFC 7396, appendix A, a selection.
        for (target, patch, result) in [
            (json!({"a": "b"}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": "b"}),
                json!({"b": "c"}),
                json!({"a": "b", "b": "c"}),
            ),
            (
                json!({"a": "b", "b": "c"}),
                json!({"a": null}),
                json!({"b": "c"}),
            ),
            (json!({"a": ["b"]}), json!({"a": "c"}), json!({"a": "c"})),
            (
                json!({"a": {"b": "c"}}),
                json!({"a": {"b": "d", "c": null}}),
                json!({"a": {"b": "d"}}),
            ),
            (
                json!({"a": [{"b": "c"}]}),
                json!({"a": [1]}),
                json!({"a": [1]}),
            ),
            (
                json!({"e": null}),
                json!({"a": 1}),
                json!({"e": null, "a": 1}),
            ),
            (
                json!([1, 2]),
                json!({"a": "b", "c": null}),
                json!({"a": "b"}),
            ),
            (
                json!({}),
                json!({"a": {"bb": {"ccc": null}}}),
                json!({"a": {"bb": {}}}),
            ),
        ] {
            let mut doc = target.clone();
            merge_patch(&mut doc, &patch);
            assert_eq!(doc, result, "{target} patched with {patch}");
        }
    }
}
