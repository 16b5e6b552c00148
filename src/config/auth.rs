//! `[auth]`: API tokens and their roles. A token is given as text, as its SHA-256, or by the
//! name of an environment variable or a file holding it; [`AuthSettings::resolve`] reads the
//! last two at load, so every later step sees the text or the hash.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret, invalid};

/// API roles, each including the ones before it.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    strum::IntoStaticStr,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
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
    /// The namespaces the token may act in; absent: every namespace.
    pub namespaces: Option<Vec<String>>,
}

/// `[auth.proxy]`: who a request comes from, as an authenticating proxy in front of JobFlow
/// (oauth2-proxy and the like) says in a header. Only requests whose peer address is one of
/// `trusted` are believed; from anywhere else the header is ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProxySettings {
    /// The header holding the user's name (oauth2-proxy: `X-Forwarded-User`, or
    /// `X-Forwarded-Email`).
    pub header: String,
    /// The header holding the user's groups, comma-separated (oauth2-proxy:
    /// `X-Forwarded-Groups`); optional.
    pub groups_header: Option<String>,
    /// The proxies' addresses: IP addresses or CIDR blocks (`10.0.0.0/8`).
    pub trusted: Vec<String>,
    /// Users by name, and their role.
    pub users: std::collections::BTreeMap<String, Role>,
    /// Groups by name, and their role; a user in several gets the highest.
    pub groups: std::collections::BTreeMap<String, Role>,
    /// The role of a user the proxy vouches for who is in neither map; absent: such a user is
    /// refused (401).
    pub default_role: Option<Role>,
}

impl ProxySettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.header.is_empty() {
            return Err(invalid("auth.proxy.header", "is required".to_string()));
        }
        for h in std::iter::once(&self.header).chain(&self.groups_header) {
            axum::http::HeaderName::try_from(h.as_str())
                .map_err(|_| invalid("auth.proxy", format!("`{h}` is not a valid header name")))?;
        }
        if self.trusted.is_empty() {
            return Err(invalid(
                "auth.proxy.trusted",
                "must list the proxies' addresses".to_string(),
            ));
        }
        for t in &self.trusted {
            IpBlock::parse(t).map_err(|m| invalid("auth.proxy.trusted", format!("`{t}`: {m}")))?;
        }
        Ok(())
    }

    /// The trusted blocks (checked by [`ProxySettings::validate`]).
    pub fn trusted_blocks(&self) -> Vec<IpBlock> {
        self.trusted
            .iter()
            .filter_map(|t| IpBlock::parse(t).ok())
            .collect()
    }
}

/// An IP address, or a CIDR block of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpBlock {
    addr: std::net::IpAddr,
    prefix: u8,
}

impl IpBlock {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let (addr, prefix) = match raw.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (raw, None),
        };
        let addr: std::net::IpAddr = addr
            .trim()
            .parse()
            .map_err(|_| "not an IP address".to_string())?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("the prefix length must be 0 to {max}"))?,
        };
        Ok(Self { addr, prefix })
    }

    /// Whether `ip` is in the block (an IPv4 address mapped into IPv6 counts as IPv4).
    pub fn contains(&self, ip: std::net::IpAddr) -> bool {
        use std::net::IpAddr;
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        let keep = |width: u32| -> u128 {
            match u32::from(self.prefix) {
                0 => 0,
                p => (u128::MAX >> (128 - width)) & !((1u128 << (width - p)) - 1),
            }
        };
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                let mask = keep(32);
                u128::from(u32::from(a)) & mask == u128::from(u32::from(b)) & mask
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => {
                let mask = keep(128);
                u128::from(a) & mask == u128::from(b) & mask
            }
            _ => false,
        }
    }
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
    /// Trust an authenticating proxy's identity header (absent: no proxy is trusted).
    pub proxy: Option<ProxySettings>,
}

impl Default for AuthSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            tokens: Vec::new(),
            protect_metrics: false,
            proxy: None,
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
        if let Some(proxy) = &self.proxy {
            proxy.validate()?;
        }
        for (i, t) in self.tokens.iter().enumerate() {
            if t.namespaces.as_ref().is_some_and(Vec::is_empty) {
                return Err(invalid(
                    "auth.tokens",
                    format!(
                        "token `{}`: `namespaces` must list at least one (leave it out for every namespace)",
                        t.name
                    ),
                ));
            }
            for ns in t.namespaces.iter().flatten() {
                crate::jobs::Namespace::parse(ns).map_err(|m| {
                    invalid(
                        "auth.tokens",
                        format!("token `{}`: namespace `{ns}` {m}", t.name),
                    )
                })?;
            }
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
