//! Taking fires back before their call: their claims and still-PENDING rows are deleted, and
//! only then are their instants owed to the engine again ([`Owed`]). The order matters: the
//! engine re-fires an owed instant under the job's current definition, and that fire's claim
//! must not meet the withdrawn one still in the database (it would be taken for a fire made
//! already, and the instant lost). If the delete fails, the instant is owed all the same: its
//! re-fire then finds the old claim and stays unrecorded, and compensation calls the old rows
//! after their lease, with the job's current definition. A fire whose rows compensation took
//! over already (the instance was late past their lease) is not withdrawn, nor owed again:
//! it runs as recorded, once.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use tokio::sync::mpsc;

use super::tasks::Tasks;
use crate::jobs::Execution;
use crate::store::{FireStore, Withdrawal};

/// An instant owed again to a job: its fire from `from` on could not be recorded, or was
/// withdrawn before its call. The engine applies the misfire rules to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owed {
    pub job: String,
    pub from: DateTime<Utc>,
    /// For a `FIXED_DELAY` fire the store refused: the job's latest fire, which must end
    /// first (another scheduler made it while this one thought it owned the job, or it has
    /// not ended long enough ago). The job waits for that fire instead of re-firing `from`.
    pub behind: Option<DateTime<Utc>>,
}

impl Owed {
    pub fn again(job: impl Into<String>, from: DateTime<Utc>) -> Self {
        Self {
            job: job.into(),
            from,
            behind: None,
        }
    }
}

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
        let owed: Vec<Owed> = fires.iter().map(|(at, _)| Owed::again(job, *at)).collect();
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
            let withdrawn = match store.withdraw_fires(&withdrawals).await {
                Ok(withdrawn) => withdrawn,
                Err(e) => {
                    tracing::warn!(error = %e, "withdrawn fires' rows not deleted; compensation settles them after their lease");
                    vec![true; owed.len()]
                }
            };
            for (o, withdrawn) in owed.into_iter().zip(withdrawn) {
                if withdrawn {
                    let _ = sink.send(o);
                } else {
                    tracing::info!(job_name = %o.job, fire_time = %o.from, "fire not withdrawn: compensation took it over after its lease");
                }
            }
        });
    }
}
