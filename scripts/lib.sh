# Shared by scripts/test.sh and scripts/bench.sh: the build settings, and bringing up what the
# suites need on this machine. Expects the caller to run from the repository root under
# `set -euo pipefail`.

export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/jobflow-target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"
MYSQL_URL="${JOBFLOW_TEST_MYSQL_URL:-mysql://root@127.0.0.1:3306}"

log() { printf '==> %s\n' "$*"; }

mysql_up() {
    # Only the default local server is managed here; a custom URL must already be up.
    mariadb-admin --protocol=tcp -h127.0.0.1 -P3306 -uroot ping >/dev/null 2>&1 \
        || mysqladmin --protocol=tcp -h127.0.0.1 -P3306 -uroot ping >/dev/null 2>&1
}

ensure_mariadb() {
    if [ -n "${JOBFLOW_TEST_MYSQL_URL:-}" ]; then
        log "using MySQL at ${JOBFLOW_TEST_MYSQL_URL%%@*}@…"
        return
    fi
    if mysql_up; then
        log "MariaDB is running"
        return
    fi
    if ! command -v mariadbd >/dev/null 2>&1 && [ ! -x /usr/sbin/mariadbd ]; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            log "installing mariadb-server"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server >/dev/null
        else
            echo "MariaDB/MySQL is needed for the MySQL suite: install mariadb-server or set JOBFLOW_TEST_MYSQL_URL" >&2
            exit 1
        fi
    fi
    log "starting MariaDB"
    mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
    start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
    for _ in $(seq 1 60); do
        mysql_up && break
        sleep 0.5
    done
    if ! mysql_up; then
        # A fresh Debian install lets root in only over the socket: allow TCP with no password.
        mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket; FLUSH PRIVILEGES;" 2>/dev/null || true
    fi
    mysql_up || { echo "MariaDB did not come up on 127.0.0.1:3306" >&2; exit 1; }
}

# The benchmarks' Python venv (`$VENV`) with `module` importable, `package` installed for it
# when it is not.
bench_venv() {
    local module="$1" package="$2"
    VENV="${JOBFLOW_BENCH_VENV:-$HOME/.cache/jobflow-bench-venv}"
    if [ ! -x "$VENV/bin/python" ] || ! "$VENV/bin/python" -c "import $module" 2>/dev/null; then
        log "installing $package into $VENV"
        python3 -m venv "$VENV"
        "$VENV/bin/pip" install --quiet "$package"
    fi
}

ensure_rnacos() {
    if [ -n "${RNACOS_BIN:-}" ] && [ -x "$RNACOS_BIN" ]; then
        log "rnacos: $RNACOS_BIN"
    elif command -v rnacos >/dev/null 2>&1; then
        export RNACOS_BIN="$(command -v rnacos)"
        log "rnacos: $RNACOS_BIN"
    elif [ -x "$HOME/.cargo/bin/rnacos" ]; then
        export RNACOS_BIN="$HOME/.cargo/bin/rnacos"
        log "rnacos: $RNACOS_BIN"
    else
        log "installing rnacos (cargo install rnacos --locked; several minutes the first time)"
        cargo install rnacos --locked --quiet
        export RNACOS_BIN="$HOME/.cargo/bin/rnacos"
    fi
}

