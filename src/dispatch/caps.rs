//! Per-service concurrency caps (`[executors.limits]`): at most N calls in flight to one
//! executor service from the whole cluster, so a job with 200 shards cannot flood a service
//! that takes 20 calls at once.
//!
//! Each scheduler instance takes an equal share of a cap, rounded up (`ceil(N / instances)`,
//! the instances being the live scheduler list, so the share follows joins and departures).
//! A call beyond its share waits for a call to that service to end: its fire is late, never
//! dropped or doubled. The wait comes before the call takes one of the instance's
//! `executor.max_in_flight` slots, so a capped service never holds back the calls of others,
//! and before the attempt decides how to start its row, so a call that waited past the first
//! half of its lease takes its row first like any late call.
//!
//! Visible in `scheduler_service_calls_in_flight{service_name}` and
//! `scheduler_service_calls_waiting{service_name}`.

use std::collections::BTreeMap;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};

use foldhash::HashMap;
use tokio::sync::{Notify, watch};

/// The caps, and this instance's calls per capped service.
pub struct ServiceCaps {
    caps: BTreeMap<String, NonZeroU32>,
    schedulers: watch::Receiver<Vec<String>>,
    /// Calls in flight and calls waiting, per capped service.
    counts: Mutex<HashMap<String, (u32, u32)>>,
    freed: Notify,
}

/// A call's place under its service's cap; the place is freed when it is dropped.
pub struct CapSlot {
    caps: Arc<ServiceCaps>,
    service: String,
}

/// This instance's share of a cap of `cap` calls over `instances` scheduler instances.
pub fn share(cap: NonZeroU32, instances: usize) -> u32 {
    let instances = u32::try_from(instances.max(1)).unwrap_or(u32::MAX);
    cap.get().div_ceil(instances)
}

impl ServiceCaps {
    pub fn new(
        caps: BTreeMap<String, NonZeroU32>,
        schedulers: watch::Receiver<Vec<String>>,
    ) -> Arc<Self> {
        Arc::new(Self {
            caps,
            schedulers,
            counts: Mutex::default(),
            freed: Notify::new(),
        })
    }

    /// Waits for a place under `service`'s cap; `None` when the service has no cap. A wait
    /// abandoned (its instance stops) leaves the queue.
    pub async fn slot(self: &Arc<Self>, service: &str) -> Option<CapSlot> {
        let cap = *self.caps.get(service)?;
        let mut queued: Option<Queued> = None;
        loop {
            // Registered before the check, so a place freed in between is not missed.
            let freed = self.freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let limit = share(cap, self.schedulers.borrow().len());
                let mut counts = self.counts.lock().expect("caps lock");
                let (in_flight, waiting) = counts.entry(service.to_string()).or_default();
                if *in_flight < limit {
                    *in_flight += 1;
                    if let Some(mut q) = queued.take() {
                        q.active = false;
                        *waiting -= 1;
                    }
                    publish(service, *in_flight, *waiting);
                    return Some(CapSlot {
                        caps: self.clone(),
                        service: service.to_string(),
                    });
                }
                if queued.is_none() {
                    *waiting += 1;
                    publish(service, *in_flight, *waiting);
                    queued = Some(Queued {
                        caps: self.clone(),
                        service: service.to_string(),
                        active: true,
                    });
                }
            }
            freed.await;
        }
    }
}

/// A call counted as waiting; uncounted when its wait is abandoned.
struct Queued {
    caps: Arc<ServiceCaps>,
    service: String,
    active: bool,
}

impl Drop for Queued {
    fn drop(&mut self) {
        if !self.active {
            return;
        }
        let mut counts = self.caps.counts.lock().expect("caps lock");
        if let Some((in_flight, waiting)) = counts.get_mut(&self.service) {
            *waiting = waiting.saturating_sub(1);
            publish(&self.service, *in_flight, *waiting);
        }
    }
}

impl Drop for CapSlot {
    fn drop(&mut self) {
        {
            let mut counts = self.caps.counts.lock().expect("caps lock");
            if let Some((in_flight, waiting)) = counts.get_mut(&self.service) {
                *in_flight = in_flight.saturating_sub(1);
                publish(&self.service, *in_flight, *waiting);
            }
        }
        self.caps.freed.notify_waiters();
    }
}

fn publish(service: &str, in_flight: u32, waiting: u32) {
    let name = service.to_string();
    metrics::gauge!("scheduler_service_calls_in_flight", "service_name" => name.clone())
        .set(f64::from(in_flight));
    metrics::gauge!("scheduler_service_calls_waiting", "service_name" => name)
        .set(f64::from(waiting));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caps(cap: u32, instances: usize) -> (Arc<ServiceCaps>, watch::Sender<Vec<String>>) {
        let list: Vec<String> = (0..instances).map(|i| format!("10.0.0.{i}:8080")).collect();
        let (tx, rx) = watch::channel(list);
        let limits = BTreeMap::from([("billing".to_string(), NonZeroU32::new(cap).unwrap())]);
        (ServiceCaps::new(limits, rx), tx)
    }

    #[test]
    fn each_instance_takes_an_equal_share_rounded_up() {
        let cap = NonZeroU32::new(20).unwrap();
        assert_eq!(share(cap, 1), 20);
        assert_eq!(share(cap, 3), 7);
        assert_eq!(share(cap, 0), 20, "before the list is known");
        assert_eq!(share(NonZeroU32::new(1).unwrap(), 4), 1, "never zero");
    }

    #[tokio::test(start_paused = true)]
    async fn a_call_beyond_the_share_waits_for_one_to_end() {
        let (caps, _list) = caps(4, 2);
        let first = caps.slot("billing").await.unwrap();
        let _second = caps.slot("billing").await.unwrap();
        assert!(caps.slot("other").await.is_none(), "an uncapped service");
        let waiter = tokio::spawn({
            let caps = caps.clone();
            async move { caps.slot("billing").await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        assert!(
            !waiter.is_finished(),
            "a third call over a share of 2 waits"
        );
        assert_eq!(caps.counts.lock().unwrap()["billing"], (2, 1));
        drop(first);
        waiter.await.unwrap().unwrap();
        assert_eq!(caps.counts.lock().unwrap()["billing"], (1, 0));
    }

    #[tokio::test(start_paused = true)]
    async fn the_share_follows_the_scheduler_list() {
        let (caps, list) = caps(4, 2);
        let _a = caps.slot("billing").await.unwrap();
        let _b = caps.slot("billing").await.unwrap();
        let waiter = tokio::spawn({
            let caps = caps.clone();
            async move { caps.slot("billing").await.map(|_| ()) }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        // The other instance left: the whole cap is this one's, at the next freed place.
        list.send_replace(vec!["10.0.0.0:8080".into()]);
        caps.freed.notify_waiters();
        waiter.await.unwrap().unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn an_abandoned_wait_leaves_the_queue() {
        let (caps, _list) = caps(1, 1);
        let _held = caps.slot("billing").await.unwrap();
        let gave_up =
            tokio::time::timeout(std::time::Duration::from_secs(1), caps.slot("billing")).await;
        assert!(gave_up.is_err());
        assert_eq!(caps.counts.lock().unwrap()["billing"], (1, 0));
    }
}
