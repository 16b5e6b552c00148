//! Test harness: the real application on 127.0.0.1:0 with its own database (a temporary
//! SQLite file, or a uniquely named MariaDB/MySQL database dropped afterwards).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use jobflow::Application;
use jobflow::config::{DiscoveryMode, Secret, Settings};
use serde_json::Value;
use sqlx::Connection;
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    MySql,
}

/// Server URL without a database, e.g. `mysql://root@127.0.0.1:3306`.
fn mysql_server_url() -> String {
    std::env::var("JOBFLOW_TEST_MYSQL_URL").unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into())
}

/// A database of its own for one test; removed when dropped.
pub struct TestDb {
    pub url: String,
    mysql_name: Option<String>,
    _dir: Option<tempfile::TempDir>,
}

impl TestDb {
    pub async fn create(backend: Backend) -> Self {
        match backend {
            Backend::Sqlite => {
                let dir = tempfile::tempdir().expect("temp dir");
                let url = format!("sqlite://{}/jobflow.db", dir.path().display());
                Self {
                    url,
                    mysql_name: None,
                    _dir: Some(dir),
                }
            }
            Backend::MySql => {
                let name = format!("jobflow_test_{:016x}", rand::random::<u64>());
                let mut conn = sqlx::MySqlConnection::connect(&mysql_server_url())
                    .await
                    .unwrap_or_else(|e| {
                        panic!(
                            "MySQL/MariaDB is required for the mysql test suite ({}): {e}",
                            mysql_server_url()
                        )
                    });
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "CREATE DATABASE `{name}` CHARACTER SET utf8mb4"
                )))
                .execute(&mut conn)
                .await
                .expect("create test database");
                Self {
                    url: format!("{}/{name}", mysql_server_url()),
                    mysql_name: Some(name),
                    _dir: None,
                }
            }
        }
    }
}

impl TestDb {
    /// Runs `sql` on the test's database directly (to damage or inspect what the store wrote).
    pub async fn execute(&self, sql: &str) {
        let sql = sqlx::AssertSqlSafe(sql.to_string());
        if self.url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
        } else {
            let mut conn = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
            sqlx::query(sql).execute(&mut conn).await.unwrap();
        }
    }
}

impl TestDb {
    /// The one integer `sql` selects, read from the test's database directly.
    pub async fn fetch_i64(&self, sql: &str) -> i64 {
        let sql = sqlx::AssertSqlSafe(sql.to_string());
        if self.url.starts_with("sqlite:") {
            let mut conn = sqlx::SqliteConnection::connect(&self.url).await.unwrap();
            sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
        } else {
            let mut conn = sqlx::MySqlConnection::connect(&self.url).await.unwrap();
            sqlx::query_scalar(sql).fetch_one(&mut conn).await.unwrap()
        }
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(name) = self.mysql_name.take() else {
            return;
        };
        // Drop runs outside async context guarantees; use a small runtime of its own.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(mut conn) = sqlx::MySqlConnection::connect(&mysql_server_url()).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS `{name}`"
                    )))
                    .execute(&mut conn)
                    .await;
                }
            });
        })
        .join();
    }
}

pub fn base_settings(db_url: &str) -> Settings {
    let mut s = Settings::default();
    s.server.host = "127.0.0.1".into();
    s.server.port = 0;
    s.database.url = Secret::new(db_url);
    s.database.max_connections = 5u32.try_into().unwrap();
    s.discovery.mode = DiscoveryMode::Standalone;
    s.discovery.advertise_ip = Some(std::net::Ipv4Addr::LOCALHOST.into());
    s.log.level = "warn".into();
    s
}

/// A migrated store on a new database of `backend`.
pub async fn open_store(backend: Backend) -> (TestDb, Arc<dyn jobflow::store::Store>) {
    let db = TestDb::create(backend).await;
    let s = jobflow::store::connect(&base_settings(&db.url).database)
        .await
        .unwrap();
    s.migrate().await.unwrap();
    (db, s)
}

/// One running JobFlow instance.
pub struct TestApp {
    pub addr: String,
    pub client: reqwest::Client,
    /// The instance's database, for arranging rows a test needs.
    pub store: Arc<dyn jobflow::store::Store>,
    shutdown: CancellationToken,
    handle: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    /// Keeps the database alive as long as the instance.
    _db: Arc<TestDb>,
}

