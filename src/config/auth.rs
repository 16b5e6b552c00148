//! `[auth]`: API tokens and their roles. A token is given as text, as its SHA-256, or by the
//! name of an environment variable or a file holding it; [`AuthSettings::resolve`] reads the
//! last two at load, so every later step sees the text or the hash.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret, invalid};

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

impl AuthSettings {
    /// Reads the tokens given by environment variable or file into `token`.
    pub fn resolve(&mut self) -> Result<(), ConfigError> {
        for t in &mut self.tokens {
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
            super::read_secret_file("auth.tokens", &file, &mut t.token)?;
        }
        Ok(())
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        for (i, t) in self.tokens.iter().enumerate() {
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
        Ok(())
    }
}
