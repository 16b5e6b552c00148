//! The job definitions this instance knows, shared by the engine, which keeps them up to date
//! from the change log, and dispatch, which checks at each instant that a fire is still of
//! the job's current definition.
//!
//! A fire carries the definition it was handed out under. A change **overtakes** it when it
//! was made after that definition and at or before the fire's instant: the fire is then
//! withdrawn and its instant fired under the change (or not at all, for a disable or a
//! delete). A change made after the instant leaves the fire alone: it was due before the
//! change, under the definition of its time, even when it is recorded or launched late
//! (behind a database stall). A change's time is when its writer made it (a definition's
//! `updated_at`, a deletion's time), on that instance's clock.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, RwLock};

use chrono::{DateTime, Utc};
use foldhash::{HashMap, HashSet};

use super::JobDefinition;

/// A job definition as a key: hashed, compared and ordered by its name, and found by `&str`,
/// so the name of a scheduled job lives once, in its definition (100,000 jobs would otherwise
/// carry 200,000 more copies of their names in the queue and the index).
#[derive(Debug, Clone)]
pub struct ByName(pub Arc<JobDefinition>);

impl ByName {
    pub fn name(&self) -> &str {
        self.0.name().as_str()
    }
}

impl Borrow<str> for ByName {
    fn borrow(&self) -> &str {
        self.name()
    }
}

impl Hash for ByName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        // As `str` hashes: lookups by `&str` find the key.
        self.name().hash(state)
    }
}

impl PartialEq for ByName {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

impl Eq for ByName {}

impl PartialOrd for ByName {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for ByName {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.name().cmp(other.name())
    }
}

/// A write of a job in the change log: the revision it took, and when it was made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobChange {
    pub name: String,
    pub revision: i64,
    pub at: DateTime<Utc>,
}

impl JobChange {
    /// Whether this change overtakes a fire handed out under revision `handed` for `instant`
    /// (see the module documentation).
    pub fn overtakes(&self, handed: i64, instant: DateTime<Utc>) -> bool {
        self.revision > handed && self.at <= instant
    }
}

/// How long the book remembers when a job was deleted: longer than any fire waits between
/// its hand-out and its launch.
const DELETIONS_KEPT: chrono::TimeDelta = chrono::TimeDelta::hours(1);

/// Every job (owned or not: a membership change can hand any of them over), by name, and the
/// job revision the set is complete up to.
#[derive(Default)]
pub struct JobBook {
    inner: RwLock<Book>,
}

#[derive(Default)]
struct Book {
    jobs: HashSet<ByName>,
    revision: i64,
    /// When recently deleted jobs were deleted. A job gone at an unknown time has no entry:
    /// it overtakes every fire.
    deleted: HashMap<String, DateTime<Utc>>,
    /// The recent writes of each job, (revision, time), as the change log told them: a fire
    /// is overtaken by any change after its definition made up to its instant, which is not
    /// always the last (an edit before the instant, then a disable after it).
    written: HashMap<String, Vec<(i64, DateTime<Utc>)>>,
}

impl Book {
    /// Notes `name` deleted at `at` (`DateTime::MIN_UTC`: at an unknown time, an unreadable
    /// row), forgetting deletions older than [`DELETIONS_KEPT`].
    fn note_deletion(&mut self, name: &str, at: DateTime<Utc>) {
        if at == DateTime::<Utc>::MIN_UTC {
            self.deleted.remove(name);
            return;
        }
        let horizon = at - DELETIONS_KEPT;
        self.deleted.retain(|_, when| *when > horizon);
        self.deleted.insert(name.to_string(), at);
    }

    /// Notes a write of a job (or its deletion), forgetting writes older than
    /// [`DELETIONS_KEPT`] before it.
    fn note_write(&mut self, change: &JobChange) {
        let horizon = change.at - DELETIONS_KEPT;
        let writes = self.written.entry(change.name.clone()).or_default();
        if !writes.contains(&(change.revision, change.at)) {
            writes.push((change.revision, change.at));
        }
        writes.retain(|(_, at)| *at > horizon);
    }

    /// Whether a write the book was told of overtakes a fire of `handed` for `instant`.
    fn written_overtakes(&self, handed: &JobDefinition, instant: DateTime<Utc>) -> bool {
        let writes = self.written.get(handed.name().as_str());
        writes.is_some_and(|w| {
            w.iter()
                .any(|&(revision, at)| revision > handed.revision && at <= instant)
        })
    }
}

