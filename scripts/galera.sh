#!/usr/bin/env bash
# A three-node MariaDB Galera cluster and an HAProxy in front of it, all on 127.0.0.1, for
# running JobFlow's Galera tests (the fault campaign kills, restarts and partitions nodes
# through this script) and for trying JobFlow on a Galera cluster locally. Uses Debian's
# packages: mariadb-server 10.11 (mariadbd, mariadb-install-db), galera-4, rsync (state
# snapshot transfer) and haproxy (installed with apt-get when missing and running as root).
#
#   scripts/galera.sh start           fresh cluster: bootstrap node 1, join 2 and 3 (rsync SST),
#                                     wait for all three Synced, start HAProxy, print the URLs.
#                                     A no-op (just prints the URLs) if it is already up and healthy.
#   scripts/galera.sh stop [N]        stop everything (HAProxy, nodes, partitions), or node N alone
#                                     (a clean shutdown: the node leaves the cluster)
#   scripts/galera.sh kill N          kill -9 node N's mariadbd (and its SST helpers, if any)
#   scripts/galera.sh restart N       (re)start node N, which rejoins the running cluster by IST or
#                                     SST, and wait for it to be Synced; stops it first if running.
#                                     With no other node running it bootstraps a new cluster instead.
#   scripts/galera.sh partition N     cut node N off the others' replication traffic (SQL still works)
#   scripts/galera.sh heal [N]        undo partition N (every partition without N)
#   scripts/galera.sh bootstrap N     make node N's component Primary (pc.bootstrap=YES): the way
#                                     out after quorum is lost (e.g. two of three nodes killed)
#   scripts/galera.sh status          one line per node and one for the proxy
#   scripts/galera.sh urls            the URLs, one "name url" per line, as start prints them
#
# Clients connect as root without a password over TCP: mysql://root@127.0.0.1:PORT.
#
# Environment:
#   GALERA_DIR         all state: datadirs, configs, sockets, pid files, logs
#                      (default ${TMPDIR:-/tmp}/jobflow-galera). `start` wipes the nodes' data;
#                      `stop` keeps the logs for a post-mortem.
#   GALERA_PORT        base port (default 13306). With base P, node N (1..3) uses
#                        SQL          P + N - 1        13306 13307 13308
#                        replication  P + 1260 + N     14567 14568 14569  (gmcast.listen_addr)
#                        IST          P + 1270 + N     14577 14578 14579  (ist.recv_addr)
#                        SST (rsync)  P + 1280 + N     14587 14588 14589  (wsrep_sst_receive_address)
#   GALERA_PROXY_PORT  HAProxy (default P + 10 = 13316); its admin socket is $GALERA_DIR/haproxy.sock
#   GALERA_PARTITION   how `partition` cuts a node off (default auto: iptables when usable, else isolate):
#                        iptables  drop the node's replication/IST/SST packets on lo (needs root, the
#                                  iptables command and cgroup v2: the node runs in its own cgroup,
#                                  which is how its outgoing connections are recognised). A real,
#                                  silent partition; the node's SQL port keeps answering. Survives
#                                  kill/restart of the node until `heal`.
#                        isolate   SET GLOBAL wsrep_provider_options='gmcast.isolate=1': Galera closes
#                                  the node's group connections and refuses new ones. Same outcome
#                                  (node non-Primary, the others carry on), but connections are
#                                  closed rather than silently dropped. Cleared by a restart.
#                        sigstop   SIGSTOP the node (heal: SIGCONT): it freezes, SQL included, so
#                                  clients hang instead of getting errors. Cleared by kill/restart.
#   GALERA_TIMEOUT     seconds to wait for a node to become Synced (default 120)
#
# Failure detection: evs.suspect_timeout=PT2S, evs.inactive_timeout=PT4S (keepalives every 0.5 s)
# instead of Galera's 5 s / 15 s, so a killed or cut-off node leaves the cluster within about
# 2-4 s. HAProxy sends every connection to node 1; nodes 2 and 3 are `backup` servers (the first
# healthy one takes all the traffic). Its health check runs $GALERA_DIR/haproxy-check.sh, which
# asks the node for wsrep_local_state and passes only on 4 (Synced): a plain TCP check or
# `option mysql-check` only sees that mariadbd accepts connections, so it would keep sending
# traffic to a node that is partitioned away (non-Primary, refusing queries with error 1047) or
# still joining. Checked every 1 s (250 ms while changing state), down after 2 failures, up after
# 3 passes; a server marked down has its client connections closed (on-marked-down
# shutdown-sessions) so pools reconnect to the backup.
#
# What clients see (MariaDB 10.11.19, galera-4 26.4.23, observed with this script):
#   - a node outside the Primary Component (partitioned, or the last one standing) refuses
#     anything touching a table: ERROR 1047 (08S01) "WSREP has not yet prepared node for
#     application use" (SELECT 1 still works; SET SESSION wsrep_dirty_reads=ON allows reads);
#   - a commit in flight when its node loses the Primary Component blocks until the node notices
#     (~2-3 s), then fails with ERROR 1180 (HY000) "Error while appending streaming replication
#     fragment(provider status: Not connected to Primary Component)";
#   - two nodes writing the same row: the loser gets ERROR 1213 (40001) "Deadlock found when
#     trying to get lock; try restarting transaction", on COMMIT (certification failure) or on
#     the statement it is running (brute-force abort by the winner's replicated write);
#   - through the proxy, while node 1 has just died: ERROR 2013 "Lost connection to server at
#     'handshake: reading initial communication packet'" until HAProxy marks it down (~1 s);
#   - GET_LOCK() works but is local to a node: sessions on two nodes can hold the same lock.
#
# Files under GALERA_DIR: nodeN/{my.cnf,data/,error.log,mariadbd.sock,pid,recover.log},
# haproxy.cfg, haproxy.log (server up/down events, timestamped), haproxy.stderr, haproxy.sock,
# haproxy-check.sh, template/ (mariadb-install-db's output, reused by every start).
set -euo pipefail

