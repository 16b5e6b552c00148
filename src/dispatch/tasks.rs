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

use crate::clock::Clock;

pub struct Tasks {
    clock: Clock,
    tracker: TaskTracker,
    stopping: CancellationToken,
    /// When the drain on shutdown gives up: work due before it is still done.
    deadline: OnceLock<DateTime<Utc>>,
}

impl Tasks {
    pub fn new(clock: Clock) -> Self {
        Self {
            clock,
            tracker: TaskTracker::new(),
            stopping: CancellationToken::new(),
            deadline: OnceLock::new(),
        }
    }

    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        self.tracker.spawn(task);
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
