//! What a handler logs, captured per execution and shipped to the scheduler
//! (docs/executor-protocol.md, "Shipping logs").
//!
//! Capture: [`layer`] is a `tracing` layer; added to the service's subscriber, it copies every
//! event logged inside a handler (the handler's task, where the SDK sets the execution) into
//! that execution's log, with its level and time. [`log`] does the same without `tracing`.
//! Each execution keeps at most its bound (1 MiB by default, [`crate::JobExecutor::log_bound`])
//! of messages; what comes beyond is counted, and a last line says how much was dropped.
//!
//! Ship: a task per execution sends what was logged every [`SHIP_EVERY`] while the handler
//! runs (the first batch a period after the start), one batch at a time and in order, each
//! line numbered so a batch sent again after a lost answer is stored once. When the handler
//! has finished, the rest goes with the result ([`Capture::take_rest`]): in the answer to the
//! call, or in the result report, which the executor sends anyway, so a handler that logs a
//! few lines costs no request of its own. Only a rest past [`CARRY_BYTES`], or one that ends
//! while a batch is on its way, is shipped on its own, with the log's end, a share of a second
//! later. Nothing is sent for a handler that logged nothing. A failed batch is sent again with
//! a doubling wait (at most [`RETRY_AT_MOST`]), for up to [`GIVE_UP_AFTER`] after the
//! handler's end; then the log is dropped. Nothing here waits on the handler's path: logging
//! appends to a buffer under a short lock.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::Serialize;
use tokio::sync::Notify;
use tracing::field::{Field, Visit};
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, Layer};

/// Bytes of messages an execution keeps by default.
pub const DEFAULT_BOUND: usize = 1024 * 1024;
/// How often a running execution's new lines are sent.
pub const SHIP_EVERY: Duration = Duration::from_secs(1);
/// Lines per batch (the scheduler takes at most 1,000).
const BATCH_LINES: usize = 500;
/// Bytes of serialised lines per batch, whatever their count: the scheduler takes bodies of at
/// most 1 MiB, and one line (16,384 characters, escaped) always fits.
const BATCH_BYTES: usize = 512 * 1024;
/// Characters per line (the scheduler takes at most 16,384).
const LINE_CHARS: usize = 16 * 1024;
/// The longest wait between two tries of a batch.
pub const RETRY_AT_MOST: Duration = Duration::from_secs(30);
/// How long after the handler's end a log that cannot be shipped is kept trying.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(600);
/// The most serialised lines a result carries.
pub const CARRY_BYTES: usize = 32 * 1024;
/// The most a result and the lines it carries take together: the scheduler reads 64 KiB of
/// an answer, and a cut answer is not a result.
pub const ANSWER_BYTES: usize = 48 * 1024;
/// Bytes of carried logs remembered for repeated calls (see [`Carried`]).
pub const CARRIED_MEMORY: usize = 8 * 1024 * 1024;

tokio::task_local! {
    static CURRENT: Arc<Capture>;
}

/// One line as shipped.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Line {
    pub seq: i64,
    pub at: DateTime<Utc>,
    pub level: &'static str,
    pub message: String,
}

#[derive(Debug, Default)]
struct Buffer {
    /// Lines not yet shipped, oldest first.
    pending: VecDeque<Line>,
    /// The last line's number.
    seq: i64,
    kept_bytes: usize,
    dropped_bytes: usize,
    ended: bool,
    /// The rest went with the result: the shipper stops.
    carried: bool,
    /// A batch is on its way: the rest is not taken meanwhile, since two batches stored at
    /// once could both hold a line.
    sending: bool,
}

/// One execution's log: appended to by the handler, drained by its shipper.
#[derive(Debug)]
pub struct Capture {
    bound: usize,
    buffer: Mutex<Buffer>,
    wake: Notify,
}

impl Capture {
    pub fn new(bound: usize) -> Arc<Self> {
        Arc::new(Self {
            bound,
            buffer: Mutex::default(),
            wake: Notify::new(),
        })
    }

