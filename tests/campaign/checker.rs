//! The history checker: JobFlow's promises (README, "What is guaranteed to reach your
//! executor"; docs/design.md, the execution lifecycle) as exact rules over a campaign's
//! [`History`]. It is a pure function of the history: the same history always gives the same
//! verdict.
//!
//! # What the job was, when
//!
//! The job definitions come from the API answers alone. Every write (create, replace,
//! enable/disable, delete) takes effect at some moment between the request being sent and
//! its answer arriving. The instance that answered sees it at once (an allowance of
//! [`OWNER_ALLOWANCE`] covers its reload); another instance up to [`OTHER_ALLOWANCE`] later
//! (docs/design.md: "a change made through another instance takes effect within 2 s").
//!
//! A write whose outcome is unknown leaves the job's state unknown until a later answer says
//! what the job is: any later answer after a 5xx (the write was decided by then), and one at
//! least [`UNCERTAIN_SPAN`] after it was sent when no answer or a 408 came (it may still be
//! waiting on the database and commit later). Each definition carries a version marker `v` in
//! its `jobParams`, bumped on every write of a definition, so every executor call shows which
//! definition it was made under.
//!
//! # The invariants
//!
//! 1. **delivered-once**: every instant `t` of a job's cron while the job surely exists,
//!    enabled, with one definition (no change sent within [`CHANGE_MARGIN`] after `t`, none
//!    answered within [`OTHER_ALLOWANCE`] before it), `t` at least 5 s before the end:
//!    - has first-attempt CRON rows (its fire was recorded), unless it is a documented skip:
//!      a FIRE_SKIPPED alert names it, or it was *missed*, which the misfire policy covers
//!      (of instants missed beyond the 5 s tolerance only the latest is fired or alerted).
//!      Missed means: no later instant of the job was recorded (by its rows' `trigger_time`)
//!      between `t - 2.5 s` ([`CLAIM_AHEAD`]) and `t + 2.5 s` ([`LIVE_AFTER`]) by a
//!      scheduler whose database link and process were undisturbed then (a recording begun
//!      while the link hung may have committed long after), and a fault that can keep
//!      schedulers from recording (a scheduler killed, terminated or paused, a database link
//!      cut or stalled, a Galera node killed or cut off: that one disturbs every scheduler)
//!      was under way between `t - 2.5 s` and `t + 1 s` ([`RECOVERY`]);
//!    - each of its ranges was called at an executor (some attempt of the range has a handler
//!      run), unless the range ended without a call for a documented reason: SKIPPED
//!      (overlap SKIP), CANCELLED before the call (operator, COVER), or FAILED/TIMEOUT for
//!      want of a live executor (none registered, every one refused, it died with the call);
//!    - every row of the fire is final once the fire is [`SETTLE_BOUND`] old, unless the
//!      handler of the open row still runs (documented); an attempt begun late (a retry in
//!      the quiet tail) has the bound of 10, counted from its own start.
//!
//!    A run with no row at all ("called but never recorded") is a violation too.
//! 2. **no-duplicate**: no two different trace ids with retry count 0 are called for
//!    overlapping shard ranges of one cron fire (job, instant), and the database holds no two
//!    first-attempt CRON rows of one fire with overlapping ranges.
//! 3. **no-overlap-per-range**: no two handler runs of one range (execution id without its
//!    `#…` suffix) overlap in true time at the executors. Documented, counted apart: the
//!    earlier run was on a bare executor (no status or cancel endpoint: at-least-once), or
//!    one of them is an operator's re-run (`#x…`).
//! 4. **no-stale-definition**: a call for a cron instant `t` carries a definition (`v`) at
//!    least as new as the last one answered before `t - allowance`, where the allowance is
//!    [`OWNER_ALLOWANCE`] when the change was answered by the scheduler that holds the row
//!    and [`OTHER_ALLOWANCE`] otherwise; and no call is made for an instant at which the job
//!    was, by that rule, disabled or deleted (while no re-enable or re-create was in flight).
//!    Counted apart: calls with a definition older than the last answered one but within
//!    the allowance, and stale calls of a scheduler paused (SIGSTOP) since the change.
//! 5. **skip**: no two fires of a job run at the same moment at the executors when the fire
//!    recorded later (by its rows' `trigger_time`) was recorded under overlap policy SKIP,
//!    and its first attempt called under SKIP too: it was judged against the other's open
//!    executions and must not have been called. (A fire recorded under SKIP but called after
//!    the job left SKIP, resumed after an outage, follows the policy of its call.)
//! 6. **cover**: likewise under COVER: the other fire's run has truly ended before the
//!    later-recorded fire's run starts. For 5 and 6, documented or counted apart: the
//!    earlier-recorded fire's run was on a bare executor (it cannot be asked or stopped), it
//!    was cancelled by an operator (and went on running), or one of the runs is an operator's
//!    re-run (which continues its run and is not judged again).
//! 7. **children**: a fire of a parent whose every range ended SUCCESS triggers each child
//!    (that exists) exactly once: the CHILD rows whose parentTraceId is a row of that fire
//!    cover every shard of the child once; a fire that did not succeed in every range
//!    triggers none. Checked for fires decided at least [`CHILD_MARGIN`] before the end, with
//!    the parent's `childJobs` and the child's existence surely unchanged around the decision.
//! 8. **cancel**: once `POST …/cancel` is answered 200 for a trace id, no run of that trace id
//!    starts afterwards. Documented: the call had been handed to the executor before the
//!    cancel (the answer's `startTime` is before it) and the answer said the executor could
//!    not stop it: a bare executor ("no cancel endpoint", the protocol's at-least-once
//!    executors) or one that could not be asked. The call was on its way; nothing can recall
//!    it, and the operator was told so.
//! 9. **sdk-once**: SDK executors run a handler at most once per `X-Execution-Id`; two runs of
//!    one id are documented only when the executor that ran the first was killed (and
//!    restarted fresh) before the second began.
//! 10. **settled**: at the end no row is PENDING or RUNNING for longer than [`SETTLE_BOUND`]
//!     since the later of its last event and the start of the quiet tail, unless its handler
//!     still runs at an executor (documented).
//! 11. **fixed-delay**: for a `FIXED_DELAY` job (created so and never written again), each
//!     scheduled fire after the first has its instant at or after the previous fire's end
//!     (the latest finish of its rows, retries included, every one final) rounded up to the
//!     second plus the interval, and no later than [`DELAY_BOUND`] after that; and a fire that
//!     ended more than the bound before the end of the history is followed by another.
//!
//! Each check reports a count and up to [`EXAMPLES`] examples with ids and times (every one is
//! kept in `all`), and counts every documented case it met. A run that starts beside several
//! others counts once.

use std::collections::{BTreeMap, HashMap, HashSet};

use chrono::{DateTime, Duration, SecondsFormat, SubsecRound, Utc};
use serde::Serialize;
use serde_json::Value;

use crate::history::{ApiCall, ExecRow, History, Run};

/// How late a scheduler that answered a change may still act on the old definition (its
/// engine reloads 100 ms after the change, then withdraws fires claimed ahead).
pub const OWNER_ALLOWANCE: Duration = Duration::milliseconds(1000);
/// How late another scheduler may (docs/design.md: "within 2 s").
pub const OTHER_ALLOWANCE: Duration = Duration::milliseconds(2000);
/// Instants this close before a change was sent may fire under either definition.
pub const CHANGE_MARGIN: Duration = Duration::milliseconds(1000);
/// A write whose outcome is unknown may still commit this long after it was sent (the
/// server's request timeout is 30 s).
pub const UNCERTAIN_SPAN: Duration = Duration::seconds(35);
/// A later instant recorded this soon after `t` shows a scheduler was recording the job in
/// time for `t`: the misfire tolerance is 5 s, and after a database outage the engine owes
/// the instants it could not record again at its next job refresh (1 s) once the database
/// answers, so half the tolerance leaves room for that.
pub const LIVE_AFTER: Duration = Duration::milliseconds(2500);
/// After a fault is undone, the engine that missed instants owes them again at its next job
/// refresh (1 s).
pub const RECOVERY: Duration = Duration::seconds(1);
/// `scheduler.claim_ahead_millis`, plus half a second of hand-over.
pub const CLAIM_AHEAD: Duration = Duration::milliseconds(2500);
/// How long a row may stay open once nothing disturbs it: a lease (10 s) after a failed
/// compensation pass's wait (lease + 5 s), or a RUNNING row's overdue sweep (timeout ≤ 5 s +
/// 5 s answer grace + 10 s, swept every 5 s, a 5 s probe) past `stuck_after_seconds` (20 s).
pub const SETTLE_BOUND: Duration = Duration::seconds(35);
/// Children of fires completed this close to the end may not be recorded yet.
pub const CHILD_MARGIN: Duration = Duration::seconds(10);
/// The longest a `FIXED_DELAY` job's next fire may come after its due instant: the worst
/// first call after a fault seen in campaigns (under a minute) with room to spare.
pub const DELAY_BOUND: Duration = Duration::seconds(90);
/// Examples kept per check and per documented case.
pub const EXAMPLES: usize = 5;

/// A job definition as far as the checks need it.
#[derive(Debug, Clone, PartialEq)]
pub struct Def {
    pub v: Option<u64>,
    pub cron: String,
    pub enabled: bool,
    pub overlap: String,
    pub child_jobs: Vec<String>,
}

