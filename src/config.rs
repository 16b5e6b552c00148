//! Layered configuration: built-in defaults, `config/default.toml`, `config/{profile}.toml`,
//! the `--config` file, then `JOBFLOW__SECTION__KEY` environment variables. The settings are
//! types, not checked text: a value that must be positive is a `NonZero*`, the time zone is
//! parsed once, executor addresses are [`InstanceAddr`]s, secrets are [`Secret`]s. The few
//! rules that span keys are checked once in [`Settings::validate`]. Every error names the key.

mod env;
mod secret;

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::num::{NonZeroU16, NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::str::FromStr;

use figment::Figment;
use figment::providers::{Format, Toml};
use serde::{Deserialize, Serialize};

use crate::discovery::addr::InstanceAddr;
use crate::jobs::TimeZoneName;

pub use secret::{REDACTED, Secret};

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
    pub alerts: crate::alerts::AlertsSettings,
    pub retention: RetentionSettings,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    pub host: String,
    /// 0 picks a free port (tests).
    pub port: u16,
    pub request_timeout_seconds: NonZeroU64,
    /// On shutdown, how long in-flight executor calls may still finish.
    pub shutdown_grace_seconds: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            host: "0.0.0.0".into(),
            port: 8080,
            request_timeout_seconds: nonzero(30),
            shutdown_grace_seconds: 30,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// `sqlite://path` or `mysql://user@host:port/db` (a secret: it may carry a password,
    /// which is all `check-config` hides of it).
    #[serde(serialize_with = "url_without_password")]
    pub url: Secret,
    /// Overrides the password of a MySQL URL, so the URL itself can stay secret-free.
    pub password: Option<Secret>,
    pub password_file: Option<PathBuf>,
    pub max_connections: NonZeroU32,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self {
            url: Secret::new("sqlite://data/jobflow.db"),
            password: None,
            password_file: None,
            max_connections: NonZeroU32::new(10).expect("positive"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum DiscoveryMode {
    #[default]
    Standalone,
    Nacos,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DiscoverySettings {
    pub mode: DiscoveryMode,
    /// The address other instances, Nacos and executors reach this instance at (containers
    /// set it); detected from the outbound interface when unset.
    pub advertise_ip: Option<IpAddr>,
    /// Default: the port the API listens on.
    pub advertise_port: Option<NonZeroU16>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NacosSettings {
    pub server_addr: String,
    pub namespace: String,
    pub group: String,
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub password_file: Option<PathBuf>,
    pub service_name: String,
    /// Data id of the jobs document in the config centre; empty: jobs come from the API only.
    pub jobs_data_id: String,
    pub jobs_group: String,
}

impl Default for NacosSettings {
    fn default() -> Self {
        Self {
            server_addr: "127.0.0.1:8848".into(),
            namespace: "public".into(),
            group: "DEFAULT_GROUP".into(),
            username: None,
            password: None,
            password_file: None,
            service_name: "jobflow-scheduler".into(),
            jobs_data_id: String::new(),
            jobs_group: "JOBFLOW".into(),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum OwnershipStrategy {
    #[default]
    JavaHash,
    Rendezvous,
}

/// A longer window holds more fires in memory and in PENDING rows for no gain in precision.
const MAX_CLAIM_AHEAD_MILLIS: u64 = 60_000;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerSettings {
    /// Time zone of jobs created without one.
    pub timezone: TimeZoneName,
    pub ownership: OwnershipStrategy,
    pub misfire_threshold_seconds: u64,
    /// A fire at most this late is on time, whatever the misfire policy.
    pub misfire_tolerance_millis: u64,
    pub job_refresh_millis: NonZeroU64,
    /// How far ahead of their instant due fires are claimed and their rows written, so the
    /// calls go out at the instant with no database round trip; 0 claims at the instant.
    pub claim_ahead_millis: u64,
    /// First retry delay; doubled per retry, with jitter, up to the maximum.
    pub retry_backoff_millis: NonZeroU64,
    pub retry_backoff_max_millis: NonZeroU64,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            timezone: TimeZoneName::UTC,
            ownership: OwnershipStrategy::JavaHash,
            misfire_threshold_seconds: 600,
            misfire_tolerance_millis: 5000,
            job_refresh_millis: nonzero(1000),
            claim_ahead_millis: 2000,
            retry_backoff_millis: nonzero(1000),
            retry_backoff_max_millis: nonzero(60_000),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompensationSettings {
    /// Overdue RUNNING rows (past their job's timeout) are looked at this often.
    pub interval_seconds: NonZeroU64,
    /// An executor that cannot tell whether it still runs an execution is waited for this
    /// long before the execution is marked TIMEOUT and retried.
    pub stuck_after_seconds: NonZeroU64,
    /// The lease: a PENDING row stays its dispatcher's this long past its due time; after it,
    /// compensation dispatches the row.
    pub pending_grace_seconds: u64,
    /// Lease-expired PENDING rows and RUNNING rows of departed schedulers are looked at this
    /// often.
    pub recovery_interval_millis: u64,
}

impl Default for CompensationSettings {
    fn default() -> Self {
        Self {
            interval_seconds: nonzero(60),
            stuck_after_seconds: nonzero(600),
            pending_grace_seconds: 10,
            recovery_interval_millis: 1000,
        }
    }
}

/// `[retention]`: how long executions are kept (SPEC §13); the purge is `retention::Retention`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RetentionSettings {
    /// Executions triggered more than this many days ago are deleted; 0 keeps them forever.
    pub execution_days: u32,
    /// At most this many executions are kept per job (the newest); 0 means no cap.
    pub max_executions_per_job: u32,
    /// How often the leader purges.
    pub interval_seconds: NonZeroU64,
    /// Rows per DELETE statement.
    pub chunk_size: NonZeroU32,
    /// After each chunk the purge rests this many times as long as the chunk took, so it
    /// holds the database at most 1 / (1 + factor) of the time and slows down by itself when
    /// the database is busy; 0 purges back to back.
    pub pause_factor: u32,
}

impl Default for RetentionSettings {
    fn default() -> Self {
        Self {
            execution_days: 30,
            max_executions_per_job: 0,
            interval_seconds: NonZeroU64::new(600).expect("non-zero"),
            chunk_size: NonZeroU32::new(1000).expect("non-zero"),
            pause_factor: 8,
        }
    }
}

/// A week of a thousand executions per second is 600 million rows: a longer window is a
/// typo, and its cutoff could leave the range of a timestamp.
const MAX_DAYS: u32 = 36_500;
const MAX_CHUNK: u32 = 100_000;
/// A rest a hundred times the work purges too slowly to keep up with any real load.
const MAX_PAUSE_FACTOR: u32 = 100;

impl RetentionSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.execution_days > MAX_DAYS {
            return Err(ConfigError::Invalid {
                key: "retention.execution_days".into(),
                message: format!("must be at most {MAX_DAYS} (0 keeps executions forever)"),
            });
        }
        if self.chunk_size.get() > MAX_CHUNK {
            return Err(ConfigError::Invalid {
                key: "retention.chunk_size".into(),
                message: format!("must be between 1 and {MAX_CHUNK}"),
            });
        }
        if self.pause_factor > MAX_PAUSE_FACTOR {
            return Err(ConfigError::Invalid {
                key: "retention.pause_factor".into(),
                message: format!("must be at most {MAX_PAUSE_FACTOR} (0 purges back to back)"),
            });
        }
        Ok(())
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorSettings {
    pub path_prefix: String,
    pub signing_secret: Option<Secret>,
    pub signing_secret_file: Option<PathBuf>,
    pub max_in_flight: NonZeroUsize,
    /// Fires between their hand-off (their claim, up to `scheduler.claim_ahead_millis` ahead)
    /// and their last result. Fires beyond it wait in the schedule, under the misfire policy.
    pub max_backlog: NonZeroUsize,
}

impl Default for ExecutorSettings {
    fn default() -> Self {
        Self {
            path_prefix: "/internal/job".into(),
            signing_secret: None,
            signing_secret_file: None,
            max_in_flight: NonZeroUsize::new(256).expect("positive"),
            max_backlog: NonZeroUsize::new(16_384).expect("positive"),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorsSettings {
    /// Executor addresses per service name, used in standalone mode; parsed once, here.
    #[serde(rename = "static")]
    pub static_: BTreeMap<String, Vec<InstanceAddr>>,
}

/// API roles, each including the ones before it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Reads jobs, executions, the cluster view.
    #[default]
    Viewer,
    /// Also triggers, retries, enables and disables jobs.
    Operator,
    /// Also creates, changes and deletes jobs.
    Admin,
}

/// One API token. Give exactly one of `token` (plain), `token_sha256` (hex SHA-256 of the
/// token, safe to keep in a file), `token_env` (the name of an environment variable holding
/// it) or `token_file` (a file holding it).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenSettings {
    /// Who this is: recorded as created_by / updated_by.
    pub name: String,
    pub role: Role,
    pub token: Option<Secret>,
    pub token_sha256: Option<String>,
    pub token_env: Option<String>,
    pub token_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    /// Require bearer tokens on the API. Turning it off in nacos mode is logged as a warning
    /// at every start.
    pub enabled: bool,
    pub tokens: Vec<TokenSettings>,
    /// Require a viewer token for `/metrics` too.
    pub protect_metrics: bool,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            tokens: Vec::new(),
            protect_metrics: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    /// Default filter; RUST_LOG wins when set.
    pub level: String,
}

impl Default for LogSettings {
    fn default() -> Self {
        Self {
            format: LogFormat::Text,
            level: "info".into(),
        }
    }
}

/// `mysql://user:pass@host/db` shown as `mysql://user:<redacted>@host/db`.
fn url_without_password<S: serde::Serializer>(url: &Secret, s: S) -> Result<S::Ok, S::Error> {
    let url = url.expose();
    let shown = match url.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((userinfo, host)) => match userinfo.split_once(':') {
                Some((user, _)) => format!("{scheme}://{user}:{REDACTED}@{host}"),
                None => url.to_string(),
            },
            None => url.to_string(),
        },
        None => url.to_string(),
    };
    s.serialize_str(&shown)
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
        fn read(
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
        read(
            "database.password_file",
            &self.database.password_file,
            &mut self.database.password,
        )?;
        read(
            "nacos.password_file",
            &self.nacos.password_file,
            &mut self.nacos.password,
        )?;
        read(
            "executor.signing_secret_file",
            &self.executor.signing_secret_file,
            &mut self.executor.signing_secret,
        )?;
        for t in &mut self.auth.tokens {
            if t.token.is_some() && (t.token_env.is_some() || t.token_file.is_some()) {
                return Err(invalid(
                    "auth.tokens",
                    format!(
                        "token `{}`: give exactly one of token, token_sha256, token_env, token_file",
                        t.name
                    ),
                ));
            }
            if let Some(var) = t.token_env.take() {
                let value = std::env::var(&var).map_err(|_| {
                    invalid(
                        "auth.tokens",
                        format!("token `{}`: environment variable {var} is not set", t.name),
                    )
                })?;
                t.token = Some(Secret::new(value));
            }
            let file = t.token_file.take();
            read("auth.tokens", &file, &mut t.token)?;
        }
        Ok(())
    }

    /// The rules that span keys or text the types cannot hold.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let url = self.database.url.expose();
        if !(url.starts_with("sqlite:")
            || url.starts_with("mysql://")
            || url.starts_with("mariadb://"))
        {
            return Err(invalid(
                "database.url",
                "must start with sqlite:// or mysql://",
            ));
        }
        if let Some(rest) = url
            .strip_prefix("mysql://")
            .or_else(|| url.strip_prefix("mariadb://"))
        {
            // TLS settings (`ssl-mode`, `ssl-ca`) and the rest of the URL are read by sqlx;
            // its messages name the parameter, never the password.
            sqlx::mysql::MySqlConnectOptions::from_str(&format!("mysql://{rest}"))
                .map_err(|e| invalid("database.url", e.to_string()))?;
        }
        if self.scheduler.retry_backoff_max_millis < self.scheduler.retry_backoff_millis {
            return Err(invalid(
                "scheduler.retry_backoff_max_millis",
                "must be at least scheduler.retry_backoff_millis",
            ));
        }
        if self.scheduler.misfire_tolerance_millis
            > self
                .scheduler
                .misfire_threshold_seconds
                .saturating_mul(1000)
        {
            return Err(invalid(
                "scheduler.misfire_tolerance_millis",
                "must not exceed scheduler.misfire_threshold_seconds",
            ));
        }
        if self
            .executor
            .signing_secret
            .as_ref()
            .is_some_and(|s| s.expose().is_empty())
        {
            return Err(invalid(
                "executor.signing_secret",
                "is empty; leave it unset to send unsigned calls",
            ));
        }
        if self.scheduler.claim_ahead_millis > MAX_CLAIM_AHEAD_MILLIS {
            return Err(invalid(
                "scheduler.claim_ahead_millis",
                format!("must be at most {MAX_CLAIM_AHEAD_MILLIS} (0 claims at the instant)"),
            ));
        }
        if self.executor.max_backlog < self.executor.max_in_flight {
            return Err(invalid(
                "executor.max_backlog",
                "must be at least executor.max_in_flight",
            ));
        }
        if self.compensation.pending_grace_seconds < 2 {
            return Err(invalid(
                "compensation.pending_grace_seconds",
                "must be at least 2",
            ));
        }
        if self.compensation.recovery_interval_millis < 100 {
            return Err(invalid(
                "compensation.recovery_interval_millis",
                "must be at least 100",
            ));
        }
        if !self.executor.path_prefix.is_empty()
            && (!self.executor.path_prefix.starts_with('/')
                || self.executor.path_prefix.ends_with('/'))
        {
            return Err(invalid(
                "executor.path_prefix",
                "must start with '/' and not end with '/'",
            ));
        }
        for (i, t) in self.auth.tokens.iter().enumerate() {
            if t.name.is_empty() || t.name.len() > 100 {
                return Err(invalid(
                    "auth.tokens",
                    format!("token #{i}: `name` must be 1 to 100 characters"),
                ));
            }
            match (&t.token, &t.token_sha256) {
                (Some(plain), None) if plain.expose().len() >= 16 => {}
                (Some(_), None) => {
                    return Err(invalid(
                        "auth.tokens",
                        format!("token `{}`: at least 16 characters", t.name),
                    ));
                }
                (None, Some(h)) if h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()) => {}
                (None, Some(_)) => {
                    return Err(invalid(
                        "auth.tokens",
                        format!("token `{}`: token_sha256 must be 64 hex digits", t.name),
                    ));
                }
                _ => {
                    return Err(invalid(
                        "auth.tokens",
                        format!(
                            "token `{}`: give exactly one of token, token_sha256",
                            t.name
                        ),
                    ));
                }
            }
        }
        if self.auth.enabled
            && self.auth.tokens.is_empty()
            && self.discovery.mode == DiscoveryMode::Nacos
        {
            return Err(invalid(
                "auth.tokens",
                "nacos mode serves a shared cluster and needs API tokens; configure auth.tokens or set auth.enabled = false explicitly",
            ));
        }
        self.alerts.validate()?;
        self.retention.validate()?;
        if !self.nacos.jobs_data_id.is_empty() && self.nacos.jobs_group.is_empty() {
            return Err(invalid(
                "nacos.jobs_group",
                "must not be empty when nacos.jobs_data_id is set",
            ));
        }
        tracing_subscriber::EnvFilter::try_new(&self.log.level)
            .map_err(|e| invalid("log.level", e.to_string()))?;
        Ok(())
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

    #[test]
    fn retention_limits_name_their_key() {
        assert!(RetentionSettings::default().validate().is_ok());
        let too_slow = RetentionSettings {
            pause_factor: MAX_PAUSE_FACTOR + 1,
            ..RetentionSettings::default()
        };
        assert!(
            matches!(too_slow.validate(), Err(ConfigError::Invalid { key, .. }) if key == "retention.pause_factor")
        );
    }

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
