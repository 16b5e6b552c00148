//! Taking fires back before their call: their claims and still-PENDING rows are deleted, and
//! only then are their instants owed to the engine again ([`Owed`]). The order matters: the
//! engine re-fires an owed instant under the job's current definition, and that fire's claim
//! must not meet the withdrawn one still in the database (it would be taken for a fire made
//! already, and the instant lost). If the delete fails, the instant is owed all the same: its
//! re-fire then finds the old claim and stays unrecorded, and compensation calls the old rows
//! after their lease, with the job's current definition.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::launch::Owed;
use super::tasks::Tasks;
use crate::jobs::Execution;
use crate::store::{FireStore, Withdrawal};

pub struct Withdraw {
    pub fires: Arc<dyn FireStore>,
    pub owed: mpsc::UnboundedSender<Owed>,
    pub tasks: Arc<Tasks>,
    /// This instance: the holder of the rows it takes back.
    pub me: String,
}

impl Withdraw {
    /// Takes back `job`'s fires at the given instants with their rows, in the background.
    pub fn take_back(&self, job: &str, fires: Vec<(DateTime<Utc>, Vec<Execution>)>) {
        if fires.is_empty() {
            return;
        }
        metrics::counter!("scheduler_fires_withdrawn_total", "job_name" => job.to_string())
            .increment(fires.len() as u64);
        let owed: Vec<Owed> = fires
            .iter()
            .map(|(at, _)| Owed {
                job: job.to_string(),
                from: *at,
            })
            .collect();
        let withdrawals: Vec<Withdrawal> = fires
            .into_iter()
            .map(|(at, rows)| Withdrawal {
                instance: self.me.clone(),
                job: job.to_string(),
                claimed: Some(at),
                traces: rows.into_iter().map(|r| r.trace_id).collect(),
            })
            .collect();
        let (store, sink) = (self.fires.clone(), self.owed.clone());
        self.tasks.spawn(async move {
            if let Err(e) = store.withdraw_fires(&withdrawals).await {
                tracing::warn!(error = %e, "withdrawn fires' rows not deleted; compensation settles them after their lease");
            }
            for o in owed {
                let _ = sink.send(o);
            }
        });
    }
}