impl Def {
    fn from_view(v: &Value) -> Option<Self> {
        Some(Self {
            v: v["jobParams"]["v"].as_u64(),
            // Empty for a schedule type without a cron (a FIXED_DELAY job: invariant 11).
            cron: v["cron"].as_str().unwrap_or_default().to_string(),
            enabled: v["enabled"].as_bool()?,
            overlap: v["overlapPolicy"].as_str().unwrap_or("ALLOW").to_string(),
            child_jobs: v["childJobs"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default(),
        })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum State {
    Absent,
    Known(Def),
    /// A write's outcome is not known.
    Unknown,
}

impl State {
    fn def(&self) -> Option<&Def> {
        match self {
            State::Known(d) => Some(d),
            _ => None,
        }
    }

    fn enabled_def(&self) -> Option<&Def> {
        self.def().filter(|d| d.enabled)
    }
}

/// One change of a job's state: it took effect between `sent` and `answered`.
#[derive(Debug, Clone)]
pub struct Change {
    pub sent: DateTime<Utc>,
    pub answered: DateTime<Utc>,
    /// The scheduler that answered (empty when none did).
    pub scheduler: String,
    pub after: State,
}

/// A job name's states over time, from the API answers; absent before its first change.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    pub changes: Vec<Change>,
}

impl Timeline {
    /// The state surely in effect at `t` and around it: `None` when `t` lies in a change's
    /// window `[sent - before, answered + after]`.
    pub fn settled_at(&self, t: DateTime<Utc>, before: Duration, after: Duration) -> Option<State> {
        if self
            .changes
            .iter()
            .any(|c| t >= c.sent - before && t <= c.answered + after)
        {
            return None;
        }
        Some(
            self.changes
                .iter()
                .rev()
                .find(|c| c.answered < t)
                .map_or(State::Absent, |c| c.after.clone()),
        )
    }

    /// The last change surely seen at `t` by `scheduler` (answered more than its allowance
    /// before `t`), and the changes still in flight then.
    fn seen_by(&self, t: DateTime<Utc>, scheduler: &str) -> (Option<&Change>, Vec<&Change>) {
        let allowance = |c: &Change| {
            if c.scheduler == scheduler {
                OWNER_ALLOWANCE
            } else {
                OTHER_ALLOWANCE
            }
        };
        let seen = self
            .changes
            .iter()
            .rev()
            .find(|c| c.answered + allowance(c) < t);
        let in_flight = self
            .changes
            .iter()
            .filter(|c| c.sent <= t && t <= c.answered + allowance(c))
            .collect();
        (seen, in_flight)
    }

    /// The last change answered before `t`, however recently.
    fn answered_before(&self, t: DateTime<Utc>) -> Option<&Change> {
        self.changes.iter().rev().find(|c| c.answered < t)
    }
}

/// Which job an API path writes or reads, and how.
enum Op {
    Create,
    Replace,
    SetEnabled,
    Delete,
    Read,
}

fn job_op(call: &ApiCall) -> Option<(String, Op)> {
    let rest = call.path.strip_prefix("/api/v1/jobs")?;
    let rest = rest.split('?').next().unwrap_or(rest);
    match (call.method.as_str(), rest) {
        ("POST", "") => Some((
            call.body.as_ref()?["name"].as_str()?.to_string(),
            Op::Create,
        )),
        (m, r) if r.starts_with('/') => {
            let r = &r[1..];
            let (name, tail) = r.split_once('/').unwrap_or((r, ""));
            if name == "executions" {
                return None;
            }
            let op = match (m, tail) {
                ("PUT", "") => Op::Replace,
                ("DELETE", "") => Op::Delete,
                ("GET", "") => Op::Read,
                ("PATCH", "enabled") => Op::SetEnabled,
                _ => return None,
            };
            Some((name.to_string(), op))
        }
        _ => None,
    }
}

/// A span of time, `(from, until)`.
type Span = (DateTime<Utc>, DateTime<Utc>);

/// A cron fire's recording: when it began (`trigger_time`), its instant, and by whom.
type Recording<'a> = (DateTime<Utc>, DateTime<Utc>, &'a str);

/// Every job name's timeline, from the API calls.
pub fn timelines(api: &[ApiCall]) -> HashMap<String, Timeline> {
    let mut calls: Vec<&ApiCall> = api.iter().collect();
    calls.sort_by_key(|c| c.sent);
    let mut out: HashMap<String, Timeline> = HashMap::new();
    // Per job: the state as last known, and until when an unknown outcome may still land.
    let mut state: HashMap<String, (State, Option<Span>)> = HashMap::new();
    for call in calls {
        let Some((name, op)) = job_op(call) else {
            continue;
        };
        let write = !matches!(op, Op::Read);
        let tl = out.entry(name.clone()).or_default();
        let (current, unknown) = state.entry(name).or_insert((State::Absent, None));
        if write && call.uncertain() {
            // A 5xx was decided when it was answered (the transaction committed or failed
            // before); without an answer, or after a 408 (the request was given up while it
            // may still be waiting on the database), it may still commit later.
            let until = match (call.status, call.answered) {
                (Some(s), Some(at)) if s >= 500 => at,
                _ => call.sent + UNCERTAIN_SPAN,
            };
            let (from, until) = match *unknown {
                Some((from, was)) => (from, was.max(until)),
                None => (call.sent, until),
            };
            *unknown = Some((from, until));
            *current = State::Unknown;
            tl.changes.push(Change {
                sent: call.sent,
                answered: until,
                scheduler: String::new(),
                after: State::Unknown,
            });
            continue;
        }
        let Some(answered) = call.answered else {
            continue;
        };
        let after = match (&op, call.status) {
            (Op::Delete, Some(204)) | (Op::Read, Some(404)) => State::Absent,
            (_, Some(s)) if (200..300).contains(&s) => {
                match call.response.as_ref().and_then(Def::from_view) {
                    Some(d) => State::Known(d),
                    None => continue,
                }
            }
            _ => continue,
        };
        let mut sent = call.sent;
        if let Some((from, until)) = *unknown {
            if answered < until {
                // An earlier write may still land after this answer.
                continue;
            }
            sent = from;
            *unknown = None;
        } else if !write && *current == after {
            continue;
        }
        *current = after.clone();
        tl.changes.push(Change {
            sent,
            answered,
            scheduler: call.scheduler.clone(),
            after,
        });
    }
    out
}

/// The instants of the cron expressions the campaign uses in `(from, to]`: `*/N * * * * ?`
/// and `* * * * * ?` (every N seconds of the minute), and `0 0 3 1 1 ?` (yearly: none within
/// a campaign). None without a cron (a `FIXED_DELAY` job, checked by invariant 11).
pub fn instants(cron: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    if cron.is_empty() {
        return Vec::new();
    }
    let first = cron.split_whitespace().next().unwrap_or("");
    let step: u64 = if first == "*" {
        1
    } else if let Some(n) = first.strip_prefix("*/") {
        n.parse().expect("a step")
    } else {
        assert_eq!(
            cron, "0 0 3 1 1 ?",
            "a cron expression the checker cannot expand"
        );
        return Vec::new();
    };
    assert!(60u64.is_multiple_of(step), "steps divide the minute");
    let step = step as i64;
    let mut out = Vec::new();
    let mut s = from.timestamp().div_euclid(step) * step;
    while let Some(t) = DateTime::from_timestamp(s, 0) {
        if t > to {
            break;
        }
        if t > from {
            out.push(t);
        }
        s += step;
    }
    out
}

/// One invariant's result.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub violations: usize,
    pub examples: Vec<String>,
    /// Every violation (kept with the history for analysis; the report shows `examples`).
    pub all: Vec<String>,
    /// Documented (or counted-apart) cases met, with a few examples each.
    pub documented: BTreeMap<String, Case>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Case {
    pub count: usize,
    pub examples: Vec<String>,
}

impl Check {
    fn new(name: &'static str) -> Self {
        Self {
            name,
            ..Default::default()
        }
    }

    fn violation(&mut self, example: impl FnOnce() -> String) {
        self.violations += 1;
        let example = example();
        if self.examples.len() < EXAMPLES {
            self.examples.push(example.clone());
        }
        self.all.push(example);
    }