DIR="${GALERA_DIR:-${TMPDIR:-/tmp}/jobflow-galera}"
BASE="${GALERA_PORT:-13306}"
PROXY_PORT="${GALERA_PROXY_PORT:-$((BASE + 10))}"
TIMEOUT="${GALERA_TIMEOUT:-120}"
PARTITION_MODE="${GALERA_PARTITION:-auto}"
NODES=(1 2 3)
MARIADBD=/usr/sbin/mariadbd
PROVIDER=/usr/lib/galera/libgalera_smm.so
# As root, mariadbd runs as mysql (it drops privileges itself), not as root: the rsync daemon
# that receives an SST, started by the joiner, switches to `nobody` when run by root and could
# not write the datadir. Otherwise it runs as whoever runs this script.
RUN_AS=$(id -un)
USER_ARGS=()
if [ "$(id -u)" = 0 ]; then
    RUN_AS=mysql
    USER_ARGS=(--user=mysql)
fi

sql_port() { echo $((BASE + $1 - 1)); }
gcomm_port() { echo $((BASE + 1260 + $1)); }
ist_port() { echo $((BASE + 1270 + $1)); }
sst_port() { echo $((BASE + 1280 + $1)); }
node_dir() { echo "$DIR/node$1"; }

log() { printf '==> %s\n' "$*" >&2; }
die() { printf 'galera.sh: %s\n' "$*" >&2; exit 1; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

check_node_arg() {
    [[ "${1:-}" =~ ^[123]$ ]] || die "expected a node number 1, 2 or 3, got '${1:-}'"
}

# ---------------------------------------------------------------------------------------------
# Processes

# The pid of node N's mariadbd if it is running (verified against its command line, so a stale
# pid file never names somebody else's process).
node_pid() {
    local pidfile pid
    pidfile="$(node_dir "$1")/pid" # written by launch_node (mariadbd.pid is mariadbd's own)
    [ -f "$pidfile" ] || return 1
    pid=$(cat "$pidfile" 2>/dev/null) || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    grep -qF -- "$(node_dir "$1")/my.cnf" "/proc/$pid/cmdline" 2>/dev/null || return 1
    # A zombie (killed, not yet reaped) is not running.
    [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
    echo "$pid"
}

proxy_pid() {
    local pid
    pid=$(cat "$DIR/haproxy.pid" 2>/dev/null) || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] || return 1
    grep -qF -- "$DIR/haproxy.cfg" "/proc/$pid/cmdline" 2>/dev/null || return 1
    echo "$pid"
}

# Helper processes working on PATH (a node's directory, or all of GALERA_DIR): the SST script,
# the rsync daemon and rsync clients it runs, HAProxy and its check script. Only those programs,
# and only when their command line names a file under PATH, so nobody's `tail -f` is touched.
helper_pids() {
    local path="$1/" p cmd
    for p in /proc/[0-9]*; do
        # (2>/dev/null first: the process may be gone by now.)
        cmd=$(tr '\0' ' ' 2>/dev/null <"$p/cmdline") || continue
        [[ "$cmd" == *"$path"* ]] || continue
        case "$(cat "$p/comm" 2>/dev/null)" in
            mariadbd | rsync | wsrep_sst_* | haproxy*) echo "${p#/proc/}" ;;
            bash | sh | dash) if [[ "$cmd" == *wsrep_sst_* ]]; then echo "${p#/proc/}"; fi ;;
        esac
    done
}

