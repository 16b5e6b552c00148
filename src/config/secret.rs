//! [`Secret`]: a configuration value that never reaches a log line, an error message or the
//! output of `jobflow check-config`.

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use zeroize::Zeroize;

/// What a secret looks like wherever it is shown.
pub const REDACTED: &str = "<redacted>";

/// A password, token or URL with credentials. The text is reachable only through
/// [`Secret::expose`]; `Debug`, `Display` and `Serialize` show [`REDACTED`], and the memory is
/// wiped on drop. It deserializes from text only, so an environment value such as `0815` keeps
/// its leading zero.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl Drop for Secret {
    fn drop(&mut self) {
        self.0.zeroize();
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{REDACTED:?}")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(REDACTED)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rendering_is_redacted() {
        let s = Secret::new("hunter2");
        assert_eq!(s.expose(), "hunter2");
        assert_eq!(format!("{s}"), REDACTED);
        assert_eq!(format!("{s:?}"), format!("{REDACTED:?}"));
        assert_eq!(serde_json::to_string(&s).unwrap(), format!("{REDACTED:?}"));
    }
}
