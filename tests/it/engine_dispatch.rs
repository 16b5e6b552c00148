//! Cron fires reaching executors: shard ranges, headers, body, and the exactly-once guard.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, backend_tests, eventually, static_executors};
use crate::recorder::Recorder;

backend_tests!(
    sharded_fire_reaches_three_executors_with_every_header,
    split_view_schedulers_dispatch_each_fire_once,
    job_changes_through_another_instance_apply_within_two_seconds,
    a_job_named_in_any_script_fires_with_its_name_encoded_in_the_headers,
);

async fn sharded_fire_reaches_three_executors_with_every_header(backend: Backend) {
    let recorders = [
        Recorder::start().await,
        Recorder::start().await,
        Recorder::start().await,
    ];
    let mut addrs: Vec<String> = recorders.iter().map(|r| r.addr.clone()).collect();
    addrs.sort();
    let db = Arc::new(TestDb::create(backend).await);
    let list = addrs.clone();
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("inventory", &list)
    })
    .await;
    app.create_job(&json!({
        "name": "stock-count", "serviceName": "inventory", "handler": "countStock",
        "cron": "* * * * * ?", "shardCount": 10, "shardStrategy": "RANGE",
        "shardParams": {"start": 1, "end": 1000}, "jobParams": {"warehouse": "east"}
    }))
    .await;

    // The first fire: one call per executor, ranges in ip:port order, larger first.
    let calls = eventually(
        Duration::from_secs(10),
        "three calls of one fire",
        || async {
            let all: Vec<_> = recorders.iter().flat_map(|r| r.calls()).collect();
            let first = all
                .iter()
                .map(|c| c.header("x-fire-time").to_string())
                .min()?;
            let of_first: Vec<_> = all
                .into_iter()
                .filter(|c| c.header("x-fire-time") == first)
                .collect();
            (of_first.len() == 3).then_some(of_first)
        },
    )
    .await;
    app.patch("/api/v1/jobs/stock-count/enabled?enabled=false")
        .await;

    let by_addr: BTreeMap<String, (u32, u32)> = recorders
        .iter()
        .filter_map(|r| {
            r.calls()
                .iter()
                .find(|c| calls.iter().any(|x| x.trace_id() == c.trace_id()))
                .map(|c| (r.addr.clone(), c.range()))
        })
        .collect();
    let ranges: Vec<(u32, u32)> = addrs.iter().map(|a| by_addr[a]).collect();
    assert_eq!(ranges, [(0, 3), (4, 6), (7, 9)]);

    let data_ranges = BTreeMap::from([
        ((0, 3), (1, 400)),
        ((4, 6), (401, 700)),
        ((7, 9), (701, 1000)),
    ]);
    for c in &calls {
        let (start, end) = c.range();
        assert_eq!(c.handler, "countStock");
        let fire = c.header("x-fire-time");
        assert!(
            fire.ends_with('Z') && chrono::DateTime::parse_from_rfc3339(fire).is_ok(),
            "{fire}"
        );
        let compact = chrono::DateTime::parse_from_rfc3339(fire)
            .unwrap()
            .format("%Y%m%d%H%M%S")
            .to_string();
        assert_eq!(
            c.header("x-execution-id"),
            format!("stock-count:{compact}:{start}-{end}")
        );
        assert_eq!(c.header("x-shard-count"), "10");
        assert_eq!(c.header("x-shard-strategy"), "RANGE");
        assert_eq!(c.header("x-job-name"), "stock-count");
        assert_eq!(c.header("x-retry-count"), "0");
        assert_eq!(c.header("content-type"), "application/json");
        let trace = c.trace_id();
        assert_eq!(trace.len(), 32);
        let tp: Vec<&str> = c.header("traceparent").split('-').collect();
        assert_eq!(
            (tp[0], tp[1], tp[3]),
            ("00", trace, "01"),
            "W3C traceparent carries the trace id"
        );
        assert_eq!(tp[2].len(), 16);

        let b = &c.body;
        assert_eq!(b["traceId"], trace);
        assert_eq!(b["executionId"], c.header("x-execution-id"));
        assert_eq!(b["jobName"], "stock-count");
        assert_eq!(
            (b["shardStart"].as_u64(), b["shardEnd"].as_u64()),
            (Some(start as u64), Some(end as u64))
        );
        assert_eq!(b["shardCount"], 10);
        assert_eq!(b["shardStrategy"], "RANGE");
        assert_eq!(b["retryCount"], 0);
        assert_eq!(b["triggerType"], "CRON");
        assert_eq!(b["jobParams"], json!({"warehouse": "east"}));
        let (lo, hi) = data_ranges[&(start, end)];
        assert_eq!(b["dataRange"], json!({"start": lo, "end": hi}));
        assert!(
            b["reportUrl"]
                .as_str()
                .unwrap()
                .ends_with(&format!("/api/v1/jobs/executions/{trace}/result"))
        );

        let exec = eventually(Duration::from_secs(5), "SUCCESS", || async {
            let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
            (e["status"] == "SUCCESS").then_some(e)
        })
        .await;
        assert_eq!(exec["executionId"], c.header("x-execution-id"));
        assert_eq!(exec["triggerType"], "CRON");
        assert_eq!(exec["resultMessage"], "done");
        assert!(exec["durationMs"].as_i64().unwrap() >= 0);
        assert!(addrs.contains(&exec["executorInstance"].as_str().unwrap().to_string()));
        assert_eq!(
            exec["schedulerInstance"].as_str().unwrap(),
            app.addr.trim_start_matches("http://")
        );
    }
    let metrics = app.metrics().await;
    assert!(
        metrics.contains("job_execution_total{job_name=\"stock-count\",status=\"SUCCESS\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("job_execution_duration_seconds_bucket{job_name=\"stock-count\""));
    assert!(metrics.contains("scheduler_fire_delay_seconds_bucket"));
    assert!(metrics.contains("scheduler_owned_jobs"));
    // Exported from the start, so the alert on it has a series to watch.
    assert!(metrics.contains("scheduler_stepped_aside 0"), "{metrics}");
}

