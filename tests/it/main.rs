//! Integration tests: the real application over HTTP, on SQLite and on MySQL/MariaDB.

mod helpers;
mod kill_restart;
mod recorder;
#[path = "../support/wait.rs"]
mod wait;

mod alerts;
mod api_auth;
mod api_contract;
mod api_execution_search;
mod api_hostile;
mod api_jobs;
mod api_misc;
mod backfills;
mod calendars;
mod caps;
mod claim_ahead;
mod console;
mod demo_e2e;
mod engine_dispatch;
mod engine_failures;
mod engine_recovery;
mod execution_logs;
mod faults;
mod java_executor;
mod job_change_log;
mod job_document;
mod job_policies;
mod jobs_cli;
mod mysql_tls;
mod outages;
mod protocol_docs;
#[path = "../support/proxy.rs"]
#[allow(dead_code)]
mod proxy;
mod retention;
mod run_policies;
mod schedule_types;
mod slow_stops;
mod store_contract;
mod teams;
