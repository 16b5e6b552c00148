//! The executions this executor knows, by trace id: the memory behind duplicate calls, the
//! status endpoint and cancellation.
//!
//! Every execution is entered when its call is admitted and stays while it runs (running
//! entries are never evicted, however many there are). Finished entries are kept so that a
//! late status question or a repeated call gets the result instead of a second run, by time
//! and by count: an entry is forgotten only once it finished more than [`Keep::for_at_least`]
//! ago *and* more than [`Keep::at_least`] finished entries are held, so how long a result is
//! remembered does not shrink with throughput. [`Keep::at_most`] bounds the memory whatever
//! the throughput. What has been forgotten is said: status answers carry the moment from
//! which every finished execution is still remembered (`rememberedSince`), so the scheduler
//! never reads "forgotten" as "never had it".
//!
//! A cancel for an execution not seen yet (its call is still on its way) is remembered as
//! cancelled: the call, when it arrives, is answered CANCELLED and never runs.

use std::collections::{HashMap, VecDeque};

use chrono::{DateTime, Utc};
use tokio::sync::{oneshot, watch};

use crate::protocol::{ExecutionState, JobResult};

/// Finished executions remembered at least, by default.
pub const KEEP_FINISHED: usize = 10_000;

/// How long finished executions are remembered at least, by default: far longer than any
/// scheduler waits before asking about a call (leases of seconds, compensation passes of a
/// minute).
pub const KEEP_FINISHED_FOR: std::time::Duration = std::time::Duration::from_secs(600);

/// Finished executions remembered at most, by default, whatever their age.
pub const KEEP_FINISHED_AT_MOST: usize = 1_000_000;

/// How long and how many finished executions are remembered.
#[derive(Debug, Clone, Copy)]
pub struct Keep {
    pub at_least: usize,
    pub for_at_least: std::time::Duration,
    pub at_most: usize,
}

impl Default for Keep {
    fn default() -> Self {
        Self {
            at_least: KEEP_FINISHED,
            for_at_least: KEEP_FINISHED_FOR,
            at_most: KEEP_FINISHED_AT_MOST,
        }
    }
}

pub(crate) struct Ledger {
    entries: HashMap<String, Entry>,
    /// Trace ids of finished entries and when they finished, oldest-finished first.
    finished: VecDeque<(String, DateTime<Utc>)>,
    keep: Keep,
    /// Every execution that finished at or after this moment is still remembered.
    remembered_since: DateTime<Utc>,
}

struct Entry {
    phase: Phase,
    /// The `reportUrl` of the latest call for this trace id: after a failover the scheduler
    /// that asks again is not the one that asked first.
    report_url: String,
    /// Report the result when it is known: background handlers, and a call repeated while the
    /// first still runs (it was answered 202).
    report_when_done: bool,
    /// Turns true once the entry is finished; cancellation waits on it.
    done: watch::Receiver<bool>,
}

enum Phase {
    /// `cancel` is taken by the first cancellation request.
    Running {
        cancel: Option<oneshot::Sender<()>>,
    },
    Finished(JobResult),
}

/// What to do with a call.
pub(crate) enum Admission {
    /// Not seen before: run it, and stop when `cancel` fires; send `true` on `done` once
    /// [`Ledger::finish`] recorded the result.
    Run {
        cancel: oneshot::Receiver<()>,
        done: watch::Sender<bool>,
    },
    /// Already running: answer 202; its result will be reported.
    StillRunning,
    /// Already finished: answer the remembered result.
    Finished(JobResult),
}

/// The result as recorded, and whether someone asked for a report of it.
pub(crate) struct Recorded {
    pub result: JobResult,
    pub report_url: String,
    pub report_requested: bool,
}

pub(crate) enum Cancellation {
    /// Nothing to stop: the answer is its final status.
    Finished,
    /// The execution was told to stop; `done` turns true once it has.
    Stopping(watch::Receiver<bool>),
}

impl Ledger {
    /// A ledger that remembers everything from `since` (the process start) on.
    pub fn new(keep: Keep, since: DateTime<Utc>) -> Self {
        Self {
            entries: HashMap::new(),
            finished: VecDeque::new(),
            keep,
            remembered_since: since,
        }
    }

