//! `/api/v1/cron/next-fire-times`: try a schedule (a cron expression, or another schedule
//! type's fields) before saving a job.

use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Caller, Viewer};
use super::error::{ApiError, Problem};
use super::extract::Query;
use super::jobs::NextFireTimes;
use crate::jobs::{Schedule, ScheduleType, TimeZoneName, Timing, TimingFields};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(preview))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct PreviewParams {
    /// Default `CRON`; the other types take the fields a job of that type takes.
    #[param(value_type = Option<ScheduleType>)]
    schedule_type: Option<String>,
    /// Cron expression (Quartz 6/7 fields or Unix 5 fields); required for `CRON`.
    cron: Option<String>,
    /// `FIXED_RATE`: seconds between instants; `FIXED_DELAY`: seconds from a fire's end to
    /// the next (only the first instant is known ahead).
    #[param(minimum = 1, maximum = 31622400)]
    interval_seconds: Option<i64>,
    /// `FIXED_RATE`, `FIXED_DELAY`: the first instant (default now); `ONCE`: the instant.
    /// RFC 3339.
    #[param(value_type = Option<String>, format = DateTime)]
    start_at: Option<String>,
    /// IANA time zone; default `scheduler.timezone`.
    timezone: Option<String>,
    /// How many fire times, 1..=100 (default 10).
    count: Option<u32>,
    /// A calendar from `[[calendars]]` whose excluded dates are left out.
    calendar: Option<String>,
}

/// Preview the next fire times of a schedule: a cron expression, or another schedule type.
#[utoipa::path(get, path = "/api/v1/cron/next-fire-times", tag = "jobs", params(PreviewParams),
    responses(
        (status = 200, description = "Upcoming fire times", body = NextFireTimes),
        (status = 400, description = "Invalid schedule, time zone, count or calendar; `errors` names the fields", body = Problem, content_type = "application/problem+json"),
    ))]
async fn preview(
    _: Caller<Viewer>,
    State(state): State<AppState>,
    Query(p): Query<PreviewParams>,
) -> Result<axum::Json<NextFireTimes>, ApiError> {
    let tz = match p.timezone {
        Some(tz) => TimeZoneName::parse(&tz).map_err(|m| ApiError::field("timezone", m))?,
        None => state.default_tz,
    };
    let given = TimingFields {
        schedule_type: p.schedule_type.as_deref(),
        cron: p.cron.as_deref(),
        interval_seconds: p.interval_seconds,
        start_at: p.start_at.as_deref(),
    };
    let timing =
        Timing::parse(given, Some(tz.tz()), state.clock.now()).map_err(ApiError::Validation)?;
    let calendar = match p.calendar.as_deref() {
        None => None,
        Some(name) => Some(state.calendars.get(name).ok_or_else(|| {
            ApiError::field(
                "calendar",
                format!("unknown calendar `{name}`: configure it under [[calendars]]"),
            )
        })?),
    };
    let schedule = Schedule {
        timing: &timing,
        tz: tz.tz(),
        calendar: calendar.map(|c| c.as_ref()),
        restart: None,
    };
    Ok(axum::Json(NextFireTimes::compute(
        schedule,
        tz,
        p.count,
        state.clock.now(),
    )?))
}