    fn documented(&mut self, case: &str, example: impl FnOnce() -> String) {
        let c = self.documented.entry(case.to_string()).or_default();
        c.count += 1;
        if c.examples.len() < EXAMPLES {
            c.examples.push(example());
        }
    }
}

/// Figures besides the invariants.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stats {
    pub fires_checked: usize,
    pub fires_delivered: usize,
    /// Parent fires whose children were checked, and how many of them succeeded.
    pub parent_fires_checked: usize,
    pub parent_fires_succeeded: usize,
    pub runs: usize,
    pub api_calls: usize,
    pub faults: usize,
    /// The slowest first call of a fire due during or just after a fault (call start minus
    /// the instant), in ms, and the fire.
    pub worst_delay_after_fault_ms: i64,
    pub worst_delay_fire: String,
    /// The same per fault kind: the slowest fire due in the window of any fault of that kind
    /// (faults overlap, so one fire may count for several kinds).
    pub worst_delay_by_fault: BTreeMap<String, i64>,
    /// The same per overlap policy of the job at the instant (`changing` when an API change
    /// was in flight): SKIP and COVER fires may wait for the run they replace to stop.
    pub worst_delay_by_policy: BTreeMap<String, i64>,
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct Verdict {
    pub checks: Vec<Check>,
    pub stats: Stats,
}

impl Verdict {
    pub fn violations(&self) -> usize {
        self.checks.iter().map(|c| c.violations).sum()
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn hms(t: DateTime<Utc>) -> String {
    t.format("%H:%M:%S%.3f").to_string()
}

/// Everything the checks look things up in.
pub struct Index<'a> {
    pub h: &'a History,
    pub timelines: HashMap<String, Timeline>,
    /// Runs by trace id.
    pub runs_of: HashMap<&'a str, Vec<&'a Run>>,
    /// Rows by trace id.
    pub row_of: HashMap<&'a str, &'a ExecRow>,
    /// Rows by range key (every attempt of a range).
    pub attempts: HashMap<&'a str, Vec<&'a ExecRow>>,
    /// First-attempt CRON rows by (job, instant).
    pub cron_fires: HashMap<(&'a str, DateTime<Utc>), Vec<&'a ExecRow>>,
    /// The recordings of CRON first attempts per job.
    pub recorded: HashMap<&'a str, Vec<Recording<'a>>>,
    /// When each fire (by its key) was recorded: its first rows' `trigger_time`.
    pub fire_recorded: HashMap<&'a str, DateTime<Utc>>,
    /// Trace ids an operator's cancel was answered 200 for, with the earliest answer.
    pub cancelled: HashMap<String, Cancel>,
}

fn is_cron_row(r: &ExecRow) -> bool {
    r.trigger_type == "CRON"
}

/// Whether an execution id names a cron fire: `{job}:{yyyyMMddHHmmss}:{s}-{e}[#…]`.
pub fn is_cron_id(execution_id: &str) -> bool {
    let key = crate::history::fire_key(execution_id);
    key.rsplit_once(':')
        .is_some_and(|(_, stamp)| stamp.len() == 14 && stamp.bytes().all(|b| b.is_ascii_digit()))
}

impl<'a> Index<'a> {
    pub fn new(h: &'a History) -> Self {
        let mut runs_of: HashMap<&str, Vec<&Run>> = HashMap::new();
        for r in &h.runs {
            runs_of.entry(r.trace_id.as_str()).or_default().push(r);
        }
        let mut row_of = HashMap::new();
        let mut attempts: HashMap<&str, Vec<&ExecRow>> = HashMap::new();
        let mut cron_fires: HashMap<(&str, DateTime<Utc>), Vec<&ExecRow>> = HashMap::new();
        let mut recorded: HashMap<&str, Vec<Recording>> = HashMap::new();
        let mut fire_recorded: HashMap<&str, DateTime<Utc>> = HashMap::new();
        for r in &h.rows {
            row_of.insert(r.trace_id.as_str(), r);
            if r.first_attempt() {
                let at = fire_recorded.entry(r.fire_key()).or_insert(r.trigger_time);
                *at = (*at).min(r.trigger_time);
            }
            attempts.entry(r.range_key()).or_default().push(r);
            if is_cron_row(r) && r.first_attempt() {
                cron_fires
                    .entry((r.job_name.as_str(), r.fire_time))
                    .or_default()
                    .push(r);
                recorded.entry(r.job_name.as_str()).or_default().push((
                    r.trigger_time,
                    r.fire_time,
                    r.scheduler_instance.as_deref().unwrap_or(""),
                ));
            }
        }
        let mut cancelled: HashMap<String, Cancel> = HashMap::new();
        for c in &h.api {
            if c.method == "POST"
                && c.status == Some(200)
                && let Some(trace) = c
                    .path
                    .strip_prefix("/api/v1/jobs/executions/")
                    .and_then(|p| p.strip_suffix("/cancel"))
                && let Some(at) = c.answered
            {
                let this = Cancel::read(at, c.response.as_ref());
                cancelled
                    .entry(trace.to_string())
                    .and_modify(|e| {
                        if this.answered < e.answered {
                            *e = this.clone();
                        }
                    })
                    .or_insert(this);
            }
        }
        Self {
            h,
            timelines: timelines(&h.api),
            runs_of,
            row_of,
            attempts,
            cron_fires,
            recorded,
            fire_recorded,
            cancelled,
        }
    }

    /// When the fire of `run` was recorded (its first rows' `trigger_time`).
    fn recorded_at(&self, run: &Run) -> DateTime<Utc> {
        self.fire_recorded
            .get(run.fire_key())
            .copied()
            .unwrap_or(run.fire_time)
    }

    fn runs_of_range(&self, range_key: &str) -> Vec<&'a Run> {
        self.attempts
            .get(range_key)
            .into_iter()
            .flatten()
            .flat_map(|r| self.runs_of.get(r.trace_id.as_str()).into_iter().flatten())
            .copied()
            .collect()
    }

    /// The scheduler holding the row of a trace id (who called it).
    fn holder(&self, trace: &str) -> &str {
        self.row_of
            .get(trace)
            .and_then(|r| r.scheduler_instance.as_deref())
            .unwrap_or("")
    }

    /// Whether `scheduler` was paused (SIGSTOP) at some moment of `[from, to]`.
    fn paused_between(&self, scheduler: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
        self.h
            .scheduler_lives
            .iter()
            .any(|l| l.id == scheduler && l.pauses.iter().any(|(s, e)| *s <= to && *e >= from))
    }

    /// Whether `scheduler`'s database link was cut or stalled, a Galera node lost or cut off
    /// (which holds every node's commits until the cluster has evicted it, and every link
    /// through the proxy while it fails over), or the process paused, at some moment of
    /// `[from, to]`.
    fn disturbed(&self, scheduler: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
        self.paused_between(scheduler, from, to)
            || self.h.faults.iter().any(|f| {
                let hits = match f.kind.as_str() {
                    "db-cut" | "db-stall" => f.target == scheduler || f.target == "all",
                    "db-node-kill" | "db-node-partition" => true,
                    _ => false,
                };
                hits && f.start <= to && f.end >= from
            })
    }

    /// Whether a fault that can keep schedulers from recording (one killed, terminated or
    /// paused, a database link cut or stalled, a Galera node lost or cut off) was under way
    /// around instant `t`.
    fn recording_disturbed(&self, t: DateTime<Utc>) -> bool {
        self.h.faults.iter().any(|f| {
            matches!(
                f.kind.as_str(),
                "kill-9"
                    | "sigterm"
                    | "sigstop"
                    | "db-cut"
                    | "db-stall"
                    | "db-node-kill"
                    | "db-node-partition"
            ) && f.start - CLAIM_AHEAD <= t
                && t <= f.end + RECOVERY
        })
    }

    /// Whether an operator had cancelled `trace` by `at`: its cancel was answered 200, or its
    /// row was made CANCELLED by a cancel that was not the COVER policy's (the answer may not
    /// have come back: the API waits for the executor's answer).
    fn cancelled_by_operator(&self, trace: &str, at: DateTime<Utc>) -> bool {
        self.cancelled.get(trace).is_some_and(|c| c.answered <= at)
            || self.row_of.get(trace).is_some_and(|r| {
                r.status == "CANCELLED"
                    && !r
                        .error_message
                        .as_deref()
                        .unwrap_or("")
                        .contains("overlapPolicy")
                    && r.finish_time.is_some_and(|f| f <= at)
            })
    }

    /// Whether a handler run of `trace` still ran when the history was taken.
    fn still_running(&self, trace: &str) -> bool {
        self.runs_of
            .get(trace)
            .is_some_and(|runs| runs.iter().any(|x| x.end.is_none()))
    }

    /// Whether `executor` was killed after `from` and before `to`.
    fn restarted_between(&self, executor: &str, from: DateTime<Utc>, to: DateTime<Utc>) -> bool {
        self.h
            .lives
            .iter()
            .any(|l| l.executor == executor && l.end.is_some_and(|e| e >= from && e <= to))
    }
}

/// Runs every check over `h`.
pub fn check(h: &History) -> Verdict {
    let ix = Index::new(h);
    let mut stats = Stats {
        runs: h.runs.len(),
        api_calls: h.api.len(),
        faults: h.faults.len(),
        ..Default::default()
    };
    let checks = vec![
        delivered_once(&ix, &mut stats),
        no_duplicate(&ix),
        no_overlap(&ix),
        no_stale_definition(&ix),
        exclusive(&ix, "skip", "SKIP"),
        exclusive(&ix, "cover", "COVER"),
        children(&ix, &mut stats),
        cancel(&ix),
        sdk_once(&ix),
        settled(&ix),
        fixed_delay(&ix),
    ];
    worst_delays(&ix, &mut stats);
    Verdict { checks, stats }
}

/// Why a range that was never called ended without a call, if that is documented.
fn undelivered_reason(attempts: &[&ExecRow]) -> Option<&'static str> {
    if attempts.iter().any(|r| r.status == "SKIPPED") {
        return Some("overlap SKIP: recorded SKIPPED");
    }
    if attempts.iter().any(|r| r.status == "CANCELLED") {
        return Some("cancelled before its call");
    }
    let gone = [
        "no executor instance available",
        "every executor instance refused",
        "the executor restarted",
        "the executor instance left",
        "request failed",
        "reading the response failed",
        "deleted before this execution was dispatched",
    ];
    let last = attempts.iter().max_by_key(|r| r.retry_count)?;
    let why = last.error_message.as_deref().unwrap_or("");
    (last.is_final() && gone.iter().any(|g| why.contains(g)))
        .then_some("no live executor took the call (executor fault)")
}

fn delivered_once(ix: &Index, stats: &mut Stats) -> Check {
    let mut c = Check::new("delivered-once");
    let h = ix.h;
    let recorded_until = h.ended - Duration::seconds(5);
    let final_until = h.ended - SETTLE_BOUND;
    let mut names: Vec<&String> = ix.timelines.keys().collect();
    names.sort();
    for name in names {
        let tl = &ix.timelines[name];
        // Every instant of every definition the job had while enabled.
        let mut candidates: Vec<DateTime<Utc>> = Vec::new();
        for (i, ch) in tl.changes.iter().enumerate() {
            let Some(def) = ch.after.enabled_def() else {
                continue;
            };
            let until = tl
                .changes
                .get(i + 1)
                .map_or(recorded_until, |n| n.sent.min(recorded_until));
            candidates.extend(instants(&def.cron, ch.answered, until));
        }
        candidates.sort();
        candidates.dedup();
        for t in candidates {
            let Some(State::Known(def)) = tl.settled_at(t, CHANGE_MARGIN, OTHER_ALLOWANCE) else {
                continue;
            };
            if !def.enabled || !instants(&def.cron, t - Duration::seconds(1), t).contains(&t) {
                continue;
            }
            stats.fires_checked += 1;
            let fire = format!("{name}@{}", hms(t));
            let rows = ix.cron_fires.get(&(name.as_str(), t));
            let Some(rows) = rows else {
                let runs: Vec<&Run> = h
                    .runs
                    .iter()
                    .filter(|r| {
                        r.job_name == *name && r.fire_time == t && is_cron_id(&r.execution_id)
                    })
                    .collect();
                if let Some(r) = runs.first() {
                    c.violation(|| {
                        format!(
                            "{fire}: called ({} on {} at {}) but no row recorded",
                            r.trace_id,
                            r.executor,
                            hms(r.start)
                        )
                    });
                    continue;
                }
                if h.alerts
                    .iter()
                    .any(|a| a.event == "FIRE_SKIPPED" && a.job_name == *name && a.fire_time == t)
                {
                    c.documented("misfire policy: FIRE_SKIPPED alert", || fire.clone());
                    continue;
                }
                let (from, to) = (t - CLAIM_AHEAD, t + LIVE_AFTER);
                let evidence: Vec<&Recording> = ix
                    .recorded
                    .get(name.as_str())
                    .into_iter()
                    .flatten()
                    .filter(|(at, instant, _)| *instant > t && *at >= from && *at <= to)
                    .collect();
                // A recording begun while its scheduler's database link hung (or the process
                // was paused) may have committed long after its trigger time.
                let sound = evidence
                    .iter()
                    .find(|(_, _, by)| !ix.disturbed(by, from, to));
                match sound {
                    Some((at, instant, by)) => c.violation(|| {
                        format!(
                            "{fire}: never recorded (lost), while {by} recorded {} at {}",
                            hms(*instant),
                            hms(*at)
                        )
                    }),
                    None if !evidence.is_empty() => c.documented(
                        "misfire policy: missed while its scheduler's database or process was disturbed",
                        || fire.clone(),
                    ),
                    None if ix.recording_disturbed(t) => c.documented(
                        "misfire policy: missed while no scheduler recorded the job",
                        || fire.clone(),
                    ),
                    None => c.violation(|| {
                        format!("{fire}: never recorded, and no fault kept the schedulers from it")
                    }),
                }
                continue;
            };
            let mut delivered = true;
            let mut open = false;
            for row in rows {
                let attempts = ix
                    .attempts
                    .get(row.range_key())
                    .cloned()
                    .unwrap_or_default();
                if attempts.iter().any(|a| !a.is_final()) {
                    open = true;
                }
                if ix.runs_of_range(row.range_key()).is_empty() {
                    if attempts.iter().any(|a| !a.is_final()) {
                        delivered = false;
                        continue;
                    }
                    match undelivered_reason(&attempts) {
                        Some(why) => c.documented(why, || format!("{fire} {}", row.execution_id)),
                        None => {
                            delivered = false;
                            let last = attempts.iter().max_by_key(|r| r.retry_count).unwrap_or(row);
                            c.violation(|| {
                                format!(
                                    "{fire}: range {}-{} never called; its last attempt {} is {} ({})",
                                    row.shard_start,
                                    row.shard_end,
                                    last.trace_id,
                                    last.status,
                                    last.error_message.as_deref().unwrap_or("")
                                )
                            });
                        }
                    }
                }
            }
            if open && t <= final_until {
                // An attempt begun late (a retry in the quiet tail) has its own bound.
                let open: Vec<&ExecRow> = rows
                    .iter()
                    .flat_map(|r| ix.attempts.get(r.range_key()).cloned().unwrap_or_default())
                    .filter(|a| !a.is_final() && h.ended - open_since(h, a) > SETTLE_BOUND)
                    .collect();
                if open.is_empty() {
                    continue;
                }
                let what = || {
                    let open: Vec<String> = open
                        .iter()
                        .map(|a| format!("{} {}", a.trace_id, a.status))
                        .collect();
                    format!("{fire}: not final at the end: {}", open.join(", "))
                };
                if open.iter().all(|a| ix.still_running(&a.trace_id)) {
                    c.documented("open at the end while its handler still runs", what);
                } else {
                    c.violation(what);
                }
            } else if delivered && !open {
                stats.fires_delivered += 1;
            }
        }
    }
    c
}

fn overlapping(a: (u32, u32), b: (u32, u32)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

fn no_duplicate(ix: &Index) -> Check {
    let mut c = Check::new("no-duplicate");
    // Calls: first attempts of one cron fire with overlapping ranges under different trace ids.
    let mut firsts: BTreeMap<(&str, DateTime<Utc>), Vec<&Run>> = BTreeMap::new();
    for r in &ix.h.runs {
        if r.retry_count == 0 && r.trigger_type == "CRON" && !r.execution_id.contains('#') {
            firsts
                .entry((r.job_name.as_str(), r.fire_time))
                .or_default()
                .push(r);
        }
    }
    for ((job, t), runs) in &firsts {
        let mut seen: Vec<(&str, (u32, u32))> = Vec::new();
        for r in runs {
            let range = (r.shard_start, r.shard_end);
            if let Some((other, _)) = seen
                .iter()
                .find(|(trace, rg)| *trace != r.trace_id && overlapping(*rg, range))
            {
                c.violation(|| {
                    format!(
                        "{job}@{}: range {}-{} called as two first attempts, {other} and {} ({} at {})",
                        hms(*t),
                        r.shard_start,
                        r.shard_end,
                        r.trace_id,
                        r.executor,
                        hms(r.start)
                    )
                });
            }
            seen.push((r.trace_id.as_str(), range));
        }
    }
    // Rows: one fire recorded twice.
    let mut keys: Vec<_> = ix.cron_fires.keys().collect();
    keys.sort();
    for key in keys {
        let rows = &ix.cron_fires[key];
        for (i, a) in rows.iter().enumerate() {
            for b in &rows[i + 1..] {
                if overlapping((a.shard_start, a.shard_end), (b.shard_start, b.shard_end)) {
                    c.violation(|| {
                        format!(
                            "{}@{}: recorded twice: {} ({}) and {} ({})",
                            key.0,
                            hms(key.1),
                            a.execution_id,
                            a.trace_id,
                            b.execution_id,
                            b.trace_id
                        )
                    });
                }
            }
        }
    }
    c
}

fn end_of(r: &Run) -> DateTime<Utc> {
    r.end.unwrap_or(DateTime::<Utc>::MAX_UTC)
}

fn run_label(r: &Run) -> String {
    let end = r.end.map_or("still running".to_string(), hms);
    format!(
        "{} ({} on {} {}–{})",
        r.trace_id,
        r.execution_id,
        r.executor,
        hms(r.start),
        end
    )
}

/// Of the runs before `runs[i]` (sorted by start) that are still running when it starts and
/// that `counts`, the one `rank` ranks highest, with its rank: each run that starts beside
/// others is counted once, under the most telling of them.
fn beside<'r>(
    runs: &[&'r Run],
    i: usize,
    counts: impl Fn(&Run) -> bool,
    rank: impl Fn(&Run) -> u8,
) -> Option<(u8, &'r Run)> {
    let b = runs[i];
    runs[..i]
        .iter()
        .filter(|a| b.start < end_of(a) && counts(a))
        .map(|a| (rank(a), *a))
        .max_by_key(|(r, a)| (*r, std::cmp::Reverse(a.start)))
}

fn no_overlap(ix: &Index) -> Check {
    let mut c = Check::new("no-overlap-per-range");
    let mut by_range: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in &ix.h.runs {
        by_range.entry(r.range_key()).or_default().push(r);
    }
    for runs in by_range.values_mut() {
        runs.sort_by_key(|r| (r.start, r.trace_id.clone()));
        for (i, b) in runs.iter().enumerate() {
            let rank = |a: &Run| {
                if !a.sdk {
                    0
                } else if a.execution_id.contains("#x") || b.execution_id.contains("#x") {
                    1
                } else {
                    2
                }
            };
            let Some((rank, a)) = beside(runs, i, |_| true, rank) else {
                continue;
            };
            let what = || format!("{} started while {} ran", run_label(b), run_label(a));
            match rank {
                0 => c.documented("earlier run on a bare executor (at-least-once)", what),
                1 => c.documented("operator re-run beside a running attempt", what),
                _ => c.violation(what),
            }
        }
    }
    c
}

fn no_stale_definition(ix: &Index) -> Check {
    let mut c = Check::new("no-stale-definition");
    for r in &ix.h.runs {
        if !is_cron_id(&r.execution_id) {
            continue;
        }
        let Some(tl) = ix.timelines.get(&r.job_name) else {
            continue;
        };
        let t = r.fire_time;
        let holder = ix.holder(&r.trace_id);
        let (seen, in_flight) = tl.seen_by(t, holder);
        let required = seen.map_or(State::Absent, |c| c.after.clone());
        let what = |why: &str, change: Option<&Change>| {
            let change = change.map_or(String::new(), |ch| {
                format!(
                    "; the change was answered at {} by {}",
                    hms(ch.answered),
                    if ch.scheduler.is_empty() {
                        "nobody"
                    } else {
                        &ch.scheduler
                    }
                )
            });
            format!(
                "{}@{}: {why}: {} (v {:?}) called by {} at {}{change}",
                r.job_name,
                hms(t),
                r.trace_id,
                r.version(),
                if holder.is_empty() { "?" } else { holder },
                hms(r.start)
            )
        };
        let paused = seen.is_some_and(|ch| ix.paused_between(holder, ch.sent, r.start));
        match &required {
            State::Unknown => continue,
            State::Absent => {
                if in_flight.iter().any(|ch| ch.after != State::Absent) {
                    continue;
                }
                if paused {
                    c.documented(
                        "called for an instant after a delete, by a scheduler paused since",
                        || what("called after the job was deleted", seen),
                    );
                } else {
                    c.violation(|| what("called after the job was deleted", seen));
                }
            }
            State::Known(def) if !def.enabled => {
                if in_flight
                    .iter()
                    .any(|ch| ch.after.enabled_def().is_some() || ch.after == State::Unknown)
                {
                    continue;
                }
                if paused {
                    c.documented(
                        "called for an instant after a disable, by a scheduler paused since",
                        || what("called after the job was disabled", seen),
                    );
                } else {
                    c.violation(|| what("called after the job was disabled", seen));
                }
            }
            State::Known(def) => {
                let (Some(want), Some(got)) = (def.v, r.version()) else {
                    continue;
                };
                if got >= want {
                    // Not older than the rule requires; was it older than the last answer?
                    if let Some(latest) = tl.answered_before(t).and_then(|ch| ch.after.def())
                        && latest.v.is_some_and(|v| got < v)
                    {
                        c.documented(
                            "old definition within the propagation allowance after the answer",
                            || what("old definition", tl.answered_before(t)),
                        );
                    }
                    continue;
                }
                if in_flight.iter().any(|ch| ch.after == State::Unknown) {
                    continue;
                }
                if paused {
                    c.documented(
                        "old definition, by a scheduler paused since the change",
                        || what(&format!("old definition (want v {want})"), seen),
                    );
                } else {
                    c.violation(|| what(&format!("old definition (want v {want})"), seen));
                }
            }
        }
    }
    c
}

/// Invariants 5 and 6: under `policy`, no run of one fire starts while a run of another fire
/// of the job is running.
/// Of two runs of different fires, the fire recorded later was judged against the other's
/// open executions: the run of the earlier-recorded fire and when the later one was recorded,
/// if the later one was surely recorded under `policy`.
fn judged_under<'r>(
    ix: &Index,
    tl: &Timeline,
    policy: &str,
    a: &'r Run,
    b: &'r Run,
) -> Option<(&'r Run, DateTime<Utc>)> {
    let (ra, rb) = (ix.recorded_at(a), ix.recorded_at(b));
    let (early, late, late_at) = if ra <= rb { (a, b, rb) } else { (b, a, ra) };
    let under = |at: DateTime<Utc>| {
        matches!(tl.settled_at(at, CHANGE_MARGIN, OTHER_ALLOWANCE),
            Some(State::Known(def)) if def.overlap == policy)
    };
    // A fire is judged when its first attempt is called (its retries continue it): one
    // recorded under the policy but called after the job left it (resumed after an outage)
    // follows the policy of its call.
    let first_call = ix
        .runs_of_range(late.range_key())
        .iter()
        .filter(|r| !r.execution_id.contains('#'))
        .map(|r| r.start)
        .min();
    let called_under = first_call.is_none_or(under);
    (under(late_at) && called_under).then_some((early, late_at))
}

fn exclusive(ix: &Index, name: &'static str, policy: &str) -> Check {
    let mut c = Check::new(name);
    let mut by_job: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in &ix.h.runs {
        by_job.entry(r.job_name.as_str()).or_default().push(r);
    }
    for (job, runs) in by_job.iter_mut() {
        let Some(tl) = ix.timelines.get(*job) else {
            continue;
        };
        runs.sort_by_key(|r| (r.start, r.trace_id.clone()));
        for (i, b) in runs.iter().enumerate() {
            let rank = |a: &Run| {
                let Some((early, late_at)) = judged_under(ix, tl, policy, a, b) else {
                    return 0;
                };
                if a.execution_id.contains("#x") || b.execution_id.contains("#x") {
                    1
                } else if !early.sdk {
                    2
                } else if ix.cancelled_by_operator(&early.trace_id, late_at) {
                    3
                } else {
                    4
                }
            };
            let other_fire = |a: &Run| {
                a.fire_key() != b.fire_key() && judged_under(ix, tl, policy, a, b).is_some()
            };
            let Some((rank, a)) = beside(runs, i, other_fire, rank) else {
                continue;
            };
            let what = || format!("{} started while {} ran", run_label(b), run_label(a));
            match rank {
                1 => c.documented(
                    "operator re-run (continues its run, not judged again)",
                    what,
                ),
                2 => c.documented(
                    "the other fire's run on a bare executor (cannot be asked or stopped)",
                    what,
                ),
                3 => c.documented(
                    "the other fire's run cancelled by an operator and still running",
                    what,
                ),
                _ => c.violation(what),
            }
        }
    }
    c
}

fn children(ix: &Index, stats: &mut Stats) -> Check {
    let mut c = Check::new("children");
    let h = ix.h;
    // Every fire (all attempts of all its ranges) of every job.
    let mut fires: BTreeMap<(&str, &str), Vec<&ExecRow>> = BTreeMap::new();
    for r in &h.rows {
        fires
            .entry((r.job_name.as_str(), r.fire_key()))
            .or_default()
            .push(r);
    }
    for ((job, key), rows) in &fires {
        let Some(tl) = ix.timelines.get(*job) else {
            continue;
        };
        let fire_time = rows[0].fire_time;
        let Some(State::Known(def)) = tl.settled_at(fire_time, CHANGE_MARGIN, OTHER_ALLOWANCE)
        else {
            continue;
        };
        if def.child_jobs.is_empty() || rows.iter().any(|r| !r.is_final()) {
            continue;
        }
        let firsts: Vec<&&ExecRow> = rows.iter().filter(|r| r.first_attempt()).collect();
        if firsts.is_empty() {
            continue;
        }
        // When each range first succeeded; the fire succeeded when the last one did.
        let mut completion = Some(DateTime::<Utc>::MIN_UTC);
        for f in &firsts {
            let done = rows
                .iter()
                .filter(|r| {
                    r.status == "SUCCESS"
                        && r.shard_start == f.shard_start
                        && r.shard_end == f.shard_end
                })
                .filter_map(|r| r.finish_time)
                .min();
            completion = match (completion, done) {
                (Some(c), Some(d)) => Some(c.max(d)),
                _ => None,
            };
        }
        let decided = completion.unwrap_or_else(|| {
            rows.iter()
                .filter_map(|r| r.finish_time)
                .max()
                .unwrap_or(fire_time)
        });
        if decided > h.ended - CHILD_MARGIN {
            continue;
        }
        // The parent's children unchanged around the decision.
        match tl.settled_at(decided, CHANGE_MARGIN, OTHER_ALLOWANCE) {
            Some(State::Known(d)) if d.child_jobs == def.child_jobs => {}
            _ => continue,
        }
        let traces: HashSet<&str> = rows.iter().map(|r| r.trace_id.as_str()).collect();
        for child in &def.child_jobs {
            let exists = ix
                .timelines
                .get(child)
                .and_then(|t| t.settled_at(decided, CHANGE_MARGIN, OTHER_ALLOWANCE));
            let Some(State::Known(_)) = exists else {
                continue;
            };
            let child_rows: Vec<&ExecRow> = h
                .rows
                .iter()
                .filter(|r| {
                    r.job_name == *child
                        && r.trigger_type == "CHILD"
                        && r.first_attempt()
                        && r.parent_trace_id
                            .as_deref()
                            .is_some_and(|p| traces.contains(p))
                })
                .collect();
            // How many triggers: the most times one shard is covered.
            let mut cover: HashMap<u32, usize> = HashMap::new();
            for r in &child_rows {
                for s in r.shard_start..=r.shard_end {
                    *cover.entry(s).or_default() += 1;
                }
            }
            let triggers = cover.values().copied().max().unwrap_or(0);
            let label = || {
                let ids: Vec<String> = child_rows
                    .iter()
                    .map(|r| format!("{} ({})", r.execution_id, r.trace_id))
                    .collect();
                format!(
                    "{job} fire {key} ({}) decided at {}: child {child} triggered {triggers}×{}",
                    if completion.is_some() {
                        "every range SUCCESS"
                    } else {
                        "not every range SUCCESS"
                    },
                    hms(decided),
                    if ids.is_empty() {
                        String::new()
                    } else {
                        format!(": {}", ids.join(", "))
                    }
                )
            };
            stats.parent_fires_checked += 1;
            stats.parent_fires_succeeded += usize::from(completion.is_some());
            match (completion.is_some(), triggers) {
                (true, 1) | (false, 0) => {}
                _ => c.violation(label),
            }
        }
    }
    c
}

/// An operator's cancel answered 200: when, and what the answer (the execution) said.
#[derive(Debug, Clone)]
pub struct Cancel {
    pub answered: DateTime<Utc>,
    /// The execution's `startTime` in the answer: the call had been handed to an executor.
    pub called: Option<DateTime<Utc>>,
    /// The answer's `errorMessage`.
    pub message: String,
}

impl Cancel {
    fn read(answered: DateTime<Utc>, response: Option<&Value>) -> Self {
        let field = |k: &str| response.and_then(|r| r[k].as_str());
        Self {
            answered,
            called: field("startTime")
                .and_then(|s| DateTime::parse_from_rfc3339(s).ok())
                .map(|t| t.with_timezone(&Utc)),
            message: field("errorMessage").unwrap_or("").to_string(),
        }
    }

