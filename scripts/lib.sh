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
