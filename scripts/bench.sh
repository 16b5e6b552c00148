#!/usr/bin/env bash
# Runs every JobFlow benchmark and its peers, then draws the plot: the one command behind
# docs/benchmarks.md. Installs what the runs need: MariaDB (started if stopped), rnacos and
# ratchjob (cargo install --locked when missing; never vendored), matplotlib in a venv.
#
# Scale parameters (environment):
#   BENCH_JOBS="50 300 1000 10000"   jobs on a one-second cron, for the precision runs
#   BENCH_SECONDS=20                 precision window (each size also runs the floor: the
#                                    same calls from a process doing nothing else)
#   BENCH_SECONDS_LARGE=60           precision window from 10,000 jobs up
#   BENCH_RUNS=1                     precision runs per size (rounds of floor, JobFlow on
#                                    MariaDB and on SQLite, and the peers, for the spread)
#   BENCH_THROUGHPUT_SECONDS=300     sustained-throughput window
#   BENCH_THROUGHPUT_RATE=1000       executions per second offered (shard_count 1 and 10)
#   BENCH_BURST=10000                jobs due at one instant
#   BENCH_IDLE="0 10000 100000"      idle instance sizes (10,000 is also run with distinct crons)
#   BENCH_CLUSTER="3 5"              cluster sizes before the join
#   BENCH_RETENTION_ROWS=10000000    executions older than the window, purged under load
#   BENCH_RETENTION_JOBS=1000        one-second jobs running meanwhile (executions per second)
#   BENCH_RETENTION_SECONDS=60       length of each retention-off / retention-on window
#   BENCH_RETENTION_PAIRS=3          alternating off/on window pairs before the purge runs alone
#   BENCH_RETENTION_BUFFER_POOL_MIB= the InnoDB buffer pool for the retention run (MiB, restored
#                                    after); empty keeps the server's
#   BENCH_SEARCH_ROWS=20000000       executions in the table the execution search is timed on
#   BENCH_OVERLAP_JOBS=1000          jobs of the SKIP and COVER precision runs (set beside ALLOW)
#   BENCH_LOG_JOBS=1000              one-second jobs of the execution-log runs, on the Rust SDK's
#                                    executor: handlers logging nothing, then BENCH_LOG_LINES
#   BENCH_LOG_LINES=10               lines each execution logs (shipped and stored)
#   BENCH_CAMPAIGN_SEEDS=1-50        fault campaign seeds (scripts/campaign.sh)
#   BENCH_CAMPAIGN_SECONDS=300       fault phase of each campaign seed
#   BENCH_ONLY="precision cluster"   run only these groups (startup precision overlap logs
#                                    throughput burst idle cluster retention search campaign)
# Results: target/bench-results/<UTC time>/ (results.md and CSVs), plot: docs/benchmarks.png.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

JOBS="${BENCH_JOBS:-50 300 1000 10000}"
SECS="${BENCH_SECONDS:-20}"
SECS_LARGE="${BENCH_SECONDS_LARGE:-60}"
RUNS="${BENCH_RUNS:-1}"
TP_SECS="${BENCH_THROUGHPUT_SECONDS:-300}"
TP_RATE="${BENCH_THROUGHPUT_RATE:-1000}"
BURST="${BENCH_BURST:-10000}"
IDLE="${BENCH_IDLE:-0 10000 100000}"
CLUSTER="${BENCH_CLUSTER:-3 5}"
RET_ROWS="${BENCH_RETENTION_ROWS:-10000000}"
RET_JOBS="${BENCH_RETENTION_JOBS:-1000}"
RET_SECS="${BENCH_RETENTION_SECONDS:-60}"
RET_PAIRS="${BENCH_RETENTION_PAIRS:-3}"
RET_POOL="${BENCH_RETENTION_BUFFER_POOL_MIB:-}"
SEARCH_ROWS="${BENCH_SEARCH_ROWS:-20000000}"
OVERLAP_JOBS="${BENCH_OVERLAP_JOBS:-1000}"
LOG_JOBS="${BENCH_LOG_JOBS:-1000}"
LOG_LINES="${BENCH_LOG_LINES:-10}"
CAMPAIGN_SEEDS="${BENCH_CAMPAIGN_SEEDS:-1-50}"
CAMPAIGN_SECS="${BENCH_CAMPAIGN_SECONDS:-300}"
ONLY="${BENCH_ONLY:-startup precision overlap logs throughput burst idle cluster retention search campaign}"

ensure_mariadb
ensure_rnacos
# Exported after ensure_mariadb, which manages the local server only when none is given.
export JOBFLOW_TEST_MYSQL_URL="$MYSQL_URL"
if [ -n "${RATCHJOB_BIN:-}" ] && [ -x "$RATCHJOB_BIN" ]; then
    log "ratchjob: $RATCHJOB_BIN"
