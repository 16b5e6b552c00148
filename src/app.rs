//! Building and running one JobFlow instance: bind, migrate, load, register, serve, and shut
//! down in the order that loses nothing: leave discovery first (the others take over at
//! once), stop firing, let the calls in flight finish while the API still takes their
//! reports, then stop serving.

use std::future::IntoFuture;
use std::net::SocketAddr;
use std::num::NonZeroU16;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::alerts::Alerts;
use crate::api::{self, AppState};
use crate::clock::Clock;
use crate::config::{DiscoveryMode, Settings};
use crate::config_center::{JobDocumentSync, check_login};
use crate::discovery::{self, Discovery, NacosDiscovery, Standalone};
use crate::dispatch::{self as dispatch_stages, Dispatcher};
use crate::engine::{ClusterState, Engine, EngineParts};
use crate::jobs::JobBook;
use crate::leader::{Backfiller, Compensator, Retention};
use crate::{store, telemetry};

pub struct Application {
    listener: TcpListener,
    state: AppState,
    /// The scheduling path's store (the API's is in `state`).
    store: Arc<dyn store::Store>,
    engine: Engine,
    compensator: Compensator,
    /// Follows the Nacos jobs document when `nacos.jobs_data_id` is set, from the MD5 of the
    /// content read at start-up (`None`: not read yet).
    job_document: Option<(JobDocumentSync, Option<String>)>,
    shutdown: CancellationToken,
}

impl Application {
    /// Connects and migrates the database, loads the jobs and binds the listener (port 0 picks
    /// a free port). Nothing is announced to other instances yet.
    pub async fn build(settings: Settings) -> anyhow::Result<Self> {
        Self::build_with(settings, Clock::system()).await
    }

