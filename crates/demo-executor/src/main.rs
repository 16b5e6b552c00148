//! `jobflow-demo-executor`: serves the demo handlers.
//!
//! Environment:
//! - `DEMO_BIND` (default `0.0.0.0:9001`)
//! - `JOBFLOW_SIGNING_SECRET`: the scheduler's `executor.signing_secret`; without it the demo
//!   refuses to start unless `DEMO_ALLOW_UNSIGNED=true`
//! - `NACOS_SERVER_ADDR` (optional): register in Nacos as `DEMO_SERVICE` (default
//!   `demo-executor`) at `DEMO_ADVERTISE_IP`:port; `NACOS_NAMESPACE`, `NACOS_USERNAME`,
//!   `NACOS_PASSWORD`
//! - `LOG_FORMAT=json` for JSON logs; `RUST_LOG`. What a handler logs also goes to the
//!   scheduler, shown on the execution's page.

use jobflow_executor::JobExecutor;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    // What a handler logs at INFO and above goes to the scheduler through the SDK's layer,
    // whatever RUST_LOG lets through to stdout.
    let logs = tracing_subscriber::registry()
        .with(jobflow_executor::logs::layer().with_filter(LevelFilter::INFO));
    if env("LOG_FORMAT").as_deref() == Some("json") {
        logs.with(
            tracing_subscriber::fmt::layer()
                .json()
                .flatten_event(true)
                .with_current_span(true)
                .with_filter(filter),
        )
        .init();
    } else {
        logs.with(
            tracing_subscriber::fmt::layer()
                .with_ansi(ansi)
                .with_filter(filter),
        )
        .init();
    }
    let executor = match (
        env("JOBFLOW_SIGNING_SECRET"),
        env("DEMO_ALLOW_UNSIGNED").as_deref(),
    ) {
        (Some(secret), _) => JobExecutor::with_secret(secret),
        (None, Some("true")) => {
            tracing::warn!("accepting unsigned calls (DEMO_ALLOW_UNSIGNED=true)");
            JobExecutor::without_signatures()
        }
        (None, _) => {
            return Err(
                "set JOBFLOW_SIGNING_SECRET (or DEMO_ALLOW_UNSIGNED=true on a trusted network)"
                    .into(),
            );
        }
    };
    let bind = env("DEMO_BIND").unwrap_or_else(|| "0.0.0.0:9001".into());
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    let port = listener.local_addr()?.port();
    let _nacos = match env("NACOS_SERVER_ADDR") {
        Some(server_addr) => {
            let registration = jobflow_executor::nacos::Registration {
                server_addr,
                namespace: env("NACOS_NAMESPACE").unwrap_or_default(),
                group: None,
                service_name: env("DEMO_SERVICE").unwrap_or_else(|| "demo-executor".into()),
                ip: env("DEMO_ADVERTISE_IP").unwrap_or_else(|| "127.0.0.1".into()),
                port,
                path_prefix: None,
                username: env("NACOS_USERNAME"),
                password: env("NACOS_PASSWORD"),
            };
            let naming = jobflow_executor::nacos::register(&registration).await?;
            tracing::info!(service = %registration.service_name, ip = %registration.ip, port, "registered in Nacos");
            Some(naming)
        }
        None => None,
    };
    tracing::info!(%bind, "demo executor listening");
    axum::serve(listener, jobflow_demo_executor::handlers(executor).router())
        .with_graceful_shutdown(async {
            // SIGTERM too: as PID 1 in a container, an unhandled SIGTERM is ignored.
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                    .expect("SIGTERM handler");
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        })
        .await?;
    Ok(())
}
