//! Layered configuration: built-in defaults, `config/default.toml`, `config/{profile}.toml`,
//! the `--config` file, then `JOBFLOW__SECTION__KEY` environment variables. Everything is
//! checked once at start-up; an error names the offending key.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Deserializer, Serialize};

use crate::jobs::TimeZoneName;

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
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    pub host: String,
    pub port: u16,
    pub request_timeout_seconds: u64,
    /// On shutdown, how long in-flight executor calls may still finish.
    pub shutdown_grace_seconds: u64,
}

impl Default for ServerSettings {
    fn default() -> Self {
        Self {
            host: "0.0.0.0".into(),
            port: 8080,
            request_timeout_seconds: 30,
            shutdown_grace_seconds: 30,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DatabaseSettings {
    /// `sqlite://path` or `mysql://user@host:port/db`.
    pub url: Secret,
    /// Overrides the password of a MySQL URL, so the URL itself can stay secret-free.
    pub password: Option<Secret>,
    pub password_file: Option<PathBuf>,
    pub max_connections: u32,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self {
            url: Secret("sqlite://data/jobflow.db".into()),
            password: None,
            password_file: None,
            max_connections: 10,
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
    /// The address other instances and Nacos reach this instance at (containers set it).
    pub advertise_ip: Option<String>,
    pub advertise_port: Option<u16>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct NacosSettings {
    pub server_addr: String,
    pub namespace: String,
    pub group: String,
    #[serde(deserialize_with = "lossy_opt_string")]
    pub username: Option<String>,
    pub password: Option<Secret>,
    pub password_file: Option<PathBuf>,
    pub service_name: String,
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

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerSettings {
    /// Time zone of jobs created without one.
    pub timezone: String,
    pub ownership: OwnershipStrategy,
    pub misfire_threshold_seconds: u64,
    /// A fire at most this late is on time, whatever the misfire policy.
    pub misfire_tolerance_millis: u64,
    pub job_refresh_millis: u64,
    /// First retry delay; doubled per retry, with jitter, up to the maximum.
    pub retry_backoff_millis: u64,
    pub retry_backoff_max_millis: u64,
}

impl Default for SchedulerSettings {
    fn default() -> Self {
        Self {
            timezone: "UTC".into(),
            ownership: OwnershipStrategy::JavaHash,
            misfire_threshold_seconds: 600,
            misfire_tolerance_millis: 5000,
            job_refresh_millis: 1000,
            retry_backoff_millis: 1000,
            retry_backoff_max_millis: 60_000,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CompensationSettings {
    pub interval_seconds: u64,
    pub stuck_after_seconds: u64,
    pub pending_grace_seconds: u64,
}

impl Default for CompensationSettings {
    fn default() -> Self {
        Self {
            interval_seconds: 60,
            stuck_after_seconds: 600,
            pending_grace_seconds: 30,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorSettings {
    pub path_prefix: String,
    pub signing_secret: Option<Secret>,
    pub signing_secret_file: Option<PathBuf>,
    pub max_in_flight: usize,
}

impl Default for ExecutorSettings {
    fn default() -> Self {
        Self {
            path_prefix: "/internal/job".into(),
            signing_secret: None,
            signing_secret_file: None,
            max_in_flight: 256,
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorsSettings {
    /// Executor addresses per service name, used in standalone mode.
    #[serde(rename = "static")]
    pub static_: BTreeMap<String, Vec<String>>,
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

/// A configuration value that must never reach a log line or an error message.
#[derive(Clone, Default, PartialEq, Eq, Serialize)]
pub struct Secret(pub String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("\"<redacted>\"")
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        lossy_string(d).map(Secret)
    }
}

/// A scalar as text. Environment values arrive typed (`JOBFLOW__NACOS__PASSWORD=123` is a
/// number), so string settings accept any scalar.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    S(String),
    I(i64),
    U(u64),
    F(f64),
    B(bool),
}

impl From<Scalar> for String {
    fn from(s: Scalar) -> String {
        match s {
            Scalar::S(s) => s,
            Scalar::I(i) => i.to_string(),
            Scalar::U(u) => u.to_string(),
            Scalar::F(f) => f.to_string(),
            Scalar::B(b) => b.to_string(),
        }
    }
}

fn lossy_string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Scalar::deserialize(d).map(String::from)
}

fn lossy_opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<Scalar>::deserialize(d)?.map(String::from))
}

/// A start-up configuration problem, always naming the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("configuration: {0}")]
    Load(#[from] Box<figment::Error>),
    #[error("configuration key `{key}`: {message}")]
    Invalid { key: &'static str, message: String },
}

fn invalid(key: &'static str, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        key,
        message: message.into(),
    }
}

impl Settings {
    /// Loads the layers from the current directory and the process environment.
    pub fn load(extra_file: Option<&Path>) -> Result<Self, ConfigError> {
        let profile = std::env::var("JOBFLOW_PROFILE").ok();
        Self::load_from(
            Path::new("config"),
            profile.as_deref(),
            extra_file,
            Env::prefixed("JOBFLOW__"),
        )
    }

    fn load_from(
        dir: &Path,
        profile: Option<&str>,
        extra_file: Option<&Path>,
        env: Env,
    ) -> Result<Self, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()))
            .merge(Toml::file(dir.join("default.toml")));
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
        let mut settings: Settings = figment.merge(env.split("__")).extract().map_err(Box::new)?;
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
                *into = Some(Secret(text.trim_end_matches(['\r', '\n']).to_string()));
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
                t.token = Some(Secret(value));
            }
            let file = t.token_file.take();
            read("auth.tokens", &file, &mut t.token)?;
        }
        Ok(())
    }

    /// Semantic checks the types alone cannot express.
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
        if self.database.max_connections == 0 {
            return Err(invalid("database.max_connections", "must be at least 1"));
        }
        if self.server.request_timeout_seconds == 0 {
            return Err(invalid(
                "server.request_timeout_seconds",
                "must be at least 1",
            ));
        }
        TimeZoneName::parse(&self.scheduler.timezone)
            .map_err(|e| invalid("scheduler.timezone", e.to_string()))?;
        if self.scheduler.job_refresh_millis == 0 {
            return Err(invalid(
                "scheduler.job_refresh_millis",
                "must be at least 1",
            ));
        }
        if self.scheduler.retry_backoff_millis == 0
            || self.scheduler.retry_backoff_max_millis < self.scheduler.retry_backoff_millis
        {
            return Err(invalid(
                "scheduler.retry_backoff_max_millis",
                "must be at least scheduler.retry_backoff_millis, which must be at least 1",
            ));
        }
        if self.scheduler.misfire_tolerance_millis > self.scheduler.misfire_threshold_seconds * 1000
        {
            return Err(invalid(
                "scheduler.misfire_tolerance_millis",
                "must not exceed scheduler.misfire_threshold_seconds",
            ));
        }
        if self.compensation.interval_seconds == 0 {
            return Err(invalid(
                "compensation.interval_seconds",
                "must be at least 1",
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
        if self.executor.max_in_flight == 0 {
            return Err(invalid("executor.max_in_flight", "must be at least 1"));
        }
        if let Some(ip) = &self.discovery.advertise_ip
            && ip.parse::<std::net::IpAddr>().is_err()
        {
            return Err(invalid(
                "discovery.advertise_ip",
                format!("`{ip}` is not an IP address"),
            ));
        }
        for (service, addrs) in &self.executors.static_ {
            for addr in addrs {
                crate::discovery::InstanceAddr::parse(addr).map_err(|e| {
                    invalid("executors.static", format!("service `{service}`: {e}"))
                })?;
            }
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
        tracing_subscriber::EnvFilter::try_new(&self.log.level)
            .map_err(|e| invalid("log.level", e.to_string()))?;
        Ok(())
    }

    /// The `ip:port` this instance is known by.
    pub fn advertised_addr(&self) -> String {
        let ip = self
            .discovery
            .advertise_ip
            .clone()
            .unwrap_or_else(|| "127.0.0.1".into());
        let port = self.discovery.advertise_port.unwrap_or(self.server.port);
        format!("{ip}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        Settings::load_from(dir.path(), Some("prod"), None, Env::prefixed(&prefix))
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
        assert_eq!(s.scheduler.timezone, "UTC");
        assert_eq!(s.scheduler.ownership, OwnershipStrategy::JavaHash);
        assert_eq!(s.compensation.interval_seconds, 60);
        assert_eq!(s.compensation.stuck_after_seconds, 600);
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
        assert_eq!(s.scheduler.timezone, "Asia/Shanghai");
        assert_eq!(s.executors.static_["orders"], vec!["127.0.0.1:9001"]);
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
    fn secrets_are_redacted_in_debug_output() {
        let s = load(
            &[],
            &[("DATABASE__URL", "mysql://root:hunter2@127.0.0.1/x")],
        )
        .unwrap();
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