    /// Appends a line, within the bound.
    pub fn push(&self, level: Level, message: String) {
        let mut b = self.buffer.lock().expect("log lock");
        if b.ended {
            return;
        }
        let message: String = if message.chars().count() > LINE_CHARS {
            message.chars().take(LINE_CHARS).collect()
        } else {
            message
        };
        if b.kept_bytes + message.len() > self.bound {
            b.dropped_bytes += message.len();
            return;
        }
        b.kept_bytes += message.len();
        b.seq += 1;
        let seq = b.seq;
        b.pending.push_back(Line {
            seq,
            at: Utc::now(),
            level: level_name(level),
            message,
        });
    }

    /// The handler has finished: a last line tells what the bound dropped, and the shipper
    /// sends the rest with the end.
    pub fn end(&self) {
        let mut b = self.buffer.lock().expect("log lock");
        if b.dropped_bytes > 0 {
            b.seq += 1;
            let (seq, dropped) = (b.seq, b.dropped_bytes);
            b.pending.push_back(Line {
                seq,
                at: Utc::now(),
                level: "WARN",
                message: format!(
                    "{dropped} bytes of log dropped: past this execution's bound of {} bytes",
                    self.bound
                ),
            });
        }
        b.ended = true;
        drop(b);
        self.wake.notify_one();
    }

    /// The next batch to send (not yet removed), and the end when it goes with it.
    fn next_batch(&self) -> (Vec<Line>, Option<End>) {
        let b = self.buffer.lock().expect("log lock");
        let mut lines: Vec<Line> = Vec::new();
        let mut bytes = 0;
        for line in b.pending.iter().take(BATCH_LINES) {
            bytes += serde_json::to_vec(line).expect("a line serialises").len();
            if bytes > BATCH_BYTES && !lines.is_empty() {
                break;
            }
            lines.push(line.clone());
        }
        let end = (b.ended && lines.len() == b.pending.len()).then_some(End {
            lines: b.seq,
            dropped_bytes: b.dropped_bytes as i64,
        });
        (lines, end)
    }

    /// The rest of an ended log, to go with the result: every line not yet taken by the
    /// scheduler, and the end. `None` when it is more than `most` bytes serialised, or while
    /// a batch is on its way (the shipper sends the rest then), or when nothing was logged at
    /// all (nothing is sent). Once taken, the shipper stops. Batches never overlap in flight:
    /// the scheduler stores a line once when batches come one after the other, not when two
    /// holding it are stored at the same moment.
    pub fn take_rest(&self, most: usize) -> Option<Carried> {
        let mut b = self.buffer.lock().expect("log lock");
        if !b.ended || b.carried || b.sending {
            return None;
        }
        if b.seq == 0 {
            b.carried = true;
            return None;
        }
        if b.pending.len() > BATCH_LINES {
            return None;
        }
        let lines: Vec<Line> = b.pending.iter().cloned().collect();
        let bytes = serde_json::to_vec(&lines).expect("lines serialise").len();
        if bytes > most {
            return None;
        }
        b.carried = true;
        let end = End {
            lines: b.seq,
            dropped_bytes: b.dropped_bytes as i64,
        };
        b.pending.clear();
        drop(b);
        self.wake.notify_one();
        Some(Carried(Arc::new(OwnedBatch { lines, end, bytes })))
    }

    fn carried(&self) -> bool {
        self.buffer.lock().expect("log lock").carried
    }

    /// The shipper is about to send a batch: `false` when the rest went with the result
    /// meanwhile (nothing is sent then).
    fn begin_send(&self) -> bool {
        let mut b = self.buffer.lock().expect("log lock");
        b.sending = !b.carried;
        b.sending
    }

    /// The batch's answer came (or did not): the rest may go with the result again.
    fn end_send(&self) {
        self.buffer.lock().expect("log lock").sending = false;
    }

    /// Forgets the lines the scheduler has taken.
    fn shipped(&self, through: i64) {
        let mut b = self.buffer.lock().expect("log lock");
        while b.pending.front().is_some_and(|l| l.seq <= through) {
            b.pending.pop_front();
        }
    }

