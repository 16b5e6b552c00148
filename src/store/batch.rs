//! Group commit for writes that arrive many at a time, each waiting for its own answer: job
//! creations (a script or an import creates jobs by the hundred) and execution log batches
//! (every running handler ships its lines). One transaction per write spends most of its
//! time on the transaction itself (begin, the commit and its log flush) and, for creations,
//! serialises the writers on the revision counter's row lock. So concurrent writes queue
//! here, and whoever finds the writer free writes every queued one in one transaction: one
//! commit for all, each write still answered only once that commit is durable. What one
//! write may fail alone (a duplicate job name, a log of an unknown execution) is decided by
//! the batch's writer, which answers each write.

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::oneshot;

use super::StoreError;

/// The most writes one transaction takes (a creation batch's read-back binds one value each).
const MAX_BATCH: usize = 500;

/// A write waiting for its batch, and where its answer goes.
pub(crate) struct Queued<T, R> {
    pub write: T,
    pub done: oneshot::Sender<Result<R, StoreError>>,
}

/// Writes of type `T` answered with `R`, committed together (see the module documentation).
pub(crate) struct GroupCommit<T, R> {
    pending: Mutex<Vec<Queued<T, R>>>,
    /// Held while a batch is written: writes arriving meanwhile form the next batch.
    writer: tokio::sync::Mutex<()>,
    /// How long a writer that finds fewer than a full batch waits for more before writing.
    linger: Duration,
}

impl<T, R> Default for GroupCommit<T, R> {
    fn default() -> Self {
        Self::lingering(Duration::ZERO)
    }
}

impl<T, R> GroupCommit<T, R> {
    /// Writes that arrive one by one rather than together (each answered a little later, so
    /// that several share a commit): the writer waits `linger` before taking a batch that
    /// is not full.
    pub fn lingering(linger: Duration) -> Self {
        Self {
            pending: Mutex::new(Vec::new()),
            writer: tokio::sync::Mutex::new(()),
            linger,
        }
    }

    /// Queues `write` and returns once it is committed (or refused). `commit` writes a batch
    /// and answers each of its writes; it runs on a task of its own, so a caller that gives
    /// up (a closed connection) does not abandon the others' writes. The caller holding the
    /// writer writes batches, oldest writes first, until its own is answered or in a batch
    /// still being written (its writer gave up waiting).
    pub async fn submit<C, F>(&self, write: T, commit: C) -> Result<R, StoreError>
    where
        C: Fn(Vec<Queued<T, R>>) -> F,
        F: Future<Output = ()> + Send + 'static,
    {
        let (done, mut result) = oneshot::channel();
        self.pending
            .lock()
            .expect("group commit lock")
            .push(Queued { write, done });
        let _writer = self.writer.lock().await;
        loop {
            match result.try_recv() {
                // A batch (maybe another caller's) answered this write.
                Ok(answer) => return answer,
                Err(oneshot::error::TryRecvError::Closed) => return Err(abandoned()),
                Err(oneshot::error::TryRecvError::Empty) => {}
            }
            let waiting = self.pending.lock().expect("group commit lock").len();
            if !self.linger.is_zero() && (1..MAX_BATCH).contains(&waiting) {
                tokio::time::sleep(self.linger).await;
            }
            let batch: Vec<Queued<T, R>> = {
                let mut pending = self.pending.lock().expect("group commit lock");
                let n = pending.len().min(MAX_BATCH);
                pending.drain(..n).collect()
            };
            if batch.is_empty() {
                // A batch still being written holds this write (its caller gave up).
                return result.await.unwrap_or_else(|_| Err(abandoned()));
            }
            // A panic in `commit` drops the answers: their waiters get `abandoned`.
            let _ = tokio::spawn(commit(batch)).await;
        }
    }
}

fn abandoned() -> StoreError {
    StoreError::Batch("the batch holding this write stopped before answering".into())
}

/// Answers every write of a batch: each its own answer when the transaction committed, all
/// its error when it failed as a whole. A batch of one gets the error itself (so a pool
/// timeout stays a pool timeout).
pub(crate) fn answer_all<T, R>(
    batch: Vec<Queued<T, R>>,
    answers: Result<Vec<Result<R, StoreError>>, StoreError>,
) {
    match answers {
        Ok(answers) => {
            for (queued, answer) in batch.into_iter().zip(answers) {
                let _ = queued.done.send(answer);
            }
        }
        Err(err) if batch.len() == 1 => {
            let queued = batch.into_iter().next().expect("one write");
            let _ = queued.done.send(Err(err));
        }
        Err(err) => {
            let message = err.to_string();
            for queued in batch {
                let _ = queued.done.send(Err(StoreError::Batch(message.clone())));
            }
        }
    }
}
