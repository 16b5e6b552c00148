//! Whether this instance stands in the scheduler list: it steps aside while its database does
//! not answer, so the others take its jobs (docs/design.md, "An instance without its
//! database").
//!
//! Ownership is computed from the scheduler list alone, so an instance that is alive in Nacos
//! but cannot reach the database keeps its share of the jobs and records none of their fires:
//! the instants it owns are missed until the database answers again, then follow the misfire
//! policy. That happens when only its own link fails (a network fault between it and the
//! database, a Galera node of a multi-primary cluster that left the Primary component). The
//! rules:
//!
//! 1. The engine's job refresh (every `scheduler.job_refresh_millis`) is the probe: each
//!    refresh that reads the database is an answer, each that fails is not.
//! 2. When a refresh fails and the last answer is at least `scheduler.step_aside_after_millis`
//!    old (the start counts as an answer: the engine loaded its jobs), the instance steps
//!    aside: it leaves the scheduler list, and the others, seeing the list change, take its
//!    jobs and owe their missed instants under the misfire rules.
//! 3. The first refresh that reads the database again steps it back: it rejoins the list and
//!    takes its share back, as a starting instance does.
//! 4. `0` never steps aside.
//! 5. While the last refresh failed, instants owed back to the engine (fires that could not
//!    be recorded) wait for the next refresh instead of calling one at once: the database is
//!    probed once a refresh, however many fires failed.
//!
//! Fires it claimed before the fault stay its own: they are recorded, and the compensation
//! leader calls them once their lease has run out, as for an instance that died. Every fire
//! is still recorded once whoever records it (its claim row's key), so an instance that
//! steps aside late, or a recording that commits after it stepped aside, doubles nothing.
//! When every instance loses the database at once they all step aside; nothing could be
//! recorded meanwhile anyway, and each comes back with its first answer.

use std::time::Duration;

use tokio::time::Instant;

/// A change of this instance's standing to carry out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Standing {
    /// Leave the scheduler list.
    Aside,
    /// Rejoin it.
    Back,
}

/// The rules of the module documentation over the refreshes' outcomes.
#[derive(Debug)]
pub struct DatabaseWatch {
    after: Option<Duration>,
    last_answer: Instant,
    aside: bool,
    /// Whether the last refresh read the database.
    answering: bool,
}

impl DatabaseWatch {
    /// A watch that steps aside after `after` without an answer (`Duration::ZERO`: never),
    /// counting from `now`.
    pub fn new(after: Duration, now: Instant) -> Self {
        Self {
            after: (!after.is_zero()).then_some(after),
            last_answer: now,
            aside: false,
            answering: true,
        }
    }

    /// Whether the last refresh read the database (the load at the start counts as one).
    pub fn answering(&self) -> bool {
        self.answering
    }

    /// A refresh read the database at `now`.
    pub fn answered(&mut self, now: Instant) -> Option<Standing> {
        self.last_answer = now;
        self.answering = true;
        std::mem::take(&mut self.aside).then_some(Standing::Back)
    }

    /// A refresh failed at `now`.
    pub fn failed(&mut self, now: Instant) -> Option<Standing> {
        self.answering = false;
        let after = self.after?;
        if self.aside || now.saturating_duration_since(self.last_answer) < after {
            return None;
        }
        self.aside = true;
        Some(Standing::Aside)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AFTER: Duration = Duration::from_secs(3);

    fn at(start: Instant, millis: u64) -> Instant {
        start + Duration::from_millis(millis)
    }

    #[test]
    fn failures_shorter_than_the_bound_keep_the_instance_in_the_list() {
        let t0 = Instant::now();
        let mut w = DatabaseWatch::new(AFTER, t0);
        assert_eq!(w.failed(at(t0, 1000)), None);
        assert_eq!(w.failed(at(t0, 2999)), None);
        assert_eq!(
            w.answered(at(t0, 3500)),
            None,
            "never aside: nothing to undo"
        );
        assert_eq!(w.failed(at(t0, 6000)), None, "counted from the last answer");
    }

    #[test]
    fn a_failure_once_the_last_answer_is_the_bound_old_steps_aside_once() {
        let t0 = Instant::now();
        let mut w = DatabaseWatch::new(AFTER, t0);
        w.answered(at(t0, 1000));
        assert_eq!(w.failed(at(t0, 2000)), None);
        assert_eq!(w.failed(at(t0, 4000)), Some(Standing::Aside));
        assert_eq!(w.failed(at(t0, 5000)), None, "already aside");
        assert_eq!(w.failed(at(t0, 60_000)), None);
    }

    #[test]
    fn a_refresh_that_fails_after_a_long_wait_steps_aside_at_once() {
        // A refresh that hung (a stalled link) until the pool gave up: the database has not
        // answered since the last refresh that read it.
        let t0 = Instant::now();
        let mut w = DatabaseWatch::new(AFTER, t0);
        assert_eq!(w.failed(at(t0, 5000)), Some(Standing::Aside));
    }

    #[test]
    fn the_first_answer_steps_back_and_the_bound_counts_again_from_it() {
        let t0 = Instant::now();
        let mut w = DatabaseWatch::new(AFTER, t0);
        assert_eq!(w.failed(at(t0, 3000)), Some(Standing::Aside));
        assert_eq!(w.answered(at(t0, 9000)), Some(Standing::Back));
        assert_eq!(w.answered(at(t0, 10_000)), None);
        assert_eq!(w.failed(at(t0, 11_000)), None);
        assert_eq!(w.failed(at(t0, 13_000)), Some(Standing::Aside));
    }

    #[test]
    fn answering_is_what_the_last_refresh_found() {
        let t0 = Instant::now();
        let mut w = DatabaseWatch::new(AFTER, t0);
        assert!(w.answering(), "the load at the start read the database");
        w.failed(at(t0, 1000));
        assert!(!w.answering());
        w.failed(at(t0, 4000));
        assert!(!w.answering(), "aside or not");
        w.answered(at(t0, 5000));
        assert!(w.answering());
        let mut never = DatabaseWatch::new(Duration::ZERO, t0);
        never.failed(at(t0, 1000));
        assert!(!never.answering(), "also when it never steps aside");
    }

    #[test]
    fn zero_never_steps_aside() {
        let t0 = Instant::now();
        let mut w = DatabaseWatch::new(Duration::ZERO, t0);
        assert_eq!(w.failed(at(t0, 3_600_000)), None);
        assert_eq!(w.answered(at(t0, 3_600_001)), None);
    }
}