# Sends SIGNAL to PIDS and waits up to SECONDS for them to be gone; then SIGKILL.
terminate() {
    local sig=$1 seconds=$2 pid
    shift 2
    [ $# -gt 0 ] || return 0
    kill "-$sig" "$@" 2>/dev/null || true
    local deadline=$((SECONDS + seconds))
    while [ $SECONDS -lt $deadline ]; do
        local alive=0
        for pid in "$@"; do
            if [ -d "/proc/$pid" ] && [ "$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)" != Z ]; then
                alive=1
            fi
        done
        [ $alive = 1 ] || return 0
        sleep 0.1
    done
    kill -KILL "$@" 2>/dev/null || true
    sleep 0.2
}

# ---------------------------------------------------------------------------------------------
# cgroups, so that iptables can tell a node's sockets apart (all nodes share 127.0.0.1)

CG_ROOT=""
if [ "$(id -u)" = 0 ]; then
    if [ "$(stat -fc %T /sys/fs/cgroup 2>/dev/null)" = cgroup2fs ]; then
        CG_ROOT=/sys/fs/cgroup
    elif [ "$(stat -fc %T /sys/fs/cgroup/unified 2>/dev/null)" = cgroup2fs ]; then
        CG_ROOT=/sys/fs/cgroup/unified
    fi
fi
CG_REL="jobflow-galera-$BASE"

# The cgroup node N's processes join (relative to the cgroup v2 root), created if possible.
node_cgroup() {
    [ -n "$CG_ROOT" ] || return 1
    mkdir -p "$CG_ROOT/$CG_REL/node$1" 2>/dev/null || return 1
    echo "$CG_REL/node$1"
}

remove_cgroups() {
    [ -n "$CG_ROOT" ] && [ -d "$CG_ROOT/$CG_REL" ] || return 0
    rmdir "$CG_ROOT/$CG_REL"/node* "$CG_ROOT/$CG_REL" 2>/dev/null || true
}

# ---------------------------------------------------------------------------------------------
# Nodes

write_node_config() {
    local n=$1 d
    d=$(node_dir "$n")
    local peers
    peers="127.0.0.1:$(gcomm_port 1),127.0.0.1:$(gcomm_port 2),127.0.0.1:$(gcomm_port 3)"
    cat >"$d/my.cnf" <<EOF
# Node $n of the JobFlow test Galera cluster (written by scripts/galera.sh; read with
# --defaults-file, so no other option file is used).
[mysqld]
datadir=$d/data
socket=$d/mariadbd.sock
pid-file=$d/mariadbd.pid
log-error=$d/error.log
port=$(sql_port "$n")
bind-address=127.0.0.1
skip-name-resolve
max-connections=500
performance-schema=OFF

# Small, and fast rather than durable: Galera replicates every commit anyway.
innodb-buffer-pool-size=64M
innodb-log-file-size=32M
innodb-flush-log-at-trx-commit=2

# What Galera needs.
binlog-format=ROW
default-storage-engine=InnoDB
innodb-autoinc-lock-mode=2

wsrep-on=ON
wsrep-provider=$PROVIDER
wsrep-cluster-name=jobflow-galera-$BASE
wsrep-cluster-address=gcomm://$peers
wsrep-node-name=node$n
wsrep-node-address=127.0.0.1:$(gcomm_port "$n")
wsrep-sst-method=rsync
wsrep-sst-receive-address=127.0.0.1:$(sst_port "$n")
wsrep-slave-threads=2
# gcache: 32M of write sets kept for IST. evs: keepalive every 0.5 s, a silent peer suspected
# after 2 s and declared dead after 4 s (defaults 1 s, 5 s, 15 s); a new view is installed
# within 2 s (default 7.5 s).
wsrep-provider-options="gmcast.listen_addr=tcp://127.0.0.1:$(gcomm_port "$n"); ist.recv_addr=127.0.0.1:$(ist_port "$n"); gcache.size=32M; evs.keepalive_period=PT0.5S; evs.inactive_check_period=PT0.5S; evs.suspect_timeout=PT2S; evs.inactive_timeout=PT4S; evs.install_timeout=PT2S; evs.join_retrans_period=PT0.5S; gmcast.peer_timeout=PT2S"
EOF
}

# Starts node N's mariadbd in the background (detached: it outlives this script and does not
# hold the caller's stdout open). Extra arguments go to mariadbd.
launch_node() {
    local n=$1 d cg=""
    shift
    d=$(node_dir "$n")
    cg=$(node_cgroup "$n") || cg=""
    touch "$d/error.log"
    [ "$RUN_AS" = "$(id -un)" ] || chown "$RUN_AS:" "$d/error.log"
    (
        # Join the node's cgroup before exec, so every socket it opens belongs to it.
        if [ -n "$cg" ]; then echo "$BASHPID" >"$CG_ROOT/$cg/cgroup.procs" 2>/dev/null || true; fi
        # Not a process group leader, so setsid does not fork: $! below is mariadbd's pid.
        # fd 9 is start/stop's lock: not to be held by the node.
        exec setsid "$MARIADBD" --defaults-file="$d/my.cnf" "${USER_ARGS[@]}" "$@" \
            </dev/null >>"$d/error.log" 2>&1 9>&-
    ) &
    local pid=$! i
    echo "$pid" >"$d/pid"
    # Until the exec, the pid is a copy of this script: wait for it to be mariadbd.
    for i in $(seq 1 50); do
        grep -qF -- "$d/my.cnf" "/proc/$pid/cmdline" 2>/dev/null && return
        sleep 0.1
    done
    fail_node "$n" "mariadbd did not start"
}

# After a crash (kill -9) grastate.dat says seqno -1: the node does not know which write sets it
# has, and would need a full SST. Like mysqld_safe, ask InnoDB (mariadbd --wsrep-recover) and
# print the --wsrep-start-position argument that lets the node rejoin by IST; nothing after a
# clean shutdown, whose grastate.dat has the position.
recovered_position_arg() {
    local n=$1 d pos
    d=$(node_dir "$n")
    grep -q '^seqno: *-1' "$d/data/grastate.dat" 2>/dev/null || return 0
    : >"$d/recover.log"
    [ "$RUN_AS" = "$(id -un)" ] || chown "$RUN_AS:" "$d/recover.log"
    "$MARIADBD" --defaults-file="$d/my.cnf" "${USER_ARGS[@]}" --wsrep-recover \
        --log-error="$d/recover.log" --skip-networking --pid-file="$d/recover.pid" \
        </dev/null >/dev/null 2>&1 9>&- || true
    pos=$(sed -n 's/.*WSREP: Recovered position: *//p' "$d/recover.log" | tail -n 1)
    if [[ "$pos" =~ ^[0-9a-f-]{36}:[0-9]+$ ]]; then
        log "node $n: recovered position $pos"
        echo "--wsrep-start-position=$pos"
    else
        log "node $n: no position recovered (see $d/recover.log): it will need a full SST"
    fi
}

# Prints "state size ready cluster_status" for node N (over its socket), or fails.
node_wsrep() {
    local d
    d=$(node_dir "$1")
    [ -S "$d/mariadbd.sock" ] || return 1
    timeout 3 mariadb --no-defaults --socket="$d/mariadbd.sock" -uroot -N -B -e \
        "SHOW GLOBAL STATUS WHERE Variable_name IN
           ('wsrep_local_state_comment', 'wsrep_cluster_size', 'wsrep_ready', 'wsrep_cluster_status')" \
        2>/dev/null | awk -F'\t' '{ v[$1] = $2 }
            END { if (!("wsrep_ready" in v)) exit 1
                  print v["wsrep_local_state_comment"], v["wsrep_cluster_size"], v["wsrep_ready"], v["wsrep_cluster_status"] }'
}

node_sql() {
    local n=$1
    shift
    mariadb --no-defaults --socket="$(node_dir "$n")/mariadbd.sock" -uroot -N -B "$@"
}

fail_node() {
    local n=$1 msg=$2
    echo "---- tail of $(node_dir "$n")/error.log ----" >&2
    tail -n 40 "$(node_dir "$n")/error.log" >&2 || true
    echo "----" >&2
    die "node $n: $msg"
}

# Waits until node N is Synced (and, given SIZE, sees a cluster of that size).
wait_synced() {
    local n=$1 size=${2:-} deadline=$((SECONDS + TIMEOUT)) st state members ready
    while :; do
        node_pid "$n" >/dev/null || fail_node "$n" "mariadbd exited"
        if st=$(node_wsrep "$n"); then
            read -r state members ready _ <<<"$st"
            if [ "$state" = Synced ] && [ "$ready" = ON ] && { [ -z "$size" ] || [ "$members" = "$size" ]; }; then
                return 0
            fi
        fi
        [ $SECONDS -lt $deadline ] || fail_node "$n" "not Synced after ${TIMEOUT}s (last: ${st:-no answer})"
        sleep 0.2
    done
}

# Stops node N cleanly (SIGTERM: it leaves the cluster), then its helpers.
stop_node() {
    local n=$1 pid d
    d=$(node_dir "$n")
    rm -f "$d/partitioned.isolate" "$d/partitioned.sigstop"
    if pid=$(node_pid "$n"); then
        kill -CONT "$pid" 2>/dev/null || true # a SIGSTOPped node would never act on SIGTERM
        terminate TERM 30 "$pid"
    fi
    # shellcheck disable=SC2046
    terminate TERM 5 $(helper_pids "$d")
}

# The template datadir (mariadb-install-db, once): node 1 starts from a copy of it; nodes 2 and
# 3 start empty and receive node 1's data by SST.
ensure_template() {
    local tpl="$DIR/template" version
    version=$("$MARIADBD" --version)
    if [ -f "$tpl/.version" ] && [ "$(cat "$tpl/.version")" = "$version" ]; then
        return
    fi
    log "mariadb-install-db (once; kept in $tpl)"
    rm -rf "$tpl"
    mkdir -p "$tpl"
    mariadb-install-db --no-defaults --user="$RUN_AS" --datadir="$tpl/data" \
        --auth-root-authentication-method=normal --skip-test-db \
        >"$tpl/install.log" 2>&1 || { tail -n 30 "$tpl/install.log" >&2; die "mariadb-install-db failed"; }
    echo "$version" >"$tpl/.version"
}

# ---------------------------------------------------------------------------------------------
# HAProxy

ensure_haproxy() {
    [ -x /usr/sbin/haproxy ] && return
    # Another process may be installing it right now: give apt a moment.
    local i
    for i in $(seq 1 60); do
        pgrep -x 'apt-get|apt|dpkg' >/dev/null 2>&1 || break
        [ -x /usr/sbin/haproxy ] && return
        [ "$i" = 1 ] && log "waiting for a running apt/dpkg (haproxy may be being installed)"
        sleep 2
    done
    [ -x /usr/sbin/haproxy ] && return
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing haproxy"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq haproxy >/dev/null
    fi
    [ -x /usr/sbin/haproxy ] || die "haproxy is needed: apt-get install haproxy"
}

write_proxy_config() {
    cat >"$DIR/haproxy-check.sh" <<'EOF'
#!/bin/sh
# HAProxy external check (written by scripts/galera.sh): arguments are proxy address, proxy
# port, server address, server port. Healthy only if the node is Synced (wsrep_local_state 4).
state=$(mariadb --no-defaults --protocol=tcp -h "$3" -P "$4" -uroot --connect-timeout=1 -N -B \
    -e "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'WSREP_LOCAL_STATE'" \
    2>/dev/null) || exit 1
[ "$state" = 4 ]
EOF
    chmod +x "$DIR/haproxy-check.sh"
    cat >"$DIR/haproxy.cfg" <<EOF
# Written by scripts/galera.sh: all connections to node 1, nodes 2 and 3 as backups.
global
    maxconn 4000
    stats socket $DIR/haproxy.sock mode 600 level admin
    # The health check runs a command (haproxy-check.sh), which needs these two.
    external-check
    insecure-fork-wanted
    # Server state changes, with timestamps (the frontend logs no connections): see haproxy.log.
    log stdout format iso local0 notice

defaults
    mode tcp
    timeout connect 2s
    # Pools keep idle connections for a long time: do not cut them.
    timeout client 8h
    timeout server 8h
    timeout check 2s
    retries 2
    option redispatch

frontend galera
    bind 127.0.0.1:$PROXY_PORT
    no log
    default_backend galera

backend galera
    log global
    option external-check
    external-check path "/usr/bin:/bin:/usr/sbin:/sbin"
    external-check command $DIR/haproxy-check.sh
    default-server check inter 1s fastinter 250ms downinter 1s fall 2 rise 3 on-marked-down shutdown-sessions
    server node1 127.0.0.1:$(sql_port 1)
    server node2 127.0.0.1:$(sql_port 2) backup
    server node3 127.0.0.1:$(sql_port 3) backup
EOF
}

start_proxy() {
    write_proxy_config
    /usr/sbin/haproxy -c -q -f "$DIR/haproxy.cfg" >/dev/null || die "invalid $DIR/haproxy.cfg"
    # stdout: the timestamped event log; stderr: start-up errors, and the same events again.
    rm -f "$DIR/haproxy.log" "$DIR/haproxy.stderr"
    (exec setsid /usr/sbin/haproxy -db -f "$DIR/haproxy.cfg" </dev/null >"$DIR/haproxy.log" 2>"$DIR/haproxy.stderr" 9>&-) &
    echo $! >"$DIR/haproxy.pid"
    local deadline=$((SECONDS + 15))
    until mariadb --no-defaults --protocol=tcp -h127.0.0.1 -P"$PROXY_PORT" -uroot --connect-timeout=1 \
        -N -B -e 'SELECT 1' >/dev/null 2>&1; do
        proxy_pid >/dev/null || { tail -n 20 "$DIR/haproxy.stderr" >&2; die "haproxy exited"; }
        [ $SECONDS -lt $deadline ] || { tail -n 20 "$DIR/haproxy.stderr" >&2; die "no answer through haproxy on $PROXY_PORT"; }
        sleep 0.2
    done
}

# "node1=UP node2=UP node3=UP" from HAProxy's admin socket.
proxy_servers() {
    [ -S "$DIR/haproxy.sock" ] && command -v socat >/dev/null || return 1
    echo "show stat" | timeout 2 socat - "UNIX-CONNECT:$DIR/haproxy.sock" 2>/dev/null \
        | awk -F, '$1 == "galera" && $2 ~ /^node/ { printf "%s%s=%s", sep, $2, $18; sep = " " }'
}

stop_proxy() {
    local pid
    if pid=$(proxy_pid); then terminate TERM 5 "$pid"; fi
    rm -f "$DIR/haproxy.pid"
}

# ---------------------------------------------------------------------------------------------
# Partitions

IPT_CHAIN_PREFIX="galera-$BASE-n" # + N; iptables chain names are limited to 28 characters

all_galera_ports() {
    local n ports=()
    for n in "${NODES[@]}"; do ports+=("$(gcomm_port "$n")" "$(ist_port "$n")" "$(sst_port "$n")"); done
    local IFS=,
    echo "${ports[*]}"
}

iptables_usable() {
    [ -n "$CG_ROOT" ] && command -v iptables >/dev/null && iptables -w -S OUTPUT >/dev/null 2>&1
}

partition_mode() {
    case "$PARTITION_MODE" in
        iptables | isolate | sigstop) echo "$PARTITION_MODE" ;;
        auto) if iptables_usable; then echo iptables; else echo isolate; fi ;;
        *) die "GALERA_PARTITION must be auto, iptables, isolate or sigstop" ;;
    esac
}

