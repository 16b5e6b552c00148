//! What one executor call costs the client's process: the same POST (JobFlow's ten headers, a
//! 400-byte JSON body, a per-call timeout) sent N at a time at each second boundary, through
//! reqwest, JobFlow's HTTP client today, or through hyper's own client (`hyper-util`'s
//! `legacy::Client`), to a hyper server in another process that answers
//! `{"success":true}`. Each client runs in a process of its own; the line it prints is its
//! CPU (user + system, `getrusage`) divided by its calls. The modes alternate.
//!
//! ```text
//! cargo run --release --manifest-path benches/http-client/Cargo.toml -- [CALLS_A_SECOND] [SECONDS] [ROUNDS]
//! ```
//! Defaults: 10000 calls a second, 8 seconds, 3 rounds. Results: docs/benchmarks.md.

use std::convert::Infallible;
use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};

/// The headers of a call (docs/executor-protocol.md), with values of a cron fire's size.
const HEADERS: [(&str, &str); 10] = [
    ("x-shard-start", "0"),
    ("x-shard-end", "0"),
    ("x-shard-count", "1"),
    ("x-shard-strategy", "MOD_HASH"),
    ("x-job-name", "bench-000001"),
    ("x-execution-id", "bench-000001:20261207050000:0-0"),
    ("x-fire-time", "2026-12-07T05:00:00Z"),
    ("x-retry-count", "0"),
    ("x-trace-id", "0123456789abcdef0123456789abcdef"),
    (
        "traceparent",
        "00-0123456789abcdef0123456789abcdef-0123456789abcdef-01",
    ),
];

const TIMEOUT: Duration = Duration::from_secs(305);

fn cpu_seconds() -> f64 {
    // SAFETY: getrusage fills the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(u.ru_utime) + t(u.ru_stime)
}

async fn until_next_second() {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    tokio::time::sleep(Duration::from_millis(1000 - u64::from(now.subsec_millis()))).await;
}

/// The executor: prints its port, answers every call with a success.
async fn serve() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    println!("{}", listener.local_addr().unwrap().port());
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        tokio::spawn(async move {
            let answer = hyper::service::service_fn(|_: Request<hyper::body::Incoming>| async {
                Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                    b"{\"success\":true}",
                ))))
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), answer)
                .await;
        });
    }
}

/// One client's run: `n` calls at each of `seconds` second boundaries (after one not counted).
async fn client(mode: &str, port: u16, n: usize, seconds: u64) {
    let reqwest = reqwest::Client::new();
    let hyper: hyper_util::client::legacy::Client<_, Full<Bytes>> =
        hyper_util::client::legacy::Client::builder(TokioExecutor::new()).build_http();
    let body = Bytes::from(vec![b'x'; 400]);
    let mut calls = 0usize;
    let mut cpu = 0.0;
    for second in 0..=seconds {
        until_next_second().await;
        let started = cpu_seconds();
        let mut set = tokio::task::JoinSet::new();
        for i in 0..n {
            let url = format!("http://127.0.0.1:{port}/internal/job/h{}", i % 7);
            let body = body.clone();
            if mode == "reqwest" {
                let client = reqwest.clone();
                set.spawn(async move {
                    let mut r = client
                        .post(url.as_str())
                        .timeout(TIMEOUT)
                        .header("content-type", "application/json");
                    for (k, v) in HEADERS {
                        r = r.header(k, v);
                    }
                    let answer = r.body(body).send().await.unwrap();
                    answer.bytes().await.unwrap().len()
                });
            } else {
                let client = hyper.clone();
                set.spawn(async move {
                    let mut r =
                        Request::post(url.as_str()).header("content-type", "application/json");
                    for (k, v) in HEADERS {
                        r = r.header(k, v);
                    }
                    let call = async {
                        let answer = client
                            .request(r.body(Full::new(body)).unwrap())
                            .await
                            .unwrap();
                        answer.into_body().collect().await.unwrap().to_bytes().len()
                    };
                    tokio::time::timeout(TIMEOUT, call).await.unwrap()
                });
            }
        }
        while let Some(r) = set.join_next().await {
            r.unwrap();
        }
        if second > 0 {
            calls += n;
            cpu += cpu_seconds() - started;
        }
    }
    println!(
        "| {mode} | {n} | {calls} | {:.1} µs |",
        cpu / calls as f64 * 1e6
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("serve") => return serve().await,
        Some("client") => {
            let (port, n, s) = (
                args[3].parse().unwrap(),
                args[4].parse().unwrap(),
                args[5].parse().unwrap(),
            );
            return client(&args[2], port, n, s).await;
        }
        _ => {}
    }
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or(default.into());
    let (n, seconds, rounds) = (arg(1, "10000"), arg(2, "8"), arg(3, "3"));
    let me = std::env::current_exe().unwrap();
    let mut server = Command::new(&me)
        .arg("serve")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut port,
    )
    .unwrap();
    println!("| client | calls a second | calls measured | CPU per call |\n|---|---|---|---|");
    for _ in 0..rounds.parse::<u32>().unwrap() {
        for mode in ["reqwest", "hyper"] {
            let status = Command::new(&me)
                .args(["client", mode, port.trim(), &n, &seconds])
                .status()
                .unwrap();
            assert!(status.success(), "the {mode} client failed");
        }
    }
    let _ = server.kill();
}
