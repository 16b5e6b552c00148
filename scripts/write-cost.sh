#!/usr/bin/env bash
# What MariaDB spends on the rows of one fire, for the way JobFlow writes them today and for
# two ways of writing a fire's execution row once, replayed without JobFlow (no HTTP, no
# scheduler): the statements and batch sizes of the fire path, against the schema of
# migrations/mysql, in a scratch database that is dropped at the end.
#
#   scripts/write-cost.sh [FIRES_PER_SECOND] [SECONDS] [ROUNDS]    defaults: 10000 10 2
#
# Modes, each round in this order, the tables emptied before each:
#   today       claim + PENDING row (50 fires a transaction), the ids returned by the insert
#               (INSERT … RETURNING); the results as JobFlow writes them (256 a transaction):
#               one single-table UPDATE of the rows by primary key, each row picking its own
#               values and guard by its position among the sorted ids (ELT(INTERVAL(id, …)))
#   joined      as today, the results as JobFlow wrote them before 2026-12-06: one UPDATE
#               joined to a derived table of values and each row's guard
#   running     as today, with each row's RUNNING written on its own before its result (a
#               call answered after its RUNNING was flushed)
#   before      as today, as JobFlow wrote it before 2026-12-05: the ids read back by trace
#               id after each insert, and each batch of results a locking compare by trace
#               id, then the UPDATE without guards
#   side-table  claim + the planned row in a compact table of its own (primary key trace_id,
#               index due_time); the result: the planned rows locked and deleted, the final
#               rows inserted
#   once        claim carrying its plan (a text column); the result: the final rows inserted
# Reported: the local mariadbd's CPU time (user + system, from /proc) per fire. The replay sends the
# statements as fast as the database takes them, one connection, so it measures cost, not
# delay; results are in docs/benchmarks.md ("What a fire's rows cost MariaDB").
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

rate="${1:-10000}"
seconds="${2:-10}"
rounds="${3:-2}"

ensure_mariadb
bench_venv pymysql pymysql

