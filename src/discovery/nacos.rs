//! Nacos discovery (docs/operations.md, "Running a cluster on Nacos"; docs/design.md, "Ownership"): this
//! instance registers under the scheduler service once it is ready, every instance subscribes to
//! that service and recomputes ownership on each push, and executor instances are kept current per
//! service and group (a job's `serviceGroup`, else `nacos.group`) by subscription (no Nacos
//! round trip per fire).
//!
//! Outages: nacos-sdk keeps the last pushed lists and re-registers by itself after a
//! reconnect; its empty-push protection is on, so an empty push during an outage is never
//! read as "everyone is gone". A probe every few seconds surfaces the connection state in
//! readiness and `scheduler_nacos_up`, and registers this instance again if the server lost
//! it (a Nacos restart without persistence).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use async_trait::async_trait;
use nacos_sdk::api::naming::{
    NamingChangeEvent, NamingEventListener, NamingService, NamingServiceBuilder, ServiceInstance,
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::{Discovery, ExecutorInstance, Executors, InstanceAddr, Service};
use crate::config::NacosSettings;

/// Instance metadata key through which an executor announces its endpoint prefix.
pub const PATH_PREFIX_METADATA: &str = "jobflow.path-prefix";

pub struct NacosDiscovery {
    naming: NamingService,
    me: String,
    ip: String,
    port: u16,
    service: String,
    group: String,
    schedulers: watch::Sender<Vec<String>>,
    /// Executor instances by grouped service name (`group@@service`, Nacos' own form).
    executors: Arc<RwLock<HashMap<String, Executors>>>,
    /// Executor services subscribed to (once each, whatever later queries do), by grouped
    /// name.
    subscribed: tokio::sync::Mutex<std::collections::HashSet<String>>,
    /// What the probe keeps true of this instance in Nacos.
    listing: Mutex<Listing>,
    reachable: Arc<AtomicBool>,
    last_error: Arc<Mutex<Option<String>>>,
    metadata: HashMap<String, String>,
    stop: CancellationToken,
}

struct SchedulerListener(watch::Sender<Vec<String>>);

impl NamingEventListener for SchedulerListener {
    fn event(&self, event: Arc<NamingChangeEvent>) {
        let Some(instances) = &event.instances else {
            return;
        };
        let list = scheduler_ids(instances);
        self.0.send_if_modified(|current| {
            if *current == list {
                return false;
            }
            tracing::info!(before = current.len(), after = list.len(), instances = ?list, "scheduler list pushed by Nacos");
            *current = list;
            true
        });
    }
}

struct ExecutorListener {
    service: String,
    cache: Arc<RwLock<HashMap<String, Executors>>>,
}

impl NamingEventListener for ExecutorListener {
    fn event(&self, event: Arc<NamingChangeEvent>) {
        let Some(instances) = &event.instances else {
            return;
        };
        let list = executor_instances(instances);
        tracing::info!(service = %self.service, executors = list.len(), "executor list pushed by Nacos");
        self.cache
            .write()
            .expect("executor cache lock")
            .insert(self.service.clone(), list.into());
    }
}

/// Healthy, enabled scheduler instances as sorted `ip:port` ids.
fn scheduler_ids(instances: &[ServiceInstance]) -> Vec<String> {
    let mut ids: Vec<String> = instances
        .iter()
        .filter(|i| i.healthy && i.enabled)
        .map(|i| format!("{}:{}", i.ip, i.port))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// Healthy, enabled executor instances with weight above zero, sorted by `ip:port`.
pub fn executor_instances(instances: &[ServiceInstance]) -> Vec<ExecutorInstance> {
    let mut list: Vec<ExecutorInstance> = instances
        .iter()
        .filter(|i| i.healthy && i.enabled && i.weight > 0.0)
        .filter_map(|i| {
            let addr = InstanceAddr::parse(&format!("{}:{}", i.ip, i.port)).ok()?;
            let path_prefix = i
                .metadata
                .get(PATH_PREFIX_METADATA)
                .filter(|p| valid_prefix(p))
                .cloned();
            Some(ExecutorInstance { addr, path_prefix })
        })
        .collect();
    list.sort_by(|a, b| a.addr.cmp(&b.addr));
    list.dedup_by(|a, b| a.addr == b.addr);
    list
}

/// A prefix from another party's metadata must be a plain absolute path.
fn valid_prefix(p: &str) -> bool {
    p.is_empty()
        || (p.starts_with('/')
            && !p.ends_with('/')
            && !p.contains("..")
            && p.len() <= 200
            && p.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '-' | '_' | '.')))
}

