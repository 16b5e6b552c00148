//! Alerts against local receivers of each kind (webhook, DingTalk, WeCom, Feishu, Slack), each
//! verifying its vendor's signature the way the vendor does and answering in its format.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::routing::post;
use base64::Engine as _;
use chrono::Utc;
use hmac::{Hmac, Mac};
use jobflow::alerts::{Alerts, AlertsSettings, ChannelKind, ChannelSettings};
use jobflow::config::Secret;
use jobflow::jobs::{
    Execution, ExecutionStatus, JobDefinition, JobRequest, JobSpec, TimeZoneName, TriggerType,
};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::helpers::eventually;

const SECRET: &str = "SEC-test-secret-0123456789";

/// One message as a receiver saw it.
#[derive(Debug, Clone)]
struct Received {
    kind: &'static str,
    /// The signature checked out (or the kind has none).
    verified: bool,
    body: Value,
}

#[derive(Clone, Default)]
struct Inbox(Arc<Mutex<Vec<Received>>>);

impl Inbox {
    fn all(&self) -> Vec<Received> {
        self.0.lock().unwrap().clone()
    }
    fn of(&self, kind: &str) -> Vec<Received> {
        self.all().into_iter().filter(|r| r.kind == kind).collect()
    }
    fn push(&self, kind: &'static str, verified: bool, body: &[u8]) {
        let body = serde_json::from_slice(body).unwrap_or(Value::Null);
        self.0.lock().unwrap().push(Received {
            kind,
            verified,
            body,
        });
    }
}

fn hmac(key: &[u8], msg: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<Sha256>::new_from_slice(key).unwrap();
    m.update(msg);
    m.finalize().into_bytes().to_vec()
}

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

async fn webhook(State(inbox): State<Inbox>, headers: HeaderMap, body: Bytes) -> &'static str {
    let h = |k: &str| headers.get(k).and_then(|v| v.to_str().ok()).unwrap_or("");
    let ts = h("x-jobflow-timestamp");
    let mut msg = format!("{ts}.").into_bytes();
    msg.extend_from_slice(&body);
    let want = format!("v1={}", hex::encode(hmac(SECRET.as_bytes(), &msg)));
    let fresh = ts
        .parse::<i64>()
        .is_ok_and(|t| (Utc::now().timestamp() - t).abs() < 300);
    let json_type = h("content-type") == "application/json";
    inbox.push(
        "webhook",
        fresh && json_type && h("x-jobflow-signature") == want,
        &body,
    );
    ""
}

/// DingTalk: `timestamp` (ms) and `sign` in the query; a bad sign is errcode 310000.
async fn dingtalk(
    State(inbox): State<Inbox>,
    Query(q): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> axum::Json<Value> {
    let ts = q.get("timestamp").cloned().unwrap_or_default();
    let want = b64(&hmac(
        SECRET.as_bytes(),
        format!("{ts}\n{SECRET}").as_bytes(),
    ));
    let ok = q.get("access_token").map(String::as_str) == Some("dt-token")
        && q.get("sign") == Some(&want);
    inbox.push("dingtalk", ok, &body);
    axum::Json(if ok {
        json!({"errcode": 0, "errmsg": "ok"})
    } else {
        json!({"errcode": 310000, "errmsg": "sign not match"})
    })
}

async fn wecom(
    State(inbox): State<Inbox>,
    Query(q): Query<BTreeMap<String, String>>,
    body: Bytes,
) -> axum::Json<Value> {
    inbox.push(
        "wecom",
        q.get("key").map(String::as_str) == Some("wc-key"),
        &body,
    );
    axum::Json(json!({"errcode": 0, "errmsg": "ok"}))
}

/// Feishu: `timestamp` (s) and `sign` in the body, the string to sign being the HMAC key.
async fn feishu(State(inbox): State<Inbox>, body: Bytes) -> axum::Json<Value> {
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let ts = v["timestamp"].as_str().unwrap_or("");
    let want = b64(&hmac(format!("{ts}\n{SECRET}").as_bytes(), b""));
    let ok = v["sign"].as_str() == Some(want.as_str());
    inbox.push("feishu", ok, &body);
    axum::Json(if ok {
        json!({"code": 0, "msg": "success"})
    } else {
        json!({"code": 19021, "msg": "sign match fail or timestamp is not within one hour from current time"})
    })
}

async fn slack(State(inbox): State<Inbox>, body: Bytes) -> &'static str {
    inbox.push("slack", true, &body);
    "ok"
}

/// Answers only after a minute: a slow endpoint.
async fn slow(State(inbox): State<Inbox>, body: Bytes) -> &'static str {
    inbox.push("slow", true, &body);
    tokio::time::sleep(Duration::from_secs(60)).await;
    ""
}

