//! Group commit for job creation. One transaction per created job spends most of its time on
//! the transaction itself (begin, the revision counter, the commit) and serialises the writers
//! on the counter's row lock; a script or an import creates jobs many at a time. So concurrent
//! creations queue here, and whoever finds the writer free writes every queued creation in one
//! transaction: one revision, one commit, one read-back. A duplicate name fails only its own
//! creation (the failed INSERT is rolled back alone, the transaction goes on).

use std::future::Future;
use std::sync::Mutex;

use chrono::{DateTime, Utc};
use tokio::sync::oneshot;

use super::StoreError;
use crate::jobs::{JobDefinition, JobSpec};

/// The most creations one transaction writes (its read-back binds one value each).
const MAX_BATCH: usize = 500;

/// A creation waiting for its batch.
pub(crate) struct NewJob {
    pub spec: JobSpec,
    pub actor: Option<String>,
    pub now: DateTime<Utc>,
    pub done: oneshot::Sender<Result<JobDefinition, StoreError>>,
}

#[derive(Default)]
pub(crate) struct CreateQueue {
    pending: Mutex<Vec<NewJob>>,
    /// Held while a batch is written: creations arriving meanwhile form the next batch.
    writer: tokio::sync::Mutex<()>,
}

impl CreateQueue {
    /// Queues the creation of `spec` and returns once it is committed (or refused). `write`
    /// writes a batch and answers each of its creations; it runs on a task of its own, so a
    /// caller that gives up (a closed connection) does not abandon the others' creations.
    /// The caller holding the writer writes batches, oldest creations first, until its own
    /// is answered or in a batch still being written (its writer gave up waiting).
    pub async fn create<W, F>(
        &self,
        spec: &JobSpec,
        actor: Option<&str>,
        now: DateTime<Utc>,
        write: W,
    ) -> Result<JobDefinition, StoreError>
    where
        W: Fn(Vec<NewJob>) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        let (done, mut result) = oneshot::channel();
        self.pending
            .lock()
            .expect("create queue lock")
            .push(NewJob {
                spec: spec.clone(),
                actor: actor.map(str::to_string),
                now,
                done,
            });
        let _writer = self.writer.lock().await;
        loop {
            match result.try_recv() {
                // A batch (maybe another caller's) answered this creation.
                Ok(answer) => return answer,
                Err(oneshot::error::TryRecvError::Closed) => return Err(abandoned()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let batch: Vec<NewJob> = {
                let mut pending = self.pending.lock().expect("create queue lock");
                let n = pending.len().min(MAX_BATCH);
                pending.drain(..n).collect()
            };
            if batch.is_empty() {
                // A batch still being written holds this creation (its caller gave up).
                return result.await.unwrap_or_else(|_| Err(abandoned()));
            }
            // A panic in `write` drops the answers: their waiters get `abandoned`.
            let _ = tokio::spawn(write(batch)).await;
        }
    }
}

fn abandoned() -> StoreError {
    StoreError::Batch("the batch writing this job stopped before answering".into())
}

/// Answers every creation of a batch whose transaction failed as a whole. A batch of one
/// gets the error itself (so a pool timeout stays a pool timeout).
pub(crate) fn fail_all(batch: Vec<NewJob>, err: StoreError) {
    if batch.len() == 1 {
        let job = batch.into_iter().next().expect("one job");
        let _ = job.done.send(Err(err));
        return;
    }
    let message = err.to_string();
    for job in batch {
        let _ = job.done.send(Err(StoreError::Batch(message.clone())));
    }
}