/// What this instance should be in the scheduler service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Listing {
    /// Not announced yet, or shut down.
    Absent,
    /// Registered: the probe registers it again when Nacos lost it.
    Listed,
    /// Stepped aside (`Discovery::stand`): the probe removes it again when Nacos still lists
    /// it.
    Aside,
}

impl NacosDiscovery {
    /// Connects to Nacos and subscribes to the scheduler service (without registering).
    pub async fn connect(
        settings: &NacosSettings,
        ip: String,
        port: u16,
    ) -> anyhow::Result<Arc<Self>> {
        let props = settings.client_props().naming_push_empty_protection(true);
        let mut builder = NamingServiceBuilder::new(props);
        if settings.username.is_some() {
            builder = builder.enable_auth_plugin_http();
        }
        let naming = builder
            .build()
            .await
            .map_err(|e| anyhow::anyhow!("connecting to Nacos at {}: {e}", settings.server_addr))?;
        let (schedulers, _) = watch::channel(Vec::new());
        let metadata = HashMap::from([
            (
                "jobflow.version".to_string(),
                env!("CARGO_PKG_VERSION").to_string(),
            ),
            ("jobflow.role".to_string(), "scheduler".to_string()),
            (
                "jobflow.start-time".to_string(),
                chrono::Utc::now().to_rfc3339(),
            ),
        ]);
        let this = Arc::new(Self {
            naming,
            me: format!("{ip}:{port}"),
            ip,
            port,
            service: settings.service_name.clone(),
            group: settings.group.clone(),
            schedulers,
            executors: Arc::default(),
            subscribed: tokio::sync::Mutex::default(),
            listing: Mutex::new(Listing::Absent),
            reachable: Arc::new(AtomicBool::new(false)),
            last_error: Arc::default(),
            metadata,
            stop: CancellationToken::new(),
        });
        this.naming
            .subscribe(
                this.service.clone(),
                Some(this.group.clone()),
                Vec::new(),
                Arc::new(SchedulerListener(this.schedulers.clone())),
            )
            .await
            .map_err(|e| anyhow::anyhow!("subscribing to {}: {e}", this.service))?;
        let current = this.fetch(&this.service, &this.group).await?;
        this.schedulers.send_replace(scheduler_ids(&current));
        this.reachable.store(true, Ordering::Release);
        tokio::spawn(this.clone().probe());
        Ok(this)
    }

    /// A query answered by the server (not nacos-sdk's cache), so it also tells whether
    /// Nacos is reachable.
    async fn fetch(&self, service: &str, group: &str) -> anyhow::Result<Vec<ServiceInstance>> {
        let call = self.naming.get_all_instances(
            service.to_string(),
            Some(group.to_string()),
            Vec::new(),
            false,
        );
        match tokio::time::timeout(Duration::from_secs(5), call).await {
            Ok(Ok(list)) => Ok(list),
            Ok(Err(e)) => Err(anyhow::anyhow!("Nacos query for {service} failed: {e}")),
            Err(_) => Err(anyhow::anyhow!(
                "Nacos did not answer a query for {service} within 5s"
            )),
        }
    }

    fn instance(&self) -> ServiceInstance {
        ServiceInstance {
            instance_id: None,
            ip: self.ip.clone(),
            port: self.port as i32,
            weight: 1.0,
            healthy: true,
            enabled: true,
            ephemeral: true,
            cluster_name: None,
            service_name: Some(self.service.clone()),
            metadata: self.metadata.clone(),
        }
    }

