//! Group commit of execution state changes, written until the database takes them.
//!
//! Every finished call ends in a compare-and-set of its row; written one by one, each is its
//! own transaction and its own log flush, and at a thousand results a second those flushes are
//! the database's main cost. The writer takes whatever changes are waiting, writes them in one
//! transaction (with the retry rows that failures earn), and answers each caller with its own
//! outcome. It never waits to fill a batch: a lone change is written at once.
//!
//! A change is never dropped: a batch that fails (database down, deadlock) is written again
//! with a capped backoff until it goes in; a batch the database refuses for its data is
//! split, so a change it refuses every time holds back no other. Memory is bounded by the queue: at
//! [`QUEUE_BOUND`] waiting changes, callers wait for room, and so hold their call slot and
//! their place in the backlog; the engine then takes no new fires, which wait in the schedule
//! and follow the misfire policy. A process that dies with changes queued leaves their rows
//! PENDING or RUNNING, and compensation settles them from what the executor remembers.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::HashMap;
use tokio::sync::{Semaphore, mpsc, oneshot, watch};

use crate::backoff::Backoff;
use crate::store::{Applied, ExecutionStore, StoreError, Transition};

/// How long a RUNNING change may wait for its row's result, so that a call answered within
/// it costs one row update instead of two: the deferred changes are flushed together (whole
/// batches) every second, or every quarter of the lease when that is shorter. RUNNING tells
/// compensation and readers that the call left; compensation reads a PENDING row as its
/// holder's until the lease is over (and then asks the executor before it calls), so a
/// RUNNING written within a quarter of it changes no decision. What the wait costs is seen
/// in the API: a call in flight reads PENDING until its result or the next flush. A cancel
/// meanwhile asks the executor the row was planned for, where the call went, and the attempt
/// asks again once its RUNNING is refused. At saturation calls are answered in hundreds of
/// milliseconds; each one past the wait writes its row once more (docs/benchmarks.md,
/// "RUNNING held back up to a second").
pub fn start_deferral(lease: Duration) -> Duration {
    (lease / 4).min(Duration::from_secs(1))
}

/// At most this many changes share one transaction.
const MAX_BATCH: usize = 256;

/// Batches written at the same time, each on its own connection: while one waits for its
/// commit, the next is already being written.
const CONCURRENT_BATCHES: usize = 4;

/// Changes waiting to be written before callers have to wait.
pub const QUEUE_BOUND: usize = 16_384;

/// Delays between attempts at a batch the database refused.
const RETRY: Backoff = Backoff::doubling(Duration::from_millis(100), MAX_RETRY);
pub const MAX_RETRY: Duration = Duration::from_secs(5);

/// Where the outcome of a change goes: to its caller, waiting for it; or, for a deferred
/// RUNNING, to a function run when the outcome is known, so that no task waits beside each
/// call for an answer that almost always folds into the call's verdict.
enum Reply {
    Waiting(oneshot::Sender<Applied>),
    Then(Box<dyn FnOnce(Applied) + Send>),
}

impl Reply {
    fn send(self, applied: Applied) {
        match self {
            Reply::Waiting(caller) => {
                let _ = caller.send(applied);
            }
            Reply::Then(then) => then(applied),
        }
    }
}

/// The writer has stopped (the process is shutting down).
#[derive(Debug, thiserror::Error)]
#[error("the execution writer has stopped")]
pub struct WriterStopped;

pub struct Settler {
    queue: mpsc::Sender<(String, Transition, Reply)>,
    /// RUNNING changes waiting for their row's result (see [`Settler::started`]).
    deferred: Arc<Mutex<HashMap<String, (Transition, Reply)>>>,
}