    /// Why a run of the cancelled call may start after the answer, if the answer says one
    /// may: the call was already handed over and the executor could not be told to stop.
    fn unstoppable(&self, run: &Run) -> Option<&'static str> {
        self.called.filter(|called| *called <= self.answered)?;
        if !run.sdk && self.message.contains("has no cancel endpoint") {
            Some("a bare executor's call handed over before the cancel, which said it may run")
        } else if self.message.contains("could not be asked") {
            Some("a call handed over before the cancel, whose executor could not be asked")
        } else {
            None
        }
    }
}

fn cancel(ix: &Index) -> Check {
    let mut c = Check::new("cancel");
    let mut traces: Vec<(&String, &Cancel)> = ix.cancelled.iter().collect();
    traces.sort_by_key(|(trace, _)| trace.as_str());
    for (trace, cancel) in traces {
        for r in ix.runs_of.get(trace.as_str()).into_iter().flatten() {
            if r.start > cancel.answered {
                let what = || {
                    format!(
                        "cancel of {trace} answered 200 at {}, then {} started",
                        hms(cancel.answered),
                        run_label(r)
                    )
                };
                match cancel.unstoppable(r) {
                    Some(why) => c.documented(why, what),
                    None => c.violation(what),
                }
            }
        }
    }
    c
}

