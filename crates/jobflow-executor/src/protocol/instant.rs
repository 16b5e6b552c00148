//! The instants of a call as the protocol writes them: the fire's instant in its execution id
//! (`yyyyMMddHHmmss`), in `X-Fire-Time` and in the body's `fireTime` (RFC 3339).
//!
//! Written field by field: `chrono`'s `format` reads its pattern anew at every call (about
//! 2,800 instructions, where these take a tenth), and its serde form writes the text a
//! character at a time through the serializer's escaping (about 2,000); a scheduler writes
//! them for every call it makes. Each is checked against `chrono`'s own text, which it falls
//! back to for what the fields cannot write (a year outside 0-9999, a leap second).

use chrono::{DateTime, Utc};
use serde::Serializer;

/// `t` as `yyyyMMddHHmmss`, the text of `t.format("%Y%m%d%H%M%S")`: the instant in a cron
/// fire's execution id (`X-Execution-Id`).
pub fn compact(t: DateTime<Utc>) -> String {
    let mut out = String::with_capacity(14);
    if write_fields(&mut out, t, [None; 5]) {
        out
    } else {
        t.format("%Y%m%d%H%M%S").to_string()
    }
}

/// `t` as RFC 3339 in whole seconds, UTC (`2026-03-01T02:00:00Z`), the text of
/// `t.to_rfc3339_opts(SecondsFormat::Secs, true)`: a call's `X-Fire-Time`, and its body's
/// `fireTime` when the instant is a whole second ([`serialize_fire_time`]).
pub fn rfc3339_seconds(t: DateTime<Utc>) -> String {
    let mut out = String::with_capacity(20);
    if write_fields(
        &mut out,
        t,
        [Some('-'), Some('-'), Some('T'), Some(':'), Some(':')],
    ) {
        out.push('Z');
        out
    } else {
        t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
    }
}

/// Year, month, day, hour, minute and second of `t`, each field after its separator; `false`
/// (nothing written) for what `chrono` writes otherwise: a year outside 0-9999, a leap second.
fn write_fields(out: &mut String, t: DateTime<Utc>, separators: [Option<char>; 5]) -> bool {
    use chrono::{Datelike, Timelike};
    let Ok(year) = u32::try_from(t.year()) else {
        return false;
    };
    if year > 9999 || t.nanosecond() >= 1_000_000_000 {
        return false;
    }
    let digits = |out: &mut String, value: u32, width: u32| {
        for place in (0..width).rev() {
            let digit = (value / 10u32.pow(place)) % 10;
            out.push(char::from(b'0' + digit as u8));
        }
    };
    digits(out, year, 4);
    let fields = [t.month(), t.day(), t.hour(), t.minute(), t.second()];
    for (value, separator) in fields.into_iter().zip(separators) {
        out.extend(separator);
        digits(out, value, 2);
    }
    true
}

/// Serializes a body's `fireTime` as `chrono`'s serde form does: [`rfc3339_seconds`] for a
/// whole second (a cron fire's instant), `chrono`'s own text otherwise (with its fraction).
pub fn serialize_fire_time<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    use chrono::Timelike;
    if t.nanosecond() == 0 {
        s.serialize_str(&rfc3339_seconds(*t))
    } else {
        serde::Serialize::serialize(t, s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_is_written_as_chrono_writes_it() {
        let mut instants: Vec<DateTime<Utc>> = [
            "0000-01-01T00:00:00Z",
            "0999-12-31T23:59:59Z",
            "1970-01-01T00:00:00Z",
            "2024-02-29T12:34:56.789Z",
            "2026-03-01T02:00:00Z",
            "9999-12-31T23:59:59.999999999Z",
        ]
        .iter()
        .map(|t| t.parse().unwrap())
        .collect();
        // Every hour of a leap year, at a second that differs each time.
        let start: DateTime<Utc> = "2028-01-01T00:00:00Z".parse().unwrap();
        instants.extend((0..366 * 24).map(|h| start + chrono::Duration::seconds(h * 3607)));
        for t in instants {
            assert_eq!(compact(t), t.format("%Y%m%d%H%M%S").to_string());
            assert_eq!(
                rfc3339_seconds(t),
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
    }

    #[test]
    fn what_the_fields_cannot_write_is_left_to_chrono() {
        let far = chrono::NaiveDate::from_ymd_opt(12026, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc();
        let before = chrono::NaiveDate::from_ymd_opt(-1, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc();
        let leap = chrono::NaiveDate::from_ymd_opt(2016, 12, 31)
            .unwrap()
            .and_hms_nano_opt(23, 59, 59, 1_000_000_000)
            .unwrap()
            .and_utc();
        for t in [far, before, leap] {
            assert_eq!(compact(t), t.format("%Y%m%d%H%M%S").to_string());
            assert_eq!(
                rfc3339_seconds(t),
                t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            );
        }
        assert_eq!(compact(leap), "20161231235960");
    }

    #[test]
    fn a_fire_time_is_serialized_as_chrono_serializes_it() {
        #[derive(serde::Serialize)]
        struct Ours(#[serde(serialize_with = "serialize_fire_time")] DateTime<Utc>);
        let start: DateTime<Utc> = "2026-03-01T00:00:00Z".parse().unwrap();
        let mut instants: Vec<DateTime<Utc>> = (0..2000)
            .map(|i| start + chrono::Duration::milliseconds(i * 86_400_123))
            .collect();
        instants.push("2024-02-29T12:34:56.000001Z".parse().unwrap());
        let far = chrono::NaiveDate::from_ymd_opt(12026, 1, 1)
            .unwrap()
            .and_hms_opt(0, 0, 0)
            .unwrap()
            .and_utc();
        instants.push(far);
        for t in instants {
            assert_eq!(
                serde_json::to_string(&Ours(t)).unwrap(),
                serde_json::to_string(&t).unwrap()
            );
        }
    }
}
