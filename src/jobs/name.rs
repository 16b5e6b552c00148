//! Names that end up in URLs, SQL keys and execution ids, parsed once at the edge.

use std::fmt;

use serde::Serialize;

/// A job name: 1-100 of `[A-Za-z0-9._:-]`, never `executions` (that path segment belongs to
/// `/api/v1/jobs/executions/{traceId}`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct JobName(String);

impl JobName {
    pub const MAX_LEN: usize = 100;
    /// The characters and length of [`JobName::parse`] as an ECMA-262 pattern (the OpenAPI
    /// document's); the reserved names are listed apart in [`JobName::RESERVED`].
    pub const PATTERN: &str = "^[A-Za-z0-9._:-]{1,100}$";
    pub const RESERVED: [&str; 3] = ["executions", ".", ".."];

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw.len() > Self::MAX_LEN {
            return Err(format!("must be 1 to {} characters long", Self::MAX_LEN));
        }
        if let Some(c) = raw
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
        {
            return Err(format!(
                "may only contain letters, digits and . _ : - (found {c:?})"
            ));
        }
        if Self::RESERVED.contains(&raw) {
            return Err(format!("`{raw}` is reserved"));
        }
        Ok(Self(raw.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A value placed into an executor URL as one path segment (service name, handler): no
/// separators, no dot-segments, no percent-encoding, no whitespace or control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct PathSegment(String);

impl PathSegment {
    pub const MAX_LEN: usize = 100;
    /// [`PathSegment::parse`] as an ECMA-262 pattern: printable ASCII except the URL
    /// delimiters and unsafe characters, dots only alone (never two in a row, never only a
    /// dot). The length is checked apart.
    pub const PATTERN: &str =
        r"^\.?[!$&'()*+,\-0-9:;=@A-Z\[\]_a-z~]+(?:\.[!$&'()*+,\-0-9:;=@A-Z\[\]_a-z~]+)*\.?$";

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.is_empty() || raw.len() > Self::MAX_LEN {
            return Err(format!("must be 1 to {} characters long", Self::MAX_LEN));
        }
        if raw.contains("..") {
            return Err("must not contain `..`".into());
        }
        if let Some(c) = raw.chars().find(|c| {
            !c.is_ascii_graphic()
                || matches!(
                    c,
                    '/' | '\\' | '%' | '?' | '#' | '"' | '<' | '>' | '`' | '{' | '}' | '|' | '^'
                )
        }) {
            return Err(format!("must be a plain path segment (found {c:?})"));
        }
        if raw == "." {
            return Err("must not be `.`".into());
        }
        Ok(Self(raw.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PathSegment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_names() {
        for ok in ["a", "order.sync", "pay:recon-2024_v1", &"x".repeat(100)] {
            assert!(JobName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "executions",
            "a b",
            "a/b",
            "名字",
            "a%2e",
            &"x".repeat(101),
            "..",
            ".",
        ] {
            assert!(JobName::parse(bad).is_err(), "{bad}");
        }
    }

    /// Every string of up to three characters over an alphabet of allowed, refused and
    /// special characters: the documented pattern and the parser agree on each.
    #[test]
    fn patterns_agree_with_the_parsers() {
        let job = regex::Regex::new(JobName::PATTERN).unwrap();
        let segment = regex::Regex::new(PathSegment::PATTERN).unwrap();
        let alphabet: Vec<char> = "a.Z0_:-/\\%?# ~!'\"é\t".chars().collect();
        let mut words = vec![String::new()];
        for _ in 0..3 {
            let longer: Vec<String> = words
                .iter()
                .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                .collect();
            words.extend(longer);
        }
        // And every pair of ASCII characters, printable or not.
        for a in 0u8..128 {
            for b in 0u8..128 {
                words.push(format!("{}{}", a as char, b as char));
            }
        }
        words.sort();
        words.dedup();
        for w in &words {
            let documented = job.is_match(w) && !JobName::RESERVED.contains(&w.as_str());
            assert_eq!(documented, JobName::parse(w).is_ok(), "job name {w:?}");
            let documented = segment.is_match(w) && w.chars().count() <= PathSegment::MAX_LEN;
            assert_eq!(documented, PathSegment::parse(w).is_ok(), "segment {w:?}");
        }
        assert!(words.len() > 20_000);
    }

    #[test]
    fn path_segments() {
        for ok in ["order-service", "syncOrders", "group@@svc", "a.b:c"] {
            assert!(PathSegment::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "", "../x", "a/b", "%2e", "%2e%2e", "a b", "a\tb", "..", ".", "a\\b", "a?b", "a#b", "é",
        ] {
            assert!(PathSegment::parse(bad).is_err(), "{bad}");
        }
    }
}