async fn split_view_schedulers_dispatch_each_fire_once(backend: Backend) {
    let (e1, e2) = (Recorder::start().await, Recorder::start().await);
    let db = Arc::new(TestDb::create(backend).await);
    // Both instances believe they are the only scheduler (standalone), so both own the job,
    // and they see different executor lists, so their shard ranges differ.
    let both = vec![e1.addr.clone(), e2.addr.clone()];
    let only_one = vec![e1.addr.clone()];
    let a = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("svc", &both)
    })
    .await;
    let b = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("svc", &only_one)
    })
    .await;
    a.create_job(&json!({"name": "split-view", "serviceName": "svc", "handler": "h", "cron": "* * * * * ?", "shardCount": 4})).await;
    // b learns about the job through the shared revision counter.
    tokio::time::sleep(Duration::from_secs(5)).await;
    a.patch("/api/v1/jobs/split-view/enabled?enabled=false")
        .await;
    tokio::time::sleep(Duration::from_millis(1500)).await;

    let calls: Vec<_> = e1.calls().into_iter().chain(e2.calls()).collect();
    let mut per_fire: BTreeMap<String, Vec<(u32, u32)>> = BTreeMap::new();
    for c in &calls {
        per_fire
            .entry(c.header("x-fire-time").to_string())
            .or_default()
            .push(c.range());
    }
    assert!(per_fire.len() >= 3, "fires observed: {per_fire:?}");
    for (fire, mut ranges) in per_fire {
        ranges.sort();
        // Exactly one scheduler's plan per fire: shards 0..4 covered once, not twice.
        let shards: Vec<u32> = ranges.iter().flat_map(|(s, e)| *s..=*e).collect();
        assert_eq!(shards, [0, 1, 2, 3], "fire {fire} dispatched as {ranges:?}");
    }
    let rows = a.executions("split-view").await;
    let mut schedulers_per_fire: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in &rows {
        schedulers_per_fire
            .entry(r["fireTime"].as_str().unwrap().into())
            .or_default()
            .insert(r["schedulerInstance"].as_str().unwrap().into());
    }
    assert!(
        schedulers_per_fire.values().all(|s| s.len() == 1),
        "{schedulers_per_fire:?}"
    );
    let skipped: f64 = [a.metrics().await, b.metrics().await]
        .iter()
        .flat_map(|m| m.lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|l| {
            l.starts_with("scheduler_duplicate_dispatch_skipped_total{job_name=\"split-view\"}")
        })
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum::<f64>();
    assert!(
        skipped >= 2.0,
        "the losing scheduler counts its skipped duplicates ({skipped})"
    );
}

