//! Sharding strategies and their parameters (docs/design.md, "Dispatch"; docs/executors.md).
//!
//! A job has a fixed `shard_count` S; the dispatcher splits 0..S into contiguous ranges over
//! the live executors. The strategy says what a shard means to the executor:
//! - `MOD_HASH`: the executor owns the records with `hash(id) mod S` in its range.
//! - `RANGE`: the data range `start..=end` from `shardParams` is cut into S equal slices and
//!   the executor receives the slice covered by its shard range.
//! - `CUSTOM`: Elastic-Job style item parameters (`0=Beijing,1=Shanghai`) per shard index.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Serialize,
    Deserialize,
    ToSchema,
    Default,
    strum::IntoStaticStr,
    strum::Display,
    strum::EnumString,
    strum::VariantNames,
)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
#[strum(serialize_all = "SCREAMING_SNAKE_CASE")]
pub enum ShardStrategy {
    #[default]
    ModHash,
    Range,
    Custom,
}

impl ShardStrategy {
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// Strategy-specific parameters, validated against the shard count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ShardParams {
    None,
    /// Inclusive data range cut into `shard_count` slices.
    Range {
        start: i64,
        end: i64,
    },
    /// Item parameter per shard index; indexes without one get none.
    Custom(BTreeMap<u32, String>),
}

impl ShardParams {
    /// Parses the API/stored JSON for `strategy`. CUSTOM accepts an object
    /// `{"0": "Beijing"}` or Elastic-Job's string form `"0=Beijing,1=Shanghai"`.
    pub fn parse(
        strategy: ShardStrategy,
        shard_count: u32,
        raw: Option<&Value>,
    ) -> Result<Self, String> {
        let raw = raw.filter(|v| !v.is_null());
        match strategy {
            ShardStrategy::ModHash => match raw {
                None => Ok(Self::None),
                Some(Value::Object(m)) if m.is_empty() => Ok(Self::None),
                Some(_) => Err("MOD_HASH takes no shardParams".into()),
            },
            ShardStrategy::Range => {
                let obj = raw
                    .and_then(Value::as_object)
                    .ok_or("RANGE needs {\"start\": <integer>, \"end\": <integer>}")?;
                if obj.keys().any(|k| k != "start" && k != "end") {
                    return Err("RANGE takes only `start` and `end`".into());
                }
                let get = |k: &str| {
                    obj.get(k)
                        .and_then(Value::as_i64)
                        .ok_or(format!("RANGE `{k}` must be an integer"))
                };
                let (start, end) = (get("start")?, get("end")?);
                if start > end {
                    return Err("RANGE `start` must not be greater than `end`".into());
                }
                if (end as i128 - start as i128 + 1) < shard_count as i128 {
                    return Err("RANGE must hold at least one value per shard".into());
                }
                Ok(Self::Range { start, end })
            }
            ShardStrategy::Custom => {
                let items = match raw {
                    Some(Value::String(s)) => parse_item_string(s)?,
                    Some(Value::Object(m)) => m
                        .iter()
                        .map(|(k, v)| {
                            let idx = k.parse::<u32>().map_err(|_| format!("CUSTOM key `{k}` is not a shard index"))?;
                            let val = v.as_str().ok_or(format!("CUSTOM value for `{k}` must be a string"))?;
                            Ok((idx, val.to_string()))
                        })
                        .collect::<Result<_, String>>()?,
                    _ => return Err("CUSTOM needs item parameters: \"0=Beijing,1=Shanghai\" or {\"0\": \"Beijing\"}".into()),
                };
                if items.is_empty() {
                    return Err("CUSTOM needs at least one item parameter".into());
                }
                if let Some(idx) = items.keys().find(|i| **i >= shard_count) {
                    return Err(format!(
                        "CUSTOM shard index {idx} is not below shardCount {shard_count}"
                    ));
                }
                if items.values().any(|v| v.len() > 1000) {
                    return Err("CUSTOM item parameters are limited to 1000 characters each".into());
                }
                Ok(Self::Custom(items))
            }
        }
    }