db="jobflow_write_cost_$$"
mysql_cli() { mariadb --protocol=tcp -h 127.0.0.1 -u root "$@"; }
mysql_cli -e "CREATE DATABASE $db"
trap 'mysql_cli -e "DROP DATABASE IF EXISTS $db"' EXIT
for f in migrations/mysql/*.sql; do
    mysql_cli "$db" < "$f"
done
mysql_cli "$db" -e "
    ALTER TABLE job_fire ADD COLUMN plan TEXT NULL;
    CREATE TABLE execution_plan (
        trace_id VARCHAR(64) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL PRIMARY KEY,
        execution_id VARCHAR(200) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
        job_name VARCHAR(141) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,
        fire_time DATETIME(3) NOT NULL,
        scheduler_instance VARCHAR(100) NOT NULL,
        executor_instance VARCHAR(100),
        shard_start INT NOT NULL, shard_end INT NOT NULL, shard_count INT NOT NULL,
        trigger_time DATETIME(3) NOT NULL,
        due_time DATETIME(3) NOT NULL,
        KEY idx_due (due_time)
    ) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4"
# WRITE_COST_SQL: statements run on the scratch schema before the replay (an index dropped,
# say), to price one part of it; WRITE_COST_MODES: the modes to run (all by default);
# WRITE_COST_TRACES: `random` (default, 32 random hex digits) or `timed` (the fire's Unix
# second in the first 8 hex digits, then 24 random ones), to price where in `uk_trace_id`
# each new row goes; WRITE_COST_FIRE_BATCH and WRITE_COST_RESULT_BATCH: fires per claim
# transaction (default 50, the fire path's) and results per transaction (default 256);
# WRITE_COST_CLAIMS=0: every mode but `once` leaves the fire's claim out.
if [ -n "${WRITE_COST_SQL:-}" ]; then
    mysql_cli "$db" -e "$WRITE_COST_SQL"
fi

log "write cost: $rate fires a second for $seconds s, $rounds rounds, database $db"
printf '| round | mode | fires | wall | mariadbd CPU | per fire |\n|---|---|---|---|---|---|\n'
for round in $(seq 1 "$rounds"); do
    for mode in ${WRITE_COST_MODES:-today joined before running side-table once}; do
        mysql_cli "$db" -e "TRUNCATE job_execution; TRUNCATE job_fire; TRUNCATE execution_plan"
        WRITE_COST_TRACES="${WRITE_COST_TRACES:-random}" \
            WRITE_COST_FIRE_BATCH="${WRITE_COST_FIRE_BATCH:-50}" \
            WRITE_COST_RESULT_BATCH="${WRITE_COST_RESULT_BATCH:-256}" \
            WRITE_COST_CLAIMS="${WRITE_COST_CLAIMS:-1}" \
            "$VENV/bin/python" - "$db" "$mode" "$rate" "$seconds" "$round" <<'EOF'
import os, subprocess, sys, time, uuid

import pymysql

db, mode, rate, seconds, round_ = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
pid = int(subprocess.run(["pidof", "-s", "mariadbd"], capture_output=True, text=True).stdout.split()[0])


def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def at(t):
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) + ".%03d" % int((t % 1) * 1000)


def marks(n, width):
    return ",".join(["(" + ",".join(["%s"] * width) + ")"] * n)


def listed(n):
    return "(" + ",".join(["%s"] * n) + ")"


IDS = {}
FIRE_BATCH = int(os.environ["WRITE_COST_FIRE_BATCH"])
RESULT_BATCH = int(os.environ["WRITE_COST_RESULT_BATCH"])
CLAIMS = os.environ["WRITE_COST_CLAIMS"] != "0"


def compare_and_set(traces, status, values, due):
    """A batch of changes as JobFlow writes it: one UPDATE joined to a derived table of the
    values and each row's guard (its from states, its lease), which must match every row.
    Before 2026-12-05: a locking compare by trace id first, then the UPDATE unguarded."""
    if mode in ("today", "running"):
        # By primary key: each row's position among the sorted ids picks its values.
        ids = sorted(IDS[t] for t in traces)
        by_id = {IDS[t]: t for t in traces}
        pos = "ELT(INTERVAL(id, " + ",".join(["%s"] * len(ids)) + "), " + ",".join(["%s"] * len(ids)) + ")"
        sets, params = ["status = " + pos], ids + [status] * len(ids)
        for n, v in values.items():
            cast = "CAST(%s AS SIGNED)" if n == "duration_ms" else "%s" if n == "result_message" else "CAST(%s AS DATETIME(6))"
            sets.append(f"{n} = COALESCE({cast % pos}, {n})")
            params += ids + [v] * len(ids)
        # One writer's results: the same from states and holder for every row, bound once.
        where = (" WHERE id IN " + listed(len(ids)) + " AND trace_id = " + pos + " AND status IN (%s, %s)"
                 " AND scheduler_instance = %s AND due_time = CAST(" + pos + " AS DATETIME(6))")
        params += ids + ids + [by_id[i] for i in ids] + ["PENDING", "RUNNING", me] + ids + [due] * len(ids)
        matched = cur.execute("UPDATE job_execution SET " + ", ".join(sets) + where, params)
        assert matched == len(traces), (matched, len(traces))
        return
    if mode == "before":
        cur.execute("SELECT status, scheduler_instance, due_time, trace_id FROM job_execution FORCE INDEX (uk_trace_id) "
                    "WHERE trace_id IN " + listed(len(traces)) + " FOR UPDATE", traces)
        cur.fetchall()
        guard, guards = [], []
    else:
        guard = ["from_0", "from_1", "held_by", "held_due"]
        guards = ["PENDING", "RUNNING", me, due]
    names = ["trace_id", "status"] + list(values) + guard
    first = "SELECT " + ", ".join(f"%s AS {n}" for n in names)
    rest = "SELECT " + ", ".join(["%s"] * len(names))
    derived = " UNION ALL ".join([first] + [rest] * (len(traces) - 1))
    sets = ", ".join(["e.status = v.status"] + [f"e.{n} = COALESCE(v.{n}, e.{n})" for n in values])
    where = (" WHERE e.status IN (v.from_0, v.from_1) AND (v.held_by IS NULL OR "
             "(e.scheduler_instance = v.held_by AND e.due_time = v.held_due))") if guard else ""
    matched = cur.execute("UPDATE (" + derived + ") v STRAIGHT_JOIN job_execution e FORCE INDEX (uk_trace_id) "
                          "ON e.trace_id = v.trace_id COLLATE utf8mb4_bin SET " + sets + where,
                          [v for t in traces for v in [t, status] + list(values.values()) + guards])
    assert matched == len(traces), (matched, len(traces))


conn = pymysql.connect(host="127.0.0.1", user="root", database=db, autocommit=False)
cur = conn.cursor()
me, executor = "10.0.0.1:8080", "127.0.0.1:9999"
base = time.time()
cpu0, wall0, fires = cpu(), time.time(), 0
for second in range(seconds):
    fire = base + second
    if os.environ["WRITE_COST_TRACES"] == "timed":
        batch = [(f"job-{j:05d}", f"{int(fire):08x}" + uuid.uuid4().hex[8:]) for j in range(rate)]
    else:
        batch = [(f"job-{j:05d}", uuid.uuid4().hex) for j in range(rate)]
    batch = [(job, trace, f"{job}:{int(fire * 1000)}:0-0") for job, trace in batch]
    # Ahead of the instant: the claims (and the PENDING or planned rows), FIRE_BATCH fires a
    # transaction.
    for i in range(0, rate, FIRE_BATCH):
        chunk = batch[i:i + FIRE_BATCH]
        if mode == "once":
            cur.execute(
                "INSERT INTO job_fire (job_name, fire_time, scheduler_instance, created_at, plan) VALUES " + marks(len(chunk), 5),
                [v for job, trace, _ in chunk for v in (job, at(fire), me, at(fire - 1.5), f"{trace} 0-0/1 {executor}")])
        elif CLAIMS:
            cur.execute(
                "INSERT INTO job_fire (job_name, fire_time, scheduler_instance, created_at) VALUES " + marks(len(chunk), 4),
                [v for job, _, _ in chunk for v in (job, at(fire), me, at(fire - 1.5))])
        if mode in ("today", "joined", "running", "before"):
            cur.execute(
                "INSERT INTO job_execution (execution_id, trace_id, job_name, trigger_type, fire_time, scheduler_instance, executor_instance, shard_start, shard_end, shard_count, trigger_time, due_time, status) VALUES " + marks(len(chunk), 13)
                + ("" if mode == "before" else " RETURNING id, trace_id"),
                [v for job, trace, eid in chunk for v in (eid, trace, job, "CRON", at(fire), me, executor, 0, 0, 1, at(fire - 1.5), at(fire), "PENDING")])
            if mode == "before":
                cur.execute("SELECT id, trace_id FROM job_execution WHERE trace_id IN " + listed(len(chunk)), [t for _, t, _ in chunk])
            for row_id, trace in cur.fetchall():
                IDS[trace] = row_id
        elif mode == "side-table":
            cur.execute(
                "INSERT INTO execution_plan (execution_id, trace_id, job_name, fire_time, scheduler_instance, executor_instance, shard_start, shard_end, shard_count, trigger_time, due_time) VALUES " + marks(len(chunk), 11),
                [v for job, trace, eid in chunk for v in (eid, trace, job, at(fire), me, executor, 0, 0, 1, at(fire - 1.5), at(fire))])
        conn.commit()
    # After the calls: the results, RESULT_BATCH a transaction.
    for i in range(0, rate, RESULT_BATCH):
        chunk = batch[i:i + RESULT_BATCH]
        traces = [t for _, t, _ in chunk]
        if mode == "running":
            compare_and_set(traces, "RUNNING", {"start_time": at(fire)}, at(fire))
            conn.commit()
        if mode in ("today", "joined", "running", "before"):
            compare_and_set(traces, "SUCCESS", {"start_time": at(fire), "finish_time": at(fire + 0.01),
                                                "duration_ms": 10, "result_message": "ok"}, at(fire))
        else:
            if mode == "side-table":
                cur.execute("SELECT trace_id, scheduler_instance, due_time FROM execution_plan WHERE trace_id IN " + listed(len(chunk)) + " FOR UPDATE", traces)
                cur.fetchall()
                cur.execute("DELETE FROM execution_plan WHERE trace_id IN " + listed(len(chunk)), traces)
            cur.execute(
                "INSERT INTO job_execution (execution_id, trace_id, job_name, trigger_type, fire_time, scheduler_instance, executor_instance, shard_start, shard_end, shard_count, trigger_time, due_time, start_time, finish_time, duration_ms, status, result_message) VALUES " + marks(len(chunk), 17),
                [v for job, trace, eid in chunk for v in (eid, trace, job, "CRON", at(fire), me, executor, 0, 0, 1, at(fire - 1.5), at(fire), at(fire), at(fire + 0.01), 10, "SUCCESS", "ok")])
        conn.commit()
    fires += rate
spent, wall = cpu() - cpu0, time.time() - wall0
print(f"| {round_} | {mode} | {fires} | {wall:.1f} s | {spent:.2f} s | {1e6 * spent / fires:.1f} µs |")
EOF
    done
done
