//! The verdict of a seed as a table for people and as one JSON line for scripts.

use std::fmt::Write;

use serde_json::json;

use crate::checker::Verdict;
use crate::history::History;

pub fn replay_command(seed: u64, seconds: u64, database: &str) -> String {
    let galera = match database.strip_prefix("galera-") {
        Some(topology) => format!("JOBFLOW_CAMPAIGN_GALERA={topology} "),
        None => String::new(),
    };
    format!(
        "{galera}JOBFLOW_CAMPAIGN_SEEDS={seed} JOBFLOW_CAMPAIGN_SECONDS={seconds} cargo test --test campaign -- --nocapture"
    )
}

/// The invariant table with examples, and the documented cases met.
pub fn table(h: &History, v: &Verdict) -> String {
    let mut out = String::new();
    let s = &v.stats;
    let _ = writeln!(
        out,
        "campaign seed {} on {} ({} s of faults): {} faults, {} API calls, {} handler runs, {} rows; \
         {} fires checked, {} delivered; worst first call after a fault {} ms ({})",
        h.seed,
        if h.database.is_empty() {
            "mariadb"
        } else {
            &h.database
        },
        h.seconds,
        s.faults,
        s.api_calls,
        s.runs,
        h.rows.len(),
        s.fires_checked,
        s.fires_delivered,
        s.worst_delay_after_fault_ms,
        s.worst_delay_fire
    );
    let by: Vec<String> = s
        .worst_delay_by_fault
        .iter()
        .map(|(k, ms)| format!("{k} {ms} ms"))
        .collect();
    let _ = writeln!(out, "worst first call by fault: {}", by.join(", "));
    let by: Vec<String> = s
        .worst_delay_by_policy
        .iter()
        .map(|(k, ms)| format!("{k} {ms} ms"))
        .collect();
    let _ = writeln!(out, "worst first call by policy: {}", by.join(", "));
    let _ = writeln!(
        out,
        "parent fires whose children were checked: {} ({} succeeded in every range)",
        s.parent_fires_checked, s.parent_fires_succeeded
    );
    let _ = writeln!(
        out,
        "{:<22} {:>10}  documented / counted apart",
        "invariant", "violations"
    );
    for c in &v.checks {
        let documented: Vec<String> = c
            .documented
            .iter()
            .map(|(k, case)| format!("{k}: {}", case.count))
            .collect();
        let _ = writeln!(
            out,
            "{:<22} {:>10}  {}",
            c.name,
            c.violations,
            documented.join("; ")
        );
    }
    for c in v.checks.iter().filter(|c| c.violations > 0) {
        let _ = writeln!(
            out,
            "\n{} ({} violations), for example:",
            c.name, c.violations
        );
        for e in &c.examples {
            let _ = writeln!(out, "  - {e}");
        }
    }
    let apart: Vec<_> = v
        .checks
        .iter()
        .flat_map(|c| c.documented.iter().map(move |(k, case)| (c.name, k, case)))
        .collect();
    if !apart.is_empty() {
        let _ = writeln!(out, "\ndocumented / counted apart, for example:");
        for (check, case, c) in apart {
            let _ = writeln!(out, "  {check}: {case} ({})", c.count);
            for e in c.examples.iter().take(2) {
                let _ = writeln!(out, "    - {e}");
            }
        }
    }
    out
}

/// One JSON line per seed: the counts, for a benchmark script to tabulate.
pub fn json_line(h: &History, v: &Verdict) -> String {
    let violations: serde_json::Map<String, serde_json::Value> = v
        .checks
        .iter()
        .map(|c| (c.name.to_string(), json!(c.violations)))
        .collect();
    let documented: serde_json::Map<String, serde_json::Value> = v
        .checks
        .iter()
        .flat_map(|c| {
            c.documented
                .iter()
                .map(move |(k, case)| (format!("{}: {k}", c.name), json!(case.count)))
        })
        .collect();
    let examples: serde_json::Map<String, serde_json::Value> = v
        .checks
        .iter()
        .filter(|c| c.violations > 0)
        .map(|c| (c.name.to_string(), json!(c.examples)))
        .collect();
    let faults: Vec<String> = h
        .faults
        .iter()
        .map(|f| format!("{} {}", f.kind, f.target))
        .collect();
    json!({
        "seed": h.seed,
        "database": h.database,
        "seconds": h.seconds,
        "violations_total": v.violations(),
        "violations": violations,
        "documented": documented,
        "examples": examples,
        "stats": v.stats,
        "faults": faults,
        "replay": replay_command(h.seed, h.seconds, &h.database),
    })
    .to_string()
}