/// All receivers on one local server; the base URL.
async fn receivers(inbox: Inbox) -> String {
    let app = Router::new()
        .route("/webhook", post(webhook))
        .route("/robot/send", post(dingtalk))
        .route("/cgi-bin/webhook/send", post(wecom))
        .route("/open-apis/bot/v2/hook/abc", post(feishu))
        .route("/services/T0/B0/x", post(slack))
        .route("/slow", post(slow))
        .with_state(inbox);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    base
}

fn channel(name: &str, kind: ChannelKind, url: String, secret: Option<&str>) -> ChannelSettings {
    ChannelSettings {
        name: name.into(),
        kind,
        url: Secret::new(url),
        secret: secret.map(Secret::new),
    }
}

fn job(name: &str, max_retry: i64, channels: &[&str]) -> JobDefinition {
    let req: JobRequest = serde_json::from_value(json!({
        "name": name, "serviceName": "order-service", "handler": "sync", "cron": "0 * * * * ?",
        "maxRetry": max_retry, "alertChannels": channels
    }))
    .unwrap();
    JobDefinition {
        id: 1,
        spec: JobSpec::parse(
            req,
            None,
            None,
            TimeZoneName::parse("UTC").unwrap(),
            Utc::now(),
        )
        .unwrap(),
        source: Default::default(),
        created_at: Utc::now(),
        updated_at: Utc::now(),
        created_by: None,
        updated_by: None,
        enabled_since: Utc::now(),
        revision: 1,
    }
}

fn execution(job: &str, status: ExecutionStatus, retry_count: u32) -> Execution {
    let fire = chrono::TimeZone::with_ymd_and_hms(&Utc, 2026, 11, 30, 12, 0, 0).unwrap();
    Execution {
        id: 7,
        execution_id: format!("{job}:20261130120000:0-0"),
        trace_id: format!("trace-{job}-{retry_count}-{status}"),
        job_name: job.into(),
        namespace: "default".into(),
        trigger_type: TriggerType::Retry,
        fire_time: fire,
        scheduler_instance: Some("127.0.0.1:8080".into()),
        executor_instance: Some("127.0.0.1:9001".into()),
        shard_start: 0,
        shard_end: 0,
        shard_count: 1,
        trigger_time: fire,
        due_time: fire,
        start_time: Some(fire),
        finish_time: Some(fire),
        duration_ms: Some(5),
        status,
        retry_count,
        parent_trace_id: None,
        result_message: None,
        error_message: (status != ExecutionStatus::Success).then(|| "HTTP 500: boom".to_string()),
        job_params: None,
    }
}

/// The value of one counter series in the process-wide Prometheus output (0 when absent).
fn counter(name: &str, labels: &[(&str, &str)]) -> u64 {
    let text = jobflow::telemetry::metrics_handle().render();
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")))
        .find(|l| {
            labels
                .iter()
                .all(|(k, v)| l.contains(&format!("{k}=\"{v}\"")))
        })
        .and_then(|l| l.rsplit(' ').next())
        .map_or(0, |v| v.parse().unwrap())
}

async fn wait_for(inbox: &Inbox, n: usize, what: &str) -> Vec<Received> {
    eventually(Duration::from_secs(20), what, || {
        let all = inbox.all();
        async move { (all.len() >= n).then_some(all) }
    })
    .await
}

