//! State changes of execution rows: every change is a compare-and-set ([`Transition`]) from
//! the states it may start from, and may carry what it earns (a retry, children), written
//! in the same transaction when it applies ([`Applied`]).

use chrono::{DateTime, Utc};
use foldhash::{HashMap, HashMapExt};

use crate::jobs::{Execution, ExecutionStatus, NewExecution};

/// Child jobs to trigger when a SUCCESS completes its fire (see [`Transition::children`]).
#[derive(Debug, Clone)]
pub struct ChildTrigger {
    /// The parent's job and the [`fire_key`](crate::jobs::fire_key) of its fire.
    pub parent_job: String,
    pub parent_fire: String,
    /// The rows of every child, planned by the caller; their execution ids derive from the
    /// parent fire, one set per child.
    pub rows: Vec<NewExecution>,
}

/// A compare-and-set status change: applied only while the row is in one of `from` (and, when
/// given, still held by `held_by` for the lease that began at `held_since`).
#[derive(Debug, Clone)]
pub struct Transition {
    pub from: &'static [ExecutionStatus],
    pub to: ExecutionStatus,
    /// Guard: the row's `scheduler_instance` and `due_time` are still these (the lease of a
    /// PENDING row; see `dispatch`), honoured alone and in batches.
    pub held_by: Option<(String, DateTime<Utc>)>,
    /// Hands the row to another holder: new `scheduler_instance` and `due_time`.
    pub hand_to: Option<(String, DateTime<Utc>)>,
    pub executor_instance: Option<String>,
    pub start_time: Option<DateTime<Utc>>,
    pub finish_time: Option<DateTime<Utc>>,
    pub duration_ms: Option<i64>,
    pub result_message: Option<String>,
    pub error_message: Option<String>,
    /// Inserted in the same transaction when this transition applies: the retry a failure
    /// earns is never lost between the failure and its row. Boxed, as `children` is: rare,
    /// and a change is moved whole through every future that carries it to the writer.
    pub retry: Option<Box<NewExecution>>,
    /// The job whose row is locked first, so that this change and the admission of the job's
    /// guarded fires (or the completion of its fires) are decided one after the other: set
    /// for jobs with an overlap policy or child jobs.
    pub lock_job: Option<String>,
    /// For a SUCCESS: the children to insert, in the same transaction, when it completes its
    /// fire (every range of the fire has a SUCCESS) and no child rows of the fire exist yet.
    pub children: Option<Box<ChildTrigger>>,
    /// For a cancel asked at this instant: the run may go on at its executor until it
    /// confirms the stop, so it is recorded as *stopping* in the same transaction when this
    /// applies (see [`Stopping`](super::Stopping)).
    pub stopping: Option<DateTime<Utc>>,
    /// The row's primary key, when the caller holds the row it read or inserted: a batch's
    /// rows that carry it are set by primary key in one single-table statement, cheaper for
    /// MariaDB than a join on `trace_id` (docs/benchmarks.md, "Results set by primary key").
    /// Never a guard: the row is still named by its trace id.
    pub row_id: Option<i64>,
}

impl Transition {
    pub fn to(from: &'static [ExecutionStatus], to: ExecutionStatus) -> Self {
        Self {
            from,
            to,
            held_by: None,
            hand_to: None,
            executor_instance: None,
            start_time: None,
            finish_time: None,
            duration_ms: None,
            result_message: None,
            error_message: None,
            retry: None,
            lock_job: None,
            children: None,
            stopping: None,
            row_id: None,
        }
    }

    /// PENDING to RUNNING: the call to `executor` goes out at `at`. Every move into RUNNING
    /// names its executor and start, which is what compensation reads.
    pub fn started(executor: String, at: DateTime<Utc>) -> Self {
        Self {
            executor_instance: Some(executor),
            start_time: Some(at),
            ..Self::to(&[ExecutionStatus::Pending], ExecutionStatus::Running)
        }
    }
}

/// What a transition that applied brought with it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Follow {
    /// The retry row it inserted.
    pub retry: Option<Box<Execution>>,
    /// The child rows it inserted (its fire completed).
    pub children: Vec<Execution>,
}

/// What one transition of a batch came to.
#[derive(Debug, Clone, PartialEq)]
pub enum Applied {
    /// The row was not in a `from` state: someone else decided it.
    No,
    Yes(Follow),
}

impl Applied {
    pub fn applied(&self) -> bool {
        matches!(self, Self::Yes(_))
    }

    pub fn yes() -> Self {
        Self::Yes(Follow::default())
    }
}