impl Settler {
    /// Starts the writer task; it ends when the settler is dropped and the queue is empty. A
    /// RUNNING change waits for its row's result until the next flush of the deferred ones,
    /// every `deferral` ([`start_deferral`]).
    pub fn spawn(store: Arc<dyn ExecutionStore>, deferral: Duration) -> Self {
        let (queue, mut rx) = mpsc::channel::<(String, Transition, Reply)>(QUEUE_BOUND);
        tokio::spawn(async move {
            let writers = Arc::new(Semaphore::new(CONCURRENT_BATCHES));
            let in_flight = InFlight::default();
            let mut waiting = Vec::with_capacity(MAX_BATCH);
            loop {
                let Ok(writer) = writers.clone().acquire_owned().await else {
                    break;
                };
                if rx.recv_many(&mut waiting, MAX_BATCH).await == 0 {
                    break;
                }
                let (store, items) = (store.clone(), std::mem::take(&mut waiting));
                let (written, earlier) = in_flight.enter(&items);
                let in_flight = in_flight.clone();
                tokio::spawn(async move {
                    for mut batch in earlier {
                        // Resolves when that batch's sender is dropped: it was written.
                        let _ = batch.changed().await;
                    }
                    write_batch(store, items).await;
                    in_flight.leave(&written);
                    drop(writer);
                });
            }
            // Let the batches in flight finish before the task ends.
            let _ = writers.acquire_many(CONCURRENT_BATCHES as u32).await;
        });
        let deferred: Arc<Mutex<HashMap<String, (Transition, Reply)>>> = Arc::default();
        // Flushes the deferred changes all at once, so they fill whole batches; ends with the
        // settler (it holds no sender of its own).
        let (due, sink) = (deferred.clone(), queue.downgrade());
        // Each is queued under the lock a verdict takes to find its RUNNING, so a verdict
        // either folds its RUNNING in or is queued after it, never before: a RUNNING written
        // after its own verdict would be refused and send its batch the long way. What the
        // queue has no room for stays deferred until the next flush.
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(deferral).await;
                let Some(sink) = sink.upgrade() else { return };
                let mut deferred = due.lock().expect("deferred lock");
                let mut waiting = std::mem::take(&mut *deferred).into_iter();
                while let Some((trace, (t, reply))) = waiting.next() {
                    match sink.try_send((trace, t, reply)) {
                        Ok(()) => {}
                        Err(mpsc::error::TrySendError::Full((trace, t, reply))) => {
                            deferred.insert(trace, (t, reply));
                            deferred.extend(waiting);
                            break;
                        }
                        Err(mpsc::error::TrySendError::Closed(_)) => return,
                    }
                }
            }
        });
        Self { queue, deferred }
    }

    /// Applies `t`, an attempt's own verdict on row `trace_id`, with the next batch. A RUNNING
    /// change still deferred for the row is folded into it (written together, in one row
    /// update), and its caller is told it applied when the verdict did.
    pub async fn settle(&self, trace_id: &str, t: Transition) -> Result<Applied, WriterStopped> {
        let started = self.take_deferred(trace_id);
        let t = match &started {
            Some((start, _)) => Transition {
                executor_instance: t.executor_instance.or(start.executor_instance.clone()),
                start_time: t.start_time.or(start.start_time),
                ..t
            },
            None => t,
        };
        let applied = self.send(trace_id, t).await?;
        if let Some((_, start_reply)) = started {
            start_reply.send(match applied {
                Applied::Yes(_) => Applied::yes(),
                Applied::No => Applied::No,
            });
        }
        Ok(applied)
    }

    /// Applies `t`, a change by anyone but the row's attempt (a cancel, a report, a note),
    /// with the next batch. A RUNNING change still deferred for the row is written first, on
    /// its own: it tells the attempt the truth about its row, and `t` finds the row as the
    /// attempt left it.
    pub async fn write(&self, trace_id: &str, t: Transition) -> Result<Applied, WriterStopped> {
        if let Some((start, reply)) = self.take_deferred(trace_id) {
            self.queue
                .send((trace_id.to_string(), start, reply))
                .await
                .map_err(|_| WriterStopped)?;
        }
        self.send(trace_id, t).await
    }

    fn take_deferred(&self, trace_id: &str) -> Option<(Transition, Reply)> {
        self.deferred
            .lock()
            .expect("deferred lock")
            .remove(trace_id)
    }

    async fn send(&self, trace_id: &str, t: Transition) -> Result<Applied, WriterStopped> {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send((trace_id.to_string(), t, Reply::Waiting(reply)))
            .await
            .map_err(|_| WriterStopped)?;
        answer.await.map_err(|_| WriterStopped)
    }

    /// Applies `t`, a PENDING → RUNNING change after a call went out, at the next flush of
    /// the deferred changes: if the row's result comes first, both are written as one update.
    /// `then` is told whether it applied once that is known (nothing, when the writer stops
    /// first), in the writer's task or the verdict's: it must not wait. The change is
    /// deferred when this is called, so it cannot arrive after its verdict: a RUNNING written
    /// after the verdict would be refused, and take its batch the long way.
    pub fn started(
        &self,
        trace_id: &str,
        t: Transition,
        then: impl FnOnce(Applied) + Send + 'static,
    ) {
        self.deferred
            .lock()
            .expect("deferred lock")
            .insert(trace_id.to_string(), (t, Reply::Then(Box::new(then))));
    }
}

