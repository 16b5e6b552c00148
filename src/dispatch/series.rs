//! A job's own Prometheus series on the fire path, registered once per job and process.
//!
//! `metrics::counter!("…", "job_name" => name)` builds a labelled key for every record: the
//! job name copied into it, a label list allocated, the key hashed and looked up in the
//! recorder's registry. At 10,000 fires a second that is three keys a fire, a few per cent
//! of JobFlow's CPU (docs/benchmarks.md, "Where JobFlow's own CPU goes"). Here each job's
//! handles are registered the first time the job needs them and kept; a fire then costs one
//! map read by name and an atomic add per series.
//!
//! The series and their labels are the ones docs/operations.md lists, registered lazily as
//! before: a series appears in `/metrics` once it is first recorded (a job that never failed
//! has no `job_execution_failures_total`). The recorder never forgets a series (no idle
//! timeout), so a kept handle always records into the series `/metrics` renders. A deleted
//! job's handles stay, as its series do.

use std::sync::{OnceLock, RwLock};

use foldhash::HashMap;
use metrics::{Counter, Histogram};

use crate::jobs::ExecutionStatus::{self, Failed, Timeout};
use crate::jobs::TriggerType;

/// The handles of one job's series, each registered on its first record.
#[derive(Default)]
struct JobSeries {
    fired_cron: OnceLock<Counter>,
    ended: [OnceLock<Counter>; ExecutionStatus::ALL.len()],
    duration: OnceLock<Histogram>,
    failures: OnceLock<Counter>,
}

/// Runs `record` with `job`'s handles, registering the job on its first record.
fn with_job(job: &str, record: impl FnOnce(&JobSeries)) {
    static JOBS: OnceLock<RwLock<HashMap<Box<str>, JobSeries>>> = OnceLock::new();
    let jobs = JOBS.get_or_init(Default::default);
    if let Some(series) = jobs.read().expect("job series lock").get(job) {
        return record(series);
    }
    record(
        jobs.write()
            .expect("job series lock")
            .entry(job.into())
            .or_default(),
    )
}

/// `scheduler_fires_total{job_name, trigger="CRON"}`: a cron fire of `job` recorded.
pub fn cron_fire_recorded(job: &str) {
    with_job(job, |s| {
        s.fired_cron
            .get_or_init(|| {
                metrics::counter!("scheduler_fires_total", "job_name" => job.to_string(), "trigger" => TriggerType::Cron.as_str())
            })
            .increment(1)
    });
}

/// The series of a row of `job` that ended with `status`: `job_execution_total`, its
/// duration when it ran, and `job_execution_failures_total` for FAILED and TIMEOUT.
pub fn ended(job: &str, status: ExecutionStatus, duration_ms: Option<i64>) {
    with_job(job, |s| {
        s.ended[status as usize]
            .get_or_init(|| {
                metrics::counter!("job_execution_total", "job_name" => job.to_string(), "status" => status.as_str())
            })
            .increment(1);
        if let Some(ms) = duration_ms {
            s.duration
                .get_or_init(|| {
                    metrics::histogram!("job_execution_duration_seconds", "job_name" => job.to_string())
                })
                .record(ms as f64 / 1000.0);
        }
        if matches!(status, Failed | Timeout) {
            s.failures
                .get_or_init(|| {
                    metrics::counter!("job_execution_failures_total", "job_name" => job.to_string())
                })
                .increment(1);
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::ExecutionStatus::Success;

    /// Every status indexes its own handle.
    #[test]
    fn each_status_has_its_own_place() {
        for (i, status) in ExecutionStatus::ALL.into_iter().enumerate() {
            assert_eq!(status as usize, i, "{status}");
        }
    }

    #[test]
    fn a_jobs_series_count_what_is_recorded_through_the_kept_handles() {
        let handle = crate::telemetry::metrics_handle();
        let job = "series-test-job";
        cron_fire_recorded(job);
        cron_fire_recorded(job);
        ended(job, Success, Some(1_500));
        ended(job, Success, None);
        ended(job, Timeout, Some(30_000));
        let text = handle.render();
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no line {prefix} in\n{text}"))
                .to_string()
        };
        assert!(
            line("scheduler_fires_total{job_name=\"series-test-job\"").ends_with(" 2"),
            "{text}"
        );
        assert!(
            line("job_execution_total{job_name=\"series-test-job\",status=\"SUCCESS\"}")
                .ends_with(" 2")
        );
        assert!(
            line("job_execution_total{job_name=\"series-test-job\",status=\"TIMEOUT\"}")
                .ends_with(" 1")
        );
        assert!(line("job_execution_failures_total{job_name=\"series-test-job\"}").ends_with(" 1"));
        assert!(
            line("job_execution_duration_seconds_count{job_name=\"series-test-job\"}")
                .ends_with(" 2")
        );
        assert!(
            !text.contains("job_execution_total{job_name=\"series-test-job\",status=\"FAILED\"}"),
            "a status never recorded has no series"
        );
    }
}