#[tokio::test]
async fn every_vendor_receives_a_signed_message_in_its_format() {
    jobflow::telemetry::metrics_handle();
    let inbox = Inbox::default();
    let base = receivers(inbox.clone()).await;
    let settings = AlertsSettings {
        channels: vec![
            channel(
                "v-hook",
                ChannelKind::Webhook,
                format!("{base}/webhook"),
                Some(SECRET),
            ),
            channel(
                "v-ding",
                ChannelKind::Dingtalk,
                format!("{base}/robot/send?access_token=dt-token"),
                Some(SECRET),
            ),
            channel(
                "v-wecom",
                ChannelKind::Wecom,
                format!("{base}/cgi-bin/webhook/send?key=wc-key"),
                None,
            ),
            channel(
                "v-feishu",
                ChannelKind::Feishu,
                format!("{base}/open-apis/bot/v2/hook/abc"),
                Some(SECRET),
            ),
            channel(
                "v-slack",
                ChannelKind::Slack,
                format!("{base}/services/T0/B0/x"),
                None,
            ),
            // Signed with the wrong secret: the DingTalk receiver refuses it.
            channel(
                "v-ding-bad",
                ChannelKind::Dingtalk,
                format!("{base}/robot/send?access_token=dt-token"),
                Some("not-the-secret"),
            ),
        ],
        ..AlertsSettings::default()
    };
    settings.validate().unwrap();
    let alerts =
        Alerts::start(&settings, "127.0.0.1:8080", jobflow::clock::Clock::system()).unwrap();
    let all = [
        "v-hook",
        "v-ding",
        "v-wecom",
        "v-feishu",
        "v-slack",
        "v-ding-bad",
    ];
    let j = job("vendor-job", 1, &all);

    // A failure with a retry left alerts nobody; the last one alerts every channel.
    alerts.execution_final(&j, &execution("vendor-job", ExecutionStatus::Failed, 0));
    alerts.execution_final(&j, &execution("vendor-job", ExecutionStatus::Timeout, 1));
    let got = wait_for(&inbox, 6, "the failure alert on six channels").await;
    assert_eq!(got.len(), 6);
    let by_kind = |k: &str| inbox.of(k);

    let hook = &by_kind("webhook")[0];
    assert!(hook.verified, "webhook HMAC");
    assert_eq!(
        hook.body,
        json!({
            "event": "EXECUTION_FAILED",
            "jobName": "vendor-job",
            "traceId": "trace-vendor-job-1-TIMEOUT",
            "executionId": "vendor-job:20261130120000:0-0",
            "status": "TIMEOUT",
            "fireTime": "2026-11-30T12:00:00Z",
            "retryCount": 1,
            "errorMessage": "HTTP 500: boom",
            "schedulerInstance": "127.0.0.1:8080",
            "executorInstance": "127.0.0.1:9001",
            "occurredAt": hook.body["occurredAt"],
        })
    );
    assert!(
        hook.body["occurredAt"]
            .as_str()
            .is_some_and(|t| chrono::DateTime::parse_from_rfc3339(t).is_ok())
    );

    let ding = by_kind("dingtalk");
    assert_eq!(ding.len(), 2);
    assert_eq!(
        ding.iter().filter(|r| r.verified).count(),
        1,
        "one good, one bad sign"
    );
    let d = &ding[0].body;
    assert_eq!(d["msgtype"], "markdown");
    assert!(
        d["markdown"]["title"]
            .as_str()
            .unwrap()
            .contains("EXECUTION_FAILED")
    );
    assert!(
        d["markdown"]["text"]
            .as_str()
            .unwrap()
            .contains("vendor-job")
    );

    let wc = &by_kind("wecom")[0];
    assert!(wc.verified);
    assert_eq!(wc.body["msgtype"], "markdown");
    assert!(
        wc.body["markdown"]["content"]
            .as_str()
            .unwrap()
            .contains("TIMEOUT")
    );

    let fs = &by_kind("feishu")[0];
    assert!(fs.verified, "feishu sign: {}", fs.body);
    assert_eq!(fs.body["msg_type"], "text");
    assert!(
        fs.body["content"]["text"]
            .as_str()
            .unwrap()
            .contains("HTTP 500: boom")
    );

    let sl = &by_kind("slack")[0];
    assert!(
        sl.body["text"]
            .as_str()
            .unwrap()
            .starts_with("JobFlow EXECUTION_FAILED: vendor-job")
    );

    // The first success after the alert is a RECOVERED message; the next success is quiet.
    alerts.execution_final(&j, &execution("vendor-job", ExecutionStatus::Success, 0));
    alerts.execution_final(&j, &execution("vendor-job", ExecutionStatus::Success, 0));
    wait_for(&inbox, 12, "the recovery on six channels").await;
    assert_eq!(by_kind("webhook")[1].body["event"], "RECOVERED");
    assert!(by_kind("webhook")[1].verified);
    assert!(
        by_kind("slack")[1].body["text"]
            .as_str()
            .unwrap()
            .contains("RECOVERED")
    );

    let sent = |c: &str| {
        counter(
            "alert_deliveries_total",
            &[("channel", c), ("outcome", "sent")],
        )
    };
    eventually(Duration::from_secs(20), "delivery metrics", || {
        let done = sent("v-hook") == 2 && sent("v-slack") == 2;
        async move { done.then_some(()) }
    })
    .await;
    for c in ["v-ding", "v-wecom", "v-feishu"] {
        assert_eq!(sent(c), 2, "{c}");
    }
    assert_eq!(sent("v-ding-bad"), 0);
    assert_eq!(
        counter(
            "alert_deliveries_total",
            &[("channel", "v-ding-bad"), ("outcome", "failed")]
        ),
        2,
        "a refused signature is a failed delivery"
    );
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(inbox.all().len(), 12, "the second success sent nothing");
}

