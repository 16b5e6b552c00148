//! Instance addresses: `ip:port` text, parsed once where it enters (configuration, Nacos,
//! a trigger's `executor`), and stored on execution rows as the executor that ran them.

use std::fmt;

/// An `ip:port` instance address; instances are ordered by this text everywhere (ownership,
/// shard assignment), as the Java JobFlow orders its instance ids.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct InstanceAddr(String);

impl TryFrom<String> for InstanceAddr {
    type Error = String;
    fn try_from(raw: String) -> Result<Self, String> {
        Self::parse(&raw)
    }
}

impl From<InstanceAddr> for String {
    fn from(addr: InstanceAddr) -> String {
        addr.0
    }
}

impl InstanceAddr {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let (host, port) = raw
            .rsplit_once(':')
            .ok_or_else(|| format!("`{raw}` is not ip:port"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if host.is_empty() || host.contains(|c: char| c.is_whitespace() || c == '/' || c == '@') {
            return Err(format!("`{raw}` has no valid host"));
        }
        match port.parse::<u16>() {
            Ok(p) if p > 0 => Ok(Self(raw.to_string())),
            _ => Err(format!("`{raw}` has no valid port")),
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for InstanceAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses() {
        assert!(InstanceAddr::parse("127.0.0.1:9001").is_ok());
        assert!(InstanceAddr::parse("[::1]:9001").is_ok());
        assert!(InstanceAddr::parse("executor-1:80").is_ok());
        for bad in [
            "nohost",
            "1.2.3.4:",
            ":80",
            "1.2.3.4:0",
            "1.2.3.4:70000",
            "a b:1",
        ] {
            assert!(InstanceAddr::parse(bad).is_err(), "{bad}");
        }
    }
}
