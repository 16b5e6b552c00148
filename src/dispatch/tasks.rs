//! The background work of dispatch and how it ends on shutdown. Every task dispatch starts
//! is tracked here, so a stopping instance can wait for its calls (up to
//! `server.shutdown_grace_seconds`). Once stopping, waits end: a wait for a due time past the
//! drain deadline, or for a call slot, gives up and leaves its row PENDING for compensation;
//! calls already made finish.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use chrono::{DateTime, Utc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

use crate::clock::Clock;

pub struct Tasks {
    clock: Clock,
    tracker: TaskTracker,
    /// The runtime dispatch runs on, whoever asks for the work: the API serves from a
    /// runtime of its own (see `app`), and a manual run it starts belongs here with the rest.
    runtime: tokio::runtime::Handle,
    stopping: CancellationToken,
    /// When the drain on shutdown gives up: work due before it is still done.
    deadline: OnceLock<DateTime<Utc>>,
}

impl Tasks {
    /// Tasks spawned on the runtime this is called from.
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            tracker: TaskTracker::new(),
            runtime: tokio::runtime::Handle::current(),
            stopping: CancellationToken::new(),
            deadline: OnceLock::new(),
        }
    }

    /// Runs `task` in the background, tracked. The task is boxed: an attempt's future is a few
    /// kilobytes, and a task keeps its future inline, so spawning it, and ending it, copied all
    /// of it (tokio's `Cell::new` and `set_stage`), twice per fire; boxed, they copy a pointer
    /// (docs/benchmarks.md, "Copies, formats and prepares").
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.tracker.spawn_on(Box::pin(task), &self.runtime);
    }

    /// Holds the drain open until the hold is dropped, as a tracked task would: for work
    /// that finishes in a callback rather than a task of its own.
    pub fn hold(&self) -> TaskTrackerToken {
        self.tracker.token()
    }

    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Resolves when shutdown begins.
    pub async fn stopping(&self) {
        self.stopping.cancelled().await
    }

    /// The instant up to which a stopping instance still starts due work.
    pub fn deadline(&self) -> Option<DateTime<Utc>> {
        self.deadline.get().copied()
    }

    /// Stops accepting waits and waits up to `grace` for the tracked tasks; `false` when some
    /// outlived it.
    pub async fn drain(&self, grace: Duration) -> bool {
        let deadline = self.clock.now() + chrono::Duration::from_std(grace).unwrap_or_default();
        let _ = self.deadline.set(deadline);
        self.stopping.cancel();
        self.tracker.close();
        tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
    }

    /// Resolves when waiting must end: at the drain deadline once shutting down.
    pub async fn halted(&self) {
        self.stopping.cancelled().await;
        if let Some(deadline) = self.deadline() {
            self.clock.sleep_until(deadline).await;
        }
    }

    /// Waits until `due`; `false` when the instance stops first and `due` is past the drain
    /// deadline (the work is left for compensation).
    pub async fn until_due(&self, due: DateTime<Utc>) -> bool {
        if self.clock.now() >= due {
            return true;
        }
        let sleep = self.clock.sleep_until(due);
        tokio::pin!(sleep);
        tokio::select! {
            _ = &mut sleep => return true,
            _ = self.stopping.cancelled() => {}
        }
        if self.deadline().is_some_and(|d| due <= d) {
            sleep.await;
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    //! Under tokio's paused clock: minutes of waiting pass in no real time.

    use std::sync::Arc;

    use super::*;

    fn at(secs: i64) -> DateTime<Utc> {
        let start: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().unwrap();
        start + chrono::Duration::seconds(secs)
    }

    #[tokio::test(start_paused = true)]
    async fn work_waits_until_it_is_due() {
        let tasks = Tasks::new(Clock::tokio(at(0)));
        assert!(tasks.until_due(at(90)).await);
        assert_eq!(tasks.clock.now(), at(90));
        assert!(
            tasks.until_due(at(10)).await,
            "a due time passed is due at once"
        );
        assert_eq!(tasks.clock.now(), at(90));
    }

    #[tokio::test(start_paused = true)]
    async fn a_stopping_instance_still_does_work_due_before_its_drain_deadline_and_leaves_the_rest()
    {
        let tasks = Arc::new(Tasks::new(Clock::tokio(at(0))));
        let (soon, late) = (tasks.clone(), tasks.clone());
        let soon = tokio::spawn(async move { soon.until_due(at(3)).await });
        let late = tokio::spawn(async move { late.until_due(at(60)).await });
        tokio::task::yield_now().await;
        assert!(
            tasks.drain(Duration::from_secs(5)).await,
            "both waits ended"
        );
        assert!(soon.await.unwrap(), "due within the grace: done");
        assert!(!late.await.unwrap(), "due after it: left for compensation");
        assert_eq!(tasks.deadline(), Some(at(5)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_keeps_the_drain_waiting_as_a_task_would() {
        let tasks = Arc::new(Tasks::new(Clock::tokio(at(0))));
        let held = tasks.hold();
        let draining = tasks.clone();
        let drained = tokio::spawn(async move { draining.drain(Duration::from_secs(5)).await });
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!drained.is_finished(), "the hold is still there");
        drop(held);
        assert!(drained.await.unwrap(), "released within the grace");
        assert_eq!(tasks.clock.now(), at(2));
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_gives_up_on_work_that_outlives_the_grace() {
        let tasks = Tasks::new(Clock::tokio(at(0)));
        tasks.spawn(async { tokio::time::sleep(Duration::from_secs(30)).await });
        assert!(!tasks.drain(Duration::from_secs(5)).await);
    }
}