impl TestApp {
    pub async fn spawn(backend: Backend) -> Self {
        let db = Arc::new(TestDb::create(backend).await);
        Self::spawn_with(db, |_| {}).await
    }

    /// Spawns an instance on `db` (shared between instances when cloned), with `tweak`
    /// applied to its settings.
    pub async fn spawn_with(db: Arc<TestDb>, tweak: impl FnOnce(&mut Settings)) -> Self {
        let mut settings = base_settings(&db.url);
        tweak(&mut settings);
        let store = jobflow::store::connect(&settings.database)
            .await
            .expect("connect store");
        let app = Application::build(settings).await.expect("build app");
        let addr = format!("http://127.0.0.1:{}", app.port());
        let shutdown = app.shutdown_token();
        let handle = tokio::spawn(app.run_until_stopped());
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()
            .unwrap();
        Self {
            addr,
            client,
            store,
            shutdown,
            handle: Some(handle),
            _db: db,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.addr)
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        into_parts(self.client.get(self.url(path)).send().await.expect("GET")).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        into_parts(
            self.client
                .post(self.url(path))
                .json(body)
                .send()
                .await
                .expect("POST"),
        )
        .await
    }

    pub async fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        into_parts(
            self.client
                .put(self.url(path))
                .json(body)
                .send()
                .await
                .expect("PUT"),
        )
        .await
    }

    pub async fn patch(&self, path: &str) -> (u16, Value) {
        into_parts(
            self.client
                .patch(self.url(path))
                .send()
                .await
                .expect("PATCH"),
        )
        .await
    }

    /// A JSON merge patch of `path` (`PATCH /api/v1/jobs/{name}`).
    pub async fn patch_json(&self, path: &str, body: &Value) -> (u16, Value) {
        into_parts(
            self.client
                .patch(self.url(path))
                .header("content-type", "application/merge-patch+json")
                .body(body.to_string())
                .send()
                .await
                .expect("PATCH"),
        )
        .await
    }

    pub async fn delete(&self, path: &str) -> (u16, Value) {
        into_parts(
            self.client
                .delete(self.url(path))
                .send()
                .await
                .expect("DELETE"),
        )
        .await
    }

    /// Every execution of `job`, newest first.
    pub async fn executions(&self, job: &str) -> Vec<Value> {
        let (status, page) = self
            .get(&format!("/api/v1/jobs/{job}/executions?size=200"))
            .await;
        assert_eq!(status, 200, "{page}");
        page["content"].as_array().cloned().unwrap_or_default()
    }

    /// Execution `trace` once it is in `status` (waiting up to `within`).
    pub async fn execution_in(&self, trace: &str, status: &str, within: Duration) -> Value {
        let what = format!("execution {trace} {status}");
        eventually(within, &what, || async {
            let (_, e) = self.get(&format!("/api/v1/jobs/executions/{trace}")).await;
            (e["status"] == status).then_some(e)
        })
        .await
    }

    pub async fn metrics(&self) -> String {
        self.client
            .get(self.url("/metrics"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    pub async fn create_job(&self, body: &Value) -> Value {
        let (status, json) = self.post("/api/v1/jobs", body).await;
        assert_eq!(status, 201, "create failed: {json}");
        json
    }

    /// Stops the instance as SIGTERM would and waits for it to exit.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(h) = self.handle.take() {
            h.await.expect("app task").expect("app exited cleanly");
        }
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn into_parts(resp: reqwest::Response) -> (u16, Value) {
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap_or_default();
    let json = if text.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    };
    (status, json)
}

pub use crate::wait::eventually;

/// Sleeps until the wall clock reads `t` (at once when it is past).
pub async fn sleep_until(t: chrono::DateTime<chrono::Utc>) {
    if let Ok(d) = (t - chrono::Utc::now()).to_std() {
        tokio::time::sleep(d).await;
    }
}

/// An executor on the Rust SDK (signatures off) whose handler `handler` succeeds and counts
/// its runs: its address and the count.
pub async fn counting_sdk_executor(handler: &str) -> (String, Arc<std::sync::atomic::AtomicUsize>) {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let executor = jobflow_executor::JobExecutor::without_signatures()
        .handler(handler, move |_ctx: jobflow_executor::JobContext| {
            let counted = counted.clone();
            async move {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                jobflow_executor::JobResult::success("ran")
            }
        })
        .router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, executor).await });
    (addr, runs)
}

