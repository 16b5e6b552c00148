//! Layered configuration: built-in defaults, `config/default.toml`, `config/{profile}.toml`,
//! the `--config` file, then `JOBFLOW__SECTION__KEY` environment variables. The settings are
//! types, not checked text: a value that must be positive is a `NonZero*`, the time zone is
//! parsed once, executor addresses are [`InstanceAddr`](crate::jobs::InstanceAddr)s, secrets
//! are [`Secret`]s. Each section lives in a file of its own and checks its own rules
//! (`validate`); the rules that span sections are checked once here, in
//! [`Settings::validate`]. Every error names the key.

mod alerts;
mod auth;
mod calendars;
mod compensation;
mod database;
mod discovery;
mod env;
mod executor;
mod log;
mod retention;
mod scheduler;
mod secret;
mod server;

use std::net::IpAddr;
use std::num::{NonZeroU16, NonZeroU64};
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Format, Toml};
use serde::{Deserialize, Serialize};

pub use alerts::{AlertsSettings, ChannelKind, ChannelSettings};
pub use auth::{AuthSettings, IpBlock, ProxySettings, Role, TokenSettings};
pub use calendars::CalendarSettings;
pub use compensation::CompensationSettings;
pub use database::DatabaseSettings;
pub use discovery::{DiscoveryMode, DiscoverySettings, NacosSettings, namespace_id};
pub use executor::{ExecutorSettings, ExecutorsSettings};
pub use log::{LogFormat, LogSettings};
pub use retention::RetentionSettings;
pub use scheduler::{OwnershipStrategy, SchedulerSettings};
pub use secret::{REDACTED, Secret};
pub use server::ServerSettings;

/// Prefix of the environment variables that override configuration keys.
pub const ENV_PREFIX: &str = "JOBFLOW__";

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub server: ServerSettings,
    pub database: DatabaseSettings,
    pub discovery: DiscoverySettings,
    pub nacos: NacosSettings,
    pub scheduler: SchedulerSettings,
    pub compensation: CompensationSettings,
    pub executor: ExecutorSettings,
    pub executors: ExecutorsSettings,
    pub auth: AuthSettings,
    pub log: LogSettings,
    pub alerts: AlertsSettings,
    pub retention: RetentionSettings,
    /// Named sets of excluded dates jobs may name (`[[calendars]]`).
    pub calendars: Vec<CalendarSettings>,
}

fn nonzero(n: u64) -> NonZeroU64 {
    NonZeroU64::new(n).expect("defaults are positive")
}

/// A start-up configuration problem, always naming the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration key `{key}`: {message}")]
    Invalid { key: String, message: String },
}

impl ConfigError {
    /// The key at fault, `section.key` (or `--config`).
    pub fn key(&self) -> &str {
        match self {
            Self::Invalid { key, .. } => key,
        }
    }
}

fn invalid(key: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        message: message.into(),
    }
}

/// Reads the secret in the file at `path` (when given) into `into`, without its final line
/// break.
fn read_secret_file(
    key: &'static str,
    path: &Option<PathBuf>,
    into: &mut Option<Secret>,
) -> Result<(), ConfigError> {
    if let Some(path) = path {
        let text = std::fs::read_to_string(path)
            .map_err(|e| invalid(key, format!("cannot read {}: {e}", path.display())))?;
        *into = Some(Secret::new(text.trim_end_matches(['\r', '\n'])));
    }
    Ok(())
}

impl ConfigError {
    /// figment's path becomes one dotted key, and the layer that gave the value is named:
    /// the file, or the environment variable.
    fn from_figment(e: figment::Error, env_prefix: &str) -> Self {
        let mut path = e.path.clone();
        if let figment::error::Kind::UnknownField(field, _) = &e.kind
            && path.last() != Some(field)
        {
            path.push(field.clone());
        }
        let key = if path.is_empty() {
            "(top level)".to_string()
        } else {
            path.join(".")
        };
        let mut message = e.kind.to_string();
        if let Some(md) = &e.metadata {
            let origin = match &md.source {
                Some(source) => source.to_string(),
                None if md.name.contains("environment") => {
                    format!("{env_prefix}{}", path.join("__").to_uppercase())
                }
                None => md.name.to_string(),
            };
            message = format!("{message} (from {origin})");
        }
        invalid(key, message)
    }
}

impl Settings {
    /// Loads the layers from the current directory and the process environment, exactly as
    /// start-up and `jobflow check-config` do.
    pub fn load(extra_file: Option<&Path>) -> Result<Self, ConfigError> {
        let profile = std::env::var("JOBFLOW_PROFILE").ok();
        Self::load_from(
            Path::new("config"),
            profile.as_deref(),
            extra_file,
            ENV_PREFIX,
        )
    }

