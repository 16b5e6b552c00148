//! `[[calendars]]`: named sets of excluded dates a job may name in its `calendar` field (see
//! [`Calendar`](crate::jobs::Calendar)).

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{ConfigError, invalid};
use crate::jobs::{Calendar, CalendarName, Calendars, TimeZoneName};

/// One calendar as configured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalendarSettings {
    pub name: String,
    /// The IANA time zone its dates are days of; default UTC.
    #[serde(default)]
    pub timezone: Option<String>,
    /// Excluded dates (`2026-10-01`) and inclusive date ranges (`2026-10-02/2026-10-07`).
    #[serde(default)]
    pub exclude: Vec<String>,
}

/// Every configured calendar, checked, by name; the first problem names its key.
pub fn calendars(settings: &[CalendarSettings]) -> Result<Calendars, ConfigError> {
    let mut out = Calendars::new();
    for (i, c) in settings.iter().enumerate() {
        let key = |field: &str| format!("calendars[{i}].{field}");
        CalendarName::parse(&c.name).map_err(|m| invalid(key("name"), m))?;
        let tz = match &c.timezone {
            Some(tz) => TimeZoneName::parse(tz).map_err(|m| invalid(key("timezone"), m))?,
            None => TimeZoneName::UTC,
        };
        let calendar =
            Calendar::parse(tz.tz(), &c.exclude).map_err(|m| invalid(key("exclude"), m))?;
        if out.insert(c.name.clone(), Arc::new(calendar)).is_some() {
            return Err(invalid(
                key("name"),
                format!("`{}` is configured twice", c.name),
            ));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Calendars, ConfigError> {
        #[derive(Deserialize)]
        struct Doc {
            calendars: Vec<CalendarSettings>,
        }
        calendars(&toml::from_str::<Doc>(text).unwrap().calendars)
    }

    #[test]
    fn calendars_are_checked_and_named_by_key() {
        let ok = parse(
            "[[calendars]]\nname = \"cn-holidays\"\ntimezone = \"Asia/Shanghai\"\nexclude = [\"2026-10-01\", \"2026-10-02/2026-10-07\"]\n",
        )
        .unwrap();
        assert!(ok.contains_key("cn-holidays"));
        for (text, key) in [
            ("[[calendars]]\nname = \"a b\"\n", "calendars[0].name"),
            (
                "[[calendars]]\nname = \"a\"\ntimezone = \"Mars/Base\"\n",
                "calendars[0].timezone",
            ),
            (
                "[[calendars]]\nname = \"a\"\nexclude = [\"2026-02-30\"]\n",
                "calendars[0].exclude",
            ),
            (
                "[[calendars]]\nname = \"a\"\n[[calendars]]\nname = \"a\"\n",
                "calendars[1].name",
            ),
        ] {
            assert_eq!(parse(text).unwrap_err().key(), key, "{text}");
        }
    }
}