/// A minimal valid job body.
pub fn job(name: &str) -> Value {
    serde_json::json!({
        "name": name,
        "serviceName": "order-service",
        "handler": "syncOrders",
        "cron": "0 0 2 * * ?",
    })
}

/// `jobParams` that serialise to `len` bytes (a JSON string).
pub fn params_of_len(len: usize) -> Value {
    Value::String("a".repeat(len - 2))
}

/// The field names of a problem+json validation error.
pub fn problem_fields(body: &Value) -> Vec<String> {
    body["errors"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|e| e["field"].as_str().unwrap_or("").to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// A local webhook receiver: the alerts posted to it, in arrival order.
#[derive(Clone, Default)]
pub struct Inbox(Arc<std::sync::Mutex<Vec<Value>>>);

impl Inbox {
    /// Starts the receiver; its URL is what a channel's `url` is set to.
    pub async fn start() -> (Self, String) {
        async fn receive(
            axum::extract::State(inbox): axum::extract::State<Inbox>,
            body: axum::body::Bytes,
        ) -> &'static str {
            inbox
                .0
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&body).unwrap());
            "ok"
        }
        let inbox = Self::default();
        let app = axum::Router::new()
            .route("/hook", axum::routing::post(receive))
            .with_state(inbox.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (inbox, url)
    }

    /// The alerts of `event` received so far.
    pub fn of(&self, event: &str) -> Vec<Value> {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|a| a["event"] == event)
            .cloned()
            .collect()
    }

    /// The alerts of `event`, once there is one (fails the test after `within`).
    pub async fn wait_for(&self, event: &str, within: Duration) -> Vec<Value> {
        eventually(within, event, || {
            std::future::ready(Some(self.of(event)).filter(|found| !found.is_empty()))
        })
        .await
    }

    /// The settings of one webhook channel `ops` to this receiver, the default for every job.
    pub fn channel(url: &str, s: &mut Settings) {
        s.alerts.default_channels = vec!["ops".into()];
        s.alerts.channels = vec![jobflow::alerts::ChannelSettings {
            name: "ops".into(),
            kind: jobflow::alerts::ChannelKind::Webhook,
            url: Secret::new(url.to_string()),
            secret: None,
        }];
    }
}

pub fn static_executors(
    service: &str,
    addrs: &[String],
) -> BTreeMap<String, Vec<jobflow::discovery::InstanceAddr>> {
    let parsed = addrs
        .iter()
        .map(|a| jobflow::discovery::InstanceAddr::parse(a).expect("ip:port"))
        .collect();
    BTreeMap::from([(service.to_string(), parsed)])
}

/// Declares each listed `async fn name(backend: Backend)` as two tests, `sqlite::name` and
/// `mysql::name`, so one body proves the behaviour on both backends.
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::Backend::Sqlite).await
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::helpers::Backend::MySql).await
                }
            )*
        }
    };
}
pub(crate) use backend_tests;

/// Migrates `db` as a release whose newest migration was `last` did: the migrations up to
/// that version only, so a test can fill the schema of that release and upgrade it.
pub async fn migrate_until(db: &TestDb, backend: Backend, last: i64) {
    use sqlx::Connection;
    let (dir, url) = match backend {
        Backend::Sqlite => ("migrations/sqlite", format!("{}?mode=rwc", db.url)),
        Backend::MySql => ("migrations/mysql", db.url.clone()),
    };
    let mut before = sqlx::migrate::Migrator::new(std::path::Path::new(dir))
        .await
        .unwrap();
    let migrations: Vec<_> = before
        .migrations
        .iter()
        .filter(|m| m.version <= last)
        .cloned()
        .collect();
    assert_eq!(migrations.last().map(|m| m.version), Some(last));
    before.migrations = migrations.into();
    match backend {
        Backend::Sqlite => {
            let mut conn = sqlx::SqliteConnection::connect(&url).await.unwrap();
            before.run(&mut conn).await.unwrap();
        }
        Backend::MySql => {
            let mut conn = sqlx::MySqlConnection::connect(&url).await.unwrap();
            before.run(&mut conn).await.unwrap();
        }
    }
}
