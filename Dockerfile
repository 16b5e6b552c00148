# JobFlow and the demo executor, built in one stage and shipped in small non-root images.
#   docker build -t jobflow .                          # the scheduler (default target)
#   docker build -t jobflow-demo-executor --target demo-executor .
FROM rust:1.95-slim-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin jobflow --bin jobflow-demo-executor \
    && strip target/release/jobflow target/release/jobflow-demo-executor

FROM debian:bookworm-slim AS runtime-base
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /app --create-home jobflow
WORKDIR /app
USER 10001

FROM runtime-base AS demo-executor
COPY --from=build /src/target/release/jobflow-demo-executor /usr/local/bin/jobflow-demo-executor
EXPOSE 9001
ENTRYPOINT ["/usr/local/bin/jobflow-demo-executor"]

FROM runtime-base AS jobflow
COPY --from=build /src/target/release/jobflow /usr/local/bin/jobflow
COPY --chown=10001 config /app/config
EXPOSE 8080
HEALTHCHECK --interval=10s --timeout=3s --retries=5 CMD curl -fsS http://127.0.0.1:8080/health/ready || exit 1
ENTRYPOINT ["/usr/local/bin/jobflow"]
CMD ["serve"]