    fn ended(&self) -> bool {
        self.buffer.lock().expect("log lock").ended
    }
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
struct End {
    lines: i64,
    dropped_bytes: i64,
}

#[derive(Serialize)]
struct Batch<'a> {
    lines: &'a [Line],
    #[serde(skip_serializing_if = "Option::is_none")]
    end: Option<End>,
}

#[derive(Debug, Serialize, PartialEq, Eq)]
struct OwnedBatch {
    lines: Vec<Line>,
    end: End,
    #[serde(skip)]
    bytes: usize,
}

/// The rest of a log, carried in a result's `logs` field (docs/executor-protocol.md,
/// "Shipping logs").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Carried(Arc<OwnedBatch>);

impl Serialize for Carried {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// The logs carried lately, by trace id, within [`CARRIED_MEMORY`] bytes, oldest forgotten
/// first: a scheduler that took an answer and stopped before storing it calls again, and
/// the repeated call's answer carries the log again.
#[derive(Debug)]
pub(crate) struct CarriedMemory {
    by_trace: std::collections::HashMap<String, Carried>,
    order: VecDeque<String>,
    bytes: usize,
    budget: usize,
}

impl Default for CarriedMemory {
    fn default() -> Self {
        Self::within(CARRIED_MEMORY)
    }
}

impl CarriedMemory {
    fn within(budget: usize) -> Self {
        Self {
            by_trace: std::collections::HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            budget,
        }
    }

    pub(crate) fn keep(&mut self, trace_id: &str, log: &Carried) {
        if self
            .by_trace
            .insert(trace_id.to_string(), log.clone())
            .is_none()
        {
            self.order.push_back(trace_id.to_string());
            self.bytes += log.0.bytes;
        }
        while self.bytes > self.budget {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = self.by_trace.remove(&old) {
                self.bytes -= gone.0.bytes;
            }
        }
    }

    pub(crate) fn get(&self, trace_id: &str) -> Option<Carried> {
        self.by_trace.get(trace_id).cloned()
    }
}

/// How many bytes of lines a result of `result_bytes` (serialised) may carry.
pub fn carry_room(result_bytes: usize) -> usize {
    CARRY_BYTES.min(ANSWER_BYTES.saturating_sub(result_bytes))
}

fn level_name(level: Level) -> &'static str {
    match level {
        Level::TRACE => "TRACE",
        Level::DEBUG => "DEBUG",
        Level::INFO => "INFO",
        Level::WARN => "WARN",
        Level::ERROR => "ERROR",
    }
}

/// Runs `fut` (a handler) with `capture` as its execution's log.
pub(crate) async fn capturing<F: std::future::Future>(capture: Arc<Capture>, fut: F) -> F::Output {
    CURRENT.scope(capture, fut).await
}

/// Logs `message` at `level` into the log of the execution whose handler calls it (nothing
/// outside a handler).
pub fn log(level: Level, message: impl Into<String>) {
    let _ = CURRENT.try_with(|c| c.push(level, message.into()));
}

/// A `tracing` layer that copies the events logged inside handlers into their executions'
/// logs: `tracing_subscriber::registry().with(jobflow_executor::logs::layer())`.
pub fn layer() -> CaptureLayer {
    CaptureLayer
}

/// See [`layer`].
#[derive(Debug, Clone, Copy, Default)]
pub struct CaptureLayer;

impl<S: Subscriber> Layer<S> for CaptureLayer {
    fn on_event(&self, event: &Event<'_>, _: Context<'_, S>) {
        let _ = CURRENT.try_with(|c| {
            let mut text = Text::default();
            event.record(&mut text);
            c.push(*event.metadata().level(), text.0);
        });
    }
}

/// An event as one line: its message, then its other fields as `name=value`.
#[derive(Default)]
struct Text(String);

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let rest = std::mem::take(&mut self.0);
            let _ = write!(self.0, "{value:?}");
            if !rest.is_empty() {
                self.0.push(' ');
                self.0.push_str(&rest);
            }
        } else {
            if !self.0.is_empty() {
                self.0.push(' ');
            }
            let _ = write!(self.0, "{}={value:?}", field.name());
        }
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.record_debug(field, &format_args!("{value}"));
        } else {
            self.record_debug(field, &value);
        }
    }
}

