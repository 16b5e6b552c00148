//! The Rust SDK's sample for the conformance suite (conformance/README.md): the handlers every
//! SDK's sample serves, on `127.0.0.1:$JOBFLOW_CONFORMANCE_PORT`, accepting only calls signed
//! with `$JOBFLOW_SIGNING_SECRET`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jobflow_executor::{JobContext, JobExecutor, JobResult};
use serde_json::{Value, json};

/// What `echo` answers: the context as the handler sees it, and how often it ran.
fn echo(ctx: &JobContext, runs: u32) -> Value {
    json!({
        "traceId": ctx.trace_id,
        "executionId": ctx.execution_id,
        "jobName": ctx.job_name,
        "handler": ctx.handler,
        "triggerType": ctx.trigger_type,
        "fireTime": ctx.fire_time.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        "shardStart": ctx.shard_start,
        "shardEnd": ctx.shard_end,
        "shardCount": ctx.shard_count,
        "shardStrategy": ctx.shard_strategy,
        "retryCount": ctx.retry_count,
        "timeoutSeconds": ctx.timeout_seconds,
        "jobParams": ctx.job_params,
        "dataRange": ctx.data_range.as_ref().map(|r| json!({"start": r.start, "end": r.end})),
        "shardItems": ctx.shard_items,
        "runs": runs,
    })
}

/// Sleeps `jobParams.millis`; a handler that was not stopped then tells `jobParams.witness`.
async fn sleep_then_witness(http: &reqwest::Client, ctx: &JobContext) {
    let params = ctx.job_params.clone().unwrap_or(Value::Null);
    let millis = params["millis"].as_u64().unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(millis)).await;
    if let Some(url) = params["witness"].as_str() {
        let _ = http
            .post(url)
            .json(&json!({"traceId": ctx.trace_id}))
            .send()
            .await;
    }
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let port: u16 = std::env::var("JOBFLOW_CONFORMANCE_PORT")
        .expect("JOBFLOW_CONFORMANCE_PORT")
        .parse()
        .expect("a port");
    let secret = std::env::var("JOBFLOW_SIGNING_SECRET").expect("JOBFLOW_SIGNING_SECRET");
    let runs: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
    let http = reqwest::Client::new();
    let (sleeper, background) = (http.clone(), http);
    let executor = JobExecutor::with_secret(secret)
        .handler("echo", move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                let n = {
                    let mut runs = runs.lock().unwrap();
                    let n = runs.entry(ctx.trace_id.clone()).or_insert(0);
                    *n += 1;
                    *n
                };
                JobResult::success(echo(&ctx, n).to_string())
            }
        })
        .handler("sleep", move |ctx: JobContext| {
            let http = sleeper.clone();
            async move {
                sleep_then_witness(&http, &ctx).await;
                JobResult::success("slept")
            }
        })
        .handler("log", |_: JobContext| async {
            use jobflow_executor::logs::log;
            log(tracing::Level::INFO, "one");
            log(tracing::Level::WARN, "two");
            log(tracing::Level::ERROR, "three");
            JobResult::success("logged")
        })
        .handler("fail", |_: JobContext| async {
            JobResult::failure("failed on purpose")
        })
        .handler("throw", |ctx: JobContext| async move {
            if !ctx.trace_id.is_empty() {
                panic!("thrown on purpose");
            }
            JobResult::success("never")
        })
        .background_handler("background", move |ctx: JobContext| {
            let http = background.clone();
            async move {
                sleep_then_witness(&http, &ctx).await;
                JobResult::success("done in background")
            }
        });
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let _registration = register(port).await;
    axum::serve(listener, executor.router()).await
}

/// With `$JOBFLOW_NACOS_ADDR` set, registers as `$JOBFLOW_NACOS_SERVICE` (credentials from
/// `$JOBFLOW_NACOS_USERNAME` and `_PASSWORD`), kept for as long as the sample serves.
#[cfg(feature = "nacos")]
async fn register(port: u16) -> Option<nacos_sdk::api::naming::NamingService> {
    use jobflow_executor::nacos::{Registration, register};
    let server_addr = std::env::var("JOBFLOW_NACOS_ADDR").ok()?;
    let r = Registration {
        server_addr,
        namespace: "public".into(),
        group: None,
        service_name: std::env::var("JOBFLOW_NACOS_SERVICE").expect("JOBFLOW_NACOS_SERVICE"),
        ip: "127.0.0.1".into(),
        port,
        path_prefix: None,
        username: std::env::var("JOBFLOW_NACOS_USERNAME").ok(),
        password: std::env::var("JOBFLOW_NACOS_PASSWORD").ok(),
    };
    Some(register(&r).await.expect("registered in Nacos"))
}

#[cfg(not(feature = "nacos"))]
async fn register(_port: u16) -> Option<()> {
    assert!(
        std::env::var_os("JOBFLOW_NACOS_ADDR").is_none(),
        "JOBFLOW_NACOS_ADDR needs the sample built with --features nacos"
    );
    None
}