async fn job_changes_through_another_instance_apply_within_two_seconds(backend: Backend) {
    let rec = Recorder::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = vec![rec.addr.clone()];
    let app = TestApp::spawn_with(db.clone(), move |s| {
        s.executors.static_ = static_executors("svc", &addr)
    })
    .await;
    // Written straight into the shared database, as another instance's API would.
    let req: jobflow::jobs::JobRequest = serde_json::from_value(
        json!({"name": "remote-made", "serviceName": "svc", "handler": "h", "cron": "* * * * * ?"}),
    )
    .unwrap();
    let spec = jobflow::jobs::JobSpec::parse(
        req,
        None,
        None,
        jobflow::jobs::TimeZoneName::parse("UTC").unwrap(),
        chrono::Utc::now(),
    )
    .unwrap();
    let created = chrono::Utc::now();
    app.store
        .create_job(&spec, Some("other-instance"), created)
        .await
        .unwrap();
    let first = eventually(Duration::from_secs(5), "a call for the new job", || async {
        rec.calls().first().cloned()
    })
    .await;
    let delay = first.received_at - created;
    assert!(
        delay < chrono::Duration::milliseconds(2000 + 1000),
        "took {delay}"
    );
    // Disabling it the same way stops it within the same bound.
    app.store
        .set_job_enabled("remote-made", false, None, chrono::Utc::now())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let n = rec.calls().len();
    tokio::time::sleep(Duration::from_millis(2000)).await;
    assert_eq!(rec.calls().len(), n, "a disabled job kept firing");
    let _: Value = Value::Null;
}

/// A job named in Chinese (the design's own example) fires like any other: the body carries
/// the name as it is; the `X-Job-Name` and `X-Execution-Id` headers carry it percent-encoded
/// (header values are ASCII).
async fn a_job_named_in_any_script_fires_with_its_name_encoded_in_the_headers(backend: Backend) {
    let recorder = Recorder::start().await;
    let db = Arc::new(TestDb::create(backend).await);
    let addr = recorder.addr.clone();
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("billing", &[addr])
    })
    .await;
    app.create_job(&json!({
        "name": "订单对账", "serviceName": "billing", "handler": "reconcile",
        "cron": "* * * * * ?", "shardCount": 2
    }))
    .await;
    let call = eventually(Duration::from_secs(10), "the first call", || async {
        recorder.calls().into_iter().next()
    })
    .await;
    app.patch("/api/v1/jobs/%E8%AE%A2%E5%8D%95%E5%AF%B9%E8%B4%A6/enabled?enabled=false")
        .await;
    let encoded = "%E8%AE%A2%E5%8D%95%E5%AF%B9%E8%B4%A6";
    assert_eq!(call.body["jobName"], "订单对账");
    assert_eq!(call.header("x-job-name"), encoded);
    let execution_id = call.body["executionId"].as_str().unwrap();
    assert!(execution_id.starts_with("订单对账:"), "{execution_id}");
    assert_eq!(
        call.header("x-execution-id"),
        execution_id.replace("订单对账", encoded)
    );
    let (status, page) = app.get(&format!("/api/v1/jobs/{encoded}/executions")).await;
    assert_eq!(status, 200);
    assert!(
        page["content"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["executionId"] == execution_id),
        "{page}"
    );
}