/// The rows of the batches being written, each with the batch that writes it. A change of a
/// row whose earlier change is in a batch still being written waits for that batch: written
/// side by side, the later one could commit first (a verdict before its flushed RUNNING), and
/// the earlier would then find its row moved, which rolls its whole batch back to be judged
/// row by row (`ExecutionStore::transitions`). Batches of other rows never wait.
#[derive(Clone, Default)]
struct InFlight(Arc<Mutex<HashMap<String, watch::Receiver<()>>>>);

impl InFlight {
    /// Registers a batch of `items`: the handle that marks it written when dropped, and the
    /// batches in flight it must wait for.
    fn enter(&self, items: &[(String, Transition, Reply)]) -> (Written, Vec<watch::Receiver<()>>) {
        let (done, rx) = watch::channel(());
        let mut rows = self.0.lock().expect("in-flight lock");
        let mut earlier: Vec<watch::Receiver<()>> = Vec::new();
        for (trace, _, _) in items {
            if let Some(before) = rows.insert(trace.clone(), rx.clone())
                && !before.same_channel(&rx)
                && !earlier.iter().any(|e| e.same_channel(&before))
            {
                earlier.push(before);
            }
        }
        (Written { _done: done, rx }, earlier)
    }

    /// Forgets the rows of a written batch, but those a later batch took over (the map holds
    /// the rows of at most [`CONCURRENT_BATCHES`] batches).
    fn leave(&self, written: &Written) {
        let mut rows = self.0.lock().expect("in-flight lock");
        rows.retain(|_, batch| !batch.same_channel(&written.rx));
    }
}

/// A batch in flight; dropping it tells the batches waiting for it to go.
struct Written {
    _done: watch::Sender<()>,
    rx: watch::Receiver<()>,
}

/// Writes one batch, again and again until the database takes it, and answers every caller
/// with its own outcome. A batch the database refuses for its data (a key it rejects: it
/// will every time) is split, and each change written on its own in a task of its own, so
/// the one at fault holds back neither the changes batched with it nor this writer.
async fn write_batch(store: Arc<dyn ExecutionStore>, items: Vec<(String, Transition, Reply)>) {
    let (batch, replies): (Vec<_>, Vec<_>) = items
        .into_iter()
        .map(|(trace, t, reply)| ((trace, t), reply))
        .unzip();
    metrics::histogram!("scheduler_result_batch_size").record(batch.len() as f64);
    let mut attempt = 0;
    let applied = loop {
        match store.transitions(&batch).await {
            Ok(applied) => break applied,
            Err(e) if refuses_the_data(&e) && batch.len() > 1 => {
                tracing::warn!(changes = batch.len(), error = %e, "execution changes refused; writing each on its own");
                for (item, reply) in batch.into_iter().zip(replies) {
                    tokio::spawn(write_alone(store.clone(), item, reply));
                }
                return;
            }
            Err(e) => {
                attempt += 1;
                let delay = RETRY.delay(attempt);
                metrics::counter!("scheduler_result_write_retries_total").increment(1);
                tracing::warn!(changes = batch.len(), error = %e, retry_in_ms = delay.as_millis() as u64, "execution changes not written; trying again");
                tokio::time::sleep(delay).await;
            }
        }
    };
    for (reply, applied) in replies.into_iter().zip(applied) {
        reply.send(applied);
    }
}

/// Whether the database refused a write for what it writes (a unique, foreign or check
/// constraint), not for its own state (away, busy, a deadlock): writing it again in the same
/// batch would meet the same refusal.
fn refuses_the_data(e: &StoreError) -> bool {
    match e {
        StoreError::Duplicate(_) => true,
        StoreError::Database(sqlx::Error::Database(db)) => {
            db.is_unique_violation() || db.is_foreign_key_violation() || db.is_check_violation()
        }
        _ => false,
    }
}