partition_node() {
    local n=$1 mode d pid
    d=$(node_dir "$n")
    mode=$(partition_mode)
    case "$mode" in
        iptables)
            iptables_usable || die "iptables partitions need root, iptables and cgroup v2"
            local chain="$IPT_CHAIN_PREFIX$n" cg mark=$(((BASE << 4) | n))
            cg=$(node_cgroup "$n") || die "no cgroup for node $n"
            pid=$(node_pid "$n") && ! grep -qxF "$pid" "$CG_ROOT/$cg/cgroup.procs" &&
                die "node $n (pid $pid) is not in cgroup $cg (started by an older galera.sh?)"
            iptables -w -S "$chain" >/dev/null 2>&1 && { log "node $n is already partitioned"; return; }
            iptables -w -N "$chain"
            # Connections the node's own sockets send on (it connecting out, or answering): mark
            # them, so both directions can be dropped.
            iptables -w -A "$chain" -m cgroup --path "$cg" -j CONNMARK --set-mark "$mark"
            iptables -w -A "$chain" -p tcp -m connmark --mark "$mark" -m multiport --ports "$(all_galera_ports)" -j DROP
            # Anything to or from the node's own replication, IST and SST ports (new connections
            # from the others included).
            iptables -w -A "$chain" -p tcp -m multiport --ports "$(gcomm_port "$n"),$(ist_port "$n"),$(sst_port "$n")" -j DROP
            iptables -w -I OUTPUT -o lo -j "$chain"
            ;;
        isolate)
            node_pid "$n" >/dev/null || die "node $n is not running"
            node_sql "$n" -e "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'"
            touch "$d/partitioned.isolate"
            ;;
        sigstop)
            pid=$(node_pid "$n") || die "node $n is not running"
            kill -STOP "$pid"
            touch "$d/partitioned.sigstop"
            ;;
    esac
    log "node $n partitioned ($mode)"
}

