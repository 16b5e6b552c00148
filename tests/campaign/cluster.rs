//! The cluster under test: three real `jobflow` processes in nacos mode on one rnacos and one
//! fresh MariaDB database (on one server, or on the Galera cluster of [`crate::galera`]),
//! each reaching the database through its own proxy (which can cut or stall the link), alerts
//! sent to a webhook receiver owned here, and the executors.
//! Schedulers keep their port (so their instance id) across restarts, unless another socket
//! took it meanwhile (see `start_scheduler`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::executors::{BARE_SERVICE, Executor, Recorder, SDK_SERVICE};
use crate::galera::Galera;
use crate::harness::{MySqlDb, Rnacos, Scheduler, free_port};
use crate::history::{AlertEvent, SchedulerLife};
use crate::proxy::CutProxy;
use crate::wait::eventually;

/// Settings that bring recovery within a campaign (docs/design.md: compensation).
const SETTINGS: [(&str, &str); 2] = [
    ("JOBFLOW__COMPENSATION__STUCK_AFTER_SECONDS", "20"),
    ("JOBFLOW__COMPENSATION__INTERVAL_SECONDS", "5"),
];

/// What the workload may know of a scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotState {
    Up,
    Paused,
    Down,
}

/// The schedulers' states, shared with the workload (which sends API calls to live ones).
#[derive(Clone, Default)]
pub struct Live(Arc<Mutex<Vec<(String, SlotState)>>>);

impl Live {
    /// The live scheduler at `pick` (modulo the number live).
    pub fn pick(&self, pick: u64) -> Option<String> {
        let slots = self.0.lock().unwrap();
        let up: Vec<&String> = slots
            .iter()
            .filter(|(_, s)| *s == SlotState::Up)
            .map(|(id, _)| id)
            .collect();
        (!up.is_empty()).then(|| up[(pick % up.len() as u64) as usize].clone())
    }

    fn set(&self, i: usize, state: SlotState) {
        self.0.lock().unwrap()[i].1 = state;
    }

    /// Slot `i` moved to another instance id (another port).
    fn rename(&self, i: usize, id: &str) {
        self.0.lock().unwrap()[i].0 = id.to_string();
    }
}

/// Alerts received by the webhook.
#[derive(Clone, Default)]
pub struct Inbox(Arc<Mutex<Vec<AlertEvent>>>);

impl Inbox {
    pub fn alerts(&self) -> Vec<AlertEvent> {
        self.0.lock().unwrap().clone()
    }
}

/// A scheduler slot: one instance id, over its lives.
struct Slot {
    id: String,
    port: u16,
    db_url: String,
    proc: Option<Scheduler>,
    lives: Vec<SchedulerLife>,
}

pub struct Cluster {
    pub nacos: Rnacos,
    pub db: MySqlDb,
    proxies: Vec<CutProxy>,
    slots: Vec<Slot>,
    pub live: Live,
    pub inbox: Inbox,
    config: tempfile::NamedTempFile,
    /// Log lines of scheduler lives that ended, per instance id.
    old_logs: Vec<(String, Vec<String>)>,
    pub recorder: Arc<Recorder>,
    pub executors: Vec<Executor>,
}