elif [ -x "$HOME/.cargo/bin/ratchjob" ]; then
    export RATCHJOB_BIN="$HOME/.cargo/bin/ratchjob"
else
    log "installing ratchjob (cargo install ratchjob --locked)"
    cargo install ratchjob --locked --quiet
    export RATCHJOB_BIN="$HOME/.cargo/bin/ratchjob"
fi
bench_venv matplotlib matplotlib

log "building the benchmark (release)"
cargo bench --locked --bench scheduler --no-run 2>&1 | tail -n 2
bench_bin=$(cargo bench --locked --bench scheduler --no-run --message-format=json 2>/dev/null \
    | sed -n 's/.*"executable":"\([^"]*scheduler-[^"]*\)".*/\1/p' | tail -n 1)
[ -x "$bench_bin" ] || { echo "benchmark binary not found" >&2; exit 1; }

out="target/bench-results/$(date -u +%Y%m%dT%H%M%SZ)"
mkdir -p "$out"
results="$out/results.md"
{
    echo "# JobFlow benchmark run $(date -u +%FT%TZ)"
    echo
    echo "$(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(uname -sr), $(rustc --version)"
    mariadb --version 2>/dev/null || true
    echo
} > "$results"
run() {
    log "bench $*"
    echo >> "$results"
    echo "\$ scheduler $*" >> "$results"
    "$bench_bin" "$@" --out "$out" | tee -a "$results"
}
wants() { case " $ONLY " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

if wants startup; then run startup --runs 5; fi
if wants precision; then
    # JobFlow at its defaults (INFO logs, the default pools), on MariaDB and on the embedded
    # SQLite; the floor and the peers in the same round.
    for n in $JOBS; do
        secs="$SECS"
        if [ "$n" -ge 10000 ]; then secs="$SECS_LARGE"; fi
        for _ in $(seq "$RUNS"); do
            run floor --jobs "$n" --seconds "$secs"
            run precision --jobs "$n" --seconds "$secs"
            run precision --jobs "$n" --seconds "$secs" --sqlite
            run peer-tcs --jobs "$n" --seconds "$secs"
            run peer-ratchjob --jobs "$n" --seconds "$secs"
        done
    done
fi
if wants overlap; then
    # Guarded fires are judged just before their instant: their delay beside ALLOW's, same run.
    for policy in ALLOW SKIP COVER; do
        run precision --jobs "$OVERLAP_JOBS" --seconds "$SECS" --overlap "$policy"
    done
fi
if wants logs; then
    # The same SDK executor, its handlers logging nothing and then LOG_LINES lines each.
    for _ in $(seq "$RUNS"); do
        run precision --jobs "$LOG_JOBS" --seconds "$SECS" --log-lines 0
        run precision --jobs "$LOG_JOBS" --seconds "$SECS" --log-lines "$LOG_LINES"
    done
fi
if wants throughput; then
    run throughput --jobs "$TP_RATE" --shards 1 --seconds "$TP_SECS"
    run throughput --jobs "$((TP_RATE / 10))" --shards 10 --seconds "$TP_SECS"
    run peer-ratchjob --jobs "$TP_RATE" --shards 1 --seconds "$TP_SECS"
    run peer-ratchjob --jobs "$((TP_RATE / 10))" --shards 10 --seconds "$TP_SECS"
fi
if wants burst; then
    run floor --jobs "$BURST" --seconds 5
    run burst --jobs "$BURST"
fi
if wants idle; then
    for n in $IDLE; do run idle --jobs "$n"; done
    run idle --jobs 10000 --distinct
fi
if wants cluster; then
    for m in $CLUSTER; do
        for s in java-hash rendezvous; do run cluster --instances "$m" --strategy "$s" --jobs 300; done
    done
fi
if wants retention; then
    echo "load before the retention run: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$results"
    run retention --rows "$RET_ROWS" --jobs "$RET_JOBS" --seconds "$RET_SECS" --pairs "$RET_PAIRS" \
        ${RET_POOL:+--buffer-pool-mib "$RET_POOL"}
fi
if wants search; then run search --rows "$SEARCH_ROWS" --jobs 1000 --runs 20; fi
if wants campaign; then
    log "bench fault campaign: seeds $CAMPAIGN_SEEDS, $CAMPAIGN_SECS s each"
    echo >> "$results"
    echo "\$ scripts/campaign.sh $CAMPAIGN_SEEDS $CAMPAIGN_SECS" >> "$results"
    JOBFLOW_CAMPAIGN_REPORT="$out/campaign.jsonl" scripts/campaign.sh "$CAMPAIGN_SEEDS" "$CAMPAIGN_SECS" \
        2>&1 | tail -n 12 | tee -a "$results"
fi

"$VENV/bin/python" scripts/plot-bench.py "$out" docs/benchmarks.png
log "results: $results; plot: docs/benchmarks.png"
