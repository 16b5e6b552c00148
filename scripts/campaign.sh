#!/usr/bin/env bash
# Runs the fault campaign (tests/campaign) over many seeds and tabulates what it found: for
# each invariant, how many seeds violated it and how many violations there were in all.
#
#   scripts/campaign.sh [SEEDS] [SECONDS]     e.g. scripts/campaign.sh 1-50 300
#
# SEEDS is a list (1,2,3) or a range (1-50); SECONDS the length of each seed's fault phase
# (default 300). Every seed's result is appended as one JSON line to
# $JOBFLOW_CAMPAIGN_REPORT (default target/campaign/report-<date>.jsonl); the table is
# printed at the end. Needs MariaDB and rnacos, as the cluster suite does.
#
# CAMPAIGN_GALERA=proxy|multi-primary runs the seeds on the three-node Galera cluster of
# scripts/galera.sh (started here when it is not up) instead of the MariaDB server, with database
# node faults beside the others (tests/campaign/galera.rs): `proxy`, every scheduler through
# HAProxy to one writer; `multi-primary`, each scheduler writing to its own node. Seeds then run
# one at a time (they share the cluster) and each plans 100 one-second burst jobs
# (CAMPAIGN_BURST=N to change it); CAMPAIGN_FAULTS=database keeps only the node faults, to
# measure what a node's loss alone costs. Needs root for the partitions (iptables).
#
# CAMPAIGN_PARALLEL=N runs N seeds at once (default 1: each seed has its own rnacos, database
# and ports, so they do not meet, but they share the cores); CAMPAIGN_RELEASE=1 builds the
# schedulers and the harness with optimisations, which leaves room for several at once.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

seeds="${1:-1-50}"
seconds="${2:-300}"
if [[ "$seeds" =~ ^([0-9]+)-([0-9]+)$ ]]; then
    seeds="$(seq -s, "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}")"
fi
report="${JOBFLOW_CAMPAIGN_REPORT:-target/campaign/report-$(date +%Y%m%dT%H%M%S).jsonl}"
mkdir -p "$(dirname "$report")"

ensure_mariadb
ensure_rnacos
export JOBFLOW_TEST_MYSQL_URL="$MYSQL_URL"

parallel="${CAMPAIGN_PARALLEL:-1}"
if [[ -n "${CAMPAIGN_GALERA:-}" ]]; then
    # One cluster: a seed's node faults would land on the others' runs.
    parallel=1
    scripts/galera.sh start >/dev/null
    export JOBFLOW_CAMPAIGN_GALERA="$CAMPAIGN_GALERA"
    [[ -n "${CAMPAIGN_BURST:-}" ]] && export JOBFLOW_CAMPAIGN_BURST="$CAMPAIGN_BURST"
    [[ -n "${CAMPAIGN_FAULTS:-}" ]] && export JOBFLOW_CAMPAIGN_FAULTS="$CAMPAIGN_FAULTS"
fi
if (( parallel > 1 )); then
    # Each seed holds about 60 connections (three schedulers' pools, the harness): MariaDB's
    # default 151 refused the fourth seed's.
    mariadb --protocol=tcp -h 127.0.0.1 -u root \
        -e "SET GLOBAL max_connections = GREATEST(@@max_connections, $((100 * parallel)))" \
        || log "could not raise max_connections; seeds may be refused connections"
fi
profile=()
[[ "${CAMPAIGN_RELEASE:-0}" == 1 ]] && profile=(--release)
log "fault campaign: seeds $seeds, $seconds s of faults each, $parallel at once; results in $report"
cargo test --locked "${profile[@]}" --test campaign --no-run
# Each seed on its own, so a seed that fails does not stop the others; its output in a log
# beside the report.
logs="${report%.jsonl}-logs"
mkdir -p "$logs"
for seed in ${seeds//,/ }; do
    while (( $(jobs -rp | wc -l) >= parallel )); do
        wait -n || true
    done
    (
        JOBFLOW_CAMPAIGN_SEEDS="$seed" JOBFLOW_CAMPAIGN_SECONDS="$seconds" JOBFLOW_CAMPAIGN_REPORT="$report" \
            cargo test --locked "${profile[@]}" --test campaign campaign -- --exact --nocapture \
            > "$logs/seed-$seed.log" 2>&1 || true
        tail -n 4 "$logs/seed-$seed.log" | head -n 1
        log "seed $seed done"
    ) &
done
wait

python3 - "$report" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
if not lines:
    sys.exit("no seed finished")
names = list(lines[0]["violations"])
print(f"\n{len(lines)} seeds of {lines[0]['seconds']} s of faults on {lines[0].get('database') or 'mariadb'}")
print(f"{'invariant':<22} {'seeds':>6} {'violations':>11}  seeds with violations")
for n in names:
    hit = [l["seed"] for l in lines if l["violations"][n] > 0]
    total = sum(l["violations"][n] for l in lines)
    print(f"{n:<22} {len(hit):>6} {total:>11}  {','.join(map(str, hit))}")
fires = sum(l["stats"]["fires_checked"] for l in lines)
delivered = sum(l["stats"]["fires_delivered"] for l in lines)
worst = max(lines, key=lambda l: l["stats"]["worst_delay_after_fault_ms"])
print(f"fires checked {fires}, delivered {delivered}; "
      f"worst first call after a fault {worst['stats']['worst_delay_after_fault_ms']} ms (seed {worst['seed']})")
for key, title in (("worst_delay_by_fault", "fault"), ("worst_delay_by_policy", "policy")):
    most = {}
    for l in lines:
        for k, ms in l["stats"].get(key, {}).items():
            most[k] = max(most.get(k, 0), ms)
    print(f"worst first call by {title}: " + ", ".join(f"{k} {ms} ms" for k, ms in sorted(most.items())))
EOF
