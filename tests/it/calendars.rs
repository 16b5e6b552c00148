//! Calendars (`[[calendars]]`, job field `calendar`): a job naming one does not fire on its
//! excluded dates, in the calendar's time zone; the previews leave those dates out; a job may
//! name only a configured calendar.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Days, NaiveDate, Utc};
use serde_json::{Value, json};

use crate::helpers::{
    Backend, TestApp, TestDb, backend_tests, eventually, problem_fields, static_executors,
};
use crate::recorder::Recorder;

backend_tests!(
    a_job_does_not_fire_on_the_excluded_dates_of_its_calendar,
    previews_leave_the_excluded_dates_out,
);

/// An instance with the calendar `closed` excluding today and tomorrow (UTC) and the
/// calendar `shanghai` excluding the Shanghai date three days ahead, its executor, and its
/// recorder.
async fn app_with_calendars(backend: Backend) -> (TestApp, Recorder) {
    let recorder = Recorder::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = recorder.addr.clone();
    let today = Utc::now().date_naive();
    let tomorrow = today + Days::new(1);
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("billing", &[addr]);
        s.calendars = vec![
            jobflow::config::CalendarSettings {
                name: "closed".into(),
                timezone: Some("UTC".into()),
                exclude: vec![format!("{today}/{tomorrow}")],
            },
            jobflow::config::CalendarSettings {
                name: "shanghai".into(),
                timezone: Some("Asia/Shanghai".into()),
                exclude: vec![shanghai_day().to_string()],
            },
        ];
    })
    .await;
    (app, recorder)
}

/// The Shanghai date three days ahead.
fn shanghai_day() -> NaiveDate {
    Utc::now()
        .with_timezone(&chrono_tz::Asia::Shanghai)
        .date_naive()
        + Days::new(3)
}

fn fire_times(preview: &Value) -> Vec<DateTime<Utc>> {
    preview["fireTimes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().parse().unwrap())
        .collect()
}

/// Two jobs firing every second, one naming a calendar that excludes today: only the other
/// is called. A calendar that is not configured is refused, naming the field.
async fn a_job_does_not_fire_on_the_excluded_dates_of_its_calendar(backend: Backend) {
    let (app, recorder) = app_with_calendars(backend).await;
    for (name, calendar) in [("open-job", json!(null)), ("closed-job", json!("closed"))] {
        let job = app
            .create_job(
                &json!({"name": name, "serviceName": "billing", "handler": "tick",
                "cron": "* * * * * ?", "calendar": calendar}),
            )
            .await;
        assert_eq!(job["calendar"], calendar);
    }
    eventually(
        Duration::from_secs(10),
        "three calls of open-job",
        || async { (recorder.calls().len() >= 3).then_some(()) },
    )
    .await;
    let called: Vec<String> = recorder
        .calls()
        .iter()
        .map(|c| c.body["jobName"].as_str().unwrap().to_string())
        .collect();
    assert!(called.iter().all(|n| n == "open-job"), "{called:?}");
    let (_, rows) = app.get("/api/v1/jobs/closed-job/executions").await;
    assert_eq!(rows["content"], json!([]), "{rows}");
    let (status, problem) = app
        .post(
            "/api/v1/jobs",
            &json!({"name": "nowhere", "serviceName": "billing", "handler": "tick",
                "cron": "* * * * * ?", "calendar": "no-such-calendar"}),
        )
        .await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(problem_fields(&problem), ["calendar"]);
}

/// The job's preview and the cron preview skip the excluded dates, in the calendar's time
/// zone: 16:30 UTC is 00:30 the next day in Shanghai, so the excluded Shanghai date D drops
/// the instant at 16:30 UTC on D - 1, not the one on D.
async fn previews_leave_the_excluded_dates_out(backend: Backend) {
    let (app, _) = app_with_calendars(backend).await;
    app.create_job(
        &json!({"name": "noon", "serviceName": "billing", "handler": "tick",
        "cron": "0 0 12 * * ?", "timezone": "UTC", "calendar": "closed"}),
    )
    .await;
    let (status, preview) = app.get("/api/v1/jobs/noon/next-fire-times?count=3").await;
    assert_eq!(status, 200, "{preview}");
    let after_closed = (Utc::now().date_naive() + Days::new(2))
        .and_hms_opt(12, 0, 0)
        .unwrap()
        .and_utc();
    assert_eq!(fire_times(&preview)[0], after_closed, "{preview}");

    let d = shanghai_day();
    let at_1630 = |date: NaiveDate| date.and_hms_opt(16, 30, 0).unwrap().and_utc();
    let path = "/api/v1/cron/next-fire-times?cron=0%2030%2016%20*%20*%20%3F&timezone=UTC&count=10";
    let (_, plain) = app.get(path).await;
    let (status, skipping) = app.get(&format!("{path}&calendar=shanghai")).await;
    assert_eq!(status, 200, "{skipping}");
    let (plain, skipping) = (fire_times(&plain), fire_times(&skipping));
    let excluded = at_1630(d - Days::new(1));
    assert!(plain.contains(&excluded), "{plain:?}");
    assert!(!skipping.contains(&excluded), "{skipping:?}");
    assert!(skipping.contains(&at_1630(d)), "{skipping:?}");
    assert_eq!(
        plain
            .iter()
            .filter(|t| **t != excluded)
            .take(9)
            .collect::<Vec<_>>(),
        skipping.iter().take(9).collect::<Vec<_>>()
    );

    let (status, problem) = app
        .get("/api/v1/cron/next-fire-times?cron=0%200%202%20*%20*%20%3F&calendar=nope")
        .await;
    assert_eq!(status, 400, "{problem}");
    assert_eq!(problem_fields(&problem), ["calendar"]);
}