    fn load_from(
        dir: &Path,
        profile: Option<&str>,
        extra_file: Option<&Path>,
        env_prefix: &str,
    ) -> Result<Self, ConfigError> {
        let mut figment = Figment::new().merge(Toml::file(dir.join("default.toml")));
        if let Some(profile) = profile {
            figment = figment.merge(Toml::file(dir.join(format!("{profile}.toml"))));
        }
        if let Some(file) = extra_file {
            if !file.is_file() {
                return Err(invalid(
                    "--config",
                    format!("file {} does not exist", file.display()),
                ));
            }
            figment = figment.merge(Toml::file_exact(file));
        }
        // Environment values are text; numbers and booleans are read from it where the
        // setting is one (lossy extraction), so secrets keep their exact characters.
        let mut settings: Settings = figment
            .merge(env::TextEnv::prefixed(env_prefix))
            .extract_lossy()
            .map_err(|e| ConfigError::from_figment(e, env_prefix))?;
        settings.read_secret_files()?;
        settings.validate()?;
        Ok(settings)
    }

    fn read_secret_files(&mut self) -> Result<(), ConfigError> {
        read_secret_file(
            "database.password_file",
            &self.database.password_file,
            &mut self.database.password,
        )?;
        read_secret_file(
            "nacos.password_file",
            &self.nacos.password_file,
            &mut self.nacos.password,
        )?;
        read_secret_file(
            "executor.signing_secret_file",
            &self.executor.signing_secret_file,
            &mut self.executor.signing_secret,
        )?;
        self.auth.resolve()
    }

