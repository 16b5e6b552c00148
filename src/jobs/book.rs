//! The job definitions this instance knows, shared by the engine, which keeps them up to date
//! from the change log, and dispatch, which checks at each instant that a fire is still of
//! the job's current definition.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};
use std::sync::{Arc, RwLock};

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
        *self.inner.write().expect("book lock") = Book { jobs, revision };
    }

    /// Applies the changes up to `revision` (an incremental reload).
    pub fn apply(&self, changed: &[Arc<JobDefinition>], removed: &[String], revision: i64) {
        let mut book = self.inner.write().expect("book lock");
        for name in removed {
            book.jobs.remove(name.as_str());
        }
        for job in changed {
            book.jobs.replace(ByName(job.clone()));
        }
        book.revision = revision;
    }
}
