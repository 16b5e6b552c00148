//! Names that end up in URLs, SQL keys and execution ids, parsed once at the edge.

use std::borrow::Cow;
use std::fmt;

use percent_encoding::{CONTROLS, utf8_percent_encode};
use serde::Serialize;
use unicode_properties::{GeneralCategoryGroup, UnicodeGeneralCategory};

/// A namespace: the group a job belongs to (docs/api.md, "Namespaces"). 1-40 characters,
/// lower-case ASCII letters, digits and `-`, starting and ending with a letter or a digit
/// (a DNS label, as Kubernetes and Nacos name theirs). Jobs created before namespaces existed
/// are in [`Namespace::DEFAULT`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct Namespace(String);

impl Namespace {
    pub const DEFAULT: &str = "default";
    pub const MAX_LEN: usize = 40;
    /// [`Namespace::parse`] as an ECMA-262 pattern.
    pub const PATTERN: &str = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$";

    pub fn parse(raw: &str) -> Result<Self, String> {
        let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
        if raw.is_empty() || raw.len() > Self::MAX_LEN {
            return Err(format!("must be 1 to {} characters long", Self::MAX_LEN));
        }
        if !raw.chars().all(|c| ok_char(c) || c == '-')
            || !raw.starts_with(ok_char)
            || !raw.ends_with(ok_char)
        {
            return Err(
                "may only contain a-z, 0-9 and -, and must start and end with a letter or a digit"
                    .into(),
            );
        }
        Ok(Self(raw.to_string()))
    }

    /// `raw`, or [`Namespace::DEFAULT`] when absent.
    pub fn or_default(raw: Option<&str>) -> Result<Self, String> {
        raw.map_or_else(|| Ok(Self::default()), Self::parse)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT
    }

    /// The namespace of the job whose key is `key` (see [`JobName::key`]).
    pub fn of_key(key: &str) -> &str {
        key.split_once('/').map_or(Self::DEFAULT, |(ns, _)| ns)
    }
}

impl Default for Namespace {
    fn default() -> Self {
        Self(Self::DEFAULT.to_string())
    }
}

impl fmt::Display for Namespace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A job's name within its namespace, and the key that identifies the job everywhere else.
///
/// The name is 1-100 characters, each a letter or a digit of any script (Unicode categories
/// L and N) or one of `. _ : -`, never `executions` (that path segment belongs to
/// `/api/v1/jobs/executions/{traceId}`). The design's own examples are names like 订单对账.
/// In a URL path, and in the protocol's headers, a name with characters beyond ASCII is
/// percent-encoded UTF-8 ([`percent_encoded`]); ASCII names are sent as they are.
///
/// The key ([`JobName::key`], and `as_str`) is the name in the `default` namespace and
/// `namespace/name` in any other: it is what the database stores in its job-name columns,
/// what ownership hashes (docs/design.md, "Ownership") and what execution ids start with. A
/// name has no `/`, so a key reads back unambiguously, and every job of the `default`
/// namespace keeps the key, the owner and the execution ids it had before namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct JobName {
    key: String,
    /// Where the name starts in `key` (0 in the `default` namespace).
    local: usize,
}

impl JobName {
    /// In characters (Unicode scalar values), as MySQL's `VARCHAR(100)` counts them.
    pub const MAX_LEN: usize = 100;
    /// The longest key: a namespace, `/` and a name.
    pub const MAX_KEY_LEN: usize = Namespace::MAX_LEN + 1 + Self::MAX_LEN;
    /// The characters and length of [`JobName::parse`] as an ECMA-262 pattern (the OpenAPI
    /// document's, read with the `u` flag as JSON Schema reads patterns); the reserved names
    /// are listed apart in [`JobName::RESERVED`].
    pub const PATTERN: &str = r"^[\p{L}\p{N}._:-]{1,100}$";
    pub const RESERVED: [&str; 3] = ["executions", ".", ".."];

    /// A name in the `default` namespace.
    pub fn parse(raw: &str) -> Result<Self, String> {
        Self::check(raw)?;
        Ok(Self {
            key: raw.to_string(),
            local: 0,
        })
    }

    /// A name in `namespace`.
    pub fn parse_in(namespace: &Namespace, raw: &str) -> Result<Self, String> {
        Self::check(raw)?;
        if namespace.is_default() {
            return Self::parse(raw);
        }
        Ok(Self {
            key: format!("{namespace}/{raw}"),
            local: namespace.as_str().len() + 1,
        })
    }

    /// A job's key as stored ([`JobName::key`]) read back.
    pub fn from_key(key: &str) -> Result<Self, String> {
        match key.split_once('/') {
            None => Self::parse(key),
            Some((ns, name)) => {
                let ns = Namespace::parse(ns).map_err(|m| format!("namespace {m}"))?;
                if ns.is_default() {
                    return Err("a key in the default namespace has no prefix".into());
                }
                Self::parse_in(&ns, name)
            }
        }
    }

    fn check(raw: &str) -> Result<(), String> {
        let len = raw.chars().count();
        if len == 0 || len > Self::MAX_LEN {
            return Err(format!("must be 1 to {} characters long", Self::MAX_LEN));
        }
        if let Some(c) = raw.chars().find(|c| !Self::allowed(*c)) {
            return Err(format!(
                "may only contain letters and digits (of any script) and . _ : - (found {c:?})"
            ));
        }
        if Self::RESERVED.contains(&raw) {
            return Err(format!("`{raw}` is reserved"));
        }
        Ok(())
    }

