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

ensure_python() {
    if ! command -v python3 >/dev/null 2>&1; then
        if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
            log "installing python3"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3 >/dev/null
        else
            echo "python3 is needed for the protocol docs test" >&2
            exit 1
        fi
    fi
}

ensure_promtool() {
    if command -v promtool >/dev/null 2>&1; then
        return
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing promtool (Debian package prometheus)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq prometheus >/dev/null
    else
        echo "promtool is needed to check deploy/prometheus: install the prometheus package" >&2
        exit 1
    fi
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
    if command -v javac >/dev/null 2>&1 && command -v java >/dev/null 2>&1; then
        return
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing a JDK (default-jdk-headless)"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq default-jdk-headless >/dev/null
    else
        echo "javac and java are needed for the Java executor example" >&2
        exit 1
    fi
}

ensure_chromium() {
    if [ -x /usr/bin/chromium ]; then
        return
    fi
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        log "installing chromium (Debian) for the console tests"
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
    else
        echo "chromium is needed for the console tests: apt-get install chromium" >&2
        exit 1
    fi
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
