//! The execution rows a fire, a retry, a child trigger or a re-run writes (docs/design.md,
//! "Dispatch"). Pure: the clock and the dispatching instance are passed in.

use chrono::{DateTime, Utc};

use super::plan;
use crate::discovery::ExecutorInstance;
use crate::jobs::{
    Execution, ExecutionStatus, JobDefinition, NewExecution, RouteStrategy, TriggerType,
    broadcast_execution_id, execution_id, new_trace_id, rerun_execution_id, retry_execution_id,
    triggered_execution_id,
};

/// One PENDING row per shard range over the live executors (range `i` planned for executor
/// `first + i`: 0 for a sharded job, the routing strategy's choice otherwise), held by `me` from `now` (a cron fire recorded
/// ahead of its instant: from the instant); or a single FAILED row of every shard when there
/// is no executor at all (the planner adds the retry it earns, recorded with it). The rows
/// use the job's `jobParams`; a trigger with its own sets them on the rows.
#[allow(clippy::too_many_arguments)]
pub fn fire_rows(
    job: &JobDefinition,
    fire_time: DateTime<Utc>,
    trigger: TriggerType,
    fire_id: Option<&str>,
    executors: &[ExecutorInstance],
    first: usize,
    me: &str,
    now: DateTime<Utc>,
) -> Vec<NewExecution> {
    let name = job.name().as_str();
    let shard_count = job.spec.shard_count;
    // The ranges of a trigger share its fire id (see `jobs::triggered_execution_id`): the
    // caller's (a backfill's instant), or a fresh one; a cron fire is named by its instant and
    // needs none.
    let fire_id = match (trigger, fire_id) {
        (TriggerType::Cron, _) => String::new(),
        (_, Some(id)) => id.to_string(),
        (_, None) => new_trace_id(),
    };
    let row = |start: u32, end: u32, executor: Option<String>| {
        NewExecution {
            execution_id: match trigger {
                TriggerType::Cron => execution_id(name, fire_time, start, end),
                other => triggered_execution_id(name, other, &fire_id, start, end),
            },
            trace_id: new_trace_id(),
            job_name: name.to_string(),
            trigger_type: trigger,
            fire_time,
            scheduler_instance: me.to_string(),
            executor_instance: executor,
            shard_start: start,
            shard_end: end,
            shard_count,
            trigger_time: now,
            // A cron fire claimed ahead is held from its instant; any other from now.
            due_time: match trigger {
                TriggerType::Cron => fire_time.max(now),
                _ => now,
            },
            status: ExecutionStatus::Pending,
            retry_count: 0,
            parent_trace_id: None,
            error_message: None,
            job_params: None,
        }
    };
    if job.spec.route_strategy == RouteStrategy::Broadcast && !executors.is_empty() {
        // One row per executor over every shard, its id naming the executor.
        return executors
            .iter()
            .map(|e| {
                let addr = e.addr.to_string();
                let mut r = row(0, shard_count - 1, Some(addr.clone()));
                r.execution_id = broadcast_execution_id(&r.execution_id, &addr);
                r
            })
            .collect();
    }
    let ranges = plan::assign(shard_count, executors.len(), first);
    if ranges.is_empty() {
        return vec![NewExecution {
            status: ExecutionStatus::Failed,
            error_message: Some(no_executor(job)),
            ..row(0, shard_count - 1, None)
        }];
    }
    ranges
        .iter()
        .map(|(r, e)| row(r.start, r.end, Some(executors[*e].addr.to_string())))
        .collect()
}

/// The automatic retry of `failed`, due at `due`: same range and fire, one more retry;
/// `trigger` is RETRY, or COMPENSATION when compensation settled the failure.
pub fn retry_row(
    failed: &Execution,
    me: &str,
    now: DateTime<Utc>,
    due: DateTime<Utc>,
    trigger: TriggerType,
) -> NewExecution {
    let retry = failed.retry_count + 1;
    NewExecution {
        execution_id: retry_execution_id(&failed.execution_id, retry),
        retry_count: retry,
        trigger_time: now,
        due_time: due,
        ..successor(failed, trigger, new_trace_id(), me)
    }
}