#[tokio::test]
async fn repeats_are_throttled_per_job_and_event_and_counted() {
    jobflow::telemetry::metrics_handle();
    let inbox = Inbox::default();
    let base = receivers(inbox.clone()).await;
    let settings = AlertsSettings {
        default_channels: vec!["t-hook".into()],
        channels: vec![channel(
            "t-hook",
            ChannelKind::Webhook,
            format!("{base}/webhook"),
            None,
        )],
        ..AlertsSettings::default()
    };
    assert_eq!(settings.min_interval_seconds, 300);
    let alerts =
        Alerts::start(&settings, "127.0.0.1:8080", jobflow::clock::Clock::system()).unwrap();
    // No alertChannels: alerts.default_channels apply.
    let a = job("throttle-a", 0, &[]);
    let b = job("throttle-b", 0, &[]);
    for _ in 0..3 {
        alerts.execution_final(&a, &execution("throttle-a", ExecutionStatus::Failed, 0));
    }
    alerts.no_executor(&a, &execution("throttle-a", ExecutionStatus::Failed, 0));
    alerts.no_executor(&a, &execution("throttle-a", ExecutionStatus::Failed, 0));
    alerts.execution_final(&b, &execution("throttle-b", ExecutionStatus::Failed, 0));
    let fire = Utc::now();
    alerts.fire_skipped(&b, fire);
    let got = wait_for(&inbox, 4, "four alerts").await;
    let mut events: Vec<(String, String)> = got
        .iter()
        .map(|r| {
            (
                r.body["jobName"].as_str().unwrap().to_string(),
                r.body["event"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    events.sort();
    assert_eq!(
        events,
        [
            ("throttle-a".into(), "EXECUTION_FAILED".into()),
            ("throttle-a".into(), "NO_EXECUTOR".into()),
            ("throttle-b".into(), "EXECUTION_FAILED".into()),
            ("throttle-b".into(), "FIRE_SKIPPED".into()),
        ]
    );
    let skipped = got
        .iter()
        .find(|r| r.body["event"] == "FIRE_SKIPPED")
        .unwrap();
    assert_eq!(skipped.body["traceId"], Value::Null);
    assert_eq!(skipped.body["schedulerInstance"], "127.0.0.1:8080");
    assert_eq!(
        skipped.body["fireTime"].as_str().unwrap(),
        fire.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
    );
    let throttled = |job: &str, event: &str| {
        counter(
            "alerts_throttled_total",
            &[("job_name", job), ("event", event)],
        )
    };
    assert_eq!(throttled("throttle-a", "EXECUTION_FAILED"), 2);
    assert_eq!(throttled("throttle-a", "NO_EXECUTOR"), 1);
    assert_eq!(throttled("throttle-b", "EXECUTION_FAILED"), 0);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(inbox.all().len(), 4);
}

#[tokio::test]
async fn a_slow_endpoint_delays_only_its_own_channel_and_overflow_is_counted() {
    jobflow::telemetry::metrics_handle();
    let inbox = Inbox::default();
    let base = receivers(inbox.clone()).await;
    let settings = AlertsSettings {
        queue_capacity: 2,
        min_interval_seconds: 0,
        timeout_seconds: 120,
        channels: vec![
            channel("s-slow", ChannelKind::Webhook, format!("{base}/slow"), None),
            channel(
                "s-fast",
                ChannelKind::Slack,
                format!("{base}/services/T0/B0/x"),
                None,
            ),
        ],
        ..AlertsSettings::default()
    };
    let alerts =
        Alerts::start(&settings, "127.0.0.1:8080", jobflow::clock::Clock::system()).unwrap();
    let j = job("slow-job", 0, &["s-slow", "s-fast"]);
    alerts.execution_final(&j, &execution("slow-job", ExecutionStatus::Failed, 0));
    // The slow channel's delivery task is now stuck in its first request.
    eventually(
        Duration::from_secs(20),
        "the first request on each channel",
        || {
            let n = (inbox.of("slow").len(), inbox.of("slack").len());
            async move { (n == (1, 1)).then_some(()) }
        },
    )
    .await;
    // Five more while it hangs, each call returning at once: two wait in the slow channel's
    // queue, three are dropped; the fast channel delivers every one meanwhile.
    for i in 0..5 {
        alerts.execution_final(&j, &execution("slow-job", ExecutionStatus::Failed, 0));
        eventually(
            Duration::from_secs(20),
            "the fast channel keeping up",
            || {
                let n = inbox.of("slack").len();
                async move { (n == 2 + i).then_some(()) }
            },
        )
        .await;
    }
    let outcome =
        |c: &str, o: &str| counter("alert_deliveries_total", &[("channel", c), ("outcome", o)]);
    assert_eq!(outcome("s-slow", "dropped"), 3);
    assert_eq!(outcome("s-fast", "dropped"), 0);
    assert_eq!(
        inbox.of("slow").len(),
        1,
        "still stuck in the first request"
    );
}