heal_node() {
    local n=$1 d pid chain="$IPT_CHAIN_PREFIX$1" healed=""
    d=$(node_dir "$n")
    if command -v iptables >/dev/null && iptables -w -S "$chain" >/dev/null 2>&1; then
        while iptables -w -D OUTPUT -o lo -j "$chain" 2>/dev/null; do :; done
        iptables -w -F "$chain"
        iptables -w -X "$chain"
        healed=iptables
    fi
    if [ -f "$d/partitioned.isolate" ]; then
        node_pid "$n" >/dev/null && node_sql "$n" -e "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'"
        rm -f "$d/partitioned.isolate"
        healed=isolate
    fi
    if [ -f "$d/partitioned.sigstop" ]; then
        if pid=$(node_pid "$n"); then kill -CONT "$pid"; fi
        rm -f "$d/partitioned.sigstop"
        healed=sigstop
    fi
    [ -z "$healed" ] || log "node $n healed ($healed)"
}

partition_of() {
    local n=$1 d
    d=$(node_dir "$n")
    if command -v iptables >/dev/null && iptables -w -S "$IPT_CHAIN_PREFIX$n" >/dev/null 2>&1; then
        echo iptables
    elif [ -f "$d/partitioned.isolate" ]; then
        echo isolate
    elif [ -f "$d/partitioned.sigstop" ]; then
        echo sigstop
    else
        return 1
    fi
}