impl Cluster {
    /// Starts everything; the database on `galera` when given (created through its proxy,
    /// each scheduler's link to the server its topology gives it), else on the test server.
    pub async fn start(galera: Option<&Galera>) -> Self {
        let nacos = Rnacos::start().await;
        let db = match galera {
            Some(g) => MySqlDb::create_on(&g.proxy).await,
            None => MySqlDb::create().await,
        };
        let inbox = Inbox::default();
        let hook = webhook(inbox.clone()).await;
        let mut config = tempfile::NamedTempFile::new().unwrap();
        use std::io::Write;
        write!(
            config,
            "[alerts]\ndefault_channels = [\"campaign\"]\nmin_interval_seconds = 0\n\
             [[alerts.channels]]\nname = \"campaign\"\nkind = \"webhook\"\nurl = \"http://{hook}/hook\"\n"
        )
        .unwrap();
        let mut proxies = Vec::new();
        let mut slots = Vec::new();
        for i in 0..3 {
            let url = match galera {
                Some(g) => db.url.replacen(&g.proxy, g.server_of(i), 1),
                None => db.url.clone(),
            };
            let (proxy, db_url) = CutProxy::in_front_of(&url).await;
            let port = free_port();
            slots.push(Slot {
                id: format!("127.0.0.1:{port}"),
                port,
                db_url,
                proc: None,
                lives: Vec::new(),
            });
            proxies.push(proxy);
        }
        let live = Live(Arc::new(Mutex::new(
            slots
                .iter()
                .map(|s| (s.id.clone(), SlotState::Down))
                .collect(),
        )));
        let recorder = Arc::new(Recorder::default());
        let mut executors = Vec::new();
        for i in 1..=3 {
            // The third keeps few finished executions by count (the SDK's `keep_finished`):
            // under the campaign's call rate the count alone would forget an execution within
            // seconds, as an executor at a high throughput forgot its 10,000 within minutes;
            // the time it keeps them by must still make every repeated call run once.
            let keep = (i == 3).then_some(20);
            executors.push(Executor::new(
                &format!("sdk-{i}"),
                true,
                keep,
                &nacos.addr(),
                recorder.clone(),
            ));
        }
        for i in 1..=2 {
            executors.push(Executor::new(
                &format!("bare-{i}"),
                false,
                None,
                &nacos.addr(),
                recorder.clone(),
            ));
        }
        let mut cluster = Self {
            nacos,
            db,
            proxies,
            slots,
            live,
            inbox,
            config,
            old_logs: Vec::new(),
            recorder,
            executors,
        };
        for e in &mut cluster.executors {
            e.start().await;
        }
        cluster.register_bare().await;
        for i in 0..3 {
            cluster.start_scheduler(i).await;
        }
        cluster.converge().await;
        let nacos = &cluster.nacos;
        eventually(
            Duration::from_secs(20),
            "the executors in Nacos",
            || async {
                let sdk = nacos.instances(SDK_SERVICE).await.len();
                let bare = nacos.instances(BARE_SERVICE).await.len();
                (sdk == 3 && bare == 2).then_some(())
            },
        )
        .await;
        cluster
    }

    /// Registers the bare executors over the HTTP API as persistent instances (they stay
    /// registered while down, as an older service's would).
    pub async fn register_bare(&self) {
        for e in self.executors.iter().filter(|e| !e.sdk) {
            self.nacos.register_http(BARE_SERVICE, &e.addr()).await;
        }
    }

    pub fn ids(&self) -> Vec<String> {
        self.slots.iter().map(|s| s.id.clone()).collect()
    }

    /// Waits until every live scheduler sees exactly the live ones.
    pub async fn converge(&self) {
        let mut want: Vec<String> = self
            .slots
            .iter()
            .filter(|s| s.proc.is_some())
            .map(|s| s.id.clone())
            .collect();
        want.sort();
        for s in self.slots.iter().filter_map(|s| s.proc.as_ref()) {
            eventually(
                Duration::from_secs(30),
                "every scheduler to see the cluster",
                || async { (s.sees().await == want).then_some(()) },
            )
            .await;
        }
    }