    /// Every section's own rules, then the rules that span sections.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.database.validate()?;
        self.nacos.validate()?;
        self.scheduler.validate()?;
        self.compensation.validate()?;
        self.executor.validate()?;
        self.auth.validate()?;
        self.log.validate()?;
        self.alerts.validate()?;
        self.retention.validate()?;
        self.calendars()?;
        if self.auth.enabled
            && self.auth.tokens.is_empty()
            && self.auth.proxy.is_none()
            && self.discovery.mode == DiscoveryMode::Nacos
        {
            return Err(invalid(
                "auth.tokens",
                "nacos mode serves a shared cluster and needs API tokens; configure auth.tokens or set auth.enabled = false explicitly",
            ));
        }
        Ok(())
    }

    /// The configured calendars, checked, by name.
    pub fn calendars(&self) -> Result<crate::jobs::Calendars, ConfigError> {
        calendars::calendars(&self.calendars)
    }

    /// The effective settings as TOML, secrets shown as [`REDACTED`] (`jobflow check-config`).
    pub fn to_redacted_toml(&self) -> String {
        toml::to_string_pretty(self).expect("settings serialize to TOML")
    }

    /// The `ip:port` this instance is known by.
    pub fn advertised_addr(&self) -> String {
        let ip = self
            .discovery
            .advertise_ip
            .unwrap_or(IpAddr::V4(std::net::Ipv4Addr::LOCALHOST));
        let port = self
            .discovery
            .advertise_port
            .map_or(self.server.port, NonZeroU16::get);
        std::net::SocketAddr::new(ip, port).to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jobs::TimeZoneName;

    fn load(files: &[(&str, &str)], env: &[(&str, &str)]) -> Result<Settings, ConfigError> {
        let dir = tempfile::tempdir().unwrap();
        for (name, body) in files {
            std::fs::write(dir.path().join(name), body).unwrap();
        }
        // figment's Env reads the process environment; a unique prefix keeps tests apart.
        let prefix = format!("JFTEST{}__", rand::random::<u32>());
        for (k, v) in env {
            // SAFETY: the variables carry a prefix unique to this test.
            unsafe { std::env::set_var(format!("{prefix}{k}"), v) };
        }
        Settings::load_from(dir.path(), Some("prod"), None, &prefix)
    }

    #[test]
    fn defaults_match_the_spec() {
        let s = load(&[], &[]).unwrap();
        assert_eq!(s.server.host, "0.0.0.0");
        assert_eq!(s.server.port, 8080);
        assert_eq!(s.database.url.expose(), "sqlite://data/jobflow.db");
        assert_eq!(s.discovery.mode, DiscoveryMode::Standalone);
        assert_eq!(s.nacos.server_addr, "127.0.0.1:8848");
        assert_eq!(s.nacos.namespace, "public");
        assert_eq!(s.nacos.group, "DEFAULT_GROUP");
        assert_eq!(s.nacos.service_name, "jobflow-scheduler");
        assert_eq!(s.nacos.jobs_data_id, "");
        assert_eq!(s.nacos.jobs_group, "JOBFLOW");
        assert_eq!(s.scheduler.timezone, TimeZoneName::UTC);
        assert_eq!(s.scheduler.ownership, OwnershipStrategy::JavaHash);
        assert_eq!(s.compensation.interval_seconds.get(), 60);
        assert_eq!(s.compensation.stuck_after_seconds.get(), 600);
    }

    #[test]
    fn layers_apply_in_order() {
        let s = load(
            &[
                (
                    "default.toml",
                    "[server]\nport = 9000\n[scheduler]\ntimezone = \"Asia/Shanghai\"",
                ),
                (
                    "prod.toml",
                    "[server]\nport = 9100\n[executors.static]\norders = [\"127.0.0.1:9001\"]",
                ),
            ],
            &[
                ("SERVER__PORT", "9200"),
                ("NACOS__PASSWORD", "12345"),
                ("DISCOVERY__ADVERTISE_IP", "10.1.2.3"),
            ],
        )
        .unwrap();
        assert_eq!(s.server.port, 9200);
        assert_eq!(s.scheduler.timezone.name(), "Asia/Shanghai");
        assert_eq!(s.executors.static_["orders"][0].as_str(), "127.0.0.1:9001");
        assert_eq!(s.nacos.password.as_ref().unwrap().expose(), "12345");
        assert_eq!(s.advertised_addr(), "10.1.2.3:9200");
    }

    #[test]
    fn errors_name_the_key() {
        let e = load(&[], &[("SERVER__PORT", "eighty")])
            .unwrap_err()
            .to_string()
            .to_lowercase();
        assert!(e.contains("server.port"), "{e}");
        let e = load(&[], &[("SCHEDULER__TIMEZONE", "Mars/Olympus")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("scheduler.timezone"), "{e}");
        let e = load(&[], &[("DATABASE__URL", "postgres://x")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("database.url"), "{e}");
        let e = load(&[("default.toml", "[server]\nprot = 1")], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("prot"), "{e}");
        let e = load(
            &[("default.toml", "[executors.static]\na = [\"nohost\"]")],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("executors.static"), "{e}");
    }

    #[test]
    fn nacos_mode_needs_tokens_or_an_explicit_opt_out() {
        let e = load(&[], &[("DISCOVERY__MODE", "nacos")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("auth.tokens"), "{e}");
        assert!(
            load(
                &[],
                &[("DISCOVERY__MODE", "nacos"), ("AUTH__ENABLED", "false")]
            )
            .is_ok()
        );
        let toml = "[discovery]\nmode = \"nacos\"\n[[auth.tokens]]\nname = \"ops\"\nrole = \"operator\"\ntoken_sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"\n";
        let s = load(&[("default.toml", toml)], &[]).unwrap();
        assert_eq!(s.auth.tokens[0].role, Role::Operator);
        let e = load(
            &[(
                "default.toml",
                "[[auth.tokens]]\nname = \"x\"\nrole = \"admin\"\ntoken = \"short\"\n",
            )],
            &[],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("16 characters"), "{e}");
    }

    #[test]
    fn tokens_come_from_the_environment_or_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("token");
        std::fs::write(&file, "file-token-0123456789\n").unwrap();
        let var = format!("JFTEST_TOKEN_{}", rand::random::<u32>());
        // SAFETY: a variable name unique to this test.
        unsafe { std::env::set_var(&var, "env-token-0123456789") };
        let toml = format!(
            "[[auth.tokens]]\nname = \"a\"\nrole = \"admin\"\ntoken_env = \"{var}\"\n[[auth.tokens]]\nname = \"b\"\nrole = \"viewer\"\ntoken_file = \"{}\"\n",
            file.display()
        );
        let s = load(&[("default.toml", &toml)], &[]).unwrap();
        assert_eq!(
            s.auth.tokens[0].token.as_ref().unwrap().expose(),
            "env-token-0123456789"
        );
        assert_eq!(
            s.auth.tokens[1].token.as_ref().unwrap().expose(),
            "file-token-0123456789"
        );
        let missing = "[[auth.tokens]]\nname = \"a\"\nrole = \"admin\"\ntoken_env = \"JFTEST_SURELY_UNSET\"\n";
        let e = load(&[("default.toml", missing)], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("JFTEST_SURELY_UNSET"), "{e}");
    }

    #[test]
    fn secrets_from_the_environment_stay_text() {
        let s = load(
            &[],
            &[
                ("DATABASE__PASSWORD", "0815"),
                ("NACOS__USERNAME", "007"),
                ("NACOS__PASSWORD", "1e3"),
                ("EXECUTOR__SIGNING_SECRET", "true"),
                ("SERVER__PORT", "9001"),
                ("AUTH__ENABLED", "false"),
            ],
        )
        .unwrap();
        assert_eq!(s.database.password.unwrap().expose(), "0815");
        assert_eq!(s.nacos.username.as_deref(), Some("007"));
        assert_eq!(s.nacos.password.unwrap().expose(), "1e3");
        assert_eq!(s.executor.signing_secret.unwrap().expose(), "true");
        assert_eq!(s.server.port, 9001);
        assert!(!s.auth.enabled);
    }

    #[test]
    fn positive_values_are_types() {
        for (var, key) in [
            (
                "COMPENSATION__INTERVAL_SECONDS",
                "compensation.interval_seconds",
            ),
            ("DATABASE__MAX_CONNECTIONS", "database.max_connections"),
            ("DATABASE__API_CONNECTIONS", "database.api_connections"),
            ("EXECUTOR__MAX_IN_FLIGHT", "executor.max_in_flight"),
            (
                "SCHEDULER__JOB_REFRESH_MILLIS",
                "scheduler.job_refresh_millis",
            ),
            (
                "SERVER__REQUEST_TIMEOUT_SECONDS",
                "server.request_timeout_seconds",
            ),
        ] {
            let e = load(&[], &[(var, "0")]).unwrap_err();
            assert_eq!(e.key(), key, "{e}");
            assert!(e.to_string().contains(var), "{e}");
        }
        let e = load(&[], &[("DISCOVERY__ADVERTISE_IP", "jobflow-1")]).unwrap_err();
        assert_eq!(e.key(), "discovery.advertise_ip", "{e}");
    }

    #[test]
    fn database_tls_settings_are_checked_at_load() {
        let s = load(
            &[],
            &[(
                "DATABASE__URL",
                "mysql://u:p@db:3306/jobflow?ssl-mode=verify_identity&ssl-ca=/etc/ca.pem",
            )],
        );
        assert!(s.is_ok(), "{s:?}");
        let e = load(
            &[],
            &[("DATABASE__URL", "mysql://u:hunter2@db/x?ssl-mode=sometimes")],
        )
        .unwrap_err();
        assert_eq!(e.key(), "database.url", "{e}");
        assert!(
            e.to_string().contains("sometimes") && !e.to_string().contains("hunter2"),
            "{e}"
        );
    }

    #[test]
    fn an_empty_signing_secret_is_refused() {
        let e = load(&[], &[("EXECUTOR__SIGNING_SECRET", "")]).unwrap_err();
        assert_eq!(e.key(), "executor.signing_secret", "{e}");
    }

    #[test]
    fn unknown_keys_are_named_in_full() {
        let e = load(&[("default.toml", "[server]\nprot = 1")], &[]).unwrap_err();
        assert_eq!(e.key(), "server.prot", "{e}");
        let e = load(&[], &[("SERVER__PROT", "1")]).unwrap_err();
        assert_eq!(e.key(), "server.prot", "{e}");
    }

    #[test]
    fn the_redacted_toml_hides_secrets_and_loads_back() {
        let s = load(
            &[(
                "default.toml",
                "[executors.static]\norders = [\"127.0.0.1:9001\"]",
            )],
            &[
                ("DATABASE__URL", "mysql://root:hunter2@127.0.0.1/x"),
                ("EXECUTOR__SIGNING_SECRET", "s3cr3t-signing"),
            ],
        )
        .unwrap();
        let text = s.to_redacted_toml();
        assert!(
            !text.contains("hunter2") && !text.contains("s3cr3t"),
            "{text}"
        );
        assert!(text.contains(REDACTED), "{text}");
        assert!(text.contains("orders = [\"127.0.0.1:9001\"]"), "{text}");
        let back = load(
            &[("default.toml", &text)],
            &[("DATABASE__URL", "mysql://root:hunter2@127.0.0.1/x")],
        )
        .unwrap();
        assert_eq!(back.executors.static_, s.executors.static_);
        assert_eq!(back.scheduler.timezone, s.scheduler.timezone);
    }

    #[test]
    fn secrets_are_redacted_in_debug_output() {
        let s = load(
            &[],
            &[("DATABASE__URL", "mysql://root:hunter2@127.0.0.1/x")],
        )
        .unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