    /// The JSON stored in `shard_params` and returned by the API (`None` is SQL NULL).
    pub fn to_json(&self) -> Option<Value> {
        match self {
            Self::None => None,
            Self::Range { start, end } => Some(json!({ "start": start, "end": end })),
            Self::Custom(items) => Some(Value::Object(
                items
                    .iter()
                    .map(|(k, v)| (k.to_string(), Value::String(v.clone())))
                    .collect::<Map<_, _>>(),
            )),
        }
    }

    /// For RANGE: the inclusive data slice covered by shards `first..=last` of `shard_count`.
    pub fn data_range(&self, first: u32, last: u32, shard_count: u32) -> Option<(i64, i64)> {
        let Self::Range { start, end } = *self else {
            return None;
        };
        let total = end as i128 - start as i128 + 1;
        let bound = |i: u32| start as i128 + total * i as i128 / shard_count as i128;
        Some((bound(first) as i64, (bound(last + 1) - 1) as i64))
    }

    /// For CUSTOM: the item parameters of shards `first..=last`.
    pub fn items_in(&self, first: u32, last: u32) -> Option<BTreeMap<u32, String>> {
        let Self::Custom(items) = self else {
            return None;
        };
        Some(
            items
                .range(first..=last)
                .map(|(k, v)| (*k, v.clone()))
                .collect(),
        )
    }
}

fn parse_item_string(s: &str) -> Result<BTreeMap<u32, String>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair
                .split_once('=')
                .ok_or(format!("CUSTOM item `{pair}` is not index=value"))?;
            let idx = k
                .trim()
                .parse::<u32>()
                .map_err(|_| format!("CUSTOM key `{}` is not a shard index", k.trim()))?;
            Ok((idx, v.trim().to_string()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_accepts_both_forms() {
        let a = ShardParams::parse(
            ShardStrategy::Custom,
            3,
            Some(&json!("0=Beijing, 1=Shanghai")),
        )
        .unwrap();
        let b = ShardParams::parse(
            ShardStrategy::Custom,
            3,
            Some(&json!({"0": "Beijing", "1": "Shanghai"})),
        )
        .unwrap();
        assert_eq!(a, b);
        assert_eq!(
            a.to_json().unwrap(),
            json!({"0": "Beijing", "1": "Shanghai"})
        );
        assert_eq!(
            a.items_in(1, 2).unwrap().into_iter().collect::<Vec<_>>(),
            vec![(1, "Shanghai".to_string())]
        );
        assert!(ShardParams::parse(ShardStrategy::Custom, 1, Some(&json!("0=a,1=b"))).is_err());
        assert!(ShardParams::parse(ShardStrategy::Custom, 3, Some(&json!("x=a"))).is_err());
        assert!(ShardParams::parse(ShardStrategy::Custom, 3, None).is_err());
    }

    #[test]
    fn range_slices_cover_the_data_exactly() {
        let p = ShardParams::parse(
            ShardStrategy::Range,
            10,
            Some(&json!({"start": 1, "end": 1000})),
        )
        .unwrap();
        assert_eq!(p.data_range(0, 3, 10), Some((1, 400)));
        assert_eq!(p.data_range(4, 6, 10), Some((401, 700)));
        assert_eq!(p.data_range(7, 9, 10), Some((701, 1000)));
        let wide = ShardParams::parse(
            ShardStrategy::Range,
            3,
            Some(&json!({"start": i64::MIN, "end": i64::MAX})),
        )
        .unwrap();
        assert_eq!(wide.data_range(0, 2, 3), Some((i64::MIN, i64::MAX)));
        assert!(
            ShardParams::parse(
                ShardStrategy::Range,
                10,
                Some(&json!({"start": 5, "end": 1}))
            )
            .is_err()
        );
        assert!(
            ShardParams::parse(
                ShardStrategy::Range,
                10,
                Some(&json!({"start": 0, "end": 3}))
            )
            .is_err()
        );
        assert!(ShardParams::parse(ShardStrategy::Range, 10, Some(&json!("0-9"))).is_err());
    }

    #[test]
    fn mod_hash_takes_nothing() {
        assert_eq!(
            ShardParams::parse(ShardStrategy::ModHash, 4, None).unwrap(),
            ShardParams::None
        );
        assert!(ShardParams::parse(ShardStrategy::ModHash, 4, Some(&json!({"start": 1}))).is_err());
    }
}
