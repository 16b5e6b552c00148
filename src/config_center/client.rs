//! The Nacos config centre through its HTTP open API (v1): log in, read one config, and
//! long-poll for its change.
//!
//! Why not nacos-sdk's config client: its listener is told of changed content but never of a
//! removed config (a removal answers "not found", which the SDK only logs), and removing the
//! document must remove its jobs. The open API's long-poll reports every change, removal
//! included, and Nacos 1.x/2.x and rnacos all serve it.
//!
//! Secrets: the password travels only in the login form body and the token only in the
//! `accessToken` header, so neither appears in a URL, and errors are built without URLs.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use md5::Digest;

use crate::config::{NacosSettings, Secret, namespace_id};

/// How long the server may hold a listen request open when nothing changes.
pub const LONG_POLL: Duration = Duration::from_secs(30);

/// One config: data id, group and namespace (the open API's `tenant`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigKey {
    pub data_id: String,
    pub group: String,
    /// Empty for the `public` namespace (Nacos's own id for it).
    pub tenant: String,
}

impl ConfigKey {
    pub fn new(data_id: &str, group: &str, namespace: &str) -> Self {
        Self {
            data_id: data_id.to_string(),
            group: group.to_string(),
            tenant: namespace_id(namespace).to_string(),
        }
    }
}

/// MD5 of a config's content, as Nacos computes it (lower-case hex).
pub fn content_md5(content: &str) -> String {
    hex::encode(md5::Md5::digest(content.as_bytes()))
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
    #[error("Nacos at {addr} answered {status} to {what}: {body}")]
    Status {
        addr: String,
        status: u16,
        what: &'static str,
        body: String,
    },
}

struct AccessToken {
    value: String,
    refresh_at: Instant,
}

pub struct NacosConfigClient {
    http: reqwest::Client,
    /// `http://host:port` of each configured server; requests go to one, the next on failure.
    servers: Vec<String>,
    current: AtomicUsize,
    credentials: Option<(String, Secret)>,
    token: tokio::sync::Mutex<Option<AccessToken>>,
}

impl NacosConfigClient {
    pub fn new(settings: &NacosSettings) -> Self {
        let servers = settings
            .server_addr
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
            .collect();
        let credentials = settings.username.clone().map(|user| {
            (
                user,
                settings.password.clone().unwrap_or_else(|| Secret::new("")),
            )
        });
        Self {
            http: reqwest::Client::builder()
                .connect_timeout(Duration::from_secs(5))
                .build()
                .expect("an HTTP client with default TLS settings"),
            servers,
            current: AtomicUsize::new(0),
            credentials,
            token: tokio::sync::Mutex::new(None),
        }
    }

    fn server(&self) -> &str {
        let i = self.current.load(Ordering::Relaxed) % self.servers.len().max(1);
        self.servers.get(i).map(String::as_str).unwrap_or("")
    }

    fn unreachable(&self, e: reqwest::Error) -> NacosError {
        let addr = self.server().to_string();
        self.current.fetch_add(1, Ordering::Relaxed);
        NacosError::Unreachable {
            addr,
            message: e.without_url().to_string(),
        }
    }

    /// Logs in when credentials are configured (a no-op otherwise). A refused login is the
    /// start-up error operators need; it names the user, never the password.
    pub async fn login(&self) -> Result<(), NacosError> {
        let mut token = self.token.lock().await;
        *token = self.fresh_token().await?;
        Ok(())
    }

    async fn fresh_token(&self) -> Result<Option<AccessToken>, NacosError> {
        let Some((user, password)) = &self.credentials else {
            return Ok(None);
        };
        let addr = self.server().to_string();
        let resp = self
            .http
            .post(format!("{addr}/nacos/v1/auth/login"))
            .timeout(Duration::from_secs(10))
            .form(&[("username", user.as_str()), ("password", password.expose())])
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = resp.status().as_u16();
        if status == 401 || status == 403 {
            return Err(NacosError::LoginRefused {
                addr,
                user: user.clone(),
                status,
            });
        }
        let body = resp.text().await.map_err(|e| self.unreachable(e))?;
        let parsed: Option<serde_json::Value> = serde_json::from_str(&body).ok();
        let value = parsed
            .as_ref()
            .and_then(|v| v["accessToken"].as_str())
            .filter(|_| status == 200);
        let Some(value) = value else {
            return Err(NacosError::Status {
                addr,
                status,
                what: "the login",
                // The answer to a login echoes no secret; it is cut short all the same.
                body: body.chars().take(200).collect(),
            });
        };
        let ttl = parsed
            .as_ref()
            .and_then(|v| v["tokenTtl"].as_u64())
            .unwrap_or(18_000);
        Ok(Some(AccessToken {
            value: value.to_string(),
            // Renewed well before it expires.
            refresh_at: Instant::now() + Duration::from_secs(ttl * 9 / 10),
        }))
    }

