//! examples/java/JobFlowExecutor.java, compiled for Java 8 with the JDK's javac and run under
//! the real scheduler: signed calls, an immediate answer, 202 + signed report, the executor's
//! own timeout, the status endpoint, cancellation, and a repeated call that is not run again.
//! Status and cancel answers are read with the scheduler's own parser.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use jobflow::config::Secret;
use jobflow_executor::protocol;
use serde_json::{Value, json};

use crate::helpers::{Backend, TestApp, TestDb, eventually, static_executors};

const SECRET: &str = "java-example-secret";

struct Java {
    child: Child,
    _classes: tempfile::TempDir,
}

impl Drop for Java {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Compiles the example with `javac --release 8` (no API newer than Java 8 may be used) and
/// starts it on a free port.
fn java_executor() -> (Java, String) {
    let source = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/java/JobFlowExecutor.java"
    );
    let classes = tempfile::tempdir().unwrap();
    let out = Command::new("javac")
        .args(["--release", "8", "-Xlint:all,-options", "-Werror", "-d"])
        .arg(classes.path())
        .arg(source)
        .output()
        .expect("javac (a JDK) is needed: scripts/test.sh installs one");
    assert!(
        out.status.success(),
        "javac --release 8 failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut child = Command::new("java")
        .arg("-cp")
        .arg(classes.path())
        .args(["JobFlowExecutor", "0", SECRET, "127.0.0.1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("java runs the example");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line
        .trim()
        .strip_prefix("listening on port ")
        .unwrap_or_else(|| panic!("unexpected first line: {line}"));
    let addr = format!("127.0.0.1:{port}");
    (
        Java {
            child,
            _classes: classes,
        },
        addr,
    )
}

async fn settled(app: &TestApp, trace: &str) -> Value {
    eventually(
        Duration::from_secs(20),
        "the execution to settle",
        || async {
            let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
            (e["status"] != "PENDING" && e["status"] != "RUNNING").then_some(e)
        },
    )
    .await
}

async fn trigger(app: &TestApp, job: &str) -> String {
    let (status, created) = app
        .post(&format!("/api/v1/jobs/{job}/trigger"), &json!({}))
        .await;
    assert_eq!(status, 200, "{created}");
    created[0]["traceId"].as_str().unwrap().to_string()
}

/// A request signed as the scheduler signs it.
fn signed(
    client: &reqwest::Client,
    method: reqwest::Method,
    addr: &str,
    path: &str,
    trace: &str,
    body: Vec<u8>,
) -> reqwest::RequestBuilder {
    let ts = chrono::Utc::now().timestamp();
    client
        .request(method.clone(), format!("http://{addr}{path}"))
        .header("X-Trace-Id", trace)
        .header("X-JobFlow-Timestamp", ts)
        .header(
            "X-JobFlow-Signature",
            protocol::signature(SECRET.as_bytes(), method.as_str(), path, ts, trace, &body),
        )
        .body(body)
}

/// A status or cancel answer, read as the scheduler reads it.
async fn status_answer(req: reqwest::RequestBuilder) -> protocol::ExecutorStatus {
    let resp = req.send().await.unwrap();
    let code = resp.status().as_u16();
    let body = resp.text().await.unwrap();
    protocol::parse_status_answer(code, &body).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_java_example_runs_under_the_real_scheduler() {
    use protocol::{ExecutorStatus, FinalStatus};
    use reqwest::Method;

    let (_java, addr) = java_executor();
    let db = Arc::new(TestDb::create(Backend::Sqlite).await);
    let list = vec![addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("java-svc", &list);
        s.executor.signing_secret = Some(Secret::new(SECRET));
    })
    .await;
    for (name, handler, params, timeout) in [
        ("java-sync", "syncOrders", json!(null), 300),
        ("java-async", "rebuildIndex", json!({"millis": 300}), 300),
        ("java-stuck", "waitForCancel", json!(null), 1),
    ] {
        app.create_job(
            &json!({"name": name, "serviceName": "java-svc", "handler": handler,
            "cron": "0 0 3 1 1 ?", "shardCount": 4, "maxRetry": 0, "jobParams": params,
            "timeoutSeconds": timeout}),
        )
        .await;
    }

    // An immediate answer.
    let trace = trigger(&app, "java-sync").await;
    let e = settled(&app, &trace).await;
    assert_eq!(e["status"], "SUCCESS", "{e}");
    assert_eq!(
        e["resultMessage"], "java synced 100 orders",
        "shards 0-3 of 4"
    );

    // 202, then a signed report to reportUrl; the status endpoint remembers it.
    let trace = trigger(&app, "java-async").await;
    let e = settled(&app, &trace).await;
    assert_eq!(e["status"], "SUCCESS", "{e}");
    assert_eq!(e["resultMessage"], "java rebuilt the index in 300 ms");
    let client = reqwest::Client::new();
    let status_path = protocol::status_path("/internal/job", &trace);
    assert_eq!(
        status_answer(signed(
            &client,
            Method::GET,
            &addr,
            &status_path,
            &trace,
            Vec::new()
        ))
        .await,
        ExecutorStatus::Finished(
            FinalStatus::Success,
            Some("java rebuilt the index in 300 ms".into())
        )
    );

    // The executor enforces timeoutSeconds (1 s here) and records the run as TIMEOUT.
    let stuck = trigger(&app, "java-stuck").await;
    let stuck_path = protocol::status_path("/internal/job", &stuck);
    eventually(
        Duration::from_secs(20),
        "the executor's timeout",
        || async {
            let answer = status_answer(signed(
                &client,
                Method::GET,
                &addr,
                &stuck_path,
                &stuck,
                Vec::new(),
            ))
            .await;
            matches!(answer, ExecutorStatus::Finished(..)).then_some(())
        },
    )
    .await;
    assert_eq!(
        status_answer(signed(
            &client,
            Method::GET,
            &addr,
            &stuck_path,
            &stuck,
            Vec::new()
        ))
        .await,
        ExecutorStatus::Finished(
            FinalStatus::Timeout,
            Some("aborted after 1s (timeoutSeconds)".into())
        )
    );

    // Unsigned and wrongly signed requests are refused.
    let unsigned = client
        .get(format!("http://{addr}{status_path}"))
        .send()
        .await
        .unwrap();
    assert_eq!(unsigned.status(), 401);
    let wrong = client
        .post(format!("http://{addr}/internal/job/syncOrders"))
        .header("X-Trace-Id", "t1")
        .header("X-JobFlow-Timestamp", chrono::Utc::now().timestamp())
        .header("X-JobFlow-Signature", "v1=00")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);

    // Cancellation, as the scheduler sends it, of a long background run.
    let call = |trace: &str| {
        let body = serde_json::to_vec(&json!({"traceId": trace, "timeoutSeconds": 600,
            "reportUrl": "http://127.0.0.1:9/api/v1/jobs/executions/c1/result"}))
        .unwrap();
        signed(
            &client,
            Method::POST,
            &addr,
            "/internal/job/waitForCancel",
            trace,
            body,
        )
        .header("X-Execution-Id", "job:20260101000000:0-0")
        .header("X-Shard-Start", "0")
        .header("X-Shard-End", "0")
        .header("X-Shard-Count", "1")
    };
    assert_eq!(call("c1").send().await.unwrap().status(), 202);
    // A repeated call is answered from memory, not run again.
    assert_eq!(call("c1").send().await.unwrap().status(), 202);
    let status = |trace: &str| {
        let path = protocol::status_path("/internal/job", trace);
        signed(&client, Method::GET, &addr, &path, trace, Vec::new())
    };
    assert_eq!(status_answer(status("c1")).await, ExecutorStatus::Running);
    let cancel = |trace: &str| {
        let path = protocol::cancel_path("/internal/job", trace);
        signed(&client, Method::POST, &addr, &path, trace, Vec::new())
    };
    assert_eq!(
        status_answer(cancel("c1")).await,
        ExecutorStatus::Finished(FinalStatus::Cancelled, Some("cancelled".into()))
    );
    assert_eq!(
        status_answer(status("c1")).await,
        ExecutorStatus::Finished(FinalStatus::Cancelled, Some("cancelled".into()))
    );
    // A cancel that overtakes its call is remembered: the call is refused when it arrives.
    let overtaken = ExecutorStatus::Finished(
        FinalStatus::Cancelled,
        Some("cancelled before its call arrived".into()),
    );
    assert_eq!(status_answer(cancel("never-seen")).await, overtaken);
    let late = call("never-seen").send().await.unwrap();
    assert_eq!(late.status(), 200);
    let late: serde_json::Value = late.json().await.unwrap();
    assert_eq!(late["status"], "CANCELLED", "{late}");
    assert_eq!(status_answer(status("never-seen")).await, overtaken);

    app.stop().await;
}