/// The winning moves of a batch, one per row: a row that moves more than once ends in its
/// last move's status, and each column takes the last value any of its moves set (what
/// applying them one by one would leave). Guards, retries and children play no part in
/// setting.
pub fn fold_moves(winners: &[&(String, Transition)]) -> Vec<(String, Transition)> {
    let mut order: Vec<(String, Transition)> = Vec::with_capacity(winners.len());
    let mut at: HashMap<&str, usize> = HashMap::with_capacity(winners.len());
    for (trace, t) in winners.iter().map(|w| (&w.0, &w.1)) {
        let next = Transition {
            held_by: None,
            retry: None,
            lock_job: None,
            children: None,
            stopping: None,
            ..t.clone()
        };
        match at.get(trace.as_str()) {
            Some(&i) => {
                let prev = &mut order[i].1;
                prev.to = next.to;
                prev.hand_to = next.hand_to.or(prev.hand_to.take());
                prev.executor_instance = next.executor_instance.or(prev.executor_instance.take());
                prev.start_time = next.start_time.or(prev.start_time);
                prev.finish_time = next.finish_time.or(prev.finish_time);
                prev.duration_ms = next.duration_ms.or(prev.duration_ms);
                prev.result_message = next.result_message.or(prev.result_message.take());
                prev.error_message = next.error_message.or(prev.error_message.take());
                prev.row_id = prev.row_id.or(next.row_id);
            }
            None => {
                at.insert(trace.as_str(), order.len());
                order.push((trace.clone(), next));
            }
        }
    }
    order
}

/// A batch's changes as one guarded move per row ([`chained_moves`]).
#[derive(Debug)]
pub struct Chained {
    pub moves: Vec<(String, Transition)>,
    /// Per change of the batch, in order: whether it is refused for certain once the changes
    /// before it in the batch applied (it starts from none of the states they leave the row
    /// in: a RUNNING queued after its own verdict).
    pub refused: Vec<bool>,
}

/// The moves of `batch` folded into one per row ([`fold_moves`]), each guarded by its row's
/// first change (its `from` states and lease), when applying that first change decides the
/// rest of the row's changes too: each later change either starts from the state the one
/// before it leaves and names no lease or the lease the row is then known to be held under
/// (it applies: a verdict after its own RUNNING), or starts from none of the states it may
/// be in (it is refused, whatever the row's lease). `None` for a batch where some later
/// change could go either way, which only the row-by-row judgement decides.
pub fn chained_moves(batch: &[(String, Transition)]) -> Option<Chained> {
    type Lease = (String, DateTime<Utc>);
    /// A row as the batch's changes so far leave it, once its first change applied.
    struct Row<'a> {
        status: ExecutionStatus,
        /// Its first change's lease: the guard of the row's move.
        guard: &'a Option<Lease>,
        /// The lease it is then known to be held under (the guard, or the one a change
        /// handed it to); `None` when unknown.
        held: Option<&'a Lease>,
    }
    let mut rows: HashMap<&str, Row> = HashMap::with_capacity(batch.len());
    let mut refused = vec![false; batch.len()];
    for (i, (trace, t)) in batch.iter().enumerate() {
        match rows.get_mut(trace.as_str()) {
            Some(row) if !t.from.contains(&row.status) => refused[i] = true,
            Some(row) if t.held_by.is_some() && row.held != t.held_by.as_ref() => return None,
            Some(row) => {
                row.status = t.to;
                row.held = t.hand_to.as_ref().or(row.held);
            }
            None => {
                let row = Row {
                    status: t.to,
                    guard: &t.held_by,
                    held: t.hand_to.as_ref().or(t.held_by.as_ref()),
                };
                rows.insert(trace.as_str(), row);
            }
        }
    }
    // The fold keeps each row's first `from` and drops leases: the first change's lease is
    // put back as the row's guard.
    let kept: Vec<&(String, Transition)> = batch
        .iter()
        .zip(&refused)
        .filter(|(_, r)| !**r)
        .map(|(item, _)| item)
        .collect();
    let mut moves = fold_moves(&kept);
    for (trace, t) in &mut moves {
        t.held_by = rows[trace.as_str()].guard.clone();
    }
    Some(Chained { moves, refused })
}

#[cfg(test)]
mod tests {
    use super::*;
    use ExecutionStatus::{Cancelled, Pending, Running, Success};

    #[test]
    fn a_row_that_moves_twice_in_a_batch_is_set_once_with_both_moves_columns() {
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let started = (
            "a".to_string(),
            Transition::started("10.0.0.1:8080".into(), at),
        );
        let other = ("b".to_string(), Transition::to(&[Pending], Running));
        let finished = (
            "a".to_string(),
            Transition {
                finish_time: Some(at),
                result_message: Some("done".into()),
                ..Transition::to(&[Pending, Running], Success)
            },
        );
        let folded = fold_moves(&[&started, &other, &finished]);
        assert_eq!(folded.len(), 2);
        let (trace, a) = &folded[0];
        assert_eq!(trace, "a");
        assert_eq!(a.to, Success);
        assert_eq!(a.executor_instance.as_deref(), Some("10.0.0.1:8080"));
        assert_eq!((a.start_time, a.finish_time), (Some(at), Some(at)));
        assert_eq!(a.result_message.as_deref(), Some("done"));
        assert_eq!((folded[1].0.as_str(), folded[1].1.to), ("b", Running));
    }

