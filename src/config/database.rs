//! `[database]`: which database, and the credentials kept out of the URL.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::{ConfigError, REDACTED, Secret, invalid};

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
    /// Connections of the scheduling path (fires, results, compensation, retention). Five by
    /// default: more transactions at once cost MariaDB more than they bring, and slow every
    /// other reader of the database (docs/benchmarks.md, "Five connections for the fire path").
    pub max_connections: NonZeroU32,
    /// Connections of the API, a pool of its own: an operator's reads and edits never queue
    /// behind the fire path when it saturates. On SQLite these are read-only connections for
    /// the API's reads; its writes go through the one writer.
    pub api_connections: NonZeroU32,
}

impl Default for DatabaseSettings {
    fn default() -> Self {
        Self {
            url: Secret::new("sqlite://data/jobflow.db"),
            password: None,
            password_file: None,
            max_connections: NonZeroU32::new(5).expect("positive"),
            api_connections: NonZeroU32::new(4).expect("positive"),
        }
    }
}

impl DatabaseSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        let url = self.url.expose();
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
        Ok(())
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
