//! Transactions the database rolled back for a conflict with another, run again.
//!
//! MySQL answers SQLSTATE `40001` (error 1213) when it rolls a whole transaction back so that
//! another can go on: an InnoDB deadlock on one server, and on a Galera cluster also a
//! certification failure, where two nodes committed writes to the same rows at once and the
//! second is refused at its commit (row locks are local to a node, so conflicts between
//! instances writing through different nodes surface only there; MySQL group replication
//! answers the same case with error 3101, SQLSTATE `40000`). Nothing of such a
//! transaction was written, so it can be run again as it was, reading afresh what the other
//! one wrote: two instances recording the same fires then find them recorded (the second
//! skips them) instead of one of them leaving its whole batch to the misfire path.
//!
//! The transactions of the fire path (recording, admitting, withdrawing fires, batches of
//! execution state changes), of job writes and of log batches run through [`retrying`]. A
//! batch of state changes that still fails is written again by the settle writer's own
//! unbounded retry (`dispatch/settle.rs`), whose backoff is for a database that answers
//! nothing.
//!
//! A Galera node may also abort a transaction between two of its statements, when a
//! conflicting write replicated from another node is applied: a read of rows it has just
//! inserted then comes back without them ([`StoreError::Aborted`]), and it is run again too.
//!
//! Only those answers are retried here. A connection lost during a commit leaves its outcome
//! unknown, and is left to the callers, who read back what was written (docs/design.md). A
//! Galera node out of the Primary component answers every statement with error 1047 until it
//! rejoins: running the transaction again at once would meet the same node. sqlx's check of
//! a connection as it is given back fails on that node too, so the pool closes it, and the
//! callers' own retries (the next instant, the settle loop) reach the node the proxy moved
//! to.

use std::future::Future;
use std::time::Duration;

use super::StoreError;
use crate::backoff::Backoff;

/// Attempts of one transaction, the first included.
const ATTEMPTS: u32 = 5;

/// Waits between attempts: short, jittered so that two instances that conflicted do not
/// meet again in lockstep.
const WAIT: Backoff = Backoff::jittered(Duration::from_millis(5), Duration::from_millis(80));

/// MySQL group replication's answer at the commit of a transaction that failed
/// certification (`ER_TRANSACTION_ROLLBACK_DURING_COMMIT`, SQLSTATE `40000`): rolled back
/// whole, as a Galera certification failure is.
const GROUP_REPLICATION_ROLLBACK: u16 = 3101;

/// Whether the database rolled the transaction back for a conflict with another.
pub(crate) fn rolled_back(e: &StoreError) -> bool {
    match e {
        StoreError::Database(sqlx::Error::Database(db)) => conflict_answer(
            db.code().as_deref(),
            db.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                .map(|m| m.number()),
        ),
        StoreError::Aborted(_) => true,
        _ => false,
    }
}

/// Whether an answer with this SQLSTATE and MySQL error number is a conflict's rollback.
fn conflict_answer(sqlstate: Option<&str>, number: Option<u16>) -> bool {
    sqlstate == Some("40001") || number == Some(GROUP_REPLICATION_ROLLBACK)
}

/// Runs the transaction `attempt` until it is not rolled back for a conflict, at most
/// [`ATTEMPTS`] times; the last answer otherwise.
pub(crate) async fn retrying<T, F, Fut>(attempt: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    retry_while(rolled_back, attempt).await
}

async fn retry_while<T, E, F, Fut>(conflict: impl Fn(&E) -> bool, mut attempt: F) -> Result<T, E>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let mut tries = 1;
    loop {
        match attempt().await {
            Err(e) if conflict(&e) && tries < ATTEMPTS => {
                metrics::counter!("scheduler_transaction_retries_total").increment(1);
                tokio::time::sleep(WAIT.delay(tries)).await;
                tries += 1;
            }
            answer => return answer,
        }
    }
}

#[cfg(test)]
mod tests {
    //! Under tokio's paused clock: the waits pass without real time.

    use std::cell::Cell;

    use super::*;

    #[derive(Debug, PartialEq)]
    enum Answer {
        Conflict,
        Other,
    }

    /// Runs `answers` in turn through the retry; what came out and how many attempts ran.
    async fn run(answers: &[Result<u8, Answer>]) -> (Result<u8, Answer>, usize) {
        let n = Cell::new(0);
        let out = retry_while(
            |e: &Answer| *e == Answer::Conflict,
            || {
                let i = n.get();
                n.set(i + 1);
                let answer = match &answers[i] {
                    Ok(v) => Ok(*v),
                    Err(Answer::Conflict) => Err(Answer::Conflict),
                    Err(Answer::Other) => Err(Answer::Other),
                };
                async move { answer }
            },
        )
        .await;
        (out, n.get())
    }

    #[tokio::test(start_paused = true)]
    async fn a_transaction_rolled_back_for_a_conflict_runs_again_until_it_goes_in() {
        use Answer::*;
        assert_eq!(
            run(&[Err(Conflict), Err(Conflict), Ok(7)]).await,
            (Ok(7), 3)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn any_other_failure_is_answered_at_once() {
        use Answer::*;
        assert_eq!(run(&[Err(Other), Ok(7)]).await, (Err(Other), 1));
        assert_eq!(
            run(&[Err(Conflict), Err(Other), Ok(7)]).await,
            (Err(Other), 2)
        );
    }

    #[test]
    fn a_transaction_that_lost_its_own_rows_counts_as_rolled_back() {
        assert!(rolled_back(&StoreError::Aborted(
            "inserted row not found".into()
        )));
        assert!(!rolled_back(&StoreError::Corrupt("a bad column".into())));
        assert!(!rolled_back(&StoreError::Database(
            sqlx::Error::PoolTimedOut
        )));
    }

    #[test]
    fn deadlocks_and_certification_failures_are_conflicts_other_answers_are_not() {
        // An InnoDB deadlock, or a Galera certification failure.
        assert!(conflict_answer(Some("40001"), Some(1213)));
        // Group replication's certification failure.
        assert!(conflict_answer(Some("40000"), Some(3101)));
        // A Galera node out of the Primary component: the node refuses, nothing to run again
        // on it.
        assert!(!conflict_answer(Some("08S01"), Some(1047)));
        // A lock wait timeout rolls back only the statement (HY000).
        assert!(!conflict_answer(Some("HY000"), Some(1205)));
        assert!(!conflict_answer(Some("23000"), Some(1062)));
        assert!(!conflict_answer(None, None));
    }

    #[tokio::test(start_paused = true)]
    async fn conflicts_are_retried_a_bounded_number_of_times() {
        use Answer::*;
        let conflicts = [
            Err(Conflict),
            Err(Conflict),
            Err(Conflict),
            Err(Conflict),
            Err(Conflict),
            Ok(7),
        ];
        assert_eq!(run(&conflicts).await, (Err(Conflict), ATTEMPTS as usize));
    }
}
