//! Real processes for cluster tests: an rnacos server on free ports with its own data
//! directory, `jobflow` scheduler processes in nacos mode on one MySQL/MariaDB database, and
//! recording executors registered in Nacos.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::Connection;

pub fn rnacos_binary() -> std::path::PathBuf {
    if let Ok(p) = std::env::var("RNACOS_BIN") {
        return p.into();
    }
    let home = std::env::var("HOME").unwrap_or_default();
    for candidate in [
        format!("{home}/.cargo/bin/rnacos"),
        "/usr/local/bin/rnacos".into(),
    ] {
        if std::path::Path::new(&candidate).is_file() {
            return candidate.into();
        }
    }
    panic!(
        "rnacos is required for the cluster tests: cargo install rnacos --locked (scripts/test.sh does this)"
    )
}

/// A free port `p` whose `p + 1000` (Nacos gRPC) is free as well.
fn free_port_pair() -> u16 {
    loop {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        if p < 60_000 && std::net::TcpListener::bind(("127.0.0.1", p + 1000)).is_ok() {
            return p;
        }
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub struct Rnacos {
    pub http_port: u16,
    console_port: u16,
    dir: tempfile::TempDir,
    child: Option<Child>,
    /// Admin user and password when started with open-API authentication on.
    auth: Option<(String, String)>,
}

impl Rnacos {
    /// rnacos on free ports. The ports are free when picked but not held, so another process
    /// can take one before rnacos binds it; a start that exits or never answers is reported
    /// with its log and redone on fresh ports.
    pub async fn start() -> Self {
        for attempt in 1..=3 {
            let mut n = Self::on_fresh_ports(None);
            match n.launch().await {
                Ok(()) => return n,
                Err(why) => {
                    eprintln!(
                        "rnacos start {attempt} failed ({why}); starting afresh. Its log:\n{}",
                        n.log()
                    );
                    n.stop();
                }
            }
        }
        panic!("rnacos did not come up in three starts")
    }

    fn on_fresh_ports(auth: Option<(String, String)>) -> Self {
        Self {
            http_port: free_port_pair(),
            console_port: free_port(),
            dir: tempfile::tempdir().unwrap(),
            child: None,
            auth,
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("rnacos.log")).unwrap_or_default()
    }

    /// rnacos with authentication on its open API (and gRPC), an admin `user` / `password`.
    /// rnacos 0.8.8 sometimes panics in its raft store on a first start; naming keeps working
    /// but logins then fail, so a start whose first login fails is redone on a fresh data
    /// directory.
    pub async fn start_with_auth(user: &str, password: &str) -> Self {
        for attempt in 1..=4 {
            let mut n = Self::on_fresh_ports(Some((user.into(), password.into())));
            if let Err(why) = n.launch().await {
                eprintln!(
                    "rnacos start {attempt} failed ({why}); starting afresh. Its log:\n{}",
                    n.log()
                );
                n.stop();
                continue;
            }
            // The admin user is created through raft shortly after start: give it a moment,
            // and a few tries, unless the store has panicked ("Mailbox has closed").
            let mut answer = Err(String::new());
            for _ in 0..10 {
                tokio::time::sleep(Duration::from_millis(500)).await;
                answer = n.login(user, password).await;
                if answer.is_ok() || answer.as_ref().is_err_and(|e| e.contains("Mailbox")) {
                    break;
                }
            }
            if answer.is_ok() {
                return n;
            }
            eprintln!(
                "rnacos refused the admin login on start {attempt}; starting afresh. Its log:\n{}",
                n.log()
            );
            n.stop();
        }
        panic!("rnacos never accepted its admin login")
    }

    /// An access token for `user`, or the status and body of the refusal.
    pub async fn login(&self, user: &str, password: &str) -> Result<String, String> {
        let r = reqwest::Client::new()
            .post(format!(
                "http://127.0.0.1:{}/nacos/v1/auth/login",
                self.http_port
            ))
            .form(&[("username", user), ("password", password)])
            .send()
            .await
            .map_err(|e| e.to_string())?;
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        let v: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        match v["accessToken"].as_str() {
            Some(t) if status.is_success() => Ok(t.to_string()),
            _ => Err(format!("{status}: {body}")),
        }
    }

    async fn admin_token(&self) -> Option<String> {
        let (u, p) = self.auth.as_ref()?;
        Some(self.login(u, p).await.expect("admin login"))
    }

    /// Publishes a config through the open API, as an operator's `curl` would; the instant
    /// the request went out.
    pub async fn publish_config(&self, data_id: &str, group: &str, content: &str) -> Instant {
        self.publish_config_in("", data_id, group, content).await
    }

    /// [`Self::publish_config`] in the namespace whose id is `tenant` (blank: the default).
    pub async fn publish_config_in(
        &self,
        tenant: &str,
        data_id: &str,
        group: &str,
        content: &str,
    ) -> Instant {
        let token = self.admin_token().await;
        let mut req = reqwest::Client::new()
            .post(format!(
                "http://127.0.0.1:{}/nacos/v1/cs/configs",
                self.http_port
            ))
            .form(&[
                ("dataId", data_id),
                ("group", group),
                ("tenant", tenant),
                ("content", content),
                ("type", "yaml"),
            ]);
        if let Some(t) = token {
            req = req.header("accessToken", t);
        }
        let sent = Instant::now();
        let r = req.send().await.unwrap();
        let status = r.status();
        let body = r.text().await.unwrap_or_default();
        assert!(
            status.is_success() && body.trim() == "true",
            "publish {data_id}: {status} {body}"
        );
        sent
    }

    pub async fn remove_config(&self, data_id: &str, group: &str) {
        self.remove_config_in("", data_id, group).await
    }

    pub async fn remove_config_in(&self, tenant: &str, data_id: &str, group: &str) {
        let mut req = reqwest::Client::new()
            .delete(format!(
                "http://127.0.0.1:{}/nacos/v1/cs/configs",
                self.http_port
            ))
            .query(&[("dataId", data_id), ("group", group), ("tenant", tenant)]);
        if let Some(t) = self.admin_token().await {
            req = req.header("accessToken", t);
        }
        let r = req.send().await.unwrap();
        assert!(r.status().is_success(), "remove {data_id}: {}", r.status());
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.http_port)
    }

    /// Spawns rnacos and waits until its HTTP and gRPC ports answer; an error says why not
    /// (the process exited, or 30 seconds passed).
    async fn launch(&mut self) -> Result<(), String> {
        let log = std::fs::File::create(self.dir.path().join("rnacos.log")).unwrap();
        let mut command = Command::new(rnacos_binary());
        if let Some((user, password)) = &self.auth {
            command
                .env("RNACOS_ENABLE_OPEN_API_AUTH", "true")
                .env("RNACOS_INIT_ADMIN_USERNAME", user)
                .env("RNACOS_INIT_ADMIN_PASSWORD", password);
        }
        let child = command
            .env("RNACOS_HTTP_PORT", self.http_port.to_string())
            .env("RNACOS_GRPC_PORT", (self.http_port + 1000).to_string())
            .env("RNACOS_HTTP_CONSOLE_PORT", self.console_port.to_string())
            .env("RNACOS_DATA_DIR", self.dir.path().join("data"))
            .env("RUST_LOG", "warn")
            .current_dir(self.dir.path())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("start rnacos");
        self.child = Some(child);
        // Any answer means the server is up (with authentication on, a 403). The probe must
        // not be a login: a login this early goes through rnacos's raft store before it is
        // wired up, which is what makes it panic.
        let url = format!(
            "http://127.0.0.1:{}/nacos/v1/ns/service/list?pageNo=1&pageSize=10",
            self.http_port
        );
        let any_answer = self.auth.is_some();
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let last = match client.get(&url).send().await {
                Ok(r) if r.status().is_success() || any_answer => break,
                Ok(r) => format!("HTTP answered {}", r.status()),
                Err(e) => format!("HTTP: {e}"),
            };
            self.still_starting(deadline, &last)?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // The gRPC port must accept too.
        while let Err(e) = std::net::TcpStream::connect(("127.0.0.1", self.http_port + 1000)) {
            self.still_starting(deadline, &format!("gRPC: {e}"))?;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Whether a start not ready yet (`last`: what the latest probe saw) may be waited for
    /// further: not when the process has exited or the deadline has passed.
    fn still_starting(&mut self, deadline: Instant, last: &str) -> Result<(), String> {
        let child = self.child.as_mut().expect("rnacos was spawned");
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!("exited with {status}; last probe: {last}"));
        }
        if Instant::now() >= deadline {
            return Err(format!("not ready in 30 s; last probe: {last}"));
        }
        Ok(())
    }

    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Stops and starts rnacos again on the same ports and data, as the schedulers know it by
    /// its address; a start that fails (a port taken meanwhile) is retried a few times.
    pub async fn restart(&mut self) {
        self.stop();
        for attempt in 1..=3 {
            match self.launch().await {
                Ok(()) => return,
                Err(why) => {
                    eprintln!(
                        "rnacos restart {attempt} failed ({why}). Its log:\n{}",
                        self.log()
                    );
                    self.stop();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        }
        panic!("rnacos did not come back on its ports")
    }

    /// `ip:port` of the healthy instances of `service`, through the 1.x HTTP open API.
    pub async fn instances(&self, service: &str) -> Vec<String> {
        self.instances_in(service, "DEFAULT_GROUP").await
    }

    /// [`Rnacos::instances`] of `service` in `group`.
    pub async fn instances_in(&self, service: &str, group: &str) -> Vec<String> {
        let url = format!(
            "http://127.0.0.1:{}/nacos/v1/ns/instance/list?serviceName={service}&groupName={group}&healthyOnly=true",
            self.http_port
        );
        let mut req = reqwest::Client::new().get(&url);
        if let Some(t) = self.admin_token().await {
            req = req.header("accessToken", t);
        }
        let Ok(resp) = req.send().await else {
            return Vec::new();
        };
        let v: Value = resp.json().await.unwrap_or(Value::Null);
        let mut out: Vec<String> = v["hosts"]
            .as_array()
            .map(|hosts| {
                hosts
                    .iter()
                    .map(|h| format!("{}:{}", h["ip"].as_str().unwrap_or(""), h["port"]))
                    .collect()
            })
            .unwrap_or_default();
        out.sort();
        out
    }

    /// Registers a persistent instance through the 1.x HTTP open API (as a non-gRPC client
    /// such as an older Spring Cloud service would).
    pub async fn register_http(&self, service: &str, addr: &str) {
        self.register_http_in(service, "DEFAULT_GROUP", addr).await
    }

    /// [`Rnacos::register_http`] in `group`.
    pub async fn register_http_in(&self, service: &str, group: &str, addr: &str) {
        let (ip, port) = addr.rsplit_once(':').unwrap();
        let url = format!(
            "http://127.0.0.1:{}/nacos/v1/ns/instance?serviceName={service}&groupName={group}&ip={ip}&port={port}&ephemeral=false&weight=1&enabled=true&healthy=true",
            self.http_port
        );
        let r = reqwest::Client::new().post(&url).send().await.unwrap();
        assert!(
            r.status().is_success(),
            "register {addr}: {}",
            r.text().await.unwrap()
        );
    }

    pub async fn deregister_http(&self, service: &str, addr: &str) {
        let (ip, port) = addr.rsplit_once(':').unwrap();
        let url = format!(
            "http://127.0.0.1:{}/nacos/v1/ns/instance?serviceName={service}&ip={ip}&port={port}&ephemeral=false",
            self.http_port
        );
        let r = reqwest::Client::new().delete(&url).send().await.unwrap();
        assert!(
            r.status().is_success(),
            "deregister {addr}: {}",
            r.text().await.unwrap()
        );
    }
}

impl Drop for Rnacos {
    fn drop(&mut self) {
        self.stop();
    }
}

pub struct MySqlDb {
    pub url: String,
    name: String,
    /// The server URL without a database.
    pub server: String,
}

impl MySqlDb {
    pub async fn create() -> Self {
        let server = std::env::var("JOBFLOW_TEST_MYSQL_URL")
            .unwrap_or_else(|_| "mysql://root@127.0.0.1:3306".into());
        Self::create_on(&server).await
    }

    /// A fresh database on the server at `server` (a URL without a database).
    pub async fn create_on(server: &str) -> Self {
        let server = server.to_string();
        let name = format!("jobflow_cluster_{:08x}", rand::random::<u32>());
        let mut conn = sqlx::MySqlConnection::connect(&server)
            .await
            .expect("MySQL/MariaDB for the cluster tests");
        sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE `{name}`")))
            .execute(&mut conn)
            .await
            .unwrap();
        Self {
            url: format!("{server}/{name}"),
            name,
            server,
        }
    }
}

impl Drop for MySqlDb {
    fn drop(&mut self) {
        let (server, name) = (self.server.clone(), self.name.clone());
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async {
                if let Ok(mut c) = sqlx::MySqlConnection::connect(&server).await {
                    let _ = sqlx::query(sqlx::AssertSqlSafe(format!(
                        "DROP DATABASE IF EXISTS `{name}`"
                    )))
                    .execute(&mut c)
                    .await;
                }
            })
        })
        .join();
    }
}

