//! Building and running one JobFlow instance: bind, migrate, serve, shut down cleanly.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::api::{self, AppState};
use crate::config::Settings;
use crate::jobs::TimeZoneName;
use crate::{store, telemetry};

pub struct Application {
    listener: TcpListener,
    state: AppState,
    shutdown: CancellationToken,
}

impl Application {
    /// Connects and migrates the database and binds the listener (port 0 picks a free port).
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        let store = store::connect(&settings.database)
            .await
            .context("connecting to the database")?;
        store.migrate().await.context("migrating the database")?;
        let default_tz =
            TimeZoneName::parse(&settings.scheduler.timezone).map_err(anyhow::Error::msg)?;
        let addr = format!("{}:{}", settings.server.host, settings.server.port);
        let listener = TcpListener::bind(&addr)
            .await
            .with_context(|| format!("binding {addr}"))?;
        let state = AppState {
            store,
            settings: Arc::new(settings),
            default_tz,
            metrics: telemetry::metrics_handle(),
            job_changes: Arc::new(tokio::sync::Notify::new()),
        };
        Ok(Self {
            listener,
            state,
            shutdown: CancellationToken::new(),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("bound listener has an address")
    }

    pub fn port(&self) -> u16 {
        self.local_addr().port()
    }

    /// Cancelling this token stops the instance as SIGTERM would.
    pub fn shutdown_token(&self) -> CancellationToken {
        self.shutdown.clone()
    }

    /// Serves until SIGTERM/SIGINT or the shutdown token.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let token = self.shutdown.clone();
        tokio::spawn(forward_signals(token.clone()));
        tracing::info!(addr = %self.local_addr(), backend = self.state.store.backend(), "JobFlow listening");
        axum::serve(self.listener, api::router(self.state))
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await
            .context("serving HTTP")?;
        tracing::info!("JobFlow stopped");
        Ok(())
    }
}

async fn forward_signals(token: CancellationToken) {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => tracing::info!("SIGINT received, shutting down"),
        _ = term => tracing::info!("SIGTERM received, shutting down"),
        _ = token.cancelled() => return,
    }
    token.cancel();
}
