use std::process::ExitCode;

use clap::Parser;
use jobflow::cli::{Cli, Command};
use jobflow::{Application, Settings, store, telemetry};

#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// mimalloc commits the arena it reserves (1 GiB) eagerly on Linux, which shows in the
/// resident set of an idle instance; committed on demand, an idle instance with 10,000 jobs
/// stays near glibc's size (docs/benchmarks.md, "Memory allocator"). Set from the process's
/// initialisers, before the first allocation reserves that arena.
#[cfg(all(feature = "mimalloc", target_os = "linux"))]
#[used]
#[unsafe(link_section = ".init_array")]
static TUNE_ALLOCATOR: extern "C" fn() = {
    unsafe extern "C" {
        fn mi_option_set(option: std::ffi::c_int, value: std::ffi::c_long);
    }
    /// `mi_option_arena_eager_commit` in mimalloc's `mi_option_e` (include/mimalloc.h, v2 and v3).
    const ARENA_EAGER_COMMIT: std::ffi::c_int = 4;
    extern "C" fn tune() {
        // SAFETY: sets one entry of mimalloc's static option table, which needs no
        // initialisation; nothing else runs yet.
        unsafe { mi_option_set(ARENA_EAGER_COMMIT, 0) }
    }
    tune
};

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let command = match cli.command.unwrap_or_default() {
        // A client of a running server: no configuration, no logging set up.
        Command::Jobs(args) => return Ok(jobflow::jobs_cli::run(args).await),
        command => command,
    };
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
        Command::CheckConfig | Command::Jobs(_) => unreachable!("answered above"),
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
