//! Group commit of execution results. Every finished call ends in a compare-and-set of its
//! row; written one by one, each is its own transaction and its own log flush, and at a
//! thousand results a second those flushes are the database's main cost. The writer takes
//! whatever results are waiting, writes them in one transaction, and answers each caller
//! with its own outcome. It never waits to fill a batch: a lone result is written at once,
//! and under load a batch is what queued while the previous ones were being written.

use std::sync::Arc;

use tokio::sync::{Semaphore, mpsc, oneshot};

use crate::store::{Store, StoreError, Transition};

/// At most this many results share one transaction.
const MAX_BATCH: usize = 256;

/// Batches written at the same time, each on its own connection: while one waits for its
/// commit, the next is already being written.
const CONCURRENT_BATCHES: usize = 4;

type Reply = oneshot::Sender<Result<bool, StoreError>>;

pub struct ResultWriter {
    queue: mpsc::UnboundedSender<(String, Transition, Reply)>,
}

impl ResultWriter {
    /// Starts the writer task; it ends when the writer is dropped and the queue is empty.
    pub fn spawn(store: Arc<dyn Store>) -> Self {
        let (queue, mut rx) = mpsc::unbounded_channel::<(String, Transition, Reply)>();
        tokio::spawn(async move {
            let writers = Arc::new(Semaphore::new(CONCURRENT_BATCHES));
            let mut waiting = Vec::with_capacity(MAX_BATCH);
            loop {
                let Ok(writer) = writers.clone().acquire_owned().await else {
                    break;
                };
                if rx.recv_many(&mut waiting, MAX_BATCH).await == 0 {
                    break;
                }
                let (store, items) = (store.clone(), std::mem::take(&mut waiting));
                tokio::spawn(async move {
                    write(store.as_ref(), items).await;
                    drop(writer);
                });
            }
        });
        Self { queue }
    }

    /// Applies `t` to the row `trace_id` with the next batch; `true` when it applied.
    pub async fn write(&self, trace_id: &str, t: Transition) -> Result<bool, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((trace_id.to_string(), t, reply))
            .map_err(|_| StoreError::Batch("the result writer has stopped".into()))?;
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Batch("the result writer has stopped".into())))
    }
}

/// Writes one batch and answers every caller with its own outcome.
async fn write(store: &dyn Store, items: Vec<(String, Transition, Reply)>) {
    let (batch, replies): (Vec<_>, Vec<_>) = items
        .into_iter()
        .map(|(trace, t, reply)| ((trace, t), reply))
        .unzip();
    metrics::histogram!("scheduler_result_batch_size").record(batch.len() as f64);
    // One retry: a batch can lose a deadlock to a concurrent statement on the same rows, and
    // is then rolled back whole.
    let mut outcome = store.transitions(&batch).await;
    if outcome.is_err() {
        outcome = store.transitions(&batch).await;
    }
    match outcome {
        Ok(changed) => {
            for (reply, changed) in replies.into_iter().zip(changed) {
                let _ = reply.send(Ok(changed));
            }
        }
        Err(e) => {
            let message = e.to_string();
            for reply in replies {
                let _ = reply.send(Err(StoreError::Batch(message.clone())));
            }
        }
    }
}
