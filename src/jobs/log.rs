//! What a handler logged, as its executor hands it over (docs/executor-protocol.md,
//! "Shipping logs"): a batch of numbered lines and, with the last one, the log's end. The
//! same body comes three ways: pushed to the log endpoint while the handler runs, carried in
//! the answer to the call, or carried in the result report of a background run. One shape
//! and one set of rules for all three, checked here.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Deserializer};
use utoipa::ToSchema;

/// At most this many lines in one batch.
pub const MAX_BATCH_LINES: usize = 1000;
/// At most this many characters in one line.
pub const MAX_LINE_CHARS: usize = 16 * 1024;
/// The levels a line may have.
pub const LEVELS: [&str; 5] = ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"];

/// The largest whole number every JSON client reads exactly (2^53 - 1, JavaScript's
/// `Number.MAX_SAFE_INTEGER`): the bound of the counters [`whole_number`] reads.
pub const MAX_SAFE_INTEGER: i64 = (1 << 53) - 1;

/// Reads a JSON number that is a whole number from 0 to [`MAX_SAFE_INTEGER`] as `i64`, written
/// `17` or `17.0`: JSON Schema's `integer` (which the OpenAPI document states) admits both,
/// and clients in languages whose numbers are doubles write the second. Within that range a
/// double holds every whole number exactly.
pub fn whole_number<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    use serde::de::Error;
    let n = serde_json::Number::deserialize(d)?;
    let value = match n.as_i64() {
        Some(i) => Some(i),
        None => n
            .as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() <= MAX_SAFE_INTEGER as f64)
            .map(|f| f as i64),
    };
    match value {
        Some(v) if (0..=MAX_SAFE_INTEGER).contains(&v) => Ok(v),
        _ => Err(D::Error::custom(format!(
            "expected a whole number from 0 to {MAX_SAFE_INTEGER}, found {n}"
        ))),
    }
}

/// A line as shipped by an executor.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShippedLine {
    /// The line's number in its execution, from 1, in the order the handler logged it.
    #[serde(deserialize_with = "whole_number")]
    pub seq: i64,
    /// When the handler logged it (RFC 3339).
    pub at: DateTime<Utc>,
    /// `TRACE`, `DEBUG`, `INFO`, `WARN` or `ERROR`.
    pub level: String,
    pub message: String,
}

/// The executor's last word on the log: every line it kept has been shipped.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ShippedEnd {
    /// Lines kept and shipped (the last line's `seq`).
    #[serde(deserialize_with = "whole_number")]
    pub lines: i64,
    /// Bytes past the executor's per-execution bound, not kept.
    #[serde(default, deserialize_with = "whole_number")]
    pub dropped_bytes: i64,
}

/// A batch of an execution's log, from its executor.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LogBatch {
    /// At most 1,000 lines, of at most 16,384 characters each.
    #[serde(default)]
    pub lines: Vec<ShippedLine>,
    /// With the last batch.
    pub end: Option<ShippedEnd>,
}

/// One line a handler logged, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogLine {
    /// Its number in the execution, from 1, in the order it was logged.
    pub seq: i64,
    pub at: DateTime<Utc>,
    /// `TRACE`, `DEBUG`, `INFO`, `WARN` or `ERROR`.
    pub level: String,
    pub message: String,
}

/// The executor's last word on an execution's log, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEnd {
    /// Lines it kept (and shipped).
    pub lines: i64,
    /// Bytes past its per-execution bound, not kept.
    pub dropped_bytes: i64,
    /// When the scheduler received it.
    pub at: DateTime<Utc>,
}

/// A batch that keeps the rules: what the store takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedLog {
    pub lines: Vec<LogLine>,
    pub end: Option<LogEnd>,
}

impl CheckedLog {
    /// Bytes of message text the batch holds (what the metrics count).
    pub fn bytes(&self) -> u64 {
        self.lines.iter().map(|l| l.message.len() as u64).sum()
    }
}