# ---------------------------------------------------------------------------------------------
# Commands

print_urls() {
    local n
    for n in "${NODES[@]}"; do echo "node$n mysql://root@127.0.0.1:$(sql_port "$n")"; done
    echo "proxy mysql://root@127.0.0.1:$PROXY_PORT"
}

cluster_healthy() {
    local n st state members
    proxy_pid >/dev/null || return 1
    for n in "${NODES[@]}"; do
        st=$(node_wsrep "$n") || return 1
        read -r state members _ <<<"$st"
        [ "$state" = Synced ] && [ "$members" = 3 ] || return 1
    done
}

stop_all() {
    local n
    stop_proxy
    for n in "${NODES[@]}"; do heal_node "$n"; done
    # All nodes at once: each leaves the cluster cleanly.
    local pids=() pid
    for n in "${NODES[@]}"; do
        if pid=$(node_pid "$n"); then
            kill -CONT "$pid" 2>/dev/null || true
            pids+=("$pid")
        fi
    done
    terminate TERM 30 "${pids[@]}"
    # shellcheck disable=SC2046
    terminate TERM 5 $(helper_pids "$DIR")
    remove_cgroups
}

# Fails, naming the listener, if a port the cluster needs is taken (another server, or a
# cluster of another GALERA_DIR with the same GALERA_PORT).
check_ports_free() {
    command -v ss >/dev/null || return 0
    local n ports=("$PROXY_PORT") p busy
    for n in "${NODES[@]}"; do ports+=("$(sql_port "$n")" "$(gcomm_port "$n")" "$(ist_port "$n")" "$(sst_port "$n")"); done
    for p in "${ports[@]}"; do
        busy=$(ss -Hltnp "sport = :$p" 2>/dev/null)
        [ -z "$busy" ] || die "port $p is in use (set GALERA_PORT / GALERA_PROXY_PORT): $busy"
    done
}

