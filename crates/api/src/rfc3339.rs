//! Times serialized as RFC 3339 text, the very text chrono's own
//! `Serialize` gives (`SecondsFormat::AutoSi`, `Z`), but written in one
//! piece: chrono's goes through `fmt` a character at a time, and
//! serde_json then escapes every character on its own, which made the
//! timestamps a large share of rendering an action.

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::{Serialize, Serializer};

/// For a `DateTime<Utc>` field (`serialize_with`).
pub fn serialize<S: Serializer>(t: &DateTime<Utc>, s: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; 30];
    match write(t, &mut buf) {
        Some(text) => s.serialize_str(text),
        None => t.serialize(s),
    }
}

/// For an `Option<DateTime<Utc>>` field (`serialize_with`).
pub fn option<S: Serializer>(t: &Option<DateTime<Utc>>, s: S) -> Result<S::Ok, S::Error> {
    match t {
        Some(t) => serialize(t, s),
        None => s.serialize_none(),
    }
}

/// `t` as text in `buf`; `None` for what chrono writes otherwise (years
/// outside 0..=9999, leap seconds), left to chrono.
fn write<'b>(t: &DateTime<Utc>, buf: &'b mut [u8; 30]) -> Option<&'b str> {
    let year = u32::try_from(t.year()).ok().filter(|y| *y <= 9999)?;
    let nanos = t.nanosecond();
    if nanos >= 1_000_000_000 {
        return None;
    }
    let mut n = 0;
    let mut put = |value: u32, width: u32, sep: u8| {
        for i in (0..width).rev() {
            buf[n] = b'0' + (value / 10u32.pow(i) % 10) as u8;
            n += 1;
        }
        buf[n] = sep;
        n += 1;
    };
    put(year, 4, b'-');
    put(t.month(), 2, b'-');
    put(t.day(), 2, b'T');
    put(t.hour(), 2, b':');
    put(t.minute(), 2, b':');
    // Fractions as chrono's AutoSi: none, or 3, 6 or 9 digits.
    let fraction = match nanos {
        0 => None,
        _ if nanos.is_multiple_of(1_000_000) => Some((nanos / 1_000_000, 3)),
        _ if nanos.is_multiple_of(1_000) => Some((nanos / 1_000, 6)),
        _ => Some((nanos, 9)),
    };
    match fraction {
        None => put(t.second(), 2, b'Z'),
        Some((digits, width)) => {
            put(t.second(), 2, b'.');
            put(digits, width, b'Z');
        }
    }
    std::str::from_utf8(&buf[..n]).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use chrono::TimeZone;

    use super::*;

    #[derive(Serialize)]
    struct Both {
        #[serde(serialize_with = "serialize")]
        ours: DateTime<Utc>,
        chrono: DateTime<Utc>,
        #[serde(serialize_with = "option")]
        some: Option<DateTime<Utc>>,
        #[serde(serialize_with = "option")]
        none: Option<DateTime<Utc>>,
    }

    #[test]
    fn times_read_exactly_as_chrono_writes_them() {
        let mut seen = 0;
        for secs in [
            0i64,
            1,
            59,
            951_782_400,     // 2000-02-29
            1_795_459_259,   // 2026-11-23
            253_402_300_799, // 9999-12-31T23:59:59
            -62_167_219_200, // 0000-01-01
            -1,
            253_402_300_800, // year 10000: left to chrono
            -62_167_219_201, // year -1: left to chrono
        ] {
            for nanos in [
                0u32,
                1,
                10,
                999,
                1_000,
                120_000,
                999_999,
                1_000_000,
                835_000_000,
                835_100_000,
                835_123_456,
                999_999_999,
                1_500_000_000,
            ] {
                let Some(t) = Utc.timestamp_opt(secs, nanos).single() else {
                    continue;
                };
                let v = serde_json::to_value(Both {
                    ours: t,
                    chrono: t,
                    some: Some(t),
                    none: None,
                })
                .unwrap();
                assert_eq!(v["ours"], v["chrono"], "{secs} {nanos}");
                assert_eq!(v["some"], v["chrono"], "{secs} {nanos}");
                assert!(v["none"].is_null());
                seen += 1;
            }
        }
        assert!(seen > 100, "{seen}");
    }
}