    fn result(from: &'static [ExecutionStatus]) -> Transition {
        Transition {
            result_message: Some("done".into()),
            ..Transition::to(from, Success)
        }
    }

    #[test]
    fn a_start_and_its_result_are_one_move_guarded_by_the_start() {
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let lease = ("10.0.0.1:8080".to_string(), at);
        let start = Transition {
            held_by: Some(lease.clone()),
            ..Transition::started("127.0.0.1:9001".into(), at)
        };
        let batch = vec![
            ("a".to_string(), start),
            ("b".to_string(), result(&[Pending, Running])),
            ("a".to_string(), result(&[Running])),
        ];
        let chained = chained_moves(&batch).expect("every later change follows the one before");
        assert_eq!(chained.refused, [false, false, false]);
        let moves = chained.moves;
        assert_eq!(moves.len(), 2);
        let (trace, a) = &moves[0];
        assert_eq!((trace.as_str(), a.to), ("a", Success));
        assert_eq!(a.from, &[Pending]);
        assert_eq!(a.held_by, Some(lease));
        assert_eq!(a.executor_instance.as_deref(), Some("127.0.0.1:9001"));
        assert_eq!(a.result_message.as_deref(), Some("done"));
        let (trace, b) = &moves[1];
        assert_eq!(
            (trace.as_str(), b.from, b.held_by.clone()),
            ("b", &[Pending, Running][..], None)
        );
    }

    #[test]
    fn a_later_change_from_none_of_the_states_the_row_is_left_in_is_refused_in_the_batch() {
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let lease = ("10.0.0.1:8080".to_string(), at);
        // A RUNNING queued after its own verdict, and a second result.
        let start = Transition {
            held_by: Some(lease.clone()),
            ..Transition::started("127.0.0.1:9001".into(), at)
        };
        let batch = vec![
            (
                "a".to_string(),
                Transition {
                    held_by: Some(lease.clone()),
                    ..result(&[Pending, Running])
                },
            ),
            ("b".to_string(), result(&[Running])),
            ("a".to_string(), start),
            ("b".to_string(), result(&[Running])),
        ];
        let chained = chained_moves(&batch).expect("decided by each row's first change");
        assert_eq!(chained.refused, [false, false, true, true]);
        let moves: Vec<_> = chained
            .moves
            .iter()
            .map(|(trace, t)| (trace.as_str(), t.to, t.held_by.clone()))
            .collect();
        assert_eq!(
            moves,
            [
                ("a", Success, Some(lease)),
                ("b", Success, None::<(String, _)>)
            ]
        );
        assert_eq!(
            chained.moves[0].1.executor_instance, None,
            "nothing of the start"
        );
    }

    #[test]
    fn a_verdict_under_the_lease_its_running_was_guarded_by_follows_it_in_the_batch() {
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        let lease = ("10.0.0.1:8080".to_string(), at);
        let start = Transition {
            held_by: Some(lease.clone()),
            ..Transition::started("127.0.0.1:9001".into(), at)
        };
        let verdict = Transition {
            held_by: Some(lease.clone()),
            ..result(&[Pending, Running])
        };
        let batch = vec![("a".to_string(), start), ("a".to_string(), verdict)];
        let chained = chained_moves(&batch).expect("the same lease, checked by the start");
        assert_eq!(chained.refused, [false, false]);
        let (_, a) = &chained.moves[0];
        assert_eq!(
            (a.to, a.from, a.held_by.clone()),
            (Success, &[Pending][..], Some(lease))
        );
        // Under another lease, or under one while the first change named none: not known.
        let other = ("10.0.0.2:8080".to_string(), at);
        let moved = vec![
            (
                "a".to_string(),
                Transition::started("127.0.0.1:9001".into(), at),
            ),
            (
                "a".to_string(),
                Transition {
                    held_by: Some(other),
                    ..result(&[Running])
                },
            ),
        ];
        assert!(chained_moves(&moved).is_none());
    }

    #[test]
    fn a_later_change_that_could_lose_leaves_the_batch_to_be_judged_row_by_row() {
        let at: DateTime<Utc> = "2026-01-01T00:00:00Z".parse().unwrap();
        // A later change under a lease: whether it holds depends on the row, not the batch.
        let leased = vec![
            ("a".to_string(), Transition::to(&[Pending], Running)),
            (
                "a".to_string(),
                Transition {
                    held_by: Some(("10.0.0.1:8080".into(), at)),
                    ..Transition::to(&[Running], Cancelled)
                },
            ),
        ];
        assert!(chained_moves(&leased).is_none());
    }
}