impl JobBook {
    /// The revision every definition here is current up to.
    pub fn revision(&self) -> i64 {
        self.inner.read().expect("book lock").revision
    }

    pub fn get(&self, name: &str) -> Option<Arc<JobDefinition>> {
        let book = self.inner.read().expect("book lock");
        book.jobs.get(name).map(|k| k.0.clone())
    }

    /// Every job.
    pub fn all(&self) -> Vec<Arc<JobDefinition>> {
        let book = self.inner.read().expect("book lock");
        book.jobs.iter().map(|k| k.0.clone()).collect()
    }

    /// Replaces every job (a full reload).
    pub fn replace(&self, jobs: Vec<JobDefinition>, revision: i64) {
        let jobs = jobs.into_iter().map(|j| ByName(Arc::new(j))).collect();
        let mut book = self.inner.write().expect("book lock");
        book.jobs = jobs;
        book.revision = revision;
    }

    /// Whether the book knows a change that overtakes a fire of `handed` for `instant` (see
    /// the module documentation). A job gone from the book with no known deletion time is
    /// taken as deleted before the instant.
    pub fn overtakes(&self, handed: &JobDefinition, instant: DateTime<Utc>) -> bool {
        let book = self.inner.read().expect("book lock");
        let name = handed.name().as_str();
        let deleted_by = || book.deleted.get(name).is_none_or(|at| *at <= instant);
        if book.written_overtakes(handed, instant) {
            return true;
        }
        match book.jobs.get(name) {
            Some(now) if now.0.revision <= handed.revision => false,
            // Created again: the handed definition was deleted in between.
            Some(now) if now.0.created_at != handed.created_at => deleted_by(),
            Some(now) => now.0.updated_at <= instant,
            None => deleted_by(),
        }
    }

    /// A job this instance just wrote through its API, before the engine reads it back from
    /// the change log: the launcher's check at each instant then knows it at once, even when
    /// the database goes away right after the answer. A definition the book knows a later
    /// state of (a later revision of the job, or its delete) is ignored; the book's
    /// revision does not move, so the engine's next read still brings everything after it.
    pub fn note_saved(&self, job: JobDefinition) {
        let mut book = self.inner.write().expect("book lock");
        let newer = match book.jobs.get(job.name().as_str()) {
            Some(known) => known.0.revision < job.revision,
            None => job.revision > book.revision,
        };
        if newer {
            book.note_write(&JobChange {
                name: job.name().to_string(),
                revision: job.revision,
                at: job.updated_at,
            });
            book.jobs.replace(ByName(Arc::new(job)));
        }
    }

    /// A job this instance just deleted through its API, at `at` (see
    /// [`JobBook::note_saved`]). A job created again under its name after `at` stays.
    pub fn note_deleted(&self, name: &str, at: DateTime<Utc>) {
        let mut book = self.inner.write().expect("book lock");
        if book
            .jobs
            .get(name)
            .is_some_and(|known| known.0.created_at <= at)
        {
            book.jobs.remove(name);
            book.note_deletion(name, at);
        }
    }

