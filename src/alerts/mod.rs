//! Alerts (docs/production.md, "Alerts"): an execution's final failure, a fire skipped by the
//! misfire policy, a fire with no executor, and the recovery on the first success after an alert,
//! sent to webhook, DingTalk, WeCom, Feishu or Slack channels.
//!
//! The dispatcher calls `Alerts` without awaiting: deciding, throttling and queueing happen
//! under one short lock, and each channel has its own bounded queue and delivery task. A slow
//! or failing endpoint therefore delays only its own channel's alerts, never scheduling;
//! when its queue is full, further alerts for it are dropped and counted.
//!
//! Metrics: `alert_deliveries_total{channel,outcome}` (`sent`, `failed`, `dropped`) and
//! `alerts_throttled_total{job_name,event}`.
//!
//! Recovery is tracked per scheduler instance: the owner of a job sees its failures and its
//! successes; after an ownership change the first success on the new owner sends no
//! RECOVERED for an alert raised by the old one.

mod throttle;
pub mod vendors;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

pub use crate::config::{AlertsSettings, ChannelKind, ChannelSettings};
pub use throttle::{Throttle, Throttled};

use crate::clock::Clock;
use crate::jobs::{Execution, ExecutionStatus, JobDefinition};

/// What an alert is about (the `event` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AlertEvent {
    /// FAILED or TIMEOUT after the last retry.
    ExecutionFailed,
    /// A fire skipped by the misfire policy.
    FireSkipped,
    /// A fire found no executor instance.
    NoExecutor,
    /// The first SUCCESS after an alert for the job.
    Recovered,
}

impl AlertEvent {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ExecutionFailed => "EXECUTION_FAILED",
            Self::FireSkipped => "FIRE_SKIPPED",
            Self::NoExecutor => "NO_EXECUTOR",
            Self::Recovered => "RECOVERED",
        }
    }
}

/// The alert, exactly the generic webhook's JSON body (docs/production.md, "Alerts"). Facts
/// an event does not have (a skipped fire has no execution) are `null`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Alert {
    pub event: AlertEvent,
    pub job_name: String,
    pub trace_id: Option<String>,
    pub execution_id: Option<String>,
    pub status: Option<ExecutionStatus>,
    pub fire_time: DateTime<Utc>,
    pub retry_count: Option<u32>,
    pub error_message: Option<String>,
    pub scheduler_instance: Option<String>,
    pub executor_instance: Option<String>,
    pub occurred_at: DateTime<Utc>,
}

impl Alert {
    fn of_execution(event: AlertEvent, exec: &Execution, at: DateTime<Utc>) -> Self {
        Self {
            event,
            job_name: exec.job_name.clone(),
            trace_id: Some(exec.trace_id.clone()),
            execution_id: Some(exec.execution_id.clone()),
            status: Some(exec.status),
            fire_time: exec.fire_time,
            retry_count: Some(exec.retry_count),
            error_message: exec.error_message.clone(),
            scheduler_instance: exec.scheduler_instance.clone(),
            executor_instance: exec.executor_instance.clone(),
            occurred_at: at,
        }
    }
}

/// Which alert, if any, a final execution raises: EXECUTION_FAILED for FAILED or TIMEOUT once
/// no retry is left, RECOVERED for a SUCCESS while the job has an alert outstanding.
pub fn final_event(
    job: &JobDefinition,
    status: ExecutionStatus,
    retry_count: u32,
    alert_outstanding: bool,
) -> Option<AlertEvent> {
    match status {
        ExecutionStatus::Failed | ExecutionStatus::Timeout if retry_count >= job.spec.max_retry => {
            Some(AlertEvent::ExecutionFailed)
        }
        ExecutionStatus::Success if alert_outstanding => Some(AlertEvent::Recovered),
        _ => None,
    }
}

struct Queued {
    alert: Arc<Alert>,
    suppressed: u64,
}

/// A configured channel and the queue of its delivery task.
struct Channel {
    name: String,
    queue: mpsc::Sender<Queued>,
}

struct State {
    throttle: Throttle<(String, AlertEvent)>,
    /// Jobs with an EXECUTION_FAILED or NO_EXECUTOR alert sent and no success since.
    outstanding: HashSet<String>,
    last_sweep: Instant,
}

pub struct Alerts {
    clock: Clock,
    channels: HashMap<String, Channel>,
    default_channels: Vec<String>,
    scheduler_instance: String,
    min_interval: Duration,
    state: Mutex<State>,
}