# Installs Debian's PACKAGE (as root, with apt-get) unless COMMAND is there; otherwise stops,
# saying what needs it.
apt_install_for() {
    local command=$1 package=$2 why=$3
    if command -v "$command" >/dev/null 2>&1 || { [[ "$command" == /* ]] && [ -e "$command" ]; }; then
        return
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing $package ($why)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$package" >/dev/null
    else
        echo "$command is needed for $why: install $package" >&2
        exit 1
    fi
}

ensure_python() {
    apt_install_for python3 python3 "the protocol docs test and the conformance suite"
}

ensure_promtool() {
    apt_install_for promtool prometheus "checking deploy/prometheus"
}

# The Kubernetes version whose schemas the manifests are checked against.
K8S_VERSION="${JOBFLOW_K8S_VERSION:-1.33.0}"
DEPLOY_VENV="${JOBFLOW_DEPLOY_VENV:-$HOME/.cache/jobflow-deploy-venv}"

ensure_kubernetes_validate() {
    if [ ! -x "$DEPLOY_VENV/bin/kubernetes-validate" ]; then
        log "installing kubernetes-validate into $DEPLOY_VENV"
        python3 -m venv "$DEPLOY_VENV"
        "$DEPLOY_VENV/bin/pip" install --quiet kubernetes-validate
    fi
}

ensure_java() {
    apt_install_for javac default-jdk-headless "the Java executor example"
    apt_install_for java default-jdk-headless "the Java executor example"
}

ensure_chromium() {
    apt_install_for /usr/bin/chromium chromium "the console tests"
}

# A second MariaDB that accepts TLS connections only (require_secure_transport=ON), on a free
# port with its own data directory and a CA made for this run. Sets JOBFLOW_TEST_TLS_MYSQL_URL
# and JOBFLOW_TEST_TLS_CA for tests/it/mysql_tls.rs; stop it with stop_tls_mariadb.
start_tls_mariadb() {
    TLS_DIR=$(mktemp -d "${TMPDIR:-/tmp}/jobflow-tls-mariadb.XXXXXX")
    local certs="$TLS_DIR/certs" data="$TLS_DIR/data"
    mkdir -p "$certs" "$data"
    openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=JobFlow test CA" \
        -keyout "$certs/ca-key.pem" -out "$certs/ca.pem" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj "/CN=localhost" \
        -keyout "$certs/server-key.pem" -out "$certs/server.csr" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\nbasicConstraints=CA:FALSE\n' > "$certs/ext.cnf"
    openssl x509 -req -in "$certs/server.csr" -CA "$certs/ca.pem" -CAkey "$certs/ca-key.pem" \
        -CAcreateserial -days 2 -extfile "$certs/ext.cnf" -out "$certs/server.pem" 2>/dev/null
    mariadb-install-db --no-defaults --user="$(id -un)" --datadir="$data" \
        --auth-root-authentication-method=normal >"$TLS_DIR/install.log" 2>&1
    TLS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    local user_arg=()
    [ "$(id -u)" = 0 ] && user_arg=(--user=root)
    /usr/sbin/mariadbd --no-defaults "${user_arg[@]}" --datadir="$data" \
        --bind-address=127.0.0.1 --port="$TLS_PORT" --socket="$TLS_DIR/mysqld.sock" \
        --pid-file="$TLS_DIR/mysqld.pid" --skip-name-resolve --innodb-buffer-pool-size=32M \
        --ssl-ca="$certs/ca.pem" --ssl-cert="$certs/server.pem" --ssl-key="$certs/server-key.pem" \
        --require-secure-transport=ON >"$TLS_DIR/mysqld.log" 2>&1 &
    TLS_PID=$!
    for _ in $(seq 1 120); do
        [ -S "$TLS_DIR/mysqld.sock" ] && break
        kill -0 "$TLS_PID" 2>/dev/null || break
        sleep 0.5
    done
    if ! [ -S "$TLS_DIR/mysqld.sock" ]; then
        cat "$TLS_DIR/mysqld.log" >&2
        echo "the TLS-only MariaDB did not start" >&2
        exit 1
    fi
    # Over the socket (which counts as secure): a TCP account for the tests.
    mariadb --no-defaults --socket="$TLS_DIR/mysqld.sock" -uroot \
        -e "CREATE USER 'jobflow'@'127.0.0.1' IDENTIFIED BY 'tls-test-password'; GRANT ALL ON *.* TO 'jobflow'@'127.0.0.1';"
    export JOBFLOW_TEST_TLS_MYSQL_URL="mysql://jobflow:tls-test-password@127.0.0.1:$TLS_PORT"
    export JOBFLOW_TEST_TLS_CA="$certs/ca.pem"
    log "TLS-only MariaDB on 127.0.0.1:$TLS_PORT (pid $TLS_PID)"
}

stop_tls_mariadb() {
    if [ -n "${TLS_PID:-}" ]; then
        kill "$TLS_PID" 2>/dev/null || true
        wait "$TLS_PID" 2>/dev/null || true
        rm -rf "$TLS_DIR"
        TLS_PID=""
    fi
}

ensure_go() {
    apt_install_for go golang-go "the Go SDK"
}