    /// Applies the changes up to `revision` (an incremental reload), with every write and
    /// deletion they came from (`history`).
    pub fn apply(
        &self,
        changed: &[Arc<JobDefinition>],
        removed: &[JobChange],
        history: &[JobChange],
        revision: i64,
    ) {
        let mut book = self.inner.write().expect("book lock");
        for change in history {
            book.note_write(change);
        }
        for gone in removed {
            if book.jobs.remove(gone.name.as_str()) {
                book.note_deletion(&gone.name, gone.at);
            }
        }
        for job in changed {
            book.jobs.replace(ByName(job.clone()));
        }
        book.revision = revision;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(name: &str, revision: i64, created: u32) -> JobDefinition {
        let at: DateTime<Utc> = format!("2026-01-01T00:00:{created:02}Z").parse().unwrap();
        let body = serde_json::json!({"name": name, "serviceName": "s", "handler": "h",
            "cron": "* * * * * ?"});
        let mut j = JobDefinition::stored(body, at);
        j.revision = revision;
        j
    }

    fn at(s: u32) -> DateTime<Utc> {
        format!("2026-01-01T00:00:{s:02}Z").parse().unwrap()
    }

    #[test]
    fn a_change_noted_by_its_writer_is_known_at_once_unless_the_book_knows_a_later_state() {
        let book = JobBook::default();
        book.replace(vec![job("a", 5, 0)], 10);
        book.note_saved(job("a", 12, 0));
        assert_eq!(book.get("a").unwrap().revision, 12, "an edit");
        book.note_saved(job("a", 11, 0));
        assert_eq!(
            book.get("a").unwrap().revision,
            12,
            "an older one is ignored"
        );
        assert_eq!(
            book.revision(),
            10,
            "the engine still reads everything after 10"
        );
        book.note_saved(job("new", 13, 1));
        assert!(book.get("new").is_some(), "a creation");
        book.note_saved(job("gone", 9, 1));
        assert!(
            book.get("gone").is_none(),
            "the book is past it: deleted since"
        );
        book.note_deleted("a", at(5));
        assert!(book.get("a").is_none(), "a delete");
        book.note_saved(job("again", 14, 8));
        book.note_deleted("again", at(5));
        assert!(
            book.get("again").is_some(),
            "created again after the delete"
        );
    }

    fn edited(name: &str, revision: i64, created: u32, updated: u32) -> JobDefinition {
        let mut j = job(name, revision, created);
        j.updated_at = at(updated);
        j
    }

    #[test]
    fn a_change_overtakes_the_fires_due_at_or_after_it() {
        let book = JobBook::default();
        let handed = edited("a", 5, 0, 0);
        book.replace(vec![handed.clone()], 5);
        assert!(!book.overtakes(&handed, at(10)), "unchanged");
        book.note_saved(edited("a", 6, 0, 10));
        assert!(book.overtakes(&handed, at(10)), "edited at the instant");
        assert!(book.overtakes(&handed, at(11)), "edited before the instant");
        assert!(
            !book.overtakes(&handed, at(9)),
            "edited after the instant: the fire was due under the old definition"
        );
    }

    #[test]
    fn a_delete_overtakes_the_fires_due_at_or_after_it() {
        let book = JobBook::default();
        let handed = edited("a", 5, 0, 0);
        book.replace(vec![handed.clone()], 5);
        book.apply(
            &[],
            &[JobChange {
                name: "a".into(),
                revision: 6,
                at: at(10),
            }],
            &[],
            6,
        );
        assert!(book.overtakes(&handed, at(10)));
        assert!(!book.overtakes(&handed, at(9)));
        let again = edited("a", 7, 20, 20);
        book.apply(&[Arc::new(again)], &[], &[], 7);
        assert!(
            book.overtakes(&handed, at(15)),
            "created again after the instant, deleted before it"
        );
        assert!(!book.overtakes(&handed, at(9)));
    }

    #[test]
    fn a_job_gone_without_a_known_time_overtakes_every_fire() {
        let book = JobBook::default();
        let handed = edited("a", 5, 0, 0);
        book.replace(vec![handed.clone()], 5);
        book.replace(Vec::new(), 6);
        assert!(book.overtakes(&handed, at(0)));
        let unreadable = edited("b", 5, 0, 0);
        book.replace(vec![unreadable.clone(), edited("c", 5, 0, 0)], 6);
        // A deletion the book remembers, beside which the unknown one is noted.
        book.note_deleted("c", at(1));
        book.apply(
            &[],
            &[JobChange {
                name: "b".into(),
                revision: 7,
                at: DateTime::<Utc>::MIN_UTC,
            }],
            &[],
            7,
        );
        assert!(book.overtakes(&unreadable, at(0)));
    }

    #[test]
    fn every_change_since_a_fire_was_handed_out_counts_not_only_the_last() {
        let book = JobBook::default();
        let handed = edited("a", 5, 0, 0);
        book.replace(vec![handed.clone()], 5);
        // Both read in one catch-up (the instance could not read the log in between): an
        // edit before the instant, then a disable after it.
        let change = |revision, s| JobChange {
            name: "a".into(),
            revision,
            at: at(s),
        };
        let mut now = edited("a", 7, 0, 20);
        now.spec.enabled = false;
        book.apply(&[Arc::new(now)], &[], &[change(6, 8), change(7, 20)], 7);
        assert!(
            book.overtakes(&handed, at(10)),
            "edited at 8, before the instant"
        );
        assert!(
            !book.overtakes(&handed, at(7)),
            "both changes came after the instant"
        );
        // A write this instance made itself counts the same way.
        let other = edited("b", 5, 0, 0);
        book.replace(vec![handed.clone(), other.clone()], 7);
        book.note_saved(edited("b", 8, 0, 3));
        book.note_saved(edited("b", 9, 0, 30));
        assert!(book.overtakes(&other, at(10)));
    }
}
