//! Command line: `jobflow [--config FILE] [serve|migrate|check-config]`, and
//! `jobflow jobs …` against a running server (see [`jobs_cli`](crate::jobs_cli)).

use std::path::PathBuf;

use clap::{Parser, Subcommand};

/// JobFlow: a lock-free distributed job scheduler for Nacos microservices.
///
/// Configuration is read from config/default.toml, then config/{JOBFLOW_PROFILE}.toml,
/// then the file given with --config, then environment variables JOBFLOW__SECTION__KEY
/// (for example JOBFLOW__DATABASE__URL=mysql://root@127.0.0.1:3306/jobflow).
#[derive(Debug, Parser)]
#[command(name = "jobflow", version)]
pub struct Cli {
    /// Extra configuration file, applied on top of config/default.toml.
    #[arg(long, short, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Option<Command>,
}

#[derive(Debug, Default, Subcommand)]
pub enum Command {
    /// Run the scheduler and its REST API (the default).
    #[default]
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Load the configuration exactly as start-up does (files and JOBFLOW__ variables),
    /// print the effective settings with secrets redacted, and exit 0; or exit 1 naming the
    /// bad key. Connects to nothing.
    CheckConfig,
    /// Manage jobs on a running server: list, get, apply, export, trigger, cancel,
    /// executions (URL and token from --url/--token or JOBFLOW_URL/JOBFLOW_TOKEN).
    Jobs(crate::jobs_cli::JobsArgs),
}