/// One `jobflow` process in nacos mode.
pub struct Scheduler {
    pub id: String,
    child: Child,
    pub log: Arc<Mutex<Vec<String>>>,
    pub client: reqwest::Client,
}

impl Scheduler {
    pub async fn start(db: &str, nacos: &str) -> Self {
        Self::start_with(db, nacos, &[]).await
    }

    /// Starts one with extra `JOBFLOW__…` settings.
    pub async fn start_with(db: &str, nacos: &str, settings: &[(&str, &str)]) -> Self {
        Self::start_with_args(db, nacos, settings, &[]).await
    }

    /// Starts one with extra `JOBFLOW__…` settings and command-line arguments (such as
    /// `--config FILE`). A setting given here wins over the harness's own (`SERVER__PORT`
    /// pins the port, so a restarted instance keeps its id).
    pub async fn start_with_args(
        db: &str,
        nacos: &str,
        settings: &[(&str, &str)],
        args: &[&str],
    ) -> Self {
        let dir = std::env::temp_dir();
        let mut child = Command::new(env!("CARGO_BIN_EXE_jobflow"))
            .current_dir(dir)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("JOBFLOW__DISCOVERY__MODE", "nacos")
            .env("JOBFLOW__NACOS__SERVER_ADDR", nacos)
            .env("JOBFLOW__DISCOVERY__ADVERTISE_IP", "127.0.0.1")
            .env("JOBFLOW__DATABASE__URL", db)
            .env("JOBFLOW__SERVER__HOST", "127.0.0.1")
            .env("JOBFLOW__SERVER__PORT", "0")
            .env("JOBFLOW__SERVER__SHUTDOWN_GRACE_SECONDS", "5")
            .env("JOBFLOW__AUTH__ENABLED", "false")
            .env("JOBFLOW__LOG__FORMAT", "json")
            .env("JOBFLOW__LOG__LEVEL", "info")
            .envs(settings.iter().copied())
            .stdout(Stdio::piped())
            .spawn()
            .expect("start jobflow");
        let log: Arc<Mutex<Vec<String>>> = Arc::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        let sink = log.clone();
        std::thread::spawn(move || {
            let mut sent = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !sent
                    && let Ok(v) = serde_json::from_str::<Value>(&line)
                    && v["message"] == "JobFlow listening"
                {
                    let _ = tx.send(v["instance"].as_str().unwrap_or("").to_string());
                    sent = true;
                }
                sink.lock().unwrap().push(line);
            }
        });
        let id = tokio::task::spawn_blocking(move || rx.recv_timeout(Duration::from_secs(60)))
            .await
            .unwrap()
            .unwrap_or_else(|_| panic!("scheduler did not start: {:?}", log.lock().unwrap()));
        Self {
            id,
            child,
            log,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(10))
                .build()
                .unwrap(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.id)
    }

    /// Runs a scheduler that is expected to refuse to start; its exit status and everything
    /// it wrote (stdout and stderr).
    pub fn start_expecting_failure(
        db: &str,
        nacos: &str,
        settings: &[(&str, &str)],
    ) -> (std::process::ExitStatus, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_jobflow"))
            .current_dir(std::env::temp_dir())
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("JOBFLOW__DISCOVERY__MODE", "nacos")
            .env("JOBFLOW__NACOS__SERVER_ADDR", nacos)
            .env("JOBFLOW__DISCOVERY__ADVERTISE_IP", "127.0.0.1")
            .env("JOBFLOW__DATABASE__URL", db)
            .env("JOBFLOW__SERVER__HOST", "127.0.0.1")
            .env("JOBFLOW__SERVER__PORT", "0")
            .env("JOBFLOW__AUTH__ENABLED", "false")
            .env("JOBFLOW__LOG__FORMAT", "json")
            .env("JOBFLOW__LOG__LEVEL", "debug")
            .envs(settings.iter().copied())
            .output()
            .expect("run jobflow");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status, text)
    }

    pub async fn get(&self, path: &str) -> Value {
        self.client
            .get(self.url(path))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap()
    }

    /// The scheduler instances this instance sees.
    pub async fn sees(&self) -> Vec<String> {
        match self.client.get(self.url("/api/v1/cluster")).send().await {
            Ok(r) => r
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| serde_json::from_value(v["instances"].clone()).ok())
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        }
    }

    /// The process id (for signals such as SIGSTOP and SIGCONT).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, then waits for the exit; returns the exit status.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        self.child.wait().unwrap()
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let log = self.log.lock().unwrap();
            eprintln!("--- last log lines of scheduler {} ---", self.id);
            for line in log.iter().rev().take(40).rev() {
                eprintln!("{line}");
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