fn sdk_once(ix: &Index) -> Check {
    let mut c = Check::new("sdk-once");
    let mut by_id: BTreeMap<&str, Vec<&Run>> = BTreeMap::new();
    for r in ix.h.runs.iter().filter(|r| r.sdk) {
        by_id.entry(r.execution_id.as_str()).or_default().push(r);
    }
    for runs in by_id.values_mut() {
        runs.sort_by_key(|r| r.start);
        for w in runs.windows(2) {
            let (a, b) = (w[0], w[1]);
            let what = || format!("{} ran again as {}", run_label(a), run_label(b));
            if ix.restarted_between(&a.executor, a.start, b.start) {
                c.documented(
                    "the executor of the first run restarted before the second",
                    what,
                );
            } else {
                c.violation(what);
            }
        }
    }
    c
}

/// Since when an open row has been left alone: the later of its last event and the start of
/// the quiet tail.
fn open_since(h: &History, r: &ExecRow) -> DateTime<Utc> {
    [
        Some(h.quiet),
        Some(r.trigger_time),
        Some(r.due_time),
        r.start_time,
    ]
    .into_iter()
    .flatten()
    .max()
    .unwrap_or(h.quiet)
}

fn settled(ix: &Index) -> Check {
    let mut c = Check::new("settled");
    let h = ix.h;
    for r in h.rows.iter().filter(|r| !r.is_final()) {
        let last = open_since(h, r);
        if h.ended - last <= SETTLE_BOUND {
            continue;
        }
        let what = || {
            format!(
                "{} {} ({}) {} since {} (held by {}, executor {})",
                r.execution_id,
                r.trace_id,
                r.trigger_type,
                r.status,
                hms(last),
                r.scheduler_instance.as_deref().unwrap_or("-"),
                r.executor_instance.as_deref().unwrap_or("-")
            )
        };
        if ix.still_running(&r.trace_id) {
            c.documented("its handler still runs at the executor", what);
        } else {
            c.violation(what);
        }
    }
    c
}