impl LogBatch {
    /// The batch as the store takes it, received at `received`; or the field that breaks a
    /// rule and why.
    pub fn check(self, received: DateTime<Utc>) -> Result<CheckedLog, (String, String)> {
        if self.lines.len() > MAX_BATCH_LINES {
            return Err((
                "lines".into(),
                format!("at most {MAX_BATCH_LINES} lines per batch"),
            ));
        }
        for (i, l) in self.lines.iter().enumerate() {
            if l.seq < 1 {
                return Err((format!("lines[{i}].seq"), "must be 1 or more".into()));
            }
            if !LEVELS.contains(&l.level.as_str()) {
                return Err((
                    format!("lines[{i}].level"),
                    format!("must be one of {}", LEVELS.join(", ")),
                ));
            }
            if l.message.chars().count() > MAX_LINE_CHARS {
                return Err((
                    format!("lines[{i}].message"),
                    format!("must be at most {MAX_LINE_CHARS} characters"),
                ));
            }
        }
        let lines = self
            .lines
            .into_iter()
            .map(|l| LogLine {
                seq: l.seq,
                at: l.at,
                level: l.level,
                message: l.message,
            })
            .collect();
        let end = self.end.map(|e| LogEnd {
            lines: e.lines,
            dropped_bytes: e.dropped_bytes,
            at: received,
        });
        Ok(CheckedLog { lines, end })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at() -> DateTime<Utc> {
        "2026-12-04T01:00:00Z".parse().unwrap()
    }

    fn batch(json: &str) -> LogBatch {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn a_batch_that_keeps_the_rules_is_taken_with_its_end_stamped_on_arrival() {
        let checked = batch(
            r#"{"lines":[{"seq":1,"at":"2026-12-04T00:59:59.5Z","level":"WARN","message":"订单"}],
                "end":{"lines":1.0}}"#,
        )
        .check(at())
        .unwrap();
        assert_eq!(checked.lines.len(), 1);
        assert_eq!(checked.lines[0].level, "WARN");
        assert_eq!(checked.bytes(), "订单".len() as u64);
        assert_eq!(
            checked.end,
            Some(LogEnd {
                lines: 1,
                dropped_bytes: 0,
                at: at()
            })
        );
    }

    #[test]
    fn a_batch_that_breaks_a_rule_names_the_field() {
        let line = |seq: i64, level: &str| {
            format!(
                r#"{{"seq":{seq},"at":"2026-12-04T00:59:59Z","level":"{level}","message":"m"}}"#
            )
        };
        let bad_level = batch(&format!(
            r#"{{"lines":[{},{}]}}"#,
            line(1, "INFO"),
            line(2, "NOTICE")
        ));
        assert_eq!(bad_level.check(at()).unwrap_err().0, "lines[1].level");
        let bad_seq = batch(&format!(r#"{{"lines":[{}]}}"#, line(0, "INFO")));
        assert_eq!(bad_seq.check(at()).unwrap_err().0, "lines[0].seq");
        let many: Vec<String> = (1..=1001).map(|s| line(s, "INFO")).collect();
        let too_many = batch(&format!(r#"{{"lines":[{}]}}"#, many.join(",")));
        assert_eq!(too_many.check(at()).unwrap_err().0, "lines");
    }

    #[test]
    fn counters_are_whole_numbers_up_to_the_safe_bound() {
        #[derive(Deserialize)]
        struct N(#[serde(deserialize_with = "whole_number")] i64);
        let n = |s: &str| serde_json::from_str::<N>(s).map(|n| n.0);
        assert_eq!(n("17").unwrap(), 17);
        assert_eq!(n("17.0").unwrap(), 17);
        assert!(n("17.5").is_err());
        assert!(n("-1").is_err());
        assert_eq!(n("9007199254740991").unwrap(), MAX_SAFE_INTEGER);
        assert!(n("9007199254740992").is_err());
    }
}