    /// The moment from which every finished execution is still remembered.
    pub fn remembered_since(&self) -> DateTime<Utc> {
        self.remembered_since
    }

    pub fn admit(&mut self, trace_id: &str, report_url: &str, background: bool) -> Admission {
        if let Some(entry) = self.entries.get_mut(trace_id) {
            return match &entry.phase {
                Phase::Running { .. } => {
                    entry.report_url = report_url.to_string();
                    entry.report_when_done = true;
                    Admission::StillRunning
                }
                Phase::Finished(result) => Admission::Finished(result.clone()),
            };
        }
        let (cancel_tx, cancel) = oneshot::channel();
        let (done, done_rx) = watch::channel(false);
        self.entries.insert(
            trace_id.to_string(),
            Entry {
                phase: Phase::Running {
                    cancel: Some(cancel_tx),
                },
                report_url: report_url.to_string(),
                report_when_done: background,
                done: done_rx,
            },
        );
        Admission::Run { cancel, done }
    }

    /// Records how a running execution ended at `now` (once; a second call changes nothing).
    pub fn finish(&mut self, trace_id: &str, result: JobResult, now: DateTime<Utc>) -> Recorded {
        let entry = self
            .entries
            .get_mut(trace_id)
            .expect("running entries are never evicted");
        if let Phase::Running { .. } = entry.phase {
            entry.phase = Phase::Finished(result);
            self.finished.push_back((trace_id.to_string(), now));
        }
        let Phase::Finished(result) = &entry.phase else {
            unreachable!("finished above")
        };
        let recorded = Recorded {
            result: result.clone(),
            report_url: entry.report_url.clone(),
            report_requested: entry.report_when_done,
        };
        self.forget(now);
        recorded
    }

    /// Forgets the oldest finished entries the [`Keep`] no longer holds.
    fn forget(&mut self, now: DateTime<Utc>) {
        let horizon = now
            - chrono::Duration::from_std(self.keep.for_at_least).unwrap_or(chrono::Duration::MAX);
        while let Some((_, finished_at)) = self.finished.front() {
            let held = self.finished.len();
            let expired = held > self.keep.at_least && *finished_at < horizon;
            if !(expired || held > self.keep.at_most) {
                break;
            }
            let (oldest, finished_at) = self.finished.pop_front().expect("non-empty");
            self.entries.remove(&oldest);
            self.remembered_since = self.remembered_since.max(finished_at);
        }
    }

    pub fn state(&self, trace_id: &str) -> Option<(ExecutionState, Option<String>)> {
        self.entries.get(trace_id).map(|e| match &e.phase {
            Phase::Running { .. } => (ExecutionState::Running, None),
            Phase::Finished(r) => (r.final_status().into(), r.message.clone()),
        })
    }

