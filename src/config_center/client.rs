//! The Nacos config centre through nacos-sdk's config client (gRPC; Nacos 2 and 3, rnacos):
//! read one config, and be woken when it changes.
//!
//! Two config services, because of what the SDK keeps. A service that listens to a config
//! caches its content, answers `get_config` from that cache, and tells its listener of changed
//! content but never of a removed config (its re-read answers "not found", which the SDK only
//! logs). Removing the document must remove its jobs, so:
//! - the *watcher* listens, and a push only wakes the follower ([`NacosConfigClient::pushed`]);
//! - the *reader* listens to nothing, so every [`NacosConfigClient::get`] asks the server, and
//!   "not found" means there is no document.
//!
//! The follower reads after each push and every [`RESYNC`] besides: a changed document is
//! applied as soon as it is pushed, a removed one within [`RESYNC`].
//!
//! Each service connects on first use and again after a failed attempt, so Nacos being away at
//! start-up delays the document without stopping the instance.
//!
//! Logins: the SDK logs in by itself and only logs a refusal. [`check_login`] makes the same
//! login (`/nacos/v1/auth/login`, the one the SDK uses) once at start-up, so wrong credentials
//! stop start-up with a message naming the keys to check. The password travels only in the
//! login form body, and errors are built without URLs.

use std::sync::Arc;
use std::time::Duration;

use nacos_sdk::api::config::{
    ConfigChangeListener, ConfigResponse, ConfigService, ConfigServiceBuilder,
};
use tokio::sync::{Notify, OnceCell};

use crate::config::{NacosSettings, namespace_id};

/// How often the document is read even without a push: the bound on seeing a removal.
pub const RESYNC: Duration = Duration::from_secs(5);

/// One config: data id, group and namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigKey {
    pub data_id: String,
    pub group: String,
    /// The id sent to Nacos ([`namespace_id`]).
    pub namespace: String,
}

impl ConfigKey {
    pub fn new(data_id: &str, group: &str, namespace: &str) -> Self {
        Self {
            data_id: data_id.to_string(),
            group: group.to_string(),
            namespace: namespace_id(namespace).to_string(),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NacosError {
    #[error(
        "Nacos at {addr} refused the login of user `{user}` ({status}): check nacos.username and nacos.password"
    )]
    LoginRefused {
        addr: String,
        user: String,
        status: u16,
    },
    #[error("Nacos at {addr} is unreachable: {message}")]
    Unreachable { addr: String, message: String },
    #[error("Nacos at {addr} answered {status} to the login: {body}")]
    Login {
        addr: String,
        status: u16,
        body: String,
    },
    #[error("Nacos at {addr}, {what}: {message}")]
    Config {
        addr: String,
        what: &'static str,
        message: String,
    },
}

/// Logs in once with `nacos.username` / `nacos.password` (a no-op without a username),
/// trying each configured server until one answers.
pub async fn check_login(settings: &NacosSettings) -> Result<(), NacosError> {
    let Some(user) = &settings.username else {
        return Ok(());
    };
    let password = settings.password.as_ref().map(|p| p.expose()).unwrap_or("");
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .timeout(Duration::from_secs(10))
        .build()
        .expect("an HTTP client with default TLS settings");
    let mut last = None;
    for addr in base_urls(&settings.server_addr) {
        let resp = match http
            .post(format!("{addr}/nacos/v1/auth/login"))
            .form(&[("username", user.as_str()), ("password", password)])
            .send()
            .await
        {
            Ok(resp) => resp,
            Err(e) => {
                last = Some(NacosError::Unreachable {
                    addr,
                    message: e.without_url().to_string(),
                });
                continue;
            }
        };
        let status = resp.status().as_u16();
        if status == 401 || status == 403 {
            return Err(NacosError::LoginRefused {
                addr,
                user: user.clone(),
                status,
            });
        }
        let body = resp.text().await.unwrap_or_default();
        let token = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .is_some_and(|v| v["accessToken"].is_string());
        if status == 200 && token {
            return Ok(());
        }
        return Err(NacosError::Login {
            addr,
            status,
            // The answer to a login echoes no secret; it is cut short all the same.
            body: body.chars().take(200).collect(),
        });
    }
    Err(last.unwrap_or_else(|| NacosError::Unreachable {
        addr: settings.server_addr.clone(),
        message: "no server address configured".into(),
    }))
}

/// `http://host:port` of each address in `nacos.server_addr`.
fn base_urls(server_addr: &str) -> Vec<String> {
    server_addr
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            let s = s.trim_end_matches('/');
            if s.starts_with("http://") || s.starts_with("https://") {
                s.to_string()
            } else {
                format!("http://{s}")
            }
        })
        .collect()
}