/// The `FIXED_DELAY` jobs of the history with their interval: created so, and never replaced.
fn delay_jobs(h: &History) -> Vec<(&str, i64)> {
    let mut out = Vec::new();
    for call in &h.api {
        let Some((name, Op::Create)) = job_op(call) else {
            continue;
        };
        let body = call.body.as_ref().expect("a create has a body");
        if body["scheduleType"] != "FIXED_DELAY" {
            continue;
        }
        let rewritten = h.api.iter().any(|c| {
            matches!(job_op(c), Some((n, Op::Replace | Op::Delete | Op::SetEnabled)) if n == name)
        });
        if let (false, Some(interval)) = (rewritten, body["intervalSeconds"].as_i64()) {
            out.push((body["name"].as_str().unwrap_or_default(), interval));
        }
    }
    out.sort();
    out.dedup();
    out
}

fn fixed_delay(ix: &Index) -> Check {
    let mut c = Check::new("fixed-delay");
    let h = ix.h;
    for (job, interval) in delay_jobs(h) {
        // Every row of each scheduled fire (first attempts and their retries), by instant.
        let mut fires: BTreeMap<DateTime<Utc>, Vec<&ExecRow>> = BTreeMap::new();
        for r in h
            .rows
            .iter()
            .filter(|r| r.job_name == job && is_cron_id(&r.execution_id))
        {
            fires.entry(r.fire_time).or_default().push(r);
        }
        let fires: Vec<(DateTime<Utc>, Vec<&ExecRow>)> = fires.into_iter().collect();
        let due_after = |rows: &[&ExecRow]| -> Option<DateTime<Utc>> {
            if !rows.iter().all(|r| r.is_final()) {
                return None;
            }
            let end = rows.iter().filter_map(|r| r.finish_time).max()?;
            let whole = end.trunc_subsecs(0);
            let up = if whole < end {
                whole + Duration::seconds(1)
            } else {
                whole
            };
            Some(up + Duration::seconds(interval))
        };
        for pair in fires.windows(2) {
            let ((prev, prev_rows), (next, _)) = (&pair[0], &pair[1]);
            match due_after(prev_rows) {
                None => c.violation(|| {
                    format!(
                        "{job}: fired at {} while its fire at {} was still open",
                        hms(*next),
                        hms(*prev)
                    )
                }),
                Some(due) if *next < due => c.violation(|| {
                    format!(
                        "{job}: fired at {}, before {} (its fire at {} ended, plus {interval} s)",
                        hms(*next),
                        hms(due),
                        hms(*prev)
                    )
                }),
                Some(due) if *next - due > DELAY_BOUND => c.violation(|| {
                    format!(
                        "{job}: fired at {}, {} s after its due instant {}",
                        hms(*next),
                        (*next - due).num_seconds(),
                        hms(due)
                    )
                }),
                Some(_) => {}
            }
        }
        if let Some((last, rows)) = fires.last()
            && let Some(due) = due_after(rows)
            && h.ended - due > DELAY_BOUND
        {
            c.violation(|| {
                format!(
                    "{job}: no fire after {} (due at {}, history ends at {})",
                    hms(*last),
                    hms(due),
                    hms(h.ended)
                )
            });
        }
    }
    c
}