cmd_start() {
    local t0 n
    t0=$(now)
    if cluster_healthy; then
        log "already running"
        print_urls
        return
    fi
    ensure_haproxy
    command -v rsync >/dev/null || die "rsync is needed for state transfers: apt-get install rsync"
    [ -e "$PROVIDER" ] || die "$PROVIDER is missing: apt-get install galera-4"
    stop_all
    check_ports_free
    ensure_template
    for n in "${NODES[@]}"; do
        rm -rf "$(node_dir "$n")"
        mkdir -p "$(node_dir "$n")/data"
        write_node_config "$n"
    done
    cp -a "$DIR/template/data/." "$(node_dir 1)/data/"
    if [ "$RUN_AS" != "$(id -un)" ]; then
        chown -R "$RUN_AS:" "${NODES[@]/#/$DIR/node}"
        runuser -u "$RUN_AS" -- test -w "$(node_dir 1)/data" ||
            die "user $RUN_AS cannot reach $DIR: set GALERA_DIR to a directory it can"
    fi
    trap 'echo "start failed: stopping what was started" >&2; stop_all' EXIT

    log "node 1: bootstrapping a new cluster"
    launch_node 1 --wsrep-new-cluster
    wait_synced 1
    # Clients come over TCP from 127.0.0.1 (skip-name-resolve: 'localhost' does not match).
    node_sql 1 -e "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1';
                   GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;"
    for n in 2 3; do
        log "node $n: joining (rsync SST from a synced node)"
        launch_node "$n"
        wait_synced "$n"
    done
    for n in "${NODES[@]}"; do wait_synced "$n" 3; done
    log "HAProxy on $PROXY_PORT"
    start_proxy
    trap - EXIT
    log "cluster up in $(elapsed "$t0")s"
    print_urls
}

