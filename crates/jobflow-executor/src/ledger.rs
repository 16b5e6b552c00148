//! The executions this executor knows, by trace id: the memory behind duplicate calls, the
//! status endpoint and cancellation.
//!
//! Every execution is entered when its call is admitted and stays while it runs (running
//! entries are never evicted, however many there are). Finished entries are kept so that a
//! late status question or a repeated call gets the result instead of a second run; the
//! oldest-finished are forgotten first once more than `keep_finished` are held.

use std::collections::{HashMap, VecDeque};

use tokio::sync::{oneshot, watch};

use crate::protocol::{ExecutionState, JobResult};

/// Finished executions remembered by default.
pub const KEEP_FINISHED: usize = 10_000;

pub(crate) struct Ledger {
    entries: HashMap<String, Entry>,
    /// Trace ids of finished entries, oldest-finished first.
    finished: VecDeque<String>,
    keep_finished: usize,
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
    Unknown,
    /// Nothing to stop: the answer is its final status.
    Finished,
    /// The execution was told to stop; `done` turns true once it has.
    Stopping(watch::Receiver<bool>),
}

impl Ledger {
    pub fn new(keep_finished: usize) -> Self {
        Self {
            entries: HashMap::new(),
            finished: VecDeque::new(),
            keep_finished,
        }
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

    /// Records how a running execution ended (once; a second call changes nothing).
    pub fn finish(&mut self, trace_id: &str, result: JobResult) -> Recorded {
        let entry = self
            .entries
            .get_mut(trace_id)
            .expect("running entries are never evicted");
        if let Phase::Running { .. } = entry.phase {
            entry.phase = Phase::Finished(result);
            self.finished.push_back(trace_id.to_string());
        }
        let Phase::Finished(result) = &entry.phase else {
            unreachable!("finished above")
        };
        let recorded = Recorded {
            result: result.clone(),
            report_url: entry.report_url.clone(),
            report_requested: entry.report_when_done,
        };
        while self.finished.len() > self.keep_finished {
            if let Some(oldest) = self.finished.pop_front() {
                self.entries.remove(&oldest);
            }
        }
        recorded
    }

    pub fn state(&self, trace_id: &str) -> Option<(ExecutionState, Option<String>)> {
        self.entries.get(trace_id).map(|e| match &e.phase {
            Phase::Running { .. } => (ExecutionState::Running, None),
            Phase::Finished(r) => (r.final_status().into(), r.message.clone()),
        })
    }

    pub fn cancel(&mut self, trace_id: &str) -> Cancellation {
        let Some(entry) = self.entries.get_mut(trace_id) else {
            return Cancellation::Unknown;
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

    fn run(ledger: &mut Ledger, trace: &str) -> (oneshot::Receiver<()>, watch::Sender<bool>) {
        match ledger.admit(trace, "http://s/r", false) {
            Admission::Run { cancel, done } => (cancel, done),
            _ => panic!("{trace} should be new"),
        }
    }

    #[test]
    fn running_entries_are_never_evicted_finished_oldest_first() {
        let mut ledger = Ledger::new(2);
        let mut handles = Vec::new();
        for t in ["a", "b", "c", "d", "e"] {
            handles.push(run(&mut ledger, t));
        }
        // Five running, two finished allowed: nothing running may go.
        assert_eq!(ledger.len(), 5);
        for t in ["c", "a", "e"] {
            ledger.finish(t, JobResult::success(t));
        }
        // "c" finished first and is forgotten; "a" and "e" are remembered.
        assert_eq!(ledger.len(), 4);
        assert_eq!(ledger.state("c"), None);
        assert_eq!(
            ledger.state("a"),
            Some((ExecutionState::Success, Some("a".into())))
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
        let mut ledger = Ledger::new(10);
        let _h = run(&mut ledger, "t");
        assert!(matches!(
            ledger.admit("t", "http://other/r", false),
            Admission::StillRunning
        ));
        let rec = ledger.finish("t", JobResult::failure("no"));
        assert!(rec.report_requested);
        assert_eq!(rec.report_url, "http://other/r");
        match ledger.admit("t", "u", false) {
            Admission::Finished(r) => assert_eq!(r, JobResult::failure("no")),
            _ => panic!("finished executions answer their result"),
        }
        // Recording twice keeps the first result.
        let again = ledger.finish("t", JobResult::success("late"));
        assert_eq!(again.result, JobResult::failure("no"));
    }

    #[test]
    fn a_synchronous_run_asks_for_no_report_by_itself() {
        let mut ledger = Ledger::new(10);
        let _h = run(&mut ledger, "t");
        assert!(
            !ledger
                .finish("t", JobResult::success("ok"))
                .report_requested
        );
        let Admission::Run { .. } = ledger.admit("bg", "u", true) else {
            panic!()
        };
        assert!(
            ledger
                .finish("bg", JobResult::success("ok"))
                .report_requested
        );
    }

    #[test]
    fn cancellation_signals_the_run_once() {
        let mut ledger = Ledger::new(10);
        assert!(matches!(ledger.cancel("nope"), Cancellation::Unknown));
        let (mut stop, _done) = run(&mut ledger, "t");
        assert!(matches!(ledger.cancel("t"), Cancellation::Stopping(_)));
        assert_eq!(stop.try_recv(), Ok(()));
        // A second request waits for the same stop.
        assert!(matches!(ledger.cancel("t"), Cancellation::Stopping(_)));
        ledger.finish("t", JobResult::cancelled());
        assert!(matches!(ledger.cancel("t"), Cancellation::Finished));
        assert_eq!(ledger.state("t"), Some((ExecutionState::Cancelled, None)));
    }
}