fn worst_delays(ix: &Index, stats: &mut Stats) {
    let h = ix.h;
    for ((job, t), rows) in &ix.cron_fires {
        let policy = ix
            .timelines
            .get(*job)
            .and_then(|tl| tl.settled_at(*t, Duration::zero(), Duration::zero()))
            .and_then(|s| s.def().map(|d| d.overlap.clone()))
            .unwrap_or_else(|| "changing".to_string());
        let near: Vec<_> = h
            .faults
            .iter()
            .filter(|f| *t >= f.start - Duration::seconds(2) && *t <= f.end + Duration::seconds(10))
            .collect();
        let Some(fault) = near.first() else {
            continue;
        };
        for row in rows {
            // The range's first call; an operator's re-run is no delivery of the fire.
            let Some(first) = ix
                .runs_of_range(row.range_key())
                .iter()
                .filter(|r| !r.execution_id.contains("#x"))
                .map(|r| r.start)
                .min()
            else {
                continue;
            };
            let delay = (first - *t).num_milliseconds();
            // Faults overlap: the delay counts for every kind whose window holds the instant.
            for f in &near {
                let by = stats
                    .worst_delay_by_fault
                    .entry(f.kind.clone())
                    .or_default();
                *by = (*by).max(delay);
            }
            let by = stats
                .worst_delay_by_policy
                .entry(policy.clone())
                .or_default();
            *by = (*by).max(delay);
            if delay > stats.worst_delay_after_fault_ms {
                stats.worst_delay_after_fault_ms = delay;
                stats.worst_delay_fire = format!(
                    "{} (fault {} on {} at {})",
                    row.execution_id,
                    fault.kind,
                    fault.target,
                    ts(fault.start)
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    //! Small hand-written histories, each showing one rule fire (and the legitimate cases
    //! it lets pass).

    use super::*;
    use crate::history::{AlertEvent, ExecutorLife, Fault};
    use serde_json::json;

    fn t(s: f64) -> DateTime<Utc> {
        DateTime::from_timestamp_millis(1_800_000_000_000 + (s * 1000.0) as i64).unwrap()
    }

    const S1: &str = "127.0.0.1:7001";
    const S2: &str = "127.0.0.1:7002";

    fn view(name: &str, v: u64, enabled: bool, overlap: &str, children: &[&str]) -> Value {
        json!({"name": name, "cron": "*/1 * * * * ?", "enabled": enabled, "overlapPolicy": overlap,
               "childJobs": children, "jobParams": {"v": v}})
    }

    fn call(
        method: &str,
        path: &str,
        body: Option<Value>,
        at: f64,
        status: u16,
        response: Option<Value>,
        by: &str,
    ) -> ApiCall {
        ApiCall {
            scheduler: by.into(),
            method: method.into(),
            path: path.into(),
            body,
            sent: t(at),
            answered: Some(t(at + 0.05)),
            status: Some(status),
            response,
        }
    }

    /// The operator's cancel of `tr8` (the steady history's fire at 8 s), answered 200 by S1
    /// at 7.9 s with `answer`.
    fn cancel_of_tr8(answer: Value) -> ApiCall {
        let path = "/api/v1/jobs/executions/tr8/cancel";
        call("POST", path, None, 7.9, 200, Some(answer), S1)
    }

    fn create(name: &str, v: u64, overlap: &str, at: f64) -> ApiCall {
        let body = view(name, v, true, overlap, &[]);
        call(
            "POST",
            "/api/v1/jobs",
            Some(body.clone()),
            at,
            201,
            Some(body),
            S1,
        )
    }

    fn row(job: &str, at: f64, range: (u32, u32), trace: &str, status: &str) -> ExecRow {
        let fire = t(at);
        ExecRow {
            execution_id: format!(
                "{job}:{}:{}-{}",
                fire.format("%Y%m%d%H%M%S"),
                range.0,
                range.1
            ),
            trace_id: trace.into(),
            job_name: job.into(),
            trigger_type: "CRON".into(),
            fire_time: fire,
            scheduler_instance: Some(S1.into()),
            executor_instance: Some("127.0.0.1:9001".into()),
            shard_start: range.0,
            shard_end: range.1,
            trigger_time: fire - Duration::seconds(2),
            due_time: fire,
            start_time: Some(fire),
            finish_time: Some(fire + Duration::milliseconds(100)),
            status: status.into(),
            retry_count: 0,
            parent_trace_id: None,
            error_message: None,
            job_params: None,
        }
    }

    fn run_of(r: &ExecRow, v: u64, start: f64, end: f64) -> Run {
        Run {
            executor: "sdk-1".into(),
            sdk: true,
            life: 0,
            trace_id: r.trace_id.clone(),
            execution_id: r.execution_id.clone(),
            job_name: r.job_name.clone(),
            handler: "fast".into(),
            trigger_type: r.trigger_type.clone(),
            fire_time: r.fire_time,
            shard_start: r.shard_start,
            shard_end: r.shard_end,
            retry_count: r.retry_count,
            job_params: json!({"v": v}),
            start: t(start),
            end: Some(t(end)),
            outcome: "SUCCESS".into(),
        }
    }

    /// A job created at -3 firing every second, each fire from 0 to 20 delivered once; the
    /// history ends at 25.5, so the instants up to 20 are checked.
    fn steady(job: &str, overlap: &str) -> History {
        steady_until(job, overlap, 20)
    }

    /// [`steady`] with fires up to `last`, ending at `last` + 5.5.
    fn steady_until(job: &str, overlap: &str, last: u32) -> History {
        let mut h = History {
            started: t(0.0),
            quiet: t(0.0),
            ended: t(last as f64 + 5.5),
            api: vec![create(job, 1, overlap, -3.0)],
            ..Default::default()
        };
        for s in 0..=last {
            let r = row(job, s as f64, (0, 0), &format!("tr{s}"), "SUCCESS");
            h.runs.push(run_of(&r, 1, s as f64 + 0.01, s as f64 + 0.05));
            h.rows.push(r);
        }
        h
    }

    fn of<'a>(v: &'a Verdict, name: &str) -> &'a Check {
        v.checks.iter().find(|c| c.name == name).unwrap()
    }

    fn documented(c: &Check, case: &str) -> usize {
        c.documented.get(case).map_or(0, |c| c.count)
    }

    /// A FIXED_DELAY job `d` (1 s) with fires at `fires` (instant, finish), all SUCCESS,
    /// the history ending at `ended`.
    fn delayed(fires: &[(f64, f64)], ended: f64) -> History {
        let body = json!({"name": "d", "scheduleType": "FIXED_DELAY", "intervalSeconds": 1,
            "enabled": true, "jobParams": {"v": 1}});
        let view = json!({"name": "d", "scheduleType": "FIXED_DELAY", "intervalSeconds": 1,
            "cron": null, "enabled": true, "overlapPolicy": "ALLOW", "childJobs": [],
            "jobParams": {"v": 1}});
        let mut h = History {
            started: t(0.0),
            quiet: t(0.0),
            ended: t(ended),
            api: vec![call(
                "POST",
                "/api/v1/jobs",
                Some(body),
                -3.0,
                201,
                Some(view),
                S1,
            )],
            ..Default::default()
        };
        for (i, &(at, finish)) in fires.iter().enumerate() {
            let mut r = row("d", at, (0, 0), &format!("d{i}"), "SUCCESS");
            r.finish_time = Some(t(finish));
            h.runs.push(run_of(&r, 1, at + 0.01, finish - 0.01));
            h.rows.push(r);
        }
        h
    }

    #[test]
    fn a_fixed_delay_fire_comes_its_interval_after_the_previous_one_ended() {
        // Ended at 2.3: due at 4; ended at 4.1: due at 6.
        let v = check(&delayed(&[(0.0, 2.3), (4.0, 4.1), (6.0, 6.2)], 8.0));
        assert_eq!(v.violations(), 0, "{v:#?}");
        let early = check(&delayed(&[(0.0, 2.3), (3.0, 3.1)], 5.0));
        assert_eq!(of(&early, "fixed-delay").violations, 1, "{early:#?}");
        let late = check(&delayed(&[(0.0, 2.3), (100.0, 100.1)], 101.0));
        assert_eq!(of(&late, "fixed-delay").violations, 1, "{late:#?}");
        let stopped = check(&delayed(&[(0.0, 2.3)], 120.0));
        assert_eq!(of(&stopped, "fixed-delay").violations, 1, "{stopped:#?}");
        let mut open = delayed(&[(0.0, 2.3), (4.0, 4.1)], 6.0);
        open.rows[0].status = "RUNNING".into();
        open.rows[0].finish_time = None;
        assert_eq!(of(&check(&open), "fixed-delay").violations, 1);
    }

    #[test]
    fn a_clean_history_has_no_violation() {
        let v = check(&steady("a", "ALLOW"));
        assert_eq!(v.violations(), 0, "{v:#?}");
        assert_eq!(v.stats.fires_checked, 21);
        assert_eq!(v.stats.fires_delivered, 21);
    }

    #[test]
    fn a_lost_fire_is_a_violation_and_a_missed_one_is_the_misfire_policy() {
        let mut h = steady("a", "ALLOW");
        // 7 never recorded although 8 was recorded at 6: lost.
        h.rows.retain(|r| r.fire_time != t(7.0));
        h.runs.retain(|r| r.fire_time != t(7.0));
        let v = check(&h);
        let c = of(&v, "delivered-once");
        assert_eq!(c.violations, 1, "{c:#?}");
        assert!(c.examples[0].contains("never recorded"), "{c:#?}");
        // 11..=17 not recorded, 18 recorded only at 23.5: nobody could record them (misfire).
        let mut h = steady("a", "ALLOW");
        h.rows
            .retain(|r| r.fire_time < t(11.0) || r.fire_time > t(17.0));
        h.runs
            .retain(|r| r.fire_time < t(11.0) || r.fire_time > t(17.0));
        for r in h.rows.iter_mut().filter(|r| r.fire_time >= t(18.0)) {
            r.trigger_time = t(23.5);
        }
        // Without a fault that kept the schedulers from recording, that is a loss.
        assert_eq!(of(&check(&h), "delivered-once").violations, 7);
        h.faults.push(Fault {
            kind: "db-cut".into(),
            target: "all".into(),
            start: t(10.5),
            end: t(17.5),
        });
        let v = check(&h);
        let c = of(&v, "delivered-once");
        assert_eq!(c.violations, 0, "{c:#?}");
        assert_eq!(
            documented(
                c,
                "misfire policy: missed while no scheduler recorded the job"
            ),
            7
        );
    }

    #[test]
    fn a_recorded_fire_never_called_is_a_violation_unless_documented() {
        let mut h = steady("a", "ALLOW");
        h.runs
            .retain(|r| r.fire_time != t(5.0) && r.fire_time != t(6.0));
        for r in h.rows.iter_mut().filter(|r| r.fire_time == t(6.0)) {
            r.status = "FAILED".into();
            r.error_message = Some("every executor instance refused the connection: …".into());
        }
        let v = check(&h);
        let c = of(&v, "delivered-once");
        assert_eq!(c.violations, 1, "{c:#?}");
        assert_eq!(
            documented(c, "no live executor took the call (executor fault)"),
            1
        );
    }

    #[test]
    fn instants_around_a_change_are_left_out() {
        let mut h = steady("a", "ALLOW");
        h.api.push(call(
            "PATCH",
            "/api/v1/jobs/a/enabled?enabled=false",
            None,
            10.5,
            200,
            Some(view("a", 1, false, "ALLOW", &[])),
            S1,
        ));
        h.rows.retain(|r| r.fire_time <= t(10.0));
        h.runs.retain(|r| r.fire_time <= t(10.0));
        let v = check(&h);
        assert_eq!(v.violations(), 0, "{v:#?}");
        assert_eq!(
            v.stats.fires_checked, 10,
            "0..=9: 10 is within a second of the change"
        );
    }

    #[test]
    fn an_attempt_is_final_within_the_settle_bound_of_its_own_start() {
        // The fire at 0 (60.5 s before the end) failed; its retry is RUNNING at the end.
        let with_retry_at = |start: f64| {
            let mut h = steady_until("a", "ALLOW", 55);
            h.rows[0].status = "FAILED".into();
            let mut retry = row("a", 0.0, (0, 0), "retry0", "RUNNING");
            retry.retry_count = 1;
            retry.trigger_time = t(start);
            retry.due_time = t(start);
            retry.start_time = Some(t(start));
            retry.finish_time = None;
            h.rows.push(retry);
            of(&check(&h), "delivered-once").violations
        };
        assert_eq!(with_retry_at(40.0), 0, "begun 20.5 s before the end");
        assert_eq!(with_retry_at(20.0), 1, "open 40.5 s after its start");
    }

    #[test]
    fn a_duplicate_first_attempt_is_a_violation() {
        let mut h = steady("a", "ALLOW");
        let twin = row("a", 4.0, (0, 0), "twin", "SUCCESS");
        h.runs.push(run_of(&twin, 1, 4.5, 4.6));
        let v = check(&h);
        let c = of(&v, "no-duplicate");
        assert_eq!(c.violations, 1, "{c:#?}");
        // And the rows of one fire recorded twice under two plans.
        let mut h = steady("a", "ALLOW");
        let mut other = row("a", 4.0, (0, 1), "tr4b", "SUCCESS");
        other.execution_id = other.execution_id.replace(":0-0", ":0-1");
        h.rows.push(other);
        assert_eq!(of(&check(&h), "no-duplicate").violations, 1);
    }

    #[test]
    fn overlapping_attempts_of_a_range_are_a_violation_unless_bare() {
        let mut h = steady("a", "ALLOW");
        let first = h
            .rows
            .iter()
            .find(|r| r.fire_time == t(3.0))
            .unwrap()
            .clone();
        let mut retry = first.clone();
        retry.execution_id.push_str("#r1");
        retry.trace_id = "retry".into();
        retry.retry_count = 1;
        retry.trigger_type = "RETRY".into();
        // The first attempt really ran to 9; the retry started at 6.
        h.runs
            .iter_mut()
            .find(|r| r.trace_id == first.trace_id)
            .unwrap()
            .end = Some(t(9.0));
        h.runs.push(run_of(&retry, 1, 6.0, 6.5));
        h.rows.push(retry);
        let v = check(&h);
        assert_eq!(of(&v, "no-overlap-per-range").violations, 1);
        // The same on a bare executor is the documented at-least-once case.
        for r in h.runs.iter_mut().filter(|r| r.trace_id == first.trace_id) {
            r.sdk = false;
            r.executor = "bare-1".into();
        }
        let v = check(&h);
        let c = of(&v, "no-overlap-per-range");
        assert_eq!(c.violations, 0);
        assert_eq!(
            documented(c, "earlier run on a bare executor (at-least-once)"),
            1
        );
    }

    #[test]
    fn a_stale_definition_after_an_edit_is_a_violation_beyond_the_allowance() {
        let mut h = steady("a", "ALLOW");
        // Edited to v 2 at 10.0 through S1, the holder: 10.9 would still be within its allowance,
        // 12 onwards must carry v 2.
        h.api.push(call(
            "PUT",
            "/api/v1/jobs/a",
            None,
            9.95,
            200,
            Some(view("a", 2, true, "ALLOW", &[])),
            S1,
        ));
        for r in h.runs.iter_mut().filter(|r| r.fire_time >= t(11.0)) {
            r.job_params = json!({"v": 2});
        }
        assert_eq!(of(&check(&h), "no-stale-definition").violations, 0);
        for r in h.runs.iter_mut().filter(|r| r.fire_time == t(12.0)) {
            r.job_params = json!({"v": 1});
        }
        let v = check(&h);
        let c = of(&v, "no-stale-definition");
        assert_eq!(c.violations, 1, "{c:#?}");
        // Answered by another scheduler: two seconds of allowance, 12 is still within them.
        for c in h.api.iter_mut().filter(|c| c.method == "PUT") {
            c.scheduler = S2.into();
        }
        let v = check(&h);
        let c = of(&v, "no-stale-definition");
        assert_eq!(c.violations, 0, "{c:#?}");
        assert_eq!(
            documented(
                c,
                "old definition within the propagation allowance after the answer"
            ),
            1
        );
    }

    #[test]
    fn a_call_after_a_disable_is_a_violation() {
        let mut h = steady("a", "SKIP");
        h.api.push(call(
            "PATCH",
            "/api/v1/jobs/a/enabled?enabled=false",
            None,
            14.2,
            200,
            Some(view("a", 1, false, "SKIP", &[])),
            S1,
        ));
        // 15 is within the holder's allowance of the answer at 14.25; 16 is not.
        h.runs.retain(|r| r.fire_time <= t(16.0));
        h.rows.retain(|r| r.fire_time <= t(16.0));
        let v = check(&h);
        let c = of(&v, "no-stale-definition");
        assert_eq!(c.violations, 1, "{c:#?}");
        assert!(c.examples[0].contains("disabled"));
    }

    #[test]
    fn skip_and_cover_forbid_runs_of_two_fires_at_once() {
        for policy in ["SKIP", "COVER"] {
            let mut h = steady("a", policy);
            // The fire of 3 ran until 7.5: the fires of 4 to 7 were called beside it.
            h.runs
                .iter_mut()
                .find(|r| r.fire_time == t(3.0))
                .unwrap()
                .end = Some(t(7.5));
            let v = check(&h);
            let c = of(&v, &policy.to_lowercase());
            assert_eq!(c.violations, 4, "{policy}: {c:#?}");
            // Under ALLOW nothing is wrong with it.
            let mut h = steady("a", "ALLOW");
            h.runs
                .iter_mut()
                .find(|r| r.fire_time == t(3.0))
                .unwrap()
                .end = Some(t(7.5));
            assert_eq!(check(&h).violations(), 0);
        }
    }

    #[test]
    fn a_fire_recorded_after_the_job_left_skip_may_run_beside_an_older_retry() {
        let mut h = steady("a", "SKIP");
        // Edited to ALLOW at 7; the fire of 3 is still retried when 12 is recorded and runs.
        h.api.push(call(
            "PUT",
            "/api/v1/jobs/a",
            None,
            7.0,
            200,
            Some(view("a", 1, true, "ALLOW", &[])),
            S1,
        ));
        let first = h
            .rows
            .iter()
            .find(|r| r.fire_time == t(3.0))
            .unwrap()
            .clone();
        let mut retry = first.clone();
        retry.execution_id.push_str("#r1");
        retry.trace_id = "retry".into();
        retry.retry_count = 1;
        retry.trigger_time = t(5.0);
        h.runs.push(run_of(&retry, 1, 11.9, 12.5));
        h.rows.push(retry);
        assert_eq!(of(&check(&h), "skip").violations, 0);
        // Still SKIP when 12 was recorded: it must not have been called.
        h.api.pop();
        assert_eq!(of(&check(&h), "skip").violations, 1);
    }

    #[test]
    fn a_fire_called_after_the_job_left_skip_follows_the_policy_of_its_call() {
        let mut h = steady("a", "SKIP");
        // The fires of 4 and 5, recorded under SKIP, are resumed together at 12, after an
        // edit to ALLOW at 7.
        h.api.push(call(
            "PUT",
            "/api/v1/jobs/a",
            None,
            7.0,
            200,
            Some(view("a", 1, true, "ALLOW", &[])),
            S1,
        ));
        for r in h
            .runs
            .iter_mut()
            .filter(|r| r.fire_time == t(4.0) || r.fire_time == t(5.0))
        {
            (r.start, r.end) = (t(12.0), Some(t(12.5)));
        }
        assert_eq!(of(&check(&h), "skip").violations, 0);
        // Still SKIP when they were called: 5 must not have run beside 4, nor 12 beside them.
        h.api.pop();
        assert_eq!(of(&check(&h), "skip").violations, 2);
    }

    #[test]
    fn a_child_lost_or_triggered_twice_is_a_violation() {
        let mut h = steady("p", "ALLOW");
        let child = view("c", 10, true, "ALLOW", &[]);
        h.api.insert(
            0,
            call(
                "POST",
                "/api/v1/jobs",
                Some(child.clone()),
                -2.0,
                201,
                Some(child),
                S1,
            ),
        );
        h.api[1] = {
            let body = view("p", 1, true, "ALLOW", &["c"]);
            call(
                "POST",
                "/api/v1/jobs",
                Some(body.clone()),
                -0.5,
                201,
                Some(body),
                S1,
            )
        };
        // Every fire of p triggered c once, except 5 (none) and 6 (twice).
        for s in 1..=20 {
            if s == 5 {
                continue;
            }
            let parent = h
                .rows
                .iter()
                .find(|r| r.fire_time == t(s as f64))
                .unwrap()
                .trace_id
                .clone();
            for n in 0..(if s == 6 { 2 } else { 1 }) {
                let mut r = row("c", s as f64, (0, 0), &format!("c{s}-{n}"), "SUCCESS");
                r.trigger_type = "CHILD".into();
                r.execution_id = format!("c:CHILD:{s:x}{n}:0-0");
                r.parent_trace_id = Some(parent.clone());
                h.rows.push(r);
            }
        }
        let v = check(&h);
        let c = of(&v, "children");
        assert_eq!(c.violations, 2, "{c:#?}");
        // A failed fire triggers none.
        let mut h2 = h.clone();
        for r in h2
            .rows
            .iter_mut()
            .filter(|r| r.job_name == "p" && r.fire_time == t(5.0))
        {
            r.status = "FAILED".into();
        }
        assert_eq!(of(&check(&h2), "children").violations, 1);
    }

    #[test]
    fn a_call_starting_after_its_cancel_was_answered_is_a_violation() {
        let mut h = steady("a", "ALLOW");
        h.api.push(cancel_of_tr8(json!({})));
        let v = check(&h);
        let c = of(&v, "cancel");
        assert_eq!(c.violations, 1, "{c:#?}");
    }

    #[test]
    fn a_call_handed_to_a_bare_executor_before_the_cancel_that_said_so_is_documented() {
        let answer = |start: Option<f64>| {
            json!({"traceId": "tr8", "status": "CANCELLED", "startTime": start.map(t),
                "errorMessage": "cancelled by campaign; the executor has no cancel endpoint; it may run to its end"})
        };
        let bare = |mut h: History| {
            h.runs.iter_mut().for_each(|r| r.sdk = false);
            h
        };
        let cancelled =
            |start: Option<f64>, h: &mut History| h.api.push(cancel_of_tr8(answer(start)));
        let mut h = bare(steady("a", "ALLOW"));
        cancelled(Some(7.85), &mut h);
        let v = check(&h);
        let c = of(&v, "cancel");
        assert_eq!(c.violations, 0, "{c:#?}");
        assert_eq!(
            documented(
                c,
                "a bare executor's call handed over before the cancel, which said it may run"
            ),
            1
        );
        // Not handed over when the cancel was written (no start): nothing excuses the run.
        let mut h = bare(steady("a", "ALLOW"));
        cancelled(None, &mut h);
        assert_eq!(of(&check(&h), "cancel").violations, 1);
        // An SDK executor remembers a cancel that arrives before its call.
        let mut h = steady("a", "ALLOW");
        cancelled(Some(7.85), &mut h);
        assert_eq!(of(&check(&h), "cancel").violations, 1);
    }

    #[test]
    fn an_sdk_handler_run_twice_is_a_violation_unless_its_executor_restarted() {
        let mut h = steady("a", "ALLOW");
        let mut again = h.runs[3].clone();
        again.start = t(30.0);
        again.end = Some(t(30.1));
        h.runs.push(again);
        assert_eq!(of(&check(&h), "sdk-once").violations, 1);
        h.lives.push(ExecutorLife {
            executor: "sdk-1".into(),
            life: 0,
            start: t(0.0),
            end: Some(t(20.0)),
        });
        let v = check(&h);
        let c = of(&v, "sdk-once");
        assert_eq!(c.violations, 0);
        assert_eq!(
            documented(
                c,
                "the executor of the first run restarted before the second"
            ),
            1
        );
    }

    #[test]
    fn a_row_left_open_beyond_the_bound_is_a_violation() {
        let mut h = steady("a", "ALLOW");
        h.ended = t(80.0);
        h.rows[2].status = "RUNNING".into();
        h.rows[3].status = "PENDING".into();
        h.runs[3].end = None;
        let v = check(&h);
        let c = of(&v, "settled");
        assert_eq!(c.violations, 1, "{c:#?}");
        assert_eq!(documented(c, "its handler still runs at the executor"), 1);
    }

    #[test]
    fn an_alerted_misfire_is_documented() {
        let mut h = steady("a", "ALLOW");
        h.rows.retain(|r| r.fire_time != t(9.0));
        h.runs.retain(|r| r.fire_time != t(9.0));
        h.alerts.push(AlertEvent {
            event: "FIRE_SKIPPED".into(),
            job_name: "a".into(),
            fire_time: t(9.0),
            trace_id: None,
            received: t(15.0),
        });
        let v = check(&h);
        assert_eq!(v.violations(), 0);
        assert_eq!(
            documented(
                of(&v, "delivered-once"),
                "misfire policy: FIRE_SKIPPED alert"
            ),
            1
        );
    }

    #[test]
    fn an_unanswered_write_leaves_the_job_unknown_until_it_is_read_again() {
        let mut h = steady("a", "ALLOW");
        let mut lost = call(
            "PATCH",
            "/api/v1/jobs/a/enabled?enabled=false",
            None,
            5.0,
            500,
            None,
            S1,
        );
        lost.status = None;
        lost.answered = None;
        h.api.push(lost);
        // Nothing was recorded after 5 (the disable did land), and nothing is asked of it.
        h.rows.retain(|r| r.fire_time <= t(5.0));
        h.runs.retain(|r| r.fire_time <= t(5.0));
        let v = check(&h);
        assert_eq!(v.violations(), 0, "{v:#?}");
    }

    #[test]
    fn a_write_answered_5xx_is_decided_by_its_answer() {
        let mut h = steady("a", "ALLOW");
        // Disabled or not at 5 (500), disabled for sure at 8: nothing is owed after 8, and a
        // call then is a violation.
        h.api.push(call(
            "PATCH",
            "/api/v1/jobs/a/enabled?enabled=false",
            None,
            5.0,
            500,
            None,
            S1,
        ));
        h.api.push(call(
            "PATCH",
            "/api/v1/jobs/a/enabled?enabled=false",
            None,
            8.0,
            200,
            Some(view("a", 1, false, "ALLOW", &[])),
            S1,
        ));
        h.rows
            .retain(|r| r.fire_time <= t(5.0) || r.fire_time == t(15.0));
        h.runs
            .retain(|r| r.fire_time <= t(5.0) || r.fire_time == t(15.0));
        let v = check(&h);
        assert_eq!(of(&v, "delivered-once").violations, 0, "{v:#?}");
        assert_eq!(of(&v, "no-stale-definition").violations, 1, "{v:#?}");
    }

    #[test]
    fn the_cron_forms_expand() {
        assert_eq!(instants("*/2 * * * * ?", t(0.5), t(5.0)).len(), 2);
        assert_eq!(
            instants("* * * * * ?", t(0.0), t(3.0)),
            vec![t(1.0), t(2.0), t(3.0)]
        );
        assert!(instants("0 0 3 1 1 ?", t(0.0), t(100.0)).is_empty());
    }
}