    fn allowed(c: char) -> bool {
        matches!(c, '.' | '_' | ':' | '-')
            || matches!(
                c.general_category_group(),
                GeneralCategoryGroup::Letter | GeneralCategoryGroup::Number
            )
    }

    /// The key: the job's identity in the database, in ownership and in execution ids.
    pub fn as_str(&self) -> &str {
        &self.key
    }

    /// The key (see [`JobName::as_str`]).
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The name within the namespace, as the API and the executor protocol show it.
    pub fn local(&self) -> &str {
        &self.key[self.local..]
    }

    /// The job's namespace.
    pub fn namespace(&self) -> &str {
        if self.local == 0 {
            Namespace::DEFAULT
        } else {
            &self.key[..self.local - 1]
        }
    }
}

impl Serialize for JobName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.key)
    }
}

/// Serialises a job key as the name within its namespace (the API's `jobName`).
pub fn serialize_local<S: serde::Serializer>(key: &str, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(local_name(key))
}

/// The name within its namespace of the job whose key is `key`.
pub fn local_name(key: &str) -> &str {
    key.split_once('/').map_or(key, |(_, name)| name)
}

/// `text` as a URL path segment or a protocol header carries it: as it is when ASCII, else
/// percent-encoded UTF-8 (only the bytes beyond ASCII, and controls, are encoded; job names
/// and execution ids have no other character that needs it).
pub fn percent_encoded(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        Cow::Borrowed(text)
    } else {
        Cow::Owned(utf8_percent_encode(text, CONTROLS).to_string())
    }
}

impl fmt::Display for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key)
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
        for ok in [
            "a",
            "order.sync",
            "pay:recon-2024_v1",
            &"x".repeat(100),
            "订单对账",
            "支付对账",
            "报表生成-2024",
            "Überweisung.täglich",
            "تقرير٣",
            "Ⅻ",
            &"账".repeat(100),
        ] {
            assert!(JobName::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "executions",
            "a b",
            "a/b",
            "a%2e",
            &"x".repeat(101),
            &"账".repeat(101),
            "..",
            ".",
            "订单、对账",
            "a\u{3000}b",
            "e\u{301}",
            "😀",
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
        let alphabet: Vec<char> = "a.Z0_:-/\\%?# ~!'\"é\t名١😀\u{301}、".chars().collect();
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
    fn namespaces() {
        for ok in ["default", "a", "team-a", "0", "a1-b2", &"x".repeat(40)] {
            assert!(Namespace::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "-a",
            "a-",
            "Team",
            "a_b",
            "a.b",
            "a/b",
            "名",
            &"x".repeat(41),
        ] {
            assert!(Namespace::parse(bad).is_err(), "{bad}");
        }
        let pattern = regex::Regex::new(Namespace::PATTERN).unwrap();
        for w in [
            "a",
            "a-",
            "-a",
            "ab",
            "a-b",
            "A",
            "a_b",
            &"x".repeat(40),
            &"x".repeat(41),
        ] {
            assert_eq!(pattern.is_match(w), Namespace::parse(w).is_ok(), "{w}");
        }
        assert_eq!(Namespace::or_default(None).unwrap().as_str(), "default");
    }

    /// A job of `default` keeps its name as its key (what existing rows, ownership and
    /// execution ids hold); elsewhere the key is `namespace/name` and reads back as it was.
    #[test]
    fn job_keys() {
        let team = Namespace::parse("team-a").unwrap();
        let plain = JobName::parse_in(&Namespace::default(), "订单对账").unwrap();
        assert_eq!(plain, JobName::parse("订单对账").unwrap());
        assert_eq!(
            (plain.key(), plain.local(), plain.namespace()),
            ("订单对账", "订单对账", "default")
        );
        let scoped = JobName::parse_in(&team, "order-sync").unwrap();
        assert_eq!(
            (scoped.key(), scoped.local(), scoped.namespace()),
            ("team-a/order-sync", "order-sync", "team-a")
        );
        assert_eq!(JobName::from_key("team-a/order-sync").unwrap(), scoped);
        assert_eq!(JobName::from_key("订单对账").unwrap(), plain);
        for bad in [
            "default/a",
            "Team/a",
            "team-a/",
            "team-a/a/b",
            "/a",
            "team-a/executions",
        ] {
            assert!(JobName::from_key(bad).is_err(), "{bad}");
        }
        assert!(JobName::parse_in(&team, "a/b").is_err());
        assert_eq!(Namespace::of_key("team-a/x"), "team-a");
        assert_eq!(Namespace::of_key("x:y"), "default");
        assert_eq!(local_name("team-a/x"), "x");
        assert_eq!(
            JobName::MAX_KEY_LEN,
            JobName::parse_in(
                &Namespace::parse(&"n".repeat(40)).unwrap(),
                &"j".repeat(100)
            )
            .unwrap()
            .key()
            .chars()
            .count()
        );
    }

    #[test]
    fn names_beyond_ascii_are_percent_encoded_utf8() {
        assert_eq!(percent_encoded("order-sync:1"), "order-sync:1");
        assert_eq!(
            percent_encoded("订单对账"),
            "%E8%AE%A2%E5%8D%95%E5%AF%B9%E8%B4%A6"
        );
        assert_eq!(
            percent_encoded("订单:20240501000000:0-9"),
            "%E8%AE%A2%E5%8D%95:20240501000000:0-9"
        );
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
