//! `jobflow jobs …`: jobs managed from a terminal or a pipeline, against a running server's
//! REST API (docs/cli.md). The server decides everything, as for any API client; this side
//! reads files, compares, and prints. Output is for people by default and JSON with
//! `-o json`; the exit code is 0 when everything asked was done, 1 when the server (or the
//! network) refused something, 2 on bad usage (arguments, unreadable or invalid files).

mod api;
mod apply;
mod body;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use reqwest::Method;
use serde_json::{Value, json};

use api::Api;
use body::{body_keys, body_of_view};

/// Manage jobs on a running server.
#[derive(Debug, Args)]
pub struct JobsArgs {
    /// The server's base URL.
    #[arg(
        long,
        env = "JOBFLOW_URL",
        default_value = "http://127.0.0.1:8080",
        global = true
    )]
    pub url: String,
    /// API token, sent as `Authorization: Bearer`.
    #[arg(long, env = "JOBFLOW_TOKEN", hide_env_values = true, global = true)]
    pub token: Option<String>,
    /// The namespace the command acts in.
    #[arg(
        long,
        short = 'n',
        env = "JOBFLOW_NAMESPACE",
        default_value = "default",
        global = true
    )]
    pub namespace: String,
    /// Output: `text` for people, `json` for scripts.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Text, global = true)]
    pub output: Output,
    #[command(subcommand)]
    pub command: JobsCommand,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// List every job.
    List,
    /// Show one job: as a jobs-document entry (YAML), or the API's JSON with `-o json`.
    Get { name: String },
    /// Create, replace and (with --prune) delete jobs so that the server holds what the files
    /// say. Prints the plan, then carries it out.
    Apply {
        /// A jobs document (YAML, or JSON for `.json`), or a directory of them; repeatable.
        #[arg(short = 'f', long = "file", required = true, value_name = "FILE|DIR")]
        files: Vec<PathBuf>,
        /// Also delete the jobs the files do not name (not those of the Nacos document).
        #[arg(long)]
        prune: bool,
        /// Print the plan only.
        #[arg(long)]
        dry_run: bool,
    },
    /// Print jobs (all, or those named) as a jobs document, which `apply` reads back.
    Export { names: Vec<String> },
    /// Run a job now, once.
    Trigger {
        name: String,
        /// This run's own `jobParams`, as JSON.
        #[arg(long, value_name = "JSON")]
        params: Option<String>,
    },
    /// Cancel an execution.
    Cancel {
        #[arg(value_name = "TRACE_ID")]
        trace_id: String,
    },
    /// A job's most recent executions.
    Executions {
        name: String,
        /// Only executions with this status (PENDING, RUNNING, SUCCESS, FAILED, …).
        #[arg(long)]
        status: Option<String>,
        /// How many, newest first.
        #[arg(long, default_value_t = 20)]
        limit: u32,
    },
}

/// Why a command did not do everything asked.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// Bad arguments or files: exit 2.
    #[error("{0}")]
    Usage(String),
    /// The server (or the network) refused: exit 1.
    #[error("{0}")]
    Refused(String),
}

