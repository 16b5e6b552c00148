//! Standalone discovery: this instance is the only scheduler; executors are the static
//! addresses of `[executors.static]`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use tokio::sync::watch;

use super::{Discovery, ExecutorInstance, Executors, InstanceAddr, Service};

pub struct Standalone {
    me: String,
    schedulers: watch::Sender<Vec<String>>,
    executors: BTreeMap<String, Executors>,
}

impl Standalone {
    pub fn new(me: String, executors: &BTreeMap<String, Vec<InstanceAddr>>) -> Self {
        let executors = executors
            .iter()
            .map(|(service, addrs)| {
                let mut list: Vec<ExecutorInstance> = addrs
                    .iter()
                    .map(|addr| ExecutorInstance {
                        addr: addr.clone(),
                        path_prefix: None,
                    })
                    .collect();
                list.sort_by(|a, b| a.addr.cmp(&b.addr));
                list.dedup_by(|a, b| a.addr == b.addr);
                (service.clone(), list.into())
            })
            .collect();
        let (schedulers, _) = watch::channel(vec![me.clone()]);
        Self {
            me,
            schedulers,
            executors,
        }
    }
}

#[async_trait]
impl Discovery for Standalone {
    fn self_id(&self) -> &str {
        &self.me
    }

    fn schedulers(&self) -> watch::Receiver<Vec<String>> {
        self.schedulers.subscribe()
    }

    async fn executors(&self, service: Service<'_>) -> Executors {
        self.executors
            .get(service.name)
            .cloned()
            .unwrap_or_default()
    }

    async fn register(&self) -> anyhow::Result<()> {
        Ok(())
    }

    async fn deregister(&self) {}

    async fn stand(&self, _listed: bool) -> bool {
        false
    }

    fn status(&self) -> Result<(), String> {
        Ok(())
    }
}
