//! `[discovery]` and `[nacos]`: how this instance finds the other schedulers and the
//! executors, and the address it is known by.

use std::net::IpAddr;
use std::num::NonZeroU16;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{ConfigError, Secret, invalid};

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

impl NacosSettings {
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !self.jobs_data_id.is_empty() && self.jobs_group.is_empty() {
            return Err(invalid(
                "nacos.jobs_group",
                "must not be empty when nacos.jobs_data_id is set",
            ));
        }
        Ok(())
    }
}

/// The namespace id to hand nacos-sdk: the default namespace `public` as the blank id.
///
/// Nacos 2 keeps configs of the default namespace under the blank id and would read a literal
/// `public` as another namespace; Nacos 3 names it `public` and normalises a blank id to it.
/// The blank id is therefore right for both, and nacos-sdk's naming client turns it into
/// `public` itself, which both versions use for services.
pub fn namespace_id(namespace: &str) -> &str {
    if namespace == "public" { "" } else { namespace }
}

impl NacosSettings {
    /// What nacos-sdk's naming and config clients connect with: the servers, the namespace,
    /// the credentials. Our configuration, not `NACOS_CLIENT_*` variables, decides.
    pub fn client_props(&self) -> nacos_sdk::api::props::ClientProps {
        let mut props = nacos_sdk::api::props::ClientProps::new()
            .server_addr(self.server_addr.clone())
            .namespace(namespace_id(&self.namespace).to_string())
            .app_name("jobflow")
            .env_first(false);
        if let Some(user) = &self.username {
            props = props.auth_username(user.clone());
            props = props.auth_password(
                self.password
                    .as_ref()
                    .map(|p| p.expose().to_string())
                    .unwrap_or_default(),
            );
        }
        props
    }
}