/// Where an execution's log goes: beside its `reportUrl` (`…/result` → `…/logs`).
pub(crate) fn log_url(report_url: &str) -> Option<String> {
    report_url
        .strip_suffix("/result")
        .map(|base| format!("{base}/logs"))
}

/// How long the last batch of `trace_id` waits after its execution's end: spread over
/// [`SHIP_EVERY`] by a hash of the trace id (FNV-1a), so no random source is needed.
fn spread_of(trace_id: &str) -> Duration {
    let hash = trace_id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    SHIP_EVERY * (hash % 1000) as u32 / 1000
}

/// Ships `capture` to `url` until its end has been taken (or given up on).
pub(crate) async fn ship(
    http: reqwest::Client,
    secret: Option<Vec<u8>>,
    url: String,
    trace_id: String,
    capture: Arc<Capture>,
) {
    let Ok(parsed) = reqwest::Url::parse(&url) else {
        return;
    };
    let mut failures = 0u32;
    let mut ended_at: Option<tokio::time::Instant> = None;
    let mut spread = false;
    // The first batch waits a period (or the end): a handler that ends within it sends its
    // whole log with its result.
    if !capture.ended() {
        tokio::select! {
            () = capture.wake.notified() => {}
            () = tokio::time::sleep(SHIP_EVERY) => {}
        }
    }
    loop {
        if capture.carried() {
            return;
        }
        if ended_at.is_none() && capture.ended() {
            ended_at = Some(tokio::time::Instant::now());
        }
        let (lines, end) = capture.next_batch();
        if end.as_ref().is_some_and(|e| e.lines == 0) {
            // Nothing was logged: nothing is sent (the scheduler calls such a log complete
            // a while after the execution ends), so a handler that logs nothing costs the
            // scheduler no write.
            return;
        }
        if end.is_some() && !spread {
            // Executions that end together (the jobs of one whole second) would ship their
            // last batches together, in the scheduler's busiest moment, its next fires: the
            // last batch waits a share of a second set by the trace id.
            spread = true;
            tokio::time::sleep(spread_of(&trace_id)).await;
            continue;
        }
        if lines.is_empty() && end.is_none() {
            tokio::select! {
                () = capture.wake.notified() => {}
                () = tokio::time::sleep(SHIP_EVERY) => {}
            }
            continue;
        }
        let last = lines.last().map(|l| l.seq);
        let done = end.is_some();
        if !capture.begin_send() {
            return;
        }
        let body = serde_json::to_vec(&Batch { lines: &lines, end }).expect("a batch serialises");
        let req = crate::runtime::signed_post(&http, secret.as_deref(), &parsed, &trace_id, body);
        let answer = req.send().await;
        capture.end_send();
        match answer {
            Ok(r) if r.status().is_success() => {
                failures = 0;
                if let Some(seq) = last {
                    capture.shipped(seq);
                }
                if done {
                    return;
                }
                if !capture.ended() {
                    tokio::select! {
                        () = capture.wake.notified() => {}
                        () = tokio::time::sleep(SHIP_EVERY) => {}
                    }
                }
            }
            // The scheduler does not know the execution (purged) or refuses the log: nothing
            // sent again would change that.
            Ok(r) if r.status().is_client_error() => {
                tracing::warn!(status = r.status().as_u16(), %trace_id, "execution log refused; dropped");
                return;
            }
            answer => {
                if let Err(e) = &answer {
                    tracing::debug!(error = %e, %trace_id, "execution log not shipped; trying again");
                }
                if ended_at.is_some_and(|t| t.elapsed() > GIVE_UP_AFTER) {
                    tracing::warn!(%trace_id, "execution log could not be shipped; dropped");
                    return;
                }
                failures = failures.saturating_add(1);
                let wait = Duration::from_millis(250)
                    .saturating_mul(1 << failures.min(10))
                    .min(RETRY_AT_MOST);
                tokio::time::sleep(wait).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn messages(c: &Capture) -> Vec<(i64, &'static str, String)> {
        let (lines, _) = c.next_batch();
        lines
            .into_iter()
            .map(|l| (l.seq, l.level, l.message))
            .collect()
    }

    #[tokio::test]
    async fn events_inside_a_handler_are_its_log_and_nothing_outside() {
        use tracing_subscriber::layer::SubscriberExt;
        let subscriber = tracing_subscriber::registry().with(layer());
        let _guard = tracing::subscriber::set_default(subscriber);
        let capture = Capture::new(DEFAULT_BOUND);
        tracing::info!("before any handler");
        capturing(capture.clone(), async {
            tracing::info!(orders = 300, "loading");
            tracing::warn!("order {} skipped", 17);
            log(Level::ERROR, "order 42 failed");
        })
        .await;
        tracing::info!("after");
        assert_eq!(
            messages(&capture),
            [
                (1, "INFO", "loading orders=300".to_string()),
                (2, "WARN", "order 17 skipped".to_string()),
                (3, "ERROR", "order 42 failed".to_string())
            ]
        );
    }

    #[test]
    fn past_its_bound_an_execution_counts_what_it_dropped_and_says_so_last() {
        let capture = Capture::new(10);
        capture.push(Level::INFO, "12345".into());
        capture.push(Level::INFO, "123456".into());
        capture.push(Level::INFO, "12345".into());
        capture.end();
        capture.push(Level::INFO, "after the end".into());
        let (lines, end) = capture.next_batch();
        assert_eq!(
            lines.iter().map(|l| l.message.as_str()).collect::<Vec<_>>(),
            [
                "12345",
                "12345",
                "6 bytes of log dropped: past this execution's bound of 10 bytes"
            ]
        );
        assert_eq!(
            end,
            Some(End {
                lines: 3,
                dropped_bytes: 6
            })
        );
    }

    #[test]
    fn batches_go_in_order_and_the_end_only_with_the_last() {
        let capture = Capture::new(DEFAULT_BOUND);
        for i in 0..(BATCH_LINES + 10) {
            capture.push(Level::DEBUG, format!("line {i}"));
        }
        capture.end();
        let (first, end) = capture.next_batch();
        assert_eq!((first.len(), first[0].seq, end), (BATCH_LINES, 1, None));
        capture.shipped(first.last().unwrap().seq);
        let (rest, end) = capture.next_batch();
        assert_eq!(rest.len(), 10);
        assert_eq!(rest[0].seq, BATCH_LINES as i64 + 1);
        assert_eq!(
            end,
            Some(End {
                lines: BATCH_LINES as i64 + 10,
                dropped_bytes: 0
            })
        );
    }

    #[test]
    fn a_batch_stays_under_the_schedulers_body_limit_whatever_its_lines() {
        // A handler that logs its whole 1 MiB bound at once, in long lines of characters
        // JSON escapes six-fold: every batch fits in the scheduler's 1 MiB body.
        let capture = Capture::new(DEFAULT_BOUND);
        for _ in 0..64 {
            capture.push(Level::INFO, "\u{1}".repeat(LINE_CHARS));
        }
        capture.end();
        let mut shipped = 0;
        while shipped < 64 {
            let (lines, _) = capture.next_batch();
            let body = serde_json::to_vec(&Batch {
                lines: &lines,
                end: None,
            })
            .unwrap();
            assert!(body.len() < 1024 * 1024, "{} bytes", body.len());
            shipped += lines.len();
            capture.shipped(lines.last().unwrap().seq);
        }
        assert_eq!(shipped, 64);
    }

    #[test]
    fn the_last_batch_waits_a_share_of_a_second_set_by_the_trace_id() {
        // The same vector in every SDK: the spread is the FNV-1a hash of the trace id.
        assert_eq!(
            spread_of("4bf92f3577b34da6a3ce929d0e0e4736"),
            Duration::from_millis(618)
        );
        assert_eq!(spread_of("a"), Duration::from_millis(996));
    }

    #[test]
    fn the_rest_of_an_ended_log_goes_with_the_result_once_and_the_shipper_stops() {
        let capture = Capture::new(DEFAULT_BOUND);
        capture.push(Level::INFO, "loading".into());
        assert_eq!(capture.take_rest(CARRY_BYTES), None, "not ended yet");
        capture.push(Level::WARN, "order 17 skipped".into());
        capture.shipped(1);
        capture.push(Level::INFO, "done".into());
        capture.end();
        let rest = capture.take_rest(CARRY_BYTES).expect("the rest");
        let json = serde_json::to_value(&rest).unwrap();
        assert_eq!(
            json["end"],
            serde_json::json!({"lines": 3, "droppedBytes": 0})
        );
        let seqs: Vec<i64> = rest.0.lines.iter().map(|l| l.seq).collect();
        assert_eq!(seqs, [2, 3]);
        assert_eq!(json["lines"][0]["message"], "order 17 skipped");
        assert!(capture.carried());
        assert_eq!(capture.take_rest(CARRY_BYTES), None, "taken once");
        assert_eq!(capture.next_batch().0, Vec::<Line>::new());
    }

    #[test]
    fn a_rest_past_the_carry_bound_is_left_to_the_shipper_with_the_end() {
        let capture = Capture::new(DEFAULT_BOUND);
        for _ in 0..3 {
            capture.push(Level::INFO, "x".repeat(LINE_CHARS));
        }
        capture.end();
        assert_eq!(capture.take_rest(CARRY_BYTES), None);
        assert!(!capture.carried());
        let (lines, end) = capture.next_batch();
        assert_eq!((lines.len(), end.map(|e| e.lines)), (3, Some(3)));
    }

    #[test]
    fn a_result_and_the_lines_it_carries_stay_within_the_answer_bound() {
        assert_eq!(carry_room(40), CARRY_BYTES);
        assert_eq!(carry_room(ANSWER_BYTES - 100), 100);
        assert_eq!(carry_room(60 * 1024), 0);
        let capture = Capture::new(DEFAULT_BOUND);
        capture.push(Level::INFO, "done".into());
        capture.end();
        assert_eq!(capture.take_rest(carry_room(60 * 1024)), None);
        assert!(
            !capture.carried(),
            "a long result leaves the log to the shipper"
        );
    }

    #[test]
    fn the_rest_stays_with_the_shipper_while_a_batch_is_on_its_way() {
        let capture = Capture::new(DEFAULT_BOUND);
        capture.push(Level::INFO, "loading".into());
        assert!(capture.begin_send());
        capture.end();
        assert_eq!(
            capture.take_rest(CARRY_BYTES),
            None,
            "a batch is on its way"
        );
        capture.end_send();
        let rest = capture
            .take_rest(CARRY_BYTES)
            .expect("taken once the batch is answered");
        assert_eq!(rest.0.lines.len(), 1);
        assert!(
            !capture.begin_send(),
            "the shipper stops once the rest is taken"
        );
    }

    #[test]
    fn a_handler_that_logged_nothing_carries_nothing_and_ships_nothing() {
        let capture = Capture::new(DEFAULT_BOUND);
        capture.end();
        assert_eq!(capture.take_rest(CARRY_BYTES), None);
        assert!(capture.carried());
    }

    #[test]
    fn carried_logs_are_remembered_within_their_bytes_oldest_forgotten_first() {
        let carried = |n: usize| {
            let capture = Capture::new(DEFAULT_BOUND);
            capture.push(Level::INFO, "x".repeat(n));
            capture.end();
            capture.take_rest(usize::MAX).unwrap()
        };
        let mut memory = CarriedMemory::within(2000);
        let big = carried(900);
        memory.keep("a", &big);
        memory.keep("b", &big);
        assert!(memory.get("a").is_some());
        memory.keep("c", &carried(10));
        assert_eq!(memory.get("a"), None);
        assert_eq!(memory.get("b"), Some(big));
        assert!(memory.get("c").is_some());
    }

    #[test]
    fn the_log_goes_beside_the_report() {
        assert_eq!(
            log_url("http://10.0.0.5:8080/api/v1/jobs/executions/abc/result").as_deref(),
            Some("http://10.0.0.5:8080/api/v1/jobs/executions/abc/logs")
        );
        assert_eq!(log_url(""), None);
    }
}
