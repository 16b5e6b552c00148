//! `/api/v1/cron/next-fire-times`: try a cron expression before saving a job.

use axum::extract::State;
use serde::Deserialize;
use utoipa::IntoParams;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::AppState;
use super::auth::{Auth, Viewer};
use super::error::{ApiError, Problem};
use super::extract::Query;
use super::jobs::NextFireTimes;
use crate::jobs::{CronSchedule, Schedule, TimeZoneName};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(preview))
}

#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct PreviewParams {
    /// Cron expression (Quartz 6/7 fields or Unix 5 fields).
    cron: String,
    /// IANA time zone; default `scheduler.timezone`.
    timezone: Option<String>,
    /// How many fire times, 1..=100 (default 10).
    count: Option<u32>,
    /// A calendar from `[[calendars]]` whose excluded dates are left out.
    calendar: Option<String>,
}

/// Preview the next fire times of a cron expression.
#[utoipa::path(get, path = "/api/v1/cron/next-fire-times", tag = "jobs", params(PreviewParams),
    responses(
        (status = 200, description = "Upcoming fire times", body = NextFireTimes),
        (status = 400, description = "Invalid expression, time zone, count or calendar", body = Problem, content_type = "application/problem+json"),
    ))]
async fn preview(
    _: Auth<Viewer>,
    State(state): State<AppState>,
    Query(p): Query<PreviewParams>,
) -> Result<axum::Json<NextFireTimes>, ApiError> {
    let cron = CronSchedule::parse(&p.cron).map_err(|m| ApiError::field("cron", m))?;
    let tz = match p.timezone {
        Some(tz) => TimeZoneName::parse(&tz).map_err(|m| ApiError::field("timezone", m))?,
        None => state.default_tz,
    };
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
        cron: &cron,
        tz: tz.tz(),
        calendar: calendar.map(|c| c.as_ref()),
    };
    Ok(axum::Json(NextFireTimes::compute(
        schedule,
        tz,
        p.count,
        state.clock.now(),
    )?))
}
