//! The duties of the leader, the first instance of the sorted scheduler list (whoever it is
//! now: when it leaves, the next one takes over at once). Exactly one instance does each of
//! them at a time, without any lock:
//! - [`compensation`]: sweeps for work that lost its scheduler (PENDING rows whose lease ran
//!   out, RUNNING rows of departed instances) or outlived its timeout, and the hourly purge of
//!   old fire claims;
//! - [`recovery`]: what to do with each such row, decided by asking its executor first;
//! - [`stops`]: confirms that cancelled runs stopped, so overlap policies stop waiting;
//! - [`retention`]: the chunked purge of old execution history;
//! - [`backfill`]: records the next instants of running backfills.

pub mod backfill;
pub mod compensation;
pub mod recovery;
pub mod retention;
pub mod stops;

pub use backfill::Backfiller;
pub use compensation::{Compensator, Pass, Sweep};
pub use recovery::{Recovered, Recovery};
pub use retention::{Purged, Retention};
