# JobFlow and the demo executor, built in one stage and shipped in small non-root images on
# Debian 13 (trixie), the Debian release with security support.
#   docker build -t jobflow .                          # the scheduler (default target)
#   docker build -t jobflow-demo-executor --target demo-executor .
# scripts/test.sh runs the cargo command below as written (release profile: thin LTO, stripped).
FROM rust:1.95-slim-trixie AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p jobflow --bin jobflow -p jobflow-demo-executor --bin jobflow-demo-executor

FROM debian:trixie-slim AS runtime-base
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /app --create-home jobflow
WORKDIR /app
USER 10001

FROM runtime-base AS demo-executor
COPY --from=build /src/target/release/jobflow-demo-executor /usr/local/bin/jobflow-demo-executor
EXPOSE 9001
ENTRYPOINT ["/usr/local/bin/jobflow-demo-executor"]

# Last, so that a plain `docker build .` gives the scheduler.
FROM runtime-base AS jobflow
COPY --from=build /src/target/release/jobflow /usr/local/bin/jobflow
COPY --chown=10001 config /app/config
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=5 CMD curl -fsS http://127.0.0.1:8080/health/ready || exit 1
ENTRYPOINT ["/usr/local/bin/jobflow"]
CMD ["serve"]
