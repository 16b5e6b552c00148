//! The last call this instance made to each executor instance, and how it came out: what the
//! console's Executors page shows beside the cluster-wide calls in flight. Recorded as each
//! call's outcome arrives; one entry per executor address, so its size is the number of
//! executors called, and entries of executors not called for a day are dropped.

use std::sync::Mutex;

use chrono::{DateTime, Duration, Utc};
use foldhash::HashMap;

/// Entries older than this are dropped when the log grows past [`PRUNE_ABOVE`].
const FORGET_AFTER: Duration = Duration::days(1);
const PRUNE_ABOVE: usize = 1024;

/// One call and its outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastCall {
    pub trace_id: String,
    pub job_name: String,
    pub at: DateTime<Utc>,
    /// The execution status the executor answered, `ACCEPTED` (it reports later),
    /// `NO_ANSWER` (none within the timeout) or `UNREACHABLE` (connection refused).
    pub outcome: &'static str,
}

#[derive(Default)]
pub struct CallLog {
    last: Mutex<HashMap<String, LastCall>>,
}

impl CallLog {
    pub fn record(&self, executor: &str, call: LastCall) {
        let mut last = self.last.lock().expect("call log lock");
        if last.len() > PRUNE_ABOVE {
            let horizon = call.at - FORGET_AFTER;
            last.retain(|_, c| c.at > horizon);
        }
        // The executor's entry is overwritten in place: its address is copied once.
        match last.get_mut(executor) {
            Some(entry) => *entry = call,
            None => {
                last.insert(executor.to_string(), call);
            }
        }
    }

    pub fn last(&self, executor: &str) -> Option<LastCall> {
        self.last
            .lock()
            .expect("call log lock")
            .get(executor)
            .cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(at: &str, trace: &str) -> LastCall {
        LastCall {
            trace_id: trace.into(),
            job_name: "j".into(),
            at: at.parse().unwrap(),
            outcome: "SUCCESS",
        }
    }

    #[test]
    fn the_latest_call_per_executor_is_kept_and_old_ones_forgotten() {
        let log = CallLog::default();
        log.record("a:1", call("2026-01-01T00:00:00Z", "t1"));
        log.record("a:1", call("2026-01-01T00:00:01Z", "t2"));
        assert_eq!(log.last("a:1").unwrap().trace_id, "t2");
        assert_eq!(log.last("b:1"), None);
        for i in 0..=PRUNE_ABOVE {
            log.record(&format!("old:{i}"), call("2026-01-01T00:00:00Z", "old"));
        }
        log.record("new:1", call("2026-01-03T00:00:00Z", "t3"));
        assert_eq!(log.last("old:0"), None, "not called for a day");
        assert_eq!(log.last("new:1").unwrap().trace_id, "t3");
    }
}