    /// Stops a running execution. One not seen yet is remembered as cancelled at `now`, so
    /// its call, when it arrives, is answered CANCELLED without running.
    pub fn cancel(&mut self, trace_id: &str, now: DateTime<Utc>) -> Cancellation {
        let Some(entry) = self.entries.get_mut(trace_id) else {
            let (_, done) = watch::channel(true);
            self.entries.insert(
                trace_id.to_string(),
                Entry {
                    phase: Phase::Finished(JobResult::cancelled()),
                    report_url: String::new(),
                    report_when_done: false,
                    done,
                },
            );
            self.finished.push_back((trace_id.to_string(), now));
            self.forget(now);
            return Cancellation::Finished;
        };
        match &mut entry.phase {
            Phase::Finished(_) => Cancellation::Finished,
            Phase::Running { cancel } => {
                if let Some(stop) = cancel.take() {
                    // The receiver is gone only if the run is ending anyway.
                    let _ = stop.send(());
                }
                Cancellation::Stopping(entry.done.clone())
            }
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u32) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + i64::from(s), 0).unwrap()
    }

    fn ledger(at_least: usize) -> Ledger {
        let keep = Keep {
            at_least,
            for_at_least: std::time::Duration::from_secs(60),
            at_most: 1000,
        };
        Ledger::new(keep, at(0))
    }

    fn run(ledger: &mut Ledger, trace: &str) -> (oneshot::Receiver<()>, watch::Sender<bool>) {
        match ledger.admit(trace, "http://s/r", false) {
            Admission::Run { cancel, done } => (cancel, done),
            _ => panic!("{trace} should be new"),
        }
    }

    #[test]
    fn running_entries_are_never_evicted_finished_oldest_first() {
        let mut ledger = ledger(2);
        let mut handles = Vec::new();
        for t in ["a", "b", "c", "d", "e"] {
            handles.push(run(&mut ledger, t));
        }
        // Five running, two finished allowed: nothing running may go.
        assert_eq!(ledger.len(), 5);
        ledger.finish("c", JobResult::success("c"), at(1));
        ledger.finish("a", JobResult::success("a"), at(2));
        // Three finished, but all within the minute: all remembered.
        ledger.finish("e", JobResult::success("e"), at(3));
        assert_eq!(ledger.len(), 5);
        assert_eq!(ledger.remembered_since(), at(0));
        // A minute later the oldest beyond two go, oldest-finished first: "c", then "a".
        let _later = run(&mut ledger, "f");
        ledger.finish("f", JobResult::success("f"), at(63));
        assert_eq!(ledger.len(), 4);
        assert_eq!(
            ledger.remembered_since(),
            at(2),
            "what finished after 2 is remembered"
        );
        assert_eq!(ledger.state("c"), None);
        assert_eq!(ledger.state("a"), None);
        assert_eq!(
            ledger.state("e"),
            Some((ExecutionState::Success, Some("e".into())))
        );
        assert_eq!(ledger.state("b"), Some((ExecutionState::Running, None)));
        assert_eq!(ledger.state("d"), Some((ExecutionState::Running, None)));
        // A forgotten trace id is new again.
        assert!(matches!(
            ledger.admit("c", "u", false),
            Admission::Run { .. }
        ));
    }

    #[test]
    fn repeated_calls_do_not_run_twice_and_ask_for_a_report() {
        let mut ledger = ledger(10);
        let _h = run(&mut ledger, "t");
        assert!(matches!(
            ledger.admit("t", "http://other/r", false),
            Admission::StillRunning
        ));
        let rec = ledger.finish("t", JobResult::failure("no"), at(1));
        assert!(rec.report_requested);
        assert_eq!(rec.report_url, "http://other/r");
        match ledger.admit("t", "u", false) {
            Admission::Finished(r) => assert_eq!(r, JobResult::failure("no")),
            _ => panic!("finished executions answer their result"),
        }
        // Recording twice keeps the first result.
        let again = ledger.finish("t", JobResult::success("late"), at(2));
        assert_eq!(again.result, JobResult::failure("no"));
    }

    #[test]
    fn a_synchronous_run_asks_for_no_report_by_itself() {
        let mut ledger = ledger(10);
        let _h = run(&mut ledger, "t");
        assert!(
            !ledger
                .finish("t", JobResult::success("ok"), at(1))
                .report_requested
        );
        let Admission::Run { .. } = ledger.admit("bg", "u", true) else {
            panic!()
        };
        assert!(
            ledger
                .finish("bg", JobResult::success("ok"), at(1))
                .report_requested
        );
    }

    #[test]
    fn cancellation_signals_the_run_once() {
        let mut ledger = ledger(10);
        let (mut stop, _done) = run(&mut ledger, "t");
        assert!(matches!(
            ledger.cancel("t", at(1)),
            Cancellation::Stopping(_)
        ));
        assert_eq!(stop.try_recv(), Ok(()));
        // A second request waits for the same stop.
        assert!(matches!(
            ledger.cancel("t", at(1)),
            Cancellation::Stopping(_)
        ));
        ledger.finish("t", JobResult::cancelled(), at(2));
        assert!(matches!(ledger.cancel("t", at(3)), Cancellation::Finished));
        assert_eq!(ledger.state("t"), Some((ExecutionState::Cancelled, None)));
    }

    #[test]
    fn a_call_cancelled_before_it_arrives_never_runs() {
        let mut ledger = ledger(10);
        assert!(matches!(
            ledger.cancel("early", at(1)),
            Cancellation::Finished
        ));
        assert_eq!(
            ledger.state("early"),
            Some((ExecutionState::Cancelled, None))
        );
        match ledger.admit("early", "u", false) {
            Admission::Finished(r) => assert_eq!(r, JobResult::cancelled()),
            _ => panic!("a cancelled call must not run"),
        }
    }
}