/// Runs `jobflow jobs …` and tells the exit code.
pub async fn run(args: JobsArgs) -> ExitCode {
    let result = match Api::new(&args.url, args.token.clone(), &args.namespace) {
        Ok(api) => command(&api, args.command, args.output).await,
        Err(e) => Err(e),
    };
    match result {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(Failure::Refused(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(1)
        }
        Err(Failure::Usage(e)) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs one command; `Ok(false)` when it ran but something in it was refused (reported).
async fn command(api: &Api, command: JobsCommand, output: Output) -> Result<bool, Failure> {
    let json_out = output == Output::Json;
    match command {
        JobsCommand::List => {
            let jobs = api.all_jobs().await?;
            if json_out {
                print_json(&Value::Array(jobs));
            } else {
                print!("{}", job_table(&jobs));
            }
        }
        JobsCommand::Get { name } => {
            let job = api.get(&Api::job_path(&name)).await?;
            if json_out {
                print_json(&job);
            } else {
                print!("{}", yaml(&body_of_view(&job, &body_keys())));
            }
        }
        JobsCommand::Apply {
            files,
            prune,
            dry_run,
        } => {
            let entries = apply::read_entries(&files, api.namespace())?;
            let jobs = api.all_jobs().await?;
            let mut steps = apply::plan(entries, &jobs, prune)?;
            if !dry_run {
                apply::execute(api, &mut steps).await;
            }
            if json_out {
                print_json(&apply::as_json(&steps, !dry_run));
            } else {
                print!("{}", apply::describe(&steps, !dry_run));
            }
            return Ok(apply::succeeded(&steps));
        }
        JobsCommand::Export { names } => {
            let jobs = if names.is_empty() {
                api.all_jobs().await?
            } else {
                let mut jobs = Vec::with_capacity(names.len());
                for name in &names {
                    jobs.push(api.get(&Api::job_path(name)).await?);
                }
                jobs
            };
            let keys = body_keys();
            let bodies: Vec<Value> = jobs.iter().map(|j| body_of_view(j, &keys)).collect();
            let document = json!({ "jobs": bodies });
            if json_out {
                print_json(&document);
            } else {
                print!("{}", yaml(&document));
            }
        }
        JobsCommand::Trigger { name, params } => {
            let body = match params {
                Some(p) => {
                    let params: Value = serde_json::from_str(&p)
                        .map_err(|e| Failure::Usage(format!("--params is not JSON: {e}")))?;
                    json!({ "jobParams": params })
                }
                None => json!({}),
            };
            let path = format!("{}/trigger", Api::job_path(&name));
            let rows = api.send(Method::POST, &path, Some(&body)).await?;
            if json_out {
                print_json(&rows);
            } else {
                for row in rows.as_array().into_iter().flatten() {
                    println!("{}  {}", text(&row["traceId"]), text(&row["executionId"]));
                }
            }
        }
        JobsCommand::Cancel { trace_id } => {
            let path = format!(
                "/api/v1/jobs/executions/{}/cancel",
                crate::jobs::percent_encoded(&trace_id)
            );
            let answer = api.send(Method::POST, &path, None).await?;
            if json_out {
                print_json(&answer);
            } else {
                println!("{trace_id}  {}", text(&answer["status"]));
            }
        }
        JobsCommand::Executions {
            name,
            status,
            limit,
        } => {
            let mut path = format!(
                "{}/executions?page=0&size={}",
                Api::job_path(&name),
                limit.clamp(1, 1000)
            );
            if let Some(s) = status {
                path.push_str(&format!("&status={}", s.to_uppercase()));
            }
            let page = api.get(&path).await?;
            let rows = page["content"].as_array().cloned().unwrap_or_default();
            if json_out {
                print_json(&Value::Array(rows));
            } else {
                print!("{}", execution_table(&rows));
            }
        }
    }
    Ok(true)
}

fn print_json(v: &Value) {
    println!(
        "{}",
        serde_json::to_string_pretty(v).expect("JSON serialises")
    );
}

fn yaml(v: &Value) -> String {
    yaml_serde::to_string(v).expect("JSON values serialise as YAML")
}

/// A JSON value as a table cell: strings bare, null as `-`.
fn text(v: &Value) -> String {
    match v {
        Value::Null => "-".to_string(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Rows of cells as aligned columns.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        out.push_str(&line(row));
    }
    out
}

/// How a job fires, in a few words.
fn schedule(job: &Value) -> String {
    match job["scheduleType"].as_str().unwrap_or("CRON") {
        "FIXED_RATE" => format!("every {}s", text(&job["intervalSeconds"])),
        "FIXED_DELAY" => format!("{}s after each end", text(&job["intervalSeconds"])),
        "ONCE" => format!("once at {}", text(&job["startAt"])),
        "NONE" => "on demand".to_string(),
        _ => format!("cron {}", text(&job["cron"])),
    }
}

fn job_table(jobs: &[Value]) -> String {
    let rows = jobs
        .iter()
        .map(|j| {
            vec![
                text(&j["name"]),
                schedule(j),
                if j["enabled"] == true { "yes" } else { "no" }.to_string(),
                format!("{}/{}", text(&j["serviceName"]), text(&j["handler"])),
                text(&j["source"]),
            ]
        })
        .collect();
    table(
        &["NAME", "SCHEDULE", "ENABLED", "SERVICE/HANDLER", "SOURCE"],
        rows,
    )
}

fn execution_table(rows: &[Value]) -> String {
    let rows = rows
        .iter()
        .map(|e| {
            vec![
                text(&e["traceId"]),
                text(&e["status"]),
                text(&e["triggerType"]),
                text(&e["fireTime"]),
                format!("{}-{}", text(&e["shardStart"]), text(&e["shardEnd"])),
                text(&e["retryCount"]),
            ]
        })
        .collect();
    table(
        &[
            "TRACE_ID",
            "STATUS",
            "TRIGGER",
            "FIRE_TIME",
            "RANGE",
            "RETRY",
        ],
        rows,
    )
}