    fn listing(&self) -> Listing {
        *self.listing.lock().expect("listing lock")
    }

    fn set_listing(&self, listing: Listing) {
        *self.listing.lock().expect("listing lock") = listing;
    }

    /// Registers this instance in the scheduler service (`true`) or removes it.
    async fn list_self(&self, listed: bool) -> Result<(), nacos_sdk::api::error::Error> {
        let (service, group) = (self.service.clone(), Some(self.group.clone()));
        if listed {
            self.naming
                .register_instance(service, group, self.instance())
                .await
        } else {
            self.naming
                .deregister_instance(service, group, self.instance())
                .await
        }
    }

    /// Every few seconds: can Nacos be reached, and does it still list this instance?
    async fn probe(self: Arc<Self>) {
        loop {
            tokio::select! {
                _ = self.stop.cancelled() => return,
                _ = tokio::time::sleep(Duration::from_secs(3)) => {}
            }
            match self.fetch(&self.service, &self.group).await {
                Ok(list) => {
                    if !self.reachable.swap(true, Ordering::AcqRel) {
                        tracing::info!("Nacos reachable again");
                    }
                    *self.last_error.lock().expect("error lock") = None;
                    metrics::gauge!("scheduler_nacos_up").set(1.0);
                    let listed = list
                        .iter()
                        .any(|i| i.ip == self.ip && i.port == self.port as i32);
                    match (self.listing(), listed) {
                        (Listing::Listed, false) => {
                            tracing::warn!(
                                "Nacos no longer lists this instance; registering again"
                            );
                            if let Err(e) = self.list_self(true).await {
                                tracing::warn!(error = %e, "re-registration failed");
                            }
                        }
                        // Stepped aside, but the deregistration did not go through.
                        (Listing::Aside, true) => {
                            if let Err(e) = self.list_self(false).await {
                                tracing::warn!(error = %e, "leaving the scheduler list failed");
                            }
                        }
                        _ => {}
                    }
                }
                Err(e) => {
                    if self.reachable.swap(false, Ordering::AcqRel) {
                        tracing::warn!(error = %e, "Nacos unreachable; scheduling continues with the last known lists");
                    }
                    *self.last_error.lock().expect("error lock") = Some(e.to_string());
                    metrics::gauge!("scheduler_nacos_up").set(0.0);
                }
            }
        }
    }
}

#[async_trait]
impl Discovery for NacosDiscovery {
    fn self_id(&self) -> &str {
        &self.me
    }

    fn schedulers(&self) -> watch::Receiver<Vec<String>> {
        self.schedulers.subscribe()
    }

    async fn executors(&self, service: Service<'_>) -> Executors {
        let group = service.group.unwrap_or(&self.group);
        let key = format!("{group}@@{}", service.name);
        if let Some(list) = self
            .executors
            .read()
            .expect("executor cache lock")
            .get(&key)
        {
            return list.clone();
        }
        // First use of this service: subscribe once, then serve from the pushed cache. A
        // failed query is asked again next time; the subscription is never added twice.
        let mut subscribed = self.subscribed.lock().await;
        if let Some(list) = self
            .executors
            .read()
            .expect("executor cache lock")
            .get(&key)
        {
            return list.clone();
        }
        if !subscribed.contains(&key) {
            let listener = Arc::new(ExecutorListener {
                service: key.clone(),
                cache: self.executors.clone(),
            });
            if let Err(e) = self
                .naming
                .subscribe(
                    service.name.to_string(),
                    Some(group.to_string()),
                    Vec::new(),
                    listener,
                )
                .await
            {
                tracing::warn!(service = %key, error = %e, "subscribing to executor service failed");
                return Executors::default();
            }
            subscribed.insert(key.clone());
        }
        match self.fetch(service.name, group).await {
            Ok(instances) => {
                let list: Executors = executor_instances(&instances).into();
                self.executors
                    .write()
                    .expect("executor cache lock")
                    .insert(key, list.clone());
                list
            }
            Err(e) => {
                tracing::warn!(service = %key, error = %e, "querying executor service failed");
                Executors::default()
            }
        }
    }