/// Wakes the follower on a push; the content is read again through the reader.
struct Pushed(Arc<Notify>);

impl ConfigChangeListener for Pushed {
    fn notify(&self, _: ConfigResponse) {
        self.0.notify_one();
    }
}

/// One config followed over gRPC: see the module doc.
pub struct NacosConfigClient {
    settings: NacosSettings,
    key: ConfigKey,
    reader: OnceCell<ConfigService>,
    watcher: OnceCell<ConfigService>,
    pushes: Arc<Notify>,
}

impl NacosConfigClient {
    pub fn new(settings: &NacosSettings, key: ConfigKey) -> Self {
        Self {
            settings: settings.clone(),
            key,
            reader: OnceCell::new(),
            watcher: OnceCell::new(),
            pushes: Arc::new(Notify::new()),
        }
    }

    async fn connect(&self) -> Result<ConfigService, NacosError> {
        let props = self
            .settings
            .client_props()
            // No content kept on disk from a previous run: the server is the truth.
            .config_load_cache_at_start(false);
        let mut builder = ConfigServiceBuilder::new(props);
        if self.settings.username.is_some() {
            builder = builder.enable_auth_plugin_http();
        }
        builder
            .build()
            .await
            .map_err(|e| self.error("connecting the config client", e))
    }

    fn error(&self, what: &'static str, e: nacos_sdk::api::error::Error) -> NacosError {
        NacosError::Config {
            addr: self.settings.server_addr.clone(),
            what,
            message: e.to_string(),
        }
    }

    /// The content of the config, or `None` when no such config exists; asked of the server.
    pub async fn get(&self) -> Result<Option<String>, NacosError> {
        let reader = self.reader.get_or_try_init(|| self.connect()).await?;
        match reader
            .get_config(self.key.data_id.clone(), self.key.group.clone())
            .await
        {
            Ok(config) => Ok(Some(config.content().clone())),
            Err(nacos_sdk::api::error::Error::ConfigNotFound(_)) => Ok(None),
            Err(e) => Err(self.error("reading the jobs document", e)),
        }
    }

    /// Subscribes the watcher to pushes (once; again after a failed attempt).
    pub async fn watch(&self) -> Result<(), NacosError> {
        self.watcher
            .get_or_try_init(|| async {
                let watcher = self.connect().await?;
                watcher
                    .add_listener(
                        self.key.data_id.clone(),
                        self.key.group.clone(),
                        Arc::new(Pushed(self.pushes.clone())),
                    )
                    .await
                    .map_err(|e| self.error("listening for changes", e))?;
                Ok(watcher)
            })
            .await
            .map(|_| ())
    }

    /// Returns at the next push (or at once if one came since the last call).
    pub async fn pushed(&self) {
        self.pushes.notified().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_namespace_is_sent_as_the_blank_id() {
        assert_eq!(ConfigKey::new("d", "g", "public").namespace, "");
        assert_eq!(ConfigKey::new("d", "g", "").namespace, "");
        assert_eq!(ConfigKey::new("d", "g", "dev").namespace, "dev");
    }

    #[test]
    fn server_addresses_become_base_urls() {
        assert_eq!(
            base_urls("10.0.0.1:8848, http://10.0.0.2:8848/,"),
            ["http://10.0.0.1:8848", "http://10.0.0.2:8848"]
        );
    }
}
