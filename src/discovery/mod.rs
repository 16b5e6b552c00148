//! Who the schedulers are and where the executors are.
//!
//! The engine sees only the `Discovery` trait. `standalone`: one scheduler, executors from
//! `[executors.static]`. `nacos`: schedulers and executors from Nacos.

mod nacos;
mod standalone;

use async_trait::async_trait;
use tokio::sync::watch;

pub use crate::jobs::InstanceAddr;
pub use nacos::{NacosDiscovery, PATH_PREFIX_METADATA};
pub use standalone::Standalone;

/// The live instances of one executor service, sorted by `ip:port`: shared, so that every
/// fire that asks for them (twice per fire) takes a reference instead of a copy.
pub type Executors = std::sync::Arc<[ExecutorInstance]>;

/// One executor instance of a service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorInstance {
    pub addr: InstanceAddr,
    /// Endpoint prefix announced by the instance (Nacos metadata); `executor.path_prefix`
    /// otherwise.
    pub path_prefix: Option<String>,
}

/// An executor service as a job names it: its name and its Nacos group (`None`: the
/// configured `nacos.group`). Standalone discovery has no groups: its static executors are
/// listed by service name alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Service<'a> {
    pub name: &'a str,
    pub group: Option<&'a str>,
}

#[async_trait]
pub trait Discovery: Send + Sync + 'static {
    /// This instance's id, `ip:port` as advertised.
    fn self_id(&self) -> &str;
    /// The healthy scheduler instances; changes are pushed through the channel.
    fn schedulers(&self) -> watch::Receiver<Vec<String>>;
    /// Healthy, enabled instances of an executor service, sorted by `ip:port`.
    async fn executors(&self, service: Service<'_>) -> Executors;
    /// Announces this instance (called once it is ready to serve).
    async fn register(&self) -> anyhow::Result<()>;
    /// Withdraws this instance (first step of shutdown).
    async fn deregister(&self);
    /// Leaves the scheduler list (`false`) while this instance cannot reach its database, or
    /// rejoins it (`true`); `engine/standing.rs` decides when. `false` when there is no list
    /// to leave (a standalone instance).
    async fn stand(&self, listed: bool) -> bool;
    /// `Err(reason)` while discovery is degraded (readiness).
    fn status(&self) -> Result<(), String>;
}

/// The local address used to reach `server_addr` (the first of a comma-separated list): the
/// interface Nacos and the other instances see. A UDP `connect` only picks a route; no packet
/// is sent.
pub fn detect_ip(server_addr: &str) -> Option<std::net::IpAddr> {
    use std::net::{ToSocketAddrs, UdpSocket};
    let first = server_addr.split(',').next()?.trim();
    let first = first
        .trim_start_matches("http://")
        .trim_start_matches("https://");
    let target = first.to_socket_addrs().ok()?.next()?;
    let bind = if target.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    };
    let socket = UdpSocket::bind(bind).ok()?;
    socket.connect(target).ok()?;
    socket.local_addr().ok().map(|a| a.ip())
}

/// The IP this instance announces: to other schedulers and Nacos (its instance id) and to
/// executors, which post 202 results to `http://{ip}:{port}/api/v1/...` (`reportUrl`).
/// `discovery.advertise_ip` when set; otherwise the interface that routes to Nacos (nacos
/// mode) or to the first static executor (standalone mode), so executors on other hosts can
/// reach it; 127.0.0.1 for a standalone instance with no executors configured.
pub fn advertised_ip(settings: &crate::config::Settings) -> Result<std::net::IpAddr, String> {
    use crate::config::DiscoveryMode;
    if let Some(ip) = settings.discovery.advertise_ip {
        return Ok(ip);
    }
    match settings.discovery.mode {
        DiscoveryMode::Nacos => detect_ip(&settings.nacos.server_addr).ok_or_else(|| {
            format!(
                "cannot detect the address to advertise (no route to Nacos at {}); set discovery.advertise_ip",
                settings.nacos.server_addr
            )
        }),
        DiscoveryMode::Standalone => {
            let first = settings.executors.static_.values().flatten().next();
            Ok(first
                .and_then(|addr| detect_ip(addr.as_str()))
                .unwrap_or(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DiscoveryMode, Settings};

    #[test]
    fn the_advertised_ip_is_configured_or_routes_to_the_peers() {
        let mut s = Settings::default();
        assert_eq!(advertised_ip(&s).unwrap().to_string(), "127.0.0.1");
        s.executors.static_.insert(
            "svc".into(),
            vec![InstanceAddr::parse("127.0.0.1:9001").unwrap()],
        );
        assert_eq!(advertised_ip(&s).unwrap().to_string(), "127.0.0.1");
        s.discovery.advertise_ip = Some("10.1.2.3".parse().unwrap());
        assert_eq!(advertised_ip(&s).unwrap().to_string(), "10.1.2.3");
        s.discovery.advertise_ip = None;
        s.discovery.mode = DiscoveryMode::Nacos;
        s.nacos.server_addr = "127.0.0.1:8848".into();
        assert_eq!(advertised_ip(&s).unwrap().to_string(), "127.0.0.1");
        s.nacos.server_addr = "".into();
        assert!(
            advertised_ip(&s)
                .unwrap_err()
                .contains("discovery.advertise_ip")
        );
    }

    #[test]
    fn detects_the_loopback_route() {
        assert_eq!(
            detect_ip("127.0.0.1:8848").unwrap().to_string(),
            "127.0.0.1"
        );
        assert!(detect_ip("").is_none());
    }
}
