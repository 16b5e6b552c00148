//! The `jobflow` binary as an operator runs it: from an empty directory with no configuration.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn jobflow(dir: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_jobflow"));
    cmd.current_dir(dir).env_remove("RUST_LOG");
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("JOBFLOW")) {
        cmd.env_remove(k);
    }
    cmd
}

#[test]
fn help_documents_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let out = jobflow(dir.path()).arg("--help").output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for word in [
        "serve",
        "migrate",
        "check-config",
        "jobs",
        "--config",
        "JOBFLOW__",
    ] {
        assert!(text.contains(word), "{word} missing from --help:\n{text}");
    }
}

#[test]
fn migrate_creates_the_embedded_database() {
    let dir = tempfile::tempdir().unwrap();
    let out = jobflow(dir.path()).arg("migrate").output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("data/jobflow.db").is_file());
}

#[test]
fn invalid_configuration_names_the_key_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let out = jobflow(dir.path())
        .env("JOBFLOW__SCHEDULER__TIMEZONE", "Mars/Base")
        .arg("migrate")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("scheduler.timezone"), "{err}");

    std::fs::write(
        dir.path().join("extra.toml"),
        "[database]\nurl = \"mysql://root:hunter2@127.0.0.1:1/x\"\n",
    )
    .unwrap();
    let out = jobflow(dir.path())
        .args(["--config", "extra.toml", "migrate"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all.contains("hunter2"),
        "a secret reached the output: {all}"
    );

    let out = jobflow(dir.path())
        .args(["--config", "missing.toml", "migrate"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--config"));
}

#[test]
fn serve_answers_and_stops_cleanly_on_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = jobflow(dir.path())
        .env("JOBFLOW__SERVER__HOST", "127.0.0.1")
        .env("JOBFLOW__SERVER__PORT", "0")
        .env("JOBFLOW__LOG__FORMAT", "json")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut addr = None;
    for line in lines.by_ref() {
        let line = line.unwrap();
        let v: serde_json::Value =
            serde_json::from_str(&line).unwrap_or_else(|_| panic!("log line is not JSON: {line}"));
        if v["message"] == "JobFlow listening" {
            addr = v["addr"].as_str().map(str::to_string);
            break;
        }
        assert!(Instant::now() < deadline, "no listening line");
    }
    let addr = addr.expect("listening address logged");
    // Keep reading so the instance never writes into a closed pipe.
    std::thread::spawn(move || lines.for_each(drop));
    let health = reqwest::blocking::get(format!("http://{addr}/health/ready")).unwrap();
    assert_eq!(health.status(), 200);
    let swagger = reqwest::blocking::get(format!("http://{addr}/swagger-ui/")).unwrap();
    assert_eq!(swagger.status(), 200);

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let start = Instant::now();
    loop {
        if let Some(code) = child.try_wait().unwrap() {
            assert!(code.success(), "exit status {code:?}");
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "did not stop after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn check_config_prints_the_effective_settings_with_secrets_redacted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("extra.toml"),
        "[server]\nport = 9100\n[executors.static]\norders = [\"10.0.0.7:9001\"]\n",
    )
    .unwrap();
    let out = jobflow(dir.path())
        .env(
            "JOBFLOW__DATABASE__URL",
            "mysql://jobflow:hunter2@db:3306/jobflow",
        )
        .env("JOBFLOW__DATABASE__PASSWORD", "0815")
        .env("JOBFLOW__EXECUTOR__SIGNING_SECRET", "signing-secret-value")
        .env("JOBFLOW__SCHEDULER__TIMEZONE", "Asia/Shanghai")
        .args(["check-config", "--config", "extra.toml"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    for line in [
        "port = 9100",
        "timezone = \"Asia/Shanghai\"",
        "orders = [\"10.0.0.7:9001\"]",
        "url = \"mysql://jobflow:<redacted>@db:3306/jobflow\"",
        "password = \"<redacted>\"",
        "signing_secret = \"<redacted>\"",
    ] {
        assert!(stdout.contains(line), "`{line}` missing from:\n{stdout}");
    }
    for secret in ["hunter2", "0815", "signing-secret-value"] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{secret} shown"
        );
    }
    // Nothing was connected to or created.
    assert!(!dir.path().join("data").exists());
}

#[test]
fn check_config_exits_1_naming_the_bad_key() {
    let dir = tempfile::tempdir().unwrap();
    let check = |env: &[(&str, &str)], args: &[&str]| {
        let mut cmd = jobflow(dir.path());
        cmd.envs(env.iter().copied()).arg("check-config").args(args);
        let out = cmd.output().unwrap();
        assert!(
            out.stdout.is_empty(),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    let (code, err) = check(&[("JOBFLOW__COMPENSATION__INTERVAL_SECONDS", "0")], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`compensation.interval_seconds`"), "{err}");
    assert!(
        err.contains("JOBFLOW__COMPENSATION__INTERVAL_SECONDS"),
        "{err}"
    );

    let (code, err) = check(&[("JOBFLOW__DISCOVERY__ADVERTISE_IP", "jobflow-1")], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`discovery.advertise_ip`"), "{err}");

    std::fs::write(
        dir.path().join("typo.toml"),
        "[scheduler]\ntimezon = \"UTC\"\n",
    )
    .unwrap();
    let (code, err) = check(&[], &["--config", "typo.toml"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`scheduler.timezon`"), "{err}");
    assert!(err.contains("typo.toml"), "{err}");

    let (code, err) = check(&[("JOBFLOW__DISCOVERY__MODE", "nacos")], &[]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`auth.tokens`"), "{err}");

    let (code, err) = check(&[], &["--config", "missing.toml"]);
    assert_eq!(code, Some(1));
    assert!(err.contains("`--config`"), "{err}");
}

/// A MariaDB/MySQL database of its own, dropped at the end.
struct FreshMySqlDb {
    server: String,
    name: String,
}

impl FreshMySqlDb {
    fn server_url() -> String {
        std::env::var("JOBFLOW_TEST_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into())
    }

    fn run<T>(fut: impl std::future::Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(fut)
    }

    fn sql(server: &str, statement: String) -> Result<(), sqlx::Error> {
        use sqlx::Connection;
        Self::run(async {
            let mut conn = sqlx::MySqlConnection::connect(server).await?;
            sqlx::query(sqlx::AssertSqlSafe(statement))
                .execute(&mut conn)
                .await?;
            Ok(())
        })
    }

    fn create() -> Self {
        let server = Self::server_url();
        let name = format!("jobflow_start_{:016x}", rand::random::<u64>());
        Self::sql(
            &server,
            format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"),
        )
        .unwrap_or_else(|e| panic!("MySQL/MariaDB is required for this test ({server}): {e}"));
        Self { server, name }
    }

    fn url(&self) -> String {
        format!("{}/{}", self.server, self.name)
    }

    /// (version, success) of every row of sqlx's migration table.
    fn applied(&self) -> Vec<(i64, bool)> {
        use sqlx::Connection;
        Self::run(async {
            let mut conn = sqlx::MySqlConnection::connect(&self.url()).await.unwrap();
            sqlx::query_as("SELECT version, success FROM _sqlx_migrations ORDER BY version")
                .fetch_all(&mut conn)
                .await
                .unwrap()
        })
    }
}

impl Drop for FreshMySqlDb {
    fn drop(&mut self) {
        let _ = Self::sql(
            &self.server,
            format!("DROP DATABASE IF EXISTS `{}`", self.name),
        );
    }
}

/// Instances of the test, killed when it ends however it ends.
struct Instances(Vec<std::process::Child>);

impl Drop for Instances {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts `n` instances at once on one fresh database; each must come up and answer ready.
fn start_together(n: usize) {
    let db = FreshMySqlDb::create();
    let dirs: Vec<_> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
    let mut instances = Instances(Vec::new());
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, dir) in dirs.iter().enumerate() {
        let mut child = jobflow(dir.path())
            .env("JOBFLOW__DATABASE__URL", db.url())
            .env("JOBFLOW__SERVER__HOST", "127.0.0.1")
            .env("JOBFLOW__SERVER__PORT", "0")
            .env("JOBFLOW__LOG__FORMAT", "json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        instances.0.push(child);
        let tx = tx.clone();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let mut seen = Vec::new();
            let mut addr = None;
            for line in lines.by_ref() {
                let Ok(line) = line else { break };
                let v: serde_json::Value = serde_json::from_str(&line).unwrap_or_default();
                if v["message"] == "JobFlow listening" {
                    addr = v["addr"].as_str().map(str::to_string);
                    break;
                }
                seen.push(line);
            }
            let outcome = match addr {
                Some(a) => Ok(a),
                None => {
                    let mut err = String::new();
                    let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut err);
                    Err(format!(
                        "instance {i} stopped before listening:\n{}\n{err}",
                        seen.join("\n")
                    ))
                }
            };
            tx.send(outcome).unwrap();
            // Keep reading so the instance never writes into a closed pipe.
            lines.for_each(drop);
        });
    }
    let mut addrs = Vec::new();
    for _ in 0..n {
        let outcome = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("every instance either listens or stops within 2 minutes");
        addrs.push(outcome.unwrap_or_else(|e| panic!("{n} instances together: {e}")));
    }
    for addr in &addrs {
        let ready = reqwest::blocking::get(format!("http://{addr}/health/ready")).unwrap();
        assert_eq!(ready.status(), 200, "{addr} of {n} is not ready");
    }
    let files = std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations/mysql"))
        .unwrap()
        .count();
    let applied = db.applied();
    assert_eq!(
        applied.len(),
        files,
        "every migration applied once: {applied:?}"
    );
    assert!(applied.iter().all(|(_, ok)| *ok), "{applied:?}");
}

/// sqlx's own lock is `GET_LOCK(name, -1)`, which MariaDB answers NULL at once: without a lock
/// that works on both servers, instances started together die with "migration … is
/// partially applied".
#[test]
fn instances_started_together_on_a_fresh_mysql_database_all_come_up() {
    start_together(3);
    start_together(5);
}