cmd_restart() {
    local n=$1 t0 others_running=0 primary=0 m st d
    t0=$(now)
    d=$(node_dir "$n")
    [ -f "$d/my.cnf" ] || die "no node $n in $DIR: run start first"
    if node_pid "$n" >/dev/null; then
        log "node $n: stopping"
        stop_node "$n"
    fi
    # shellcheck disable=SC2046
    terminate KILL 2 $(helper_pids "$d") # SST helpers of a killed node
    rm -f "$d/partitioned.isolate" "$d/partitioned.sigstop"
    for m in "${NODES[@]}"; do
        [ "$m" != "$n" ] || continue
        if node_pid "$m" >/dev/null; then
            others_running=1
            st=$(node_wsrep "$m") && [ "$(echo "$st" | awk '{ print $4 }')" = Primary ] && primary=1
        fi
    done
    local args=()
    mapfile -t args < <(recovered_position_arg "$n")
    if [ $others_running = 0 ]; then
        # Nothing to join: start a new cluster from this node's data. After a crash Galera
        # refuses that (safe_to_bootstrap: 0) until told it is the node to bootstrap from.
        log "node $n: no other node running, bootstrapping a new cluster from it"
        [ -f "$d/data/grastate.dat" ] && sed -i 's/^safe_to_bootstrap:.*/safe_to_bootstrap: 1/' "$d/data/grastate.dat"
        launch_node "$n" --wsrep-new-cluster "${args[@]}"
    else
        # Joins through the other nodes' addresses in wsrep_cluster_address (node 1 too: only
        # `start` bootstraps it).
        [ $primary = 1 ] || log "warning: no running node is in a Primary component; node $n may wait for one (see: bootstrap N)"
        log "node $n: rejoining"
        launch_node "$n" "${args[@]}"
    fi
    if partition_of "$n" >/dev/null; then
        log "node $n is partitioned ($(partition_of "$n")): not waiting for it to sync"
        return
    fi
    wait_synced "$n"
    log "node $n Synced in $(elapsed "$t0")s"
    cmd_status
}

cmd_kill() {
    local n=$1 pid d
    d=$(node_dir "$n")
    pid=$(node_pid "$n") || die "node $n is not running"
    kill -KILL "$pid"
    # Then whatever it left running (an SST in progress: rsync daemon or client, the script).
    # shellcheck disable=SC2046
    terminate KILL 2 "$pid" $(helper_pids "$d")
    rm -f "$d/partitioned.isolate" "$d/partitioned.sigstop"
    log "node $n (pid $pid) killed"
}

cmd_bootstrap() {
    local n=$1
    node_pid "$n" >/dev/null || die "node $n is not running"
    node_sql "$n" -e "SET GLOBAL wsrep_provider_options = 'pc.bootstrap=YES'"
    wait_synced "$n"
    cmd_status
}

cmd_status() {
    local n pid st part state members ready status
    for n in "${NODES[@]}"; do
        part=$(partition_of "$n") && part=" partitioned=$part" || part=""
        if pid=$(node_pid "$n"); then
            if st=$(node_wsrep "$n"); then
                read -r state members ready status <<<"$st"
                echo "node$n port=$(sql_port "$n") pid=$pid state=$state size=$members ready=$ready status=$status$part"
            else
                echo "node$n port=$(sql_port "$n") pid=$pid state=no-answer$part"
            fi
        else
            echo "node$n port=$(sql_port "$n") pid=- state=down$part"
        fi
    done
    if pid=$(proxy_pid); then
        echo "proxy port=$PROXY_PORT pid=$pid $(proxy_servers || echo 'servers=?')"
    else
        echo "proxy port=$PROXY_PORT pid=- state=down"
    fi
}

usage() {
    sed -n '2,/^set -euo/p' "$0" | sed -e '/^set -euo/d' -e 's/^# \{0,1\}//' >&2
    exit 2
}

# Start and stop take a lock, so two of them never interleave.
with_lock() {
    mkdir -p "$DIR"
    exec 9>"$DIR/.lock"
    flock -w 300 9 || die "another galera.sh start/stop holds $DIR/.lock"
}

cmd=${1:-}
case "$cmd" in
    start) with_lock; cmd_start ;;
    stop)
        if [ -n "${2:-}" ]; then
            check_node_arg "$2"
            stop_node "$2"
        else
            [ -d "$DIR" ] || exit 0
            with_lock
            stop_all
        fi
        ;;
    kill) check_node_arg "${2:-}"; cmd_kill "$2" ;;
    restart) check_node_arg "${2:-}"; cmd_restart "$2" ;;
    partition) check_node_arg "${2:-}"; partition_node "$2" ;;
    heal)
        if [ -n "${2:-}" ]; then
            check_node_arg "$2"
            heal_node "$2"
        else
            for n in "${NODES[@]}"; do heal_node "$n"; done
        fi
        ;;
    bootstrap) check_node_arg "${2:-}"; cmd_bootstrap "$2" ;;
    status) cmd_status ;;
    urls) print_urls ;;
    *) usage ;;
esac
