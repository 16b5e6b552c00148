//! The examples of docs/executor-protocol.md, checked against the real protocol: the worked
//! signature example, the Python executor run under the real scheduler, and the Java
//! controller's use of the headers and canonical string.

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use jobflow::config::Secret;
use jobflow_executor::protocol;
use serde_json::json;

use crate::helpers::{Backend, TestApp, TestDb, eventually, static_executors};

fn doc() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/executor-protocol.md"
    ))
    .unwrap()
}

/// The contents of the first fenced block whose info string starts with `info`.
fn block(doc: &str, info: &str) -> String {
    let start = doc
        .find(&format!("```{info}"))
        .unwrap_or_else(|| panic!("no ```{info} block"));
    let body = &doc[start..];
    let body = &body[body.find('\n').unwrap() + 1..];
    body[..body.find("```").unwrap()].to_string()
}

#[test]
fn the_worked_signature_example_is_right() {
    let ex = block(&doc(), "text signature-example");
    let field = |name: &str| {
        ex.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap()
            .trim()
            .to_string()
    };
    let sig = protocol::signature(
        field("secret").as_bytes(),
        &field("method"),
        &field("path"),
        field("timestamp").parse().unwrap(),
        &field("traceId"),
        field("body").as_bytes(),
    );
    assert_eq!(sig, field("signature"));
}

#[test]
fn the_java_example_follows_the_protocol() {
    let java = block(&doc(), "java");
    for needle in [
        "\"X-Trace-Id\"",
        "\"X-JobFlow-Timestamp\"",
        "\"X-JobFlow-Signature\"",
        "\"X-Shard-Start\"",
        "\"X-Shard-End\"",
        "\"X-Shard-Count\"",
        "@PostMapping(\"/{handler}\")",
        "@RequestMapping(\"/internal/job\")",
        "\"HmacSHA256\"",
        // The canonical string in the documented order, then the raw body.
        "(\"POST\\n\" + path + \"\\n\" + ts + \"\\n\" + traceId + \"\\n\")",
        "mac.doFinal(body)",
        "\"v1=\" + hex(mac.doFinal(body))",
        "@RequestBody byte[] body",
        "@RequestHeader(\"X-Execution-Id\")",
        "MessageDigest.isEqual(",
        "MAX_AGE_SECONDS = 300",
        "status(401)",
        "result(true, ",
        "result(false, ",
    ] {
        assert!(java.contains(needle), "the Java example lacks {needle}");
    }
}

struct Python(Child);

impl Drop for Python {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn python_executor(secret: &str) -> (Python, String) {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("executor.py");
    std::fs::write(&script, block(&doc(), "python")).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("python3")
        .arg(&script)
        .arg(port.to_string())
        .arg(secret)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs the documented Python executor");
    let addr = format!("127.0.0.1:{port}");
    eventually(
        Duration::from_secs(10),
        "the Python executor to listen",
        || async { std::net::TcpStream::connect(&addr).is_ok().then_some(()) },
    )
    .await;
    // The script file must outlive the interpreter's start.
    std::mem::forget(dir);
    (Python(child), addr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_example_runs_under_the_real_scheduler() {
    let secret = "python-example-secret";
    let (_py, addr) = python_executor(secret).await;
    let db = Arc::new(TestDb::create(Backend::Sqlite).await);
    let list = vec![addr.clone()];
    let app = TestApp::spawn_with(db, move |s| {
        s.executors.static_ = static_executors("py-svc", &list);
        s.executor.signing_secret = Some(Secret::new(secret));
    })
    .await;
    app.create_job(&json!({"name": "py-sync", "serviceName": "py-svc", "handler": "syncOrders", "cron": "0 0 3 1 1 ?", "shardCount": 4, "maxRetry": 0}))
        .await;
    let (_, created) = app.post("/api/v1/jobs/py-sync/trigger", &json!({})).await;
    let trace = created[0]["traceId"].as_str().unwrap().to_string();
    let e = eventually(
        Duration::from_secs(10),
        "the Python executor's answer",
        || async {
            let (_, e) = app.get(&format!("/api/v1/jobs/executions/{trace}")).await;
            (e["status"] != "PENDING" && e["status"] != "RUNNING").then_some(e)
        },
    )
    .await;
    assert_eq!(e["status"], "SUCCESS", "{e}");
    assert_eq!(
        e["resultMessage"],
        format!("trace {trace} synced 100 orders"),
        "one executor: the whole shard range 0-3"
    );

    // Calls the example must refuse: unsigned, wrong secret, stale.
    let body = br#"{"traceId":"t","shardStart":0,"shardEnd":0,"shardCount":1}"#.to_vec();
    let path = "/internal/job/syncOrders";
    let now = chrono::Utc::now().timestamp();
    let client = reqwest::Client::new();
    let send = |ts: Option<i64>, key: &str| {
        let mut r = client
            .post(format!("http://{addr}{path}"))
            .header("X-Trace-Id", "t")
            .body(body.clone());
        if let Some(ts) = ts {
            r = r.header("X-JobFlow-Timestamp", ts).header(
                "X-JobFlow-Signature",
                protocol::signature(key.as_bytes(), "POST", path, ts, "t", &body),
            );
        }
        r.send()
    };
    assert_eq!(send(None, secret).await.unwrap().status(), 401);
    assert_eq!(send(Some(now), "wrong").await.unwrap().status(), 401);
    assert_eq!(send(Some(now - 400), secret).await.unwrap().status(), 401);
    assert_eq!(send(Some(now), secret).await.unwrap().status(), 200);
}