    async fn register(&self) -> anyhow::Result<()> {
        if self.listing() == Listing::Aside {
            // The engine stepped aside before start-up ended: its first answer registers.
            tracing::warn!(instance = %self.me, "the database does not answer; registering once it does");
            return Ok(());
        }
        self.list_self(true)
            .await
            .map_err(|e| anyhow::anyhow!("registering {} in Nacos: {e}", self.me))?;
        {
            let mut listing = self.listing.lock().expect("listing lock");
            if *listing == Listing::Absent {
                *listing = Listing::Listed;
            }
        }
        tracing::info!(service = %self.service, instance = %self.me, "registered in Nacos");
        Ok(())
    }

    async fn deregister(&self) {
        self.set_listing(Listing::Absent);
        self.stop.cancel();
        match self.list_self(false).await {
            Ok(()) => tracing::info!(instance = %self.me, "deregistered from Nacos"),
            Err(e) => {
                tracing::warn!(error = %e, "deregistration failed; Nacos expires the instance by itself")
            }
        }
    }

    async fn stand(&self, listed: bool) -> bool {
        if self.stop.is_cancelled() {
            return true;
        }
        // What the probe keeps true in Nacos: set first, so a change that fails now is made
        // again by the probe.
        self.set_listing(if listed {
            Listing::Listed
        } else {
            Listing::Aside
        });
        match self.list_self(listed).await {
            Ok(()) if listed => {
                tracing::info!(instance = %self.me, "the database answers again; back in the scheduler list")
            }
            Ok(()) => {
                tracing::warn!(instance = %self.me, "the database does not answer; left the scheduler list, the other instances take this one's jobs")
            }
            Err(e) => {
                tracing::warn!(error = %e, listed, "changing this instance's place in Nacos failed")
            }
        }
        // Shut down meanwhile: the deregistration may have gone out before this registration.
        if listed && self.stop.is_cancelled() {
            self.set_listing(Listing::Absent);
            let _ = self.list_self(false).await;
        }
        true
    }

    fn status(&self) -> Result<(), String> {
        if self.reachable.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(self
                .last_error
                .lock()
                .expect("error lock")
                .clone()
                .unwrap_or_else(|| "Nacos unreachable".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inst(
        ip: &str,
        port: i32,
        healthy: bool,
        enabled: bool,
        weight: f64,
        prefix: Option<&str>,
    ) -> ServiceInstance {
        ServiceInstance {
            instance_id: None,
            ip: ip.into(),
            port,
            weight,
            healthy,
            enabled,
            ephemeral: true,
            cluster_name: None,
            service_name: None,
            metadata: prefix
                .map(|p| HashMap::from([(PATH_PREFIX_METADATA.to_string(), p.to_string())]))
                .unwrap_or_default(),
        }
    }

    #[test]
    fn executors_are_filtered_and_sorted() {
        let list = executor_instances(&[
            inst("10.0.0.2", 80, true, true, 1.0, Some("/jobs")),
            inst("10.0.0.1", 80, true, true, 1.0, Some("/../../admin")),
            inst("10.0.0.3", 80, false, true, 1.0, None),
            inst("10.0.0.4", 80, true, false, 1.0, None),
            inst("10.0.0.5", 80, true, true, 0.0, None),
        ]);
        let addrs: Vec<_> = list
            .iter()
            .map(|e| (e.addr.to_string(), e.path_prefix.clone()))
            .collect();
        assert_eq!(
            addrs,
            [
                ("10.0.0.1:80".to_string(), None),
                ("10.0.0.2:80".to_string(), Some("/jobs".to_string()))
            ]
        );
    }

    #[test]
    fn scheduler_ids_skip_unhealthy() {
        let ids = scheduler_ids(&[
            inst("b", 1, true, true, 1.0, None),
            inst("a", 1, true, true, 1.0, None),
            inst("c", 1, false, true, 1.0, None),
        ]);
        assert_eq!(ids, ["a:1", "b:1"]);
    }
}
