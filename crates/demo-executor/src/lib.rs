//! The demo executor's handlers, as a library so tests can serve them in-process.
//!
//! - `succeed`: answers success at once.
//! - `fail`: always fails (watch the scheduler retry it).
//! - `slow`: a background handler (202) that works for `jobParams.seconds` (default 30) and
//!   then reports success.
//! - `sleep`: a synchronous handler that works for `jobParams.sleepMillis` (default 1000) and
//!   then succeeds; make it slower than the job's `timeoutSeconds` to watch the executor stop
//!   it (TIMEOUT), or cancel it while it runs.
//! - `shardedSync`: shows which data this execution owns: for MOD_HASH the ids among
//!   `1..=jobParams.total` (default 100) with `id % shardCount` in its range, for RANGE its
//!   data slice, for CUSTOM its item parameters.

use std::time::Duration;

use jobflow_executor::{JobContext, JobExecutor, JobResult};
use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Params {
    seconds: Option<u64>,
    sleep_millis: Option<u64>,
    total: Option<u64>,
}

fn params(ctx: &JobContext) -> Params {
    ctx.params().unwrap_or_default()
}

/// What `shardedSync` owns, as one line.
pub fn owned_data(ctx: &JobContext) -> String {
    match ctx.shard_strategy.as_str() {
        "RANGE" => match ctx.data_range {
            Some(r) => format!(
                "RANGE shards {}-{} of {}: ids {}..={}",
                ctx.shard_start, ctx.shard_end, ctx.shard_count, r.start, r.end
            ),
            None => "RANGE without a data range".into(),
        },
        "CUSTOM" => format!(
            "CUSTOM shards {}-{}: {:?}",
            ctx.shard_start, ctx.shard_end, ctx.shard_items
        ),
        _ => {
            let total = params(ctx).total.unwrap_or(100);
            let ids: Vec<u64> = (1..=total).filter(|id| ctx.owns_id(*id)).collect();
            format!(
                "MOD_HASH shards {}-{} of {}: {} ids {:?}",
                ctx.shard_start,
                ctx.shard_end,
                ctx.shard_count,
                ids.len(),
                ids
            )
        }
    }
}

pub fn handlers(executor: JobExecutor) -> JobExecutor {
    executor
        .handler("succeed", |ctx: JobContext| async move {
            tracing::info!("succeeding");
            JobResult::success(format!("{} done", ctx.job_name))
        })
        .handler("fail", |ctx: JobContext| async move {
            tracing::warn!(retry = ctx.retry_count, "failing on purpose");
            JobResult::failure(format!(
                "{} failed on purpose (attempt {})",
                ctx.job_name,
                ctx.retry_count + 1
            ))
        })
        .background_handler("slow", |ctx: JobContext| async move {
            let seconds = params(&ctx).seconds.unwrap_or(30);
            tracing::info!(seconds, "working in the background");
            for done in 1..=seconds {
                tokio::time::sleep(Duration::from_secs(1)).await;
                tracing::info!("worked {done} of {seconds} s");
            }
            JobResult::success(format!("worked {seconds}s"))
        })
        .handler("sleep", |ctx: JobContext| async move {
            let millis = params(&ctx).sleep_millis.unwrap_or(1000);
            tracing::info!(millis, "sleeping");
            tokio::time::sleep(Duration::from_millis(millis)).await;
            JobResult::success(format!("slept {millis}ms"))
        })
        .handler("shardedSync", |ctx: JobContext| async move {
            let line = owned_data(&ctx);
            tracing::info!(owned = %line, "sharded sync");
            JobResult::success(line)
        })
}