    /// The token to send, logging in again when it is due for renewal.
    async fn token(&self) -> Result<Option<String>, NacosError> {
        if self.credentials.is_none() {
            return Ok(None);
        }
        let mut token = self.token.lock().await;
        if token
            .as_ref()
            .is_none_or(|t| Instant::now() >= t.refresh_at)
        {
            *token = self.fresh_token().await?;
        }
        Ok(token.as_ref().map(|t| t.value.clone()))
    }

    async fn forget_token(&self) {
        *self.token.lock().await = None;
    }

    /// Sends `build(server)`, with the token; once more after a new login when the server
    /// answers 403 (an expired or revoked token).
    async fn send(
        &self,
        build: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> Result<reqwest::Response, NacosError> {
        for attempt in 0..2 {
            let mut req = build(self.server());
            if let Some(t) = self.token().await? {
                req = req.header("accessToken", t);
            }
            let resp = req.send().await.map_err(|e| self.unreachable(e))?;
            if resp.status() == reqwest::StatusCode::FORBIDDEN
                && self.credentials.is_some()
                && attempt == 0
            {
                self.forget_token().await;
                continue;
            }
            return Ok(resp);
        }
        unreachable!("the loop returns on its second pass")
    }

    /// The content of `key`, or `None` when no such config exists.
    pub async fn get(&self, key: &ConfigKey) -> Result<Option<String>, NacosError> {
        let resp = self
            .send(|server| {
                self.http
                    .get(format!("{server}/nacos/v1/cs/configs"))
                    .timeout(Duration::from_secs(10))
                    .query(&[
                        ("dataId", key.data_id.as_str()),
                        ("group", key.group.as_str()),
                        ("tenant", key.tenant.as_str()),
                    ])
            })
            .await?;
        let status = resp.status().as_u16();
        match status {
            200 => Ok(Some(resp.text().await.map_err(|e| self.unreachable(e))?)),
            404 => Ok(None),
            _ => Err(self.status(resp, "reading the jobs document").await),
        }
    }

    /// Waits up to `timeout` for `key` to differ from the content whose MD5 is `md5` (empty:
    /// no such config). `true` when it changed (or was published or removed).
    pub async fn wait_for_change(
        &self,
        key: &ConfigKey,
        md5: &str,
        timeout: Duration,
    ) -> Result<bool, NacosError> {
        let mut listening = format!("{}\u{2}{}\u{2}{md5}", key.data_id, key.group);
        if !key.tenant.is_empty() {
            listening.push('\u{2}');
            listening.push_str(&key.tenant);
        }
        listening.push('\u{1}');
        let resp = self
            .send(|server| {
                self.http
                    .post(format!("{server}/nacos/v1/cs/configs/listener"))
                    .header("Long-Pulling-Timeout", timeout.as_millis().to_string())
                    .timeout(timeout + Duration::from_secs(10))
                    .form(&[("Listening-Configs", listening.as_str())])
            })
            .await?;
        if !resp.status().is_success() {
            return Err(self.status(resp, "listening for changes").await);
        }
        let body = resp.text().await.map_err(|e| self.unreachable(e))?;
        Ok(!body.trim().is_empty())
    }

    async fn status(&self, resp: reqwest::Response, what: &'static str) -> NacosError {
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        NacosError::Status {
            addr: self.server().to_string(),
            status,
            what,
            body: body.chars().take(200).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_public_namespace_is_the_empty_id() {
        assert_eq!(ConfigKey::new("d", "g", "public").tenant, "");
        assert_eq!(ConfigKey::new("d", "g", "dev").tenant, "dev");
    }

    #[test]
    fn md5_matches_nacos() {
        // Nacos keeps the MD5 of the UTF-8 content: that of "" is the well-known constant.
        assert_eq!(content_md5(""), "d41d8cd98f00b204e9800998ecf8427e");
        assert_eq!(content_md5("jobs: []"), content_md5("jobs: []"));
        assert_ne!(content_md5("jobs: []"), content_md5("jobs: [ ]"));
    }

    #[test]
    fn server_addresses_become_base_urls() {
        let s = NacosSettings {
            server_addr: "10.0.0.1:8848, http://10.0.0.2:8848/".into(),
            ..NacosSettings::default()
        };
        let c = NacosConfigClient::new(&s);
        assert_eq!(c.servers, ["http://10.0.0.1:8848", "http://10.0.0.2:8848"]);
    }
}
