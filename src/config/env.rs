//! The `JOBFLOW__SECTION__KEY` layer. figment's own `Env` provider guesses a type for every
//! value, which turns a password `0815` into the number 815. Here a value is text unless it is
//! an array or table literal (`[...]`, `{...}`); numbers and booleans are read from that text
//! by the typed settings themselves (`Figment::extract_lossy`).

use figment::providers::Env;
use figment::value::{Dict, Map, Tag, Value};
use figment::{Error, Metadata, Profile, Provider};

pub struct TextEnv(Env);

impl TextEnv {
    pub fn prefixed(prefix: &str) -> Self {
        Self(Env::prefixed(prefix).split("__"))
    }
}

impl Provider for TextEnv {
    fn metadata(&self) -> Metadata {
        self.0.metadata()
    }

    fn data(&self) -> Result<Map<Profile, Dict>, Error> {
        let mut dict = Dict::new();
        for (key, raw) in self.0.iter() {
            let trimmed = raw.trim_start();
            let value = if trimmed.starts_with('[') || trimmed.starts_with('{') {
                raw.parse().expect("infallible")
            } else {
                Value::from(raw)
            };
            let path: Vec<&str> = key.as_str().split('.').collect();
            insert(&mut dict, &path, value);
        }
        Ok(self.0.profile.collect(dict))
    }
}

/// Puts `value` at `path` (`["database", "password"]`), creating the tables on the way; a
/// later variable wins over an earlier one for the same key.
fn insert(dict: &mut Dict, path: &[&str], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = dict;
    for part in parents {
        let entry = node
            .entry((*part).to_string())
            .or_insert_with(|| Value::Dict(Tag::Default, Dict::new()));
        if !matches!(entry, Value::Dict(..)) {
            *entry = Value::Dict(Tag::Default, Dict::new());
        }
        let Value::Dict(_, inner) = entry else {
            unreachable!("made a table above")
        };
        node = inner;
    }
    node.insert((*last).to_string(), value);
}
