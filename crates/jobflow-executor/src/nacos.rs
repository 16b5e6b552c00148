//! Registering an executor service in Nacos (feature `nacos`).

use std::collections::HashMap;

use nacos_sdk::api::naming::{NamingService, NamingServiceBuilder, ServiceInstance};
use nacos_sdk::api::props::ClientProps;

/// Where and as what to register.
#[derive(Debug, Clone)]
pub struct Registration {
    pub server_addr: String,
    /// `public` (Nacos's default namespace, whose id is empty) and `""` are the same.
    pub namespace: String,
    pub group: Option<String>,
    pub service_name: String,
    /// The address the scheduler reaches this executor at.
    pub ip: String,
    pub port: u16,
    /// Announced as `jobflow.path-prefix` when not the default `/internal/job`.
    pub path_prefix: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
}

/// The namespace id Nacos expects: `public` is the default namespace, whose id is empty (the
/// scheduler maps it the same way, so both sides meet in one namespace).
pub fn namespace_id(namespace: &str) -> &str {
    if namespace == "public" { "" } else { namespace }
}

/// Registers the executor (ephemeral: Nacos drops it when this process goes away). Keep the
/// returned service alive for as long as the executor serves.
pub async fn register(r: &Registration) -> Result<NamingService, nacos_sdk::api::error::Error> {
    let mut props = ClientProps::new()
        .server_addr(r.server_addr.clone())
        .namespace(namespace_id(&r.namespace).to_string())
        .app_name(r.service_name.clone())
        .env_first(false);
    let auth = r.username.is_some() || r.password.is_some();
    if let Some(u) = &r.username {
        props = props.auth_username(u.clone());
    }
    if let Some(p) = &r.password {
        props = props.auth_password(p.clone());
    }
    let mut builder = NamingServiceBuilder::new(props);
    if auth {
        builder = builder.enable_auth_plugin_http();
    }
    let naming = builder.build().await?;
    let metadata = r
        .path_prefix
        .iter()
        .map(|p| ("jobflow.path-prefix".to_string(), p.clone()))
        .collect::<HashMap<_, _>>();
    naming
        .register_instance(
            r.service_name.clone(),
            r.group.clone(),
            ServiceInstance {
                instance_id: None,
                ip: r.ip.clone(),
                port: r.port as i32,
                weight: 1.0,
                healthy: true,
                enabled: true,
                ephemeral: true,
                cluster_name: None,
                service_name: None,
                metadata,
            },
        )
        .await?;
    Ok(naming)
}

#[cfg(test)]
mod tests {
    #[test]
    fn public_is_the_default_namespace() {
        assert_eq!(super::namespace_id("public"), "");
        assert_eq!(super::namespace_id(""), "");
        assert_eq!(super::namespace_id("dev"), "dev");
    }
}
