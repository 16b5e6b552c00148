#!/usr/bin/env bash
# Checks the deployment files with the tools their platforms use, as far as a machine without
# a Docker engine or a Kubernetes cluster allows:
# - the Dockerfile's cargo command, run exactly as written (the image build's only step that
#   depends on this repository);
# - the Prometheus configuration and alert rules, with promtool (Debian's `prometheus`),
#   including the rules' unit tests (deploy/prometheus/alerts.test.yml);
# - the Kubernetes manifests, against the Kubernetes OpenAPI schemas (kubernetes-validate from
#   PyPI, offline), strictly: unknown fields are errors.
# The compose file and the manifests' configuration go through `jobflow check-config` in
# tests/deploy.rs.
set -euo pipefail
cd "$(dirname "$0")/.."

# shellcheck source=scripts/lib.sh
. scripts/lib.sh

ensure_promtool
ensure_kubernetes_validate

log "Dockerfile: its cargo command as written"
docker_cargo=$(sed -n 's/^RUN \(cargo build .*\)$/\1/p' Dockerfile)
if [ -z "$docker_cargo" ]; then
    echo "Dockerfile: no 'RUN cargo build' line" >&2
    exit 1
fi
echo "$docker_cargo"
eval "$docker_cargo"
for bin in jobflow jobflow-demo-executor; do
    [ -x "$CARGO_TARGET_DIR/release/$bin" ] || { echo "Dockerfile build made no $bin" >&2; exit 1; }
done

log "promtool: Prometheus configuration and alert rules"
# The configuration names the rules by their path in the container; check it beside them.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp deploy/prometheus/alerts.yml "$work/alerts.yml"
sed "s|/etc/prometheus/alerts.yml|$work/alerts.yml|" deploy/prometheus/prometheus.yml > "$work/prometheus.yml"
promtool check config "$work/prometheus.yml"
promtool check rules deploy/prometheus/alerts.yml
promtool test rules deploy/prometheus/alerts.test.yml

log "kubernetes-validate: deploy/kubernetes against the Kubernetes schemas"
# ServiceMonitor is a Prometheus Operator resource with no schema in Kubernetes' own set (a
# warning here); its fields are checked in tests/deploy.rs.
"$DEPLOY_VENV/bin/kubernetes-validate" --strict --kubernetes-version "$K8S_VERSION" deploy/kubernetes/*.yaml
