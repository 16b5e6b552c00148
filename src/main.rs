use std::process::ExitCode;

use clap::Parser;
use jobflow::cli::{Cli, Command};
use jobflow::{Application, Settings, store, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let command = cli.command.unwrap_or_default();
    let loaded = Settings::load(cli.config.as_deref());
    if let Command::CheckConfig = command {
        return Ok(check_config(loaded));
    }
    let settings = loaded?;
    telemetry::init(&settings.log);
    match command {
        Command::Serve => {
            Application::build(settings)
                .await?
                .run_until_stopped()
                .await?
        }
        Command::Migrate => {
            let store = store::connect(&settings.database).await?;
            store.migrate().await?;
            tracing::info!(backend = store.backend(), "migrations applied");
        }
        Command::CheckConfig => unreachable!("answered above"),
    }
    Ok(ExitCode::SUCCESS)
}

/// `jobflow check-config`: the effective settings on stdout, or the bad key on stderr.
fn check_config(loaded: Result<Settings, jobflow::config::ConfigError>) -> ExitCode {
    match loaded {
        Ok(settings) => {
            println!("# configuration is valid; effective settings (secrets redacted):");
            print!("{}", settings.to_redacted_toml());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("invalid configuration: {e}");
            ExitCode::FAILURE
        }
    }
}
