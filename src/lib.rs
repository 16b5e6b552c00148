//! JobFlow: a lock-free distributed job scheduler for teams whose microservices live in Nacos.
//!
//! # Layout
//! - [`config`]: layered settings (files, profile, `JOBFLOW__…` environment), checked at start.
//! - [`jobs`]: the domain: job names, cron schedules, sharding, executions; input is parsed
//!   into these types at the edge.
//! - [`store`]: persistence behind the `Store` trait, MySQL and SQLite implementations.
//! - [`api`]: the REST API, OpenAPI document and Swagger UI, health and metrics endpoints, and
//!   the operations console at `/ui/` (its files compiled into the binary).
//! - [`engine`]: ownership of jobs and their timers (one loop, one queue), misfire handling.
//! - [`dispatch`]: shard plans, execution rows, executor HTTP calls, failover, retries.
//! - [`alerts`]: alert channels, vendor formats and signing, throttling, background delivery.
//! - [`leader`]: what the first instance of the sorted list does for all: compensation of
//!   work that lost its scheduler or outlived its timeout, retention of old history.
//! - [`discovery`]: scheduler instances and executor addresses (standalone or Nacos).
//! - [`config_center`]: jobs as code, followed from a document in the Nacos config centre.
//! - [`audit`]: the audit trail's entries: who did what, when, to what.
//! - [`telemetry`]: logging and the Prometheus recorder.
//! - [`clock`]: the one clock the scheduler reads time from; [`backoff`]: retry delays.
//! - [`app`]: building and running one instance; [`jobs_cli`]: `jobflow jobs …`, an API
//!   client for terminals and pipelines.

pub mod alerts;
pub mod api;
pub mod app;
pub mod audit;
pub mod backoff;
pub mod cli;
pub mod clock;
pub mod config;
pub mod config_center;
pub mod discovery;
pub mod dispatch;
pub mod engine;
pub mod jobs;
pub mod jobs_cli;
pub mod leader;
pub mod store;
pub mod telemetry;

pub use app::Application;
pub use config::Settings;