    /// [`Application::build`] reading time from `clock`.
    pub async fn build_with(settings: Settings, clock: Clock) -> anyhow::Result<Self> {
        let store = store::connect(&settings.database)
            .await
            .context("connecting to the database")?;
        store.migrate().await.context("migrating the database")?;
        let api_connections = settings.database.api_connections.get();
        let api_store = store::connect_beside(&settings.database, &store, api_connections)
            .await
            .context("connecting the API to the database")?;
        let instant_store = store::connect_beside(&settings.database, &store, 1)
            .await
            .context("connecting the instant check to the database")?;
        // The engine's job refreshes tell whether the database answers this instance
        // (engine/standing.rs): on a connection of their own, a fire path that holds every
        // connection of its pool does not look like a database that is gone.
        let engine_store = store::connect_beside(&settings.database, &store, 1)
            .await
            .context("connecting the engine to the database")?;
        let (listener, settings) = bind(settings).await?;
        let discovery = join_discovery(&settings).await?;
        let alerts = Alerts::start(&settings.alerts, discovery.self_id(), clock)?;
        let cluster = Arc::new(ClusterState::new(settings.scheduler.ownership));
        let job_changes = Arc::new(tokio::sync::Notify::new());
        let book = Arc::new(JobBook::default());
        let calendars = Arc::new(settings.calendars()?);
        let (dispatcher, owed) = Dispatcher::start(
            &settings,
            dispatch_stages::Parts {
                clock,
                store: store.clone(),
                instant_store,
                discovery: discovery.clone(),
                alerts: alerts.clone(),
                book: book.clone(),
                reload: job_changes.clone(),
            },
        )?;
        let dispatcher = Arc::new(dispatcher);
        let job_document = follow_job_document(&settings, clock, &store, &job_changes).await?;
        let engine = Engine::load(
            &settings,
            EngineParts {
                clock,
                store: engine_store,
                discovery: discovery.clone(),
                dispatcher: dispatcher.clone(),
                cluster: cluster.clone(),
                job_changes: job_changes.clone(),
                owed,
                book: book.clone(),
                calendars: calendars.clone(),
            },
        )
        .await
        .context("loading jobs")?;
        let compensator = Compensator::new(
            settings.compensation.clone(),
            settings.scheduler.misfire_threshold_seconds,
            clock,
            store.clone(),
            discovery.clone(),
            dispatcher.clone(),
            cluster.clone(),
        );
        let state = AppState {
            clock,
            store: api_store,
            default_tz: settings.scheduler.timezone,
            tokens: Arc::new(api::auth::Tokens::new(&settings.auth)),
            settings: Arc::new(settings),
            metrics: telemetry::metrics_handle(),
            job_changes,
            book: book.clone(),
            dispatcher,
            discovery,
            cluster,
            alerts,
            calendars,
        };
        warn_if_open(&state);
        Ok(Self {
            listener,
            state,
            store,
            engine,
            compensator,
            job_document,
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

    /// Serves until SIGTERM/SIGINT or the shutdown token, then: deregister (others take over
    /// at once), stop firing, stop the API, let in-flight calls finish within the grace period.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        let Self {
            listener,
            state,
            store,
            engine,
            compensator,
            job_document,
            shutdown,
        } = self;
        tokio::spawn(forward_signals(shutdown.clone()));
        let addr = listener.local_addr()?;
        let background = CancellationToken::new();
        let engine_task = tokio::spawn(engine.run(background.clone()));
        let compensation_task = tokio::spawn(compensator.run(background.clone()));
        let backfiller = Backfiller {
            clock: state.clock,
            store: store.clone(),
            discovery: state.discovery.clone(),
            dispatcher: state.dispatcher.clone(),
            cluster: state.cluster.clone(),
            calendars: state.calendars.clone(),
        };
        let backfill_task = tokio::spawn(backfiller.run(background.clone()));
        let retention = Retention::new(
            state.clock,
            state.settings.retention.clone(),
            store,
            state.discovery.clone(),
            state.cluster.clone(),
        );
        let retention_task = tokio::spawn(retention.run(background.clone()));
        if let Some((sync, seen)) = job_document {
            tokio::spawn(sync.run(seen, background.clone()));
        }
        state
            .discovery
            .register()
            .await
            .context("registering this instance")?;
        tracing::info!(%addr, instance = state.discovery.self_id(), backend = state.store.backend(), "JobFlow listening");

        // The API serves until the calls in flight have drained, so their executors' reports
        // still land; it stops only after them.
        let serving = CancellationToken::new();
        // Should this future be dropped before it stops serving (its runtime shut down), the
        // API's threads stop all the same.
        let _serving = serving.clone().drop_guard();
        let grace = Duration::from_secs(state.settings.server.shutdown_grace_seconds);
        let mut server = serve_apart(listener, state.clone(), serving.clone(), grace)
            .context("starting the API's thread")?;
        // A server that ends on its own (it failed) stops the instance too.
        let ended = tokio::select! {
            _ = shutdown.cancelled() => None,
            ended = &mut server => Some(ended),
        };

        // Leave discovery first: the others take over this instance's jobs at once. Then stop
        // firing, and let the calls already made finish.
        state.discovery.deregister().await;
        background.cancel();
        let _ = tokio::join!(
            engine_task,
            compensation_task,
            backfill_task,
            retention_task
        );
        if !state.dispatcher.drain(grace).await {
            tracing::warn!(
                grace_seconds = grace.as_secs(),
                "in-flight executor calls outlived the grace period; compensation settles them"
            );
        }
        serving.cancel();
        let ended = match ended {
            Some(ended) => ended,
            None => server.await,
        };
        let served = match ended {
            Ok(result) => result.context("serving HTTP"),
            Err(_) => Err(anyhow::anyhow!("the HTTP server's thread failed")),
        };
        tracing::info!("JobFlow stopped");
        served
    }
}

/// Serves the API on a runtime of its own, on its own threads, until `stop`, and lets the
/// requests in flight then finish for up to `grace`; answers with how serving ended. At
/// 10,000 fires a second the scheduling runtime's queue holds thousands of ready attempts at
/// each second's burst, and a request's task queued behind them waited its turn (API reads
/// p99 73-147 ms, docs/benchmarks.md); on threads of its own the API gets its share of the
/// cores from the operating system instead. Work an API call starts (a manual run, a retry)
/// still runs on the scheduling runtime (`dispatch::Tasks`).
fn serve_apart(
    listener: TcpListener,
    state: AppState,
    stop: CancellationToken,
    grace: Duration,
) -> anyhow::Result<tokio::sync::oneshot::Receiver<std::io::Result<()>>> {
    let listener = listener.into_std()?;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let (done, ended) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("jobflow-api".into())
        .spawn(move || {
            let served = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(threads)
                .thread_name("jobflow-api")
                .enable_all()
                .build()
                .and_then(|runtime| {
                    runtime.block_on(async move {
                        let listener = TcpListener::from_std(listener)?;
                        let app =
                            api::router(state).into_make_service_with_connect_info::<SocketAddr>();
                        let served = axum::serve(listener, app)
                            .with_graceful_shutdown(stop.clone().cancelled_owned());
                        tokio::select! {
                            served = served.into_future() => served,
                            // A request still going then is dropped with the runtime.
                            _ = async {
                                stop.cancelled().await;
                                tokio::time::sleep(grace).await;
                            } => Ok(()),
                        }
                    })
                });
            let _ = done.send(served);
        })?;
    Ok(ended)
}

/// Binds the API's listener, and settles the address this instance is known by (the port
/// the listener got, unless one is advertised).
async fn bind(mut settings: Settings) -> anyhow::Result<(TcpListener, Settings)> {
    let addr = format!("{}:{}", settings.server.host, settings.server.port);
    let listener = TcpListener::bind(&addr)
        .await
        .with_context(|| format!("binding {addr}"))?;
    if settings.discovery.advertise_port.is_none() {
        settings.discovery.advertise_port = NonZeroU16::new(listener.local_addr()?.port());
    }
    // The address executors report 202 results to and other instances know this one by.
    settings.discovery.advertise_ip =
        Some(discovery::advertised_ip(&settings).map_err(anyhow::Error::msg)?);
    Ok((listener, settings))
}

/// The discovery of `settings.discovery.mode` (not registered yet).
async fn join_discovery(settings: &Settings) -> anyhow::Result<Arc<dyn Discovery>> {
    Ok(match settings.discovery.mode {
        DiscoveryMode::Standalone => Arc::new(Standalone::new(
            settings.advertised_addr(),
            &settings.executors.static_,
        )),
        DiscoveryMode::Nacos => {
            let ip = settings.discovery.advertise_ip.expect("bound").to_string();
            let port = settings.discovery.advertise_port.expect("bound").get();
            // A clear start-up error for wrong credentials, before the naming client (which
            // would only log its failed logins); nothing to check without a username.
            check_login(&settings.nacos).await?;
            NacosDiscovery::connect(&settings.nacos, ip, port).await?
        }
    })
}

/// The jobs document followed from the Nacos config centre, read once now, when configured.
async fn follow_job_document(
    settings: &Settings,
    clock: Clock,
    store: &Arc<dyn store::Store>,
    job_changes: &Arc<tokio::sync::Notify>,
) -> anyhow::Result<Option<(JobDocumentSync, Option<String>)>> {
    let sync =
        JobDocumentSync::connect(settings, clock, store.clone(), job_changes.clone()).await?;
    Ok(match sync {
        Some(sync) => {
            let seen = sync.start().await;
            Some((sync, seen))
        }
        None => None,
    })
}

/// Says so in the log when the API is open to anyone who reaches it.
fn warn_if_open(state: &AppState) {
    if !state.settings.auth.enabled {
        tracing::warn!(
            "API authentication is switched off (auth.enabled = false): anyone who reaches this port can change and trigger jobs"
        );
    } else if !state.tokens.enabled() {
        tracing::warn!(
            "no auth.tokens configured: the API is open; configure tokens before exposing this instance"
        );
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
