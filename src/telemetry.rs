//! Logging (tracing, text or JSON) and the Prometheus recorder.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::FmtSpan;

use crate::config::{LogFormat, LogSettings};

/// Installs the global subscriber. `RUST_LOG` wins over `log.level`.
pub fn init(settings: &LogSettings) {
    let spec = std::env::var("RUST_LOG")
        .ok()
        .filter(|s| EnvFilter::try_new(s).is_ok())
        .unwrap_or_else(|| settings.level.clone());
    let mut filter = EnvFilter::new(&spec);
    for directive in nacos_sdk_directives(&spec) {
        filter = filter.add_directive(directive.parse().expect("a valid directive"));
    }
    // Colours only on a terminal: log files and collectors get plain text.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stdout());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_span_events(FmtSpan::NONE);
    let _ = match settings.format {
        LogFormat::Text => builder.try_init(),
        // Span fields (trace_id, job) go on every line, flattened for ELK/Loki.
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    };
}

/// What JobFlow holds nacos-sdk to, on top of the configured level `spec`.
///
/// - Its HTTP login logs the password at debug level: never let it through, even where `spec`
///   asks for more of nacos-sdk.
/// - Unless `spec` names `nacos_sdk`: warnings and errors only. At info it writes a line for
///   every cache save and request, which says nothing an operator needs.
/// - Unless `spec` names `nacos_sdk`: nothing from its config worker. That worker re-reads a
///   config after each push and logs an error every minute while the jobs document is absent
///   (a removal it cannot pass on); JobFlow reads the document itself and logs its own failures
///   (`config_center`).
fn nacos_sdk_directives(spec: &str) -> &'static [&'static str] {
    if spec.contains("nacos_sdk") {
        &["nacos_sdk::api::plugin::auth=info"]
    } else {
        &["nacos_sdk=warn", "nacos_sdk::config::worker=off"]
    }
}

/// The process-wide Prometheus recorder (installed once; every app in a process shares it).
pub fn metrics_handle() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Suffix("duration_seconds".into()),
                    &[
                        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                        300.0, 1800.0,
                    ],
                )
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("http_server_requests_seconds".into()),
                        &[
                            0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
                        ],
                    )
                })
                .and_then(|b| {
                    b.set_buckets_for_metric(
                        Matcher::Full("scheduler_fire_delay_seconds".into()),
                        &[
                            0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 30.0,
                            300.0,
                        ],
                    )
                })
                .expect("static bucket configuration is valid")
                .build_recorder();
            let handle = recorder.handle();
            // Another recorder may already be installed by an embedding program; then ours
            // still renders what is recorded through it.
            let _ = metrics::set_global_recorder(recorder);
            let upkeep = handle.clone();
            std::thread::Builder::new()
                .name("metrics-upkeep".into())
                .spawn(move || {
                    loop {
                        std::thread::sleep(std::time::Duration::from_secs(5));
                        upkeep.run_upkeep();
                    }
                })
                .expect("spawn metrics upkeep thread");
            handle
        })
        .clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nacos_sdk_is_held_to_warnings_unless_the_level_names_it() {
        assert_eq!(
            nacos_sdk_directives("debug,sqlx=warn"),
            ["nacos_sdk=warn", "nacos_sdk::config::worker=off"]
        );
        // Asked for by name: as asked, but never the login's debug line with the password.
        assert_eq!(
            nacos_sdk_directives("info,nacos_sdk=debug"),
            ["nacos_sdk::api::plugin::auth=info"]
        );
        for spec in ["info", "nacos_sdk=trace"] {
            for d in nacos_sdk_directives(spec) {
                d.parse::<tracing_subscriber::filter::Directive>().unwrap();
            }
        }
    }
}