impl Alerts {
    /// Starts one delivery task per configured channel (call inside the runtime). The tasks
    /// end when the `Alerts` is dropped.
    pub fn start(
        settings: &AlertsSettings,
        scheduler_instance: impl Into<String>,
        clock: Clock,
    ) -> anyhow::Result<Arc<Self>> {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(settings.timeout_seconds))
            .user_agent(concat!("jobflow/", env!("CARGO_PKG_VERSION")))
            .build()?;
        let mut channels = HashMap::new();
        for c in &settings.channels {
            let url = reqwest::Url::parse(c.url.expose())
                .map_err(|e| anyhow::anyhow!("alert channel `{}`: url: {e}", c.name))?;
            let (tx, rx) = mpsc::channel(settings.queue_capacity);
            let target = Target {
                name: c.name.clone(),
                kind: c.kind,
                url,
                secret: c.secret.as_ref().map(|s| s.expose().to_string()),
            };
            tokio::spawn(target.deliver(rx, client.clone()));
            channels.insert(
                c.name.clone(),
                Channel {
                    name: c.name.clone(),
                    queue: tx,
                },
            );
        }
        let min_interval = Duration::from_secs(settings.min_interval_seconds);
        Ok(Arc::new(Self {
            clock,
            channels,
            default_channels: settings.default_channels.clone(),
            scheduler_instance: scheduler_instance.into(),
            min_interval,
            state: Mutex::new(State {
                throttle: Throttle::new(min_interval),
                outstanding: HashSet::new(),
                last_sweep: Instant::now(),
            }),
        }))
    }

    /// An execution reached a final status: alerts EXECUTION_FAILED when it is FAILED or
    /// TIMEOUT with no retry left (`retry_count >= max_retry`), RECOVERED on the first SUCCESS
    /// after an alert for the job. Never blocks.
    pub fn execution_final(&self, job: &JobDefinition, exec: &Execution) {
        self.execution_ended(job, exec.status, exec.retry_count, || exec.clone());
    }

    /// [`Alerts::execution_final`] for a row whose final state is not built yet: `ended`
    /// builds it only when an alert is raised. Without any channel configured nothing can be
    /// raised, and a row's end costs nothing here (it is called for every fire).
    pub fn execution_ended(
        &self,
        job: &JobDefinition,
        status: ExecutionStatus,
        retry_count: u32,
        ended: impl FnOnce() -> Execution,
    ) {
        if self.channels.is_empty() {
            return;
        }
        let outstanding = self.lock().outstanding.contains(job.name().as_str());
        if let Some(event) = final_event(job, status, retry_count, outstanding) {
            self.raise(job, Alert::of_execution(event, &ended(), self.clock.now()));
        }
    }

    /// A fire was skipped by the misfire policy. Never blocks.
    pub fn fire_skipped(&self, job: &JobDefinition, fire_time: DateTime<Utc>) {
        self.raise(
            job,
            Alert {
                event: AlertEvent::FireSkipped,
                job_name: job.name().to_string(),
                trace_id: None,
                execution_id: None,
                status: None,
                fire_time,
                retry_count: None,
                error_message: Some("skipped by the misfire policy".into()),
                scheduler_instance: Some(self.scheduler_instance.clone()),
                executor_instance: None,
                occurred_at: self.clock.now(),
            },
        );
    }

    /// A fire found no executor instance (`exec` is the row recorded FAILED for it). Never
    /// blocks.
    pub fn no_executor(&self, job: &JobDefinition, exec: &Execution) {
        self.raise(
            job,
            Alert::of_execution(AlertEvent::NoExecutor, exec, self.clock.now()),
        );
    }

    /// The channels `job`'s alerts go to: its own, else `alerts.default_channels`.
    fn channels_of<'a>(&'a self, job: &'a JobDefinition) -> Vec<&'a Channel> {
        let names: Vec<&str> = if job.spec.alert_channels.is_empty() {
            self.default_channels.iter().map(String::as_str).collect()
        } else {
            job.spec.alert_channels.iter().map(|c| c.as_str()).collect()
        };
        names
            .into_iter()
            .filter_map(|n| self.channels.get(n))
            .collect()
    }

    /// Throttles, then queues `alert` on each of the job's channels without waiting.
    pub fn raise(&self, job: &JobDefinition, mut alert: Alert) {
        let channels = self.channels_of(job);
        if channels.is_empty() {
            return;
        }
        if alert.scheduler_instance.is_none() {
            alert.scheduler_instance = Some(self.scheduler_instance.clone());
        }
        let event = alert.event;
        let suppressed = {
            let mut state = self.lock();
            let now = Instant::now();
            if now.saturating_duration_since(state.last_sweep) > self.min_interval {
                state.throttle.forget_idle(now);
                state.last_sweep = now;
            }
            match state.throttle.check((alert.job_name.clone(), event), now) {
                Throttled::Suppress => {
                    metrics::counter!("alerts_throttled_total", "job_name" => alert.job_name.clone(), "event" => event.as_str())
                        .increment(1);
                    return;
                }
                Throttled::Send { suppressed } => {
                    match event {
                        AlertEvent::ExecutionFailed | AlertEvent::NoExecutor => {
                            state.outstanding.insert(alert.job_name.clone());
                        }
                        AlertEvent::Recovered => {
                            state.outstanding.remove(&alert.job_name);
                        }
                        AlertEvent::FireSkipped => {}
                    }
                    suppressed
                }
            }
        };
        let alert = Arc::new(alert);
        for c in channels {
            let queued = Queued {
                alert: alert.clone(),
                suppressed,
            };
            if c.queue.try_send(queued).is_err() {
                metrics::counter!("alert_deliveries_total", "channel" => c.name.clone(), "outcome" => "dropped")
                    .increment(1);
                tracing::warn!(channel = %c.name, job = %alert.job_name, event = event.as_str(), "alert queue full: alert dropped");
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Where one channel's alerts go; owned by its delivery task.
struct Target {
    name: String,
    kind: ChannelKind,
    url: reqwest::Url,
    secret: Option<String>,
}

impl Target {
    /// Delivers queued alerts one by one (a chat channel shows them in order); each attempt is
    /// bounded by `alerts.timeout_seconds`.
    async fn deliver(self, mut queue: mpsc::Receiver<Queued>, client: reqwest::Client) {
        while let Some(q) = queue.recv().await {
            let out = vendors::render(
                self.kind,
                &self.url,
                self.secret.as_deref(),
                &q.alert,
                q.suppressed,
                // Vendor signatures carry the wall time their receivers check.
                Utc::now(),
            );
            let outcome = match self.send(&client, out).await {
                Ok(()) => "sent",
                Err(e) => {
                    tracing::warn!(channel = %self.name, job = %q.alert.job_name, event = q.alert.event.as_str(), error = %e, "alert delivery failed");
                    "failed"
                }
            };
            metrics::counter!("alert_deliveries_total", "channel" => self.name.clone(), "outcome" => outcome)
                .increment(1);
        }
    }

    async fn send(&self, client: &reqwest::Client, out: vendors::Outgoing) -> Result<(), String> {
        let mut req = client.post(out.url).body(out.body);
        for (k, v) in out.headers {
            req = req.header(k, v);
        }
        // The URL carries robot tokens: errors are reported without it.
        let resp = req.send().await.map_err(|e| e.without_url().to_string())?;
        let status = resp.status().as_u16();
        let body = resp
            .bytes()
            .await
            .map_err(|e| e.without_url().to_string())?;
        vendors::accepted(self.kind, status, &body[..body.len().min(64 * 1024)])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(max_retry: i64) -> JobDefinition {
        let body = serde_json::json!({
            "name": "j", "serviceName": "s", "handler": "h", "cron": "0 * * * * ?",
            "maxRetry": max_retry
        });
        JobDefinition::stored(body, Utc::now())
    }

    fn execution(status: ExecutionStatus, retry_count: u32) -> Execution {
        Execution::for_tests(status, retry_count)
    }

    #[test]
    fn only_the_last_failure_and_the_first_success_after_it_alert() {
        use ExecutionStatus::*;
        let j = job(2);
        let ev = |s, r, out| final_event(&j, s, r, out);
        assert_eq!(ev(Failed, 0, false), None, "a retry is left");
        assert_eq!(ev(Timeout, 1, false), None);
        assert_eq!(ev(Failed, 2, false), Some(AlertEvent::ExecutionFailed));
        assert_eq!(ev(Timeout, 3, true), Some(AlertEvent::ExecutionFailed));
        assert_eq!(ev(Success, 0, false), None);
        assert_eq!(ev(Success, 1, true), Some(AlertEvent::Recovered));
        for s in [Cancelled, Skipped, Running, Pending] {
            assert_eq!(ev(s, 5, true), None, "{s}");
        }
        let no_retries = job(0);
        assert_eq!(
            final_event(&no_retries, Failed, 0, false),
            Some(AlertEvent::ExecutionFailed)
        );
    }

    #[test]
    fn the_body_has_exactly_the_spec_fields() {
        let a = Alert::of_execution(
            AlertEvent::ExecutionFailed,
            &execution(ExecutionStatus::Failed, 3),
            Utc::now(),
        );
        let v = serde_json::to_value(&a).unwrap();
        let mut keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(
            keys,
            [
                "errorMessage",
                "event",
                "executionId",
                "executorInstance",
                "fireTime",
                "jobName",
                "occurredAt",
                "retryCount",
                "schedulerInstance",
                "status",
                "traceId"
            ]
        );
        assert_eq!(v["event"], "EXECUTION_FAILED");
        assert_eq!(v["status"], "FAILED");
        assert_eq!(v["retryCount"], 3);
    }
}
