use clap::Parser;
use jobflow::cli::{Cli, Command};
use jobflow::{Application, Settings, store, telemetry};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let settings = Settings::load(cli.config.as_deref())?;
    telemetry::init(&settings.log);
    match cli.command.unwrap_or_default() {
        Command::Serve => {
            Application::build(settings)
                .await?
                .run_until_stopped()
                .await
        }
        Command::Migrate => {
            let store = store::connect(&settings.database).await?;
            store.migrate().await?;
            tracing::info!(backend = store.backend(), "migrations applied");
            Ok(())
        }
    }
}