    /// Starts scheduler `i` on its port; a start that fails is tried again. A port that stays
    /// taken (another socket of this machine got it while the scheduler was down, an outgoing
    /// connection's ephemeral port for one) is given up after five tries: the slot moves to a
    /// fresh port, as a scheduler that comes back under another address would.
    pub async fn start_scheduler(&mut self, i: usize) {
        let (db, nacos) = (self.slots[i].db_url.clone(), self.nacos.addr());
        let config = self.config.path().to_string_lossy().to_string();
        let mut failures = 0;
        let proc = loop {
            let port = self.slots[i].port.to_string();
            let (db, nacos, config) = (db.clone(), nacos.clone(), config.clone());
            let started = tokio::spawn(async move {
                let mut settings: Vec<(&str, &str)> = SETTINGS.to_vec();
                settings.push(("JOBFLOW__SERVER__PORT", &port));
                // A finer log for a seed under study, e.g. `jobflow::dispatch=debug,info`.
                let level = std::env::var("JOBFLOW_CAMPAIGN_LOG").unwrap_or_default();
                if !level.is_empty() {
                    settings.push(("JOBFLOW__LOG__LEVEL", &level));
                }
                Scheduler::start_with_args(&db, &nacos, &settings, &["--config", &config]).await
            })
            .await;
            match started {
                Ok(s) => break s,
                Err(e) => {
                    failures += 1;
                    eprintln!(
                        "scheduler {} did not start ({e}); trying again",
                        self.slots[i].id
                    );
                    if failures % 5 == 0 {
                        let port = free_port();
                        eprintln!("scheduler {} moves to port {port}", self.slots[i].id);
                        self.slots[i].port = port;
                        self.slots[i].id = format!("127.0.0.1:{port}");
                        // The workload's calls follow it (an executor took the old port at
                        // the start once, and answered them 404).
                        self.live.rename(i, &self.slots[i].id);
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        };
        let slot = &mut self.slots[i];
        assert_eq!(proc.id, slot.id, "the scheduler announces its pinned port");
        slot.lives.push(SchedulerLife {
            id: slot.id.clone(),
            start: Utc::now(),
            end: None,
            pauses: Vec::new(),
        });
        slot.proc = Some(proc);
        self.live.set(i, SlotState::Up);
    }

    fn ended(&mut self, i: usize, proc: Scheduler) {
        let slot = &mut self.slots[i];
        if let Some(l) = slot.lives.last_mut() {
            l.end = Some(Utc::now());
        }
        let lines = std::mem::take(&mut *proc.log.lock().unwrap());
        self.old_logs.push((slot.id.clone(), lines));
        self.live.set(i, SlotState::Down);
    }

    pub fn kill9(&mut self, i: usize) {
        if let Some(mut proc) = self.slots[i].proc.take() {
            self.live.set(i, SlotState::Down);
            proc.kill9();
            self.ended(i, proc);
        }
    }

    /// SIGTERM, and waits for the exit (the graceful shutdown).
    pub async fn terminate(&mut self, i: usize) {
        if let Some(mut proc) = self.slots[i].proc.take() {
            self.live.set(i, SlotState::Down);
            let proc = tokio::task::spawn_blocking(move || {
                proc.terminate();
                proc
            })
            .await
            .unwrap();
            self.ended(i, proc);
        }
    }

    fn signal(&self, i: usize, signal: &str) {
        if let Some(proc) = &self.slots[i].proc {
            let _ = std::process::Command::new("kill")
                .args([signal, &proc.pid().to_string()])
                .status();
        }
    }

    pub fn pause(&mut self, i: usize) {
        self.live.set(i, SlotState::Paused);
        self.signal(i, "-STOP");
        if let Some(l) = self.slots[i].lives.last_mut() {
            let now = Utc::now();
            l.pauses.push((now, now));
        }
    }

    pub fn resume(&mut self, i: usize) {
        self.signal(i, "-CONT");
        if let Some((_, until)) = self.slots[i]
            .lives
            .last_mut()
            .and_then(|l| l.pauses.last_mut())
        {
            *until = Utc::now();
        }
        self.live.set(i, SlotState::Up);
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.slots[i].proc.is_some()
    }

    pub fn db_cut(&self, which: Option<usize>) {
        for (i, p) in self.proxies.iter().enumerate() {
            if which.is_none_or(|w| w == i) {
                p.cut();
            }
        }
    }

    pub fn db_stall(&self, which: Option<usize>) {
        for (i, p) in self.proxies.iter().enumerate() {
            if which.is_none_or(|w| w == i) {
                p.stall();
            }
        }
    }

    /// Undoes every database fault.
    pub fn db_heal(&self) {
        for p in &self.proxies {
            p.restore();
            p.resume();
        }
    }

    pub async fn restart_nacos(&mut self, down: Duration) {
        self.nacos.stop();
        tokio::time::sleep(down).await;
        self.nacos.restart().await;
        // A Nacos without persistence forgets persistent instances registered over HTTP.
        self.register_bare().await;
    }

    pub fn scheduler_lives(&self) -> Vec<SchedulerLife> {
        self.slots.iter().flat_map(|s| s.lives.clone()).collect()
    }

    /// Every scheduler's log lines so far, per instance id (ended lives first).
    pub fn logs(&self) -> Vec<(String, Vec<String>)> {
        let mut out = self.old_logs.clone();
        for s in &self.slots {
            if let Some(p) = &s.proc {
                out.push((s.id.clone(), p.log.lock().unwrap().clone()));
            }
        }
        out
    }

    /// Reads the rows of `job_execution` and `job_fire`.
    pub async fn read_rows(&self) -> (Vec<crate::history::ExecRow>, Vec<crate::history::FireRow>) {
        use sqlx::{Connection, Row};
        let mut conn = sqlx::MySqlConnection::connect(&self.db.url).await.unwrap();
        let rows = sqlx::query(
            "SELECT execution_id, trace_id, job_name, trigger_type, fire_time, scheduler_instance, \
             executor_instance, shard_start, shard_end, trigger_time, due_time, start_time, finish_time, \
             status, retry_count, parent_trace_id, error_message, job_params FROM job_execution ORDER BY id",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        let utc = |t: chrono::NaiveDateTime| DateTime::<Utc>::from_naive_utc_and_offset(t, Utc);
        let rows = rows
            .iter()
            .map(|r| crate::history::ExecRow {
                execution_id: r.get("execution_id"),
                trace_id: r.get("trace_id"),
                job_name: r.get("job_name"),
                trigger_type: r.get("trigger_type"),
                fire_time: utc(r.get("fire_time")),
                scheduler_instance: r.get("scheduler_instance"),
                executor_instance: r.get("executor_instance"),
                shard_start: r.get::<i32, _>("shard_start") as u32,
                shard_end: r.get::<i32, _>("shard_end") as u32,
                trigger_time: utc(r.get("trigger_time")),
                due_time: utc(r.get("due_time")),
                start_time: r
                    .get::<Option<chrono::NaiveDateTime>, _>("start_time")
                    .map(utc),
                finish_time: r
                    .get::<Option<chrono::NaiveDateTime>, _>("finish_time")
                    .map(utc),
                status: r.get("status"),
                retry_count: r.get::<i32, _>("retry_count") as u32,
                parent_trace_id: r.get("parent_trace_id"),
                error_message: r.get("error_message"),
                job_params: r.get("job_params"),
            })
            .collect();
        let fires = sqlx::query("SELECT job_name, fire_time, scheduler_instance FROM job_fire")
            .fetch_all(&mut conn)
            .await
            .unwrap()
            .iter()
            .map(|r| crate::history::FireRow {
                job_name: r.get("job_name"),
                fire_time: utc(r.get("fire_time")),
                scheduler_instance: r.get("scheduler_instance"),
            })
            .collect();
        (rows, fires)
    }
}

/// The webhook receiver: every alert it gets, with the moment it arrived.
async fn webhook(inbox: Inbox) -> String {
    let app = Router::new().route(
        "/hook",
        post(move |body: Bytes| {
            let inbox = inbox.clone();
            async move {
                if let Ok(v) = serde_json::from_slice::<Value>(&body)
                    && let Some(fire_time) = v["fireTime"].as_str().and_then(|t| t.parse().ok())
                {
                    inbox.0.lock().unwrap().push(AlertEvent {
                        event: v["event"].as_str().unwrap_or("").to_string(),
                        job_name: v["jobName"].as_str().unwrap_or("").to_string(),
                        fire_time,
                        trace_id: v["traceId"].as_str().map(String::from),
                        received: Utc::now(),
                    });
                }
                "ok"
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(async move { axum::serve(listener, app).await });
    addr
}