/// Writes one change of a refused batch, again and again until the database takes it.
async fn write_alone(store: Arc<dyn ExecutionStore>, item: (String, Transition), reply: Reply) {
    let one = std::slice::from_ref(&item);
    let mut attempt = 0;
    loop {
        match store.transitions(one).await {
            Ok(mut applied) => {
                reply.send(applied.remove(0));
                return;
            }
            Err(e) => {
                attempt += 1;
                let delay = RETRY.delay(attempt);
                metrics::counter!("scheduler_result_write_retries_total").increment(1);
                tracing::warn!(trace_id = %item.0, error = %e, retry_in_ms = delay.as_millis() as u64, "execution change not written; trying again");
                tokio::time::sleep(delay).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Under tokio's paused clock: the deferral and the retry delays pass without real time.

    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;
    use chrono::{DateTime, Utc};

    use super::*;
    use crate::jobs::{Execution, ExecutionStatus};
    use crate::store::{
        Activity, Cursor, ExecutionFilter, Listing, PageRequest, Stopping, StoreError, Swept,
    };

    use ExecutionStatus::{Pending, Running, Success};

    /// Records every batch written; refuses the first `failures` with a database error, and
    /// every batch holding a change of a row in `poison` as a duplicate.
    #[derive(Default)]
    struct Recording {
        batches: Mutex<Vec<Vec<(String, Transition)>>>,
        failures: AtomicUsize,
        poison: Mutex<Vec<String>>,
        /// A batch holding one of these rows takes this long to write (once).
        slow: Mutex<HashMap<String, Duration>>,
    }

    #[async_trait]
    impl ExecutionStore for Recording {
        async fn transitions(
            &self,
            batch: &[(String, Transition)],
        ) -> Result<Vec<Applied>, StoreError> {
            if self.failures.load(Ordering::SeqCst) > 0 {
                self.failures.fetch_sub(1, Ordering::SeqCst);
                return Err(StoreError::Database(sqlx::Error::PoolTimedOut));
            }
            let slow = batch
                .iter()
                .find_map(|(trace, _)| self.slow.lock().unwrap().remove(trace));
            if let Some(slow) = slow {
                tokio::time::sleep(slow).await;
            }
            let poison = self.poison.lock().unwrap().clone();
            if batch.iter().any(|(trace, _)| poison.contains(trace)) {
                return Err(StoreError::Duplicate(crate::store::UniqueKey::ExecutionId));
            }
            self.batches.lock().unwrap().push(batch.to_vec());
            Ok(batch.iter().map(|_| Applied::yes()).collect())
        }

        async fn transition(&self, trace: &str, t: &Transition) -> Result<Applied, StoreError> {
            let mut applied = self.transitions(&[(trace.to_string(), t.clone())]).await?;
            Ok(applied.remove(0))
        }

        // The settler writes through `transitions` only.
        async fn get_execution(&self, _: &str) -> Result<Option<Execution>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn list_executions(
            &self,
            _: &str,
            _: Option<ExecutionStatus>,
            _: PageRequest,
        ) -> Result<Listing<Execution>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn running_per_executor(
            &self,
        ) -> Result<std::collections::HashMap<String, i64>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn latest_executions(&self, _: &[&str]) -> Result<Vec<Execution>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn search_executions(
            &self,
            _: &ExecutionFilter,
            _: PageRequest,
            _: i64,
        ) -> Result<Listing<Execution>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn pending_before(
            &self,
            _: DateTime<Utc>,
            _: Cursor,
            _: u32,
        ) -> Result<Vec<Swept>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn running_before(
            &self,
            _: DateTime<Utc>,
            _: Cursor,
            _: u32,
        ) -> Result<Vec<Swept>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn fire_executions(&self, _: &str, _: &str) -> Result<Vec<Execution>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn activity_since(&self, _: DateTime<Utc>) -> Result<Activity, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn stopping(&self, _: u32) -> Result<Vec<Stopping>, StoreError> {
            unreachable!("the settler reads no rows")
        }
        async fn stops_confirmed(&self, _: &[String]) -> Result<(), StoreError> {
            unreachable!("the settler confirms no stops")
        }
    }

    const DEFERRAL: Duration = Duration::from_secs(1);

    fn started() -> Transition {
        let at: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().unwrap();
        Transition::started("127.0.0.1:9000".into(), at)
    }

    /// [`Settler::started`], its outcome awaited as a caller would.
    fn start(
        settler: &Settler,
        trace: &str,
    ) -> impl Future<Output = Result<Applied, WriterStopped>> + use<> {
        let (told, answer) = oneshot::channel();
        settler.started(trace, started(), move |applied| {
            let _ = told.send(applied);
        });
        async move { answer.await.map_err(|_| WriterStopped) }
    }

    fn success() -> Transition {
        Transition::to(&[Pending, Running], Success)
    }

    #[tokio::test(start_paused = true)]
    async fn a_running_answered_within_the_deferral_is_written_with_its_verdict_in_one_update() {
        let store = Arc::new(Recording::default());
        let settler = Arc::new(Settler::spawn(store.clone(), DEFERRAL));
        let s = settler.clone();
        let start = tokio::spawn(async move { start(&s, "a").await });
        tokio::time::sleep(DEFERRAL / 2).await;
        assert!(settler.settle("a", success()).await.unwrap().applied());
        assert!(
            start.await.unwrap().unwrap().applied(),
            "the RUNNING is told it applied"
        );
        let batches = store.batches.lock().unwrap().clone();
        assert_eq!(batches.len(), 1, "{batches:?}");
        let (trace, t) = &batches[0][0];
        assert_eq!((trace.as_str(), t.to), ("a", Success));
        assert_eq!(t.executor_instance.as_deref(), Some("127.0.0.1:9000"));
        assert!(t.start_time.is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn a_running_is_deferred_when_asked_for_not_when_its_answer_is_awaited() {
        let store = Arc::new(Recording::default());
        let settler = Settler::spawn(store.clone(), DEFERRAL);
        let start = start(&settler, "a");
        assert!(settler.settle("a", success()).await.unwrap().applied());
        assert!(
            start.await.unwrap().applied(),
            "told it applied with the verdict"
        );
        let batches = store.batches.lock().unwrap().clone();
        assert_eq!(batches.len(), 1, "{batches:?}");
        assert_eq!(batches[0][0].1.to, Success);
        assert!(batches[0][0].1.start_time.is_some(), "the start folded in");
    }

    #[tokio::test(start_paused = true)]
    async fn a_running_alone_is_written_within_the_deferral() {
        let store = Arc::new(Recording::default());
        let settler = Settler::spawn(store.clone(), DEFERRAL);
        tokio::time::sleep(DEFERRAL * 3 / 10).await;
        let before = tokio::time::Instant::now();
        assert!(start(&settler, "a").await.unwrap().applied());
        assert_eq!(before.elapsed(), DEFERRAL * 7 / 10, "at the next flush");
        let batches = store.batches.lock().unwrap().clone();
        assert_eq!(batches.len(), 1);
        assert_eq!(batches[0][0].1.to, Running);
    }

    #[tokio::test(start_paused = true)]
    async fn the_runnings_deferred_until_a_flush_are_written_in_one_batch() {
        let store = Arc::new(Recording::default());
        let settler = Arc::new(Settler::spawn(store.clone(), DEFERRAL));
        let mut starts = Vec::new();
        for i in 0..10 {
            let s = settler.clone();
            starts.push(tokio::spawn(
                async move { start(&s, &format!("r{i}")).await },
            ));
            tokio::time::sleep(DEFERRAL / 20).await;
        }
        for s in starts {
            assert!(s.await.unwrap().unwrap().applied());
        }
        let sizes: Vec<usize> = store.batches.lock().unwrap().iter().map(Vec::len).collect();
        assert_eq!(sizes, [10]);
    }

    #[test]
    fn the_deferral_is_a_second_or_a_quarter_of_a_shorter_lease() {
        assert_eq!(
            start_deferral(Duration::from_secs(10)),
            Duration::from_secs(1)
        );
        assert_eq!(
            start_deferral(Duration::from_secs(4)),
            Duration::from_secs(1)
        );
        assert_eq!(
            start_deferral(Duration::from_secs(2)),
            Duration::from_millis(500)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_batch_the_database_refuses_is_written_again_until_it_goes_in() {
        let store = Arc::new(Recording::default());
        store.failures.store(6, Ordering::SeqCst);
        let settler = Settler::spawn(store.clone(), DEFERRAL);
        let before = tokio::time::Instant::now();
        assert!(settler.settle("a", success()).await.unwrap().applied());
        // 0.1 + 0.2 + 0.4 + 0.8 + 1.6 + 3.2 s of backoff, none of it real.
        let waited = before.elapsed();
        assert!(waited >= Duration::from_millis(6_300), "{waited:?}");
        assert!(waited < Duration::from_millis(6_400), "{waited:?}");
        assert_eq!(store.batches.lock().unwrap().len(), 1, "written once");
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_by_another_party_writes_the_deferred_running_first() {
        let store = Arc::new(Recording::default());
        let settler = Arc::new(Settler::spawn(store.clone(), DEFERRAL));
        let s = settler.clone();
        let start = tokio::spawn(async move { start(&s, "a").await });
        tokio::task::yield_now().await;
        let cancel = Transition::to(&[Pending, Running], ExecutionStatus::Cancelled);
        assert!(settler.write("a", cancel).await.unwrap().applied());
        assert!(start.await.unwrap().unwrap().applied());
        let written: Vec<ExecutionStatus> = store
            .batches
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .map(|(_, t)| t.to)
            .collect();
        assert_eq!(written, [Running, ExecutionStatus::Cancelled]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_of_a_row_waits_for_the_batch_still_writing_its_earlier_change() {
        let store = Arc::new(Recording::default());
        let settler = Arc::new(Settler::spawn(store.clone(), DEFERRAL));
        store
            .slow
            .lock()
            .unwrap()
            .insert("a".into(), Duration::from_secs(1));
        let s = settler.clone();
        let first = tokio::spawn(async move { s.write("a", started()).await });
        // Each change taken by the writer as a batch of its own.
        tokio::time::sleep(Duration::from_millis(1)).await;
        let s = settler.clone();
        let second = tokio::spawn(async move { s.write("a", success()).await });
        tokio::time::sleep(Duration::from_millis(1)).await;
        assert!(settler.write("b", success()).await.unwrap().applied());
        assert!(
            !first.is_finished(),
            "b was not held back by a's slow batch"
        );
        assert!(first.await.unwrap().unwrap().applied());
        assert!(second.await.unwrap().unwrap().applied());
        let written: Vec<(String, ExecutionStatus)> = store
            .batches
            .lock()
            .unwrap()
            .iter()
            .flatten()
            .map(|(trace, t)| (trace.clone(), t.to))
            .collect();
        assert_eq!(
            written,
            [
                ("b".to_string(), Success),
                ("a".to_string(), Running),
                ("a".to_string(), Success)
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_change_the_database_refuses_every_time_holds_back_no_other() {
        let store = Arc::new(Recording::default());
        let settler = Arc::new(Settler::spawn(store.clone(), DEFERRAL));
        // As many refused changes as there are writers, each batched with a good one.
        let bad = |i: usize| format!("bad-{i}");
        *store.poison.lock().unwrap() = (0..CONCURRENT_BATCHES).map(bad).collect();
        let mut stuck = Vec::new();
        let mut good = Vec::new();
        for i in 0..CONCURRENT_BATCHES {
            let (s1, s2) = (settler.clone(), settler.clone());
            stuck.push(tokio::spawn(
                async move { s1.settle(&bad(i), success()).await },
            ));
            good.push(tokio::spawn(async move {
                s2.settle(&format!("good-{i}"), success()).await
            }));
        }
        for g in good {
            let written = tokio::time::timeout(Duration::from_secs(60), g).await;
            assert!(
                written
                    .expect("a good change goes in")
                    .unwrap()
                    .unwrap()
                    .applied()
            );
        }
        // Every writer is free again.
        let later =
            tokio::time::timeout(Duration::from_secs(60), settler.settle("later", success()));
        assert!(later.await.expect("not held back").unwrap().applied());
        assert!(
            stuck.iter().all(|b| !b.is_finished()),
            "still tried, never dropped"
        );
        store.poison.lock().unwrap().clear();
        for b in stuck {
            assert!(
                b.await.unwrap().unwrap().applied(),
                "in once the database takes it"
            );
        }
    }
}