/// The rows of a child triggered by the parent run `parent_trace` whose SUCCESS completed its
/// fire, planned under the parent fire's [`child_fire_id`](crate::jobs::child_fire_id): each
/// first attempt names the parent run; a retry planned with them (the child found no
/// executor) names the attempt it follows.
pub fn child_rows(parent_trace: &str, planned: Vec<NewExecution>) -> Vec<NewExecution> {
    planned
        .into_iter()
        .map(|r| match r.retry_count {
            0 => NewExecution {
                parent_trace_id: Some(parent_trace.to_string()),
                ..r
            },
            _ => r,
        })
        .collect()
}

/// An operator's re-run of a finished execution's range, as a new RETRY execution.
pub fn rerun_row(finished: &Execution, me: &str, now: DateTime<Utc>) -> NewExecution {
    let trace_id = new_trace_id();
    NewExecution {
        execution_id: rerun_execution_id(&finished.execution_id, &trace_id),
        retry_count: finished.retry_count + 1,
        trigger_time: now,
        due_time: now,
        ..successor(finished, TriggerType::Retry, trace_id, me)
    }
}

fn successor(parent: &Execution, trigger: TriggerType, trace_id: String, me: &str) -> NewExecution {
    NewExecution {
        execution_id: String::new(),
        trace_id,
        job_name: parent.job_name.clone(),
        trigger_type: trigger,
        fire_time: parent.fire_time,
        scheduler_instance: me.to_string(),
        executor_instance: None,
        shard_start: parent.shard_start,
        shard_end: parent.shard_end,
        shard_count: parent.shard_count,
        trigger_time: parent.trigger_time,
        due_time: parent.due_time,
        status: ExecutionStatus::Pending,
        retry_count: parent.retry_count,
        parent_trace_id: Some(parent.trace_id.clone()),
        error_message: None,
        // A retry or re-run is the same run: it sends the same params.
        job_params: parent.job_params.clone(),
    }
}

pub fn no_executor(job: &JobDefinition) -> String {
    format!(
        "no executor instance available for service `{}`",
        job.spec.service_name
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discovery::InstanceAddr;
    use crate::dispatch::client::executor_request;

    /// A manual run of a job with its own params, recorded and failed.
    fn failed_run(params: Option<serde_json::Value>) -> (JobDefinition, Execution) {
        let now: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let job = JobDefinition::stored(
            serde_json::json!({"name": "j", "serviceName": "s", "handler": "h",
                "cron": "0 0 3 * * ?", "jobParams": {"day": "monday"}}),
            now,
        );
        let executor = ExecutorInstance {
            addr: InstanceAddr::parse("10.0.0.1:9999").unwrap(),
            path_prefix: None,
        };
        let mut row = fire_rows(
            &job,
            now,
            TriggerType::Manual,
            None,
            &[executor],
            0,
            "me",
            now,
        )
        .pop()
        .unwrap();
        row.job_params = params;
        row.status = ExecutionStatus::Failed;
        (job, row.recorded(1))
    }

    #[test]
    fn a_runs_params_go_to_its_retries_and_win_over_the_jobs() {
        let friday = serde_json::json!({"day": "friday"});
        let (job, run) = failed_run(Some(friday.clone()));
        let now = run.trigger_time;
        let retry = retry_row(&run, "me", now, now, TriggerType::Retry).recorded(2);
        let rerun = rerun_row(&run, "me", now).recorded(3);
        let compensated = retry_row(&run, "other", now, now, TriggerType::Compensation);
        for exec in [&run, &retry, &rerun, &compensated.recorded(4)] {
            let sent = executor_request(exec, &job, String::new());
            assert_eq!(sent.job_params, Some(friday.clone()), "{}", exec.trace_id);
        }
        // Without its own, a run sends the job's.
        let (job, plain) = failed_run(None);
        let retry = retry_row(&plain, "me", now, now, TriggerType::Retry).recorded(2);
        assert_eq!(retry.job_params, None);
        assert_eq!(
            executor_request(&retry, &job, String::new()).job_params,
            Some(serde_json::json!({"day": "monday"}))
        );
    }
}
