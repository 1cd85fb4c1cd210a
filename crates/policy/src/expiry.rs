//! The expiry grammar of grants (`1h`, `30m`, `2d`, `today`, `indefinite`,
//! an RFC 3339 time) and plain durations for timeouts.

use chrono::{DateTime, Duration as ChronoDuration, LocalResult, TimeZone, Utc};
use chrono_tz::Tz;
use std::time::Duration;

const ACCEPTED: &str = "a whole number and one unit such as 90s, 30m, 1h, 2d or 1w, `today`, `indefinite`, or an RFC 3339 time such as 2026-05-01T17:00:00Z";

/// When a grant stops counting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Expiry {
    /// At this instant (the grant is expired from then on).
    At(DateTime<Utc>),
    /// Never.
    Indefinite,
}

impl Expiry {
    /// The instant, or `None` for [`Expiry::Indefinite`] (the form a
    /// [`crate::Grant`] stores).
    pub fn expires_at(self) -> Option<DateTime<Utc>> {
        match self {
            Self::At(t) => Some(t),
            Self::Indefinite => None,
        }
    }
}

/// Input the expiry or duration grammar does not accept.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExpiryError {
    /// Not any accepted form.
    #[error("`{input}` is not an expiry; use {ACCEPTED}")]
    Invalid {
        /// The input as given.
        input: String,
    },
    /// An RFC 3339 time at or before now.
    #[error("`{input}` is in the past; use {ACCEPTED}")]
    InPast {
        /// The input as given.
        input: String,
    },
    /// Not a duration.
    #[error("`{input}` is not a duration; use a number and a unit, such as 90s, 30m, 1h, 2d or 1w")]
    InvalidDuration {
        /// The input as given.
        input: String,
    },
    /// A duration of zero.
    #[error("`{input}` is zero; a duration must be longer than that")]
    ZeroDuration {
        /// The input as given.
        input: String,
    },
}

/// Parses a duration such as `90s`, `30m`, `1h`, `2d`, `1w` (also `1h 30m`).
/// Zero is rejected. Bounds (e.g. a timeout between 1m and 60m) are the
/// caller's to check.
pub fn parse_duration(input: &str) -> Result<Duration, ExpiryError> {
    let trimmed = input.trim();
    let duration =
        humantime::parse_duration(trimmed).map_err(|_| ExpiryError::InvalidDuration {
            input: input.to_owned(),
        })?;
    if duration.is_zero() {
        return Err(ExpiryError::ZeroDuration {
            input: input.to_owned(),
        });
    }
    Ok(duration)
}

/// Parses a grant expiry relative to `now`. `today` means until the next
/// midnight in `tz`, wherever daylight saving time puts it.
pub fn parse_expiry(input: &str, now: DateTime<Utc>, tz: Tz) -> Result<Expiry, ExpiryError> {
    let trimmed = input.trim();
    let invalid = || ExpiryError::Invalid {
        input: input.to_owned(),
    };
    if trimmed.eq_ignore_ascii_case("indefinite") {
        return Ok(Expiry::Indefinite);
    }
    if trimmed.eq_ignore_ascii_case("today") {
        return next_midnight(now, tz).map(Expiry::At).ok_or_else(invalid);
    }
    if let Ok(at) = DateTime::parse_from_rfc3339(trimmed) {
        let at = at.with_timezone(&Utc);
        if at <= now {
            return Err(ExpiryError::InPast {
                input: input.to_owned(),
            });
        }
        return Ok(Expiry::At(at));
    }
    match parse_duration(trimmed) {
        Ok(duration) => ChronoDuration::from_std(duration)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .map(Expiry::At)
            .ok_or_else(invalid),
        Err(ExpiryError::ZeroDuration { .. }) => Err(ExpiryError::InPast {
            input: input.to_owned(),
        }),
        Err(_) => Err(invalid()),
    }
}

/// What the API takes as an expiry, exactly: a whole number of one unit
/// (`90s`, `30m`, `1h`, `2d`, `1w`, at most four digits), `today`,
/// `indefinite`, or an RFC 3339 time. The OpenAPI document states it too.
pub const WIRE_EXPIRY_PATTERN: &str = r"^(?:[1-9][0-9]{0,3}[smhdw]|today|indefinite|[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?(?:Z|[+-][0-9]{2}:[0-9]{2}))$";

static WIRE_EXPIRY: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    regex::Regex::new(WIRE_EXPIRY_PATTERN).expect("the wire expiry pattern compiles")
});

/// [`parse_expiry`] of an expiry sent over the API: anything outside
/// [`WIRE_EXPIRY_PATTERN`] (`1h 30m`, ` 1h`, `99999d`, `Today`) is refused
/// as the schema refuses it, so what a client validates is what is taken.
pub fn parse_wire_expiry(input: &str, now: DateTime<Utc>, tz: Tz) -> Result<Expiry, ExpiryError> {
    if !WIRE_EXPIRY.is_match(input) {
        return Err(ExpiryError::Invalid {
            input: input.to_owned(),
        });
    }
    parse_expiry(input, now, tz)
}

/// The first instant of the next local day in `tz`. Usually that is
/// 00:00; where a DST change skips midnight, it is the first local time that
/// exists; where midnight happens twice, the earlier.
fn next_midnight(now: DateTime<Utc>, tz: Tz) -> Option<DateTime<Utc>> {
    let tomorrow = now.with_timezone(&tz).date_naive().succ_opt()?;
    let mut local = tomorrow.and_hms_opt(0, 0, 0)?;
    // Offsets change by at most a few hours; try each minute of that window.
    for _ in 0..(4 * 60) {
        match tz.from_local_datetime(&local) {
            LocalResult::Single(t) => return Some(t.with_timezone(&Utc)),
            LocalResult::Ambiguous(earliest, _) => return Some(earliest.with_timezone(&Utc)),
            LocalResult::None => local += ChronoDuration::minutes(1),
        }
    }
    None
}

#[cfg(test)]
mod wire_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_wire_takes_exactly_what_its_pattern_says() {
        let now = Utc.with_ymd_and_hms(2026, 5, 1, 12, 0, 0).unwrap();
        let tz = chrono_tz::UTC;
        for ok in [
            "90s",
            "30m",
            "1h",
            "2d",
            "1w",
            "9999d",
            "today",
            "indefinite",
            "2026-05-01T17:00:00Z",
            "2026-05-01T17:00:00.5+02:00",
        ] {
            assert!(parse_wire_expiry(ok, now, tz).is_ok(), "{ok}");
        }
        for bad in [
            "1h 30m",
            " 1h",
            "1h ",
            "0h",
            "01h",
            "10000d",
            "1H",
            "Today",
            "1hour",
            "2026-05-01 17:00:00Z",
            "2026-05-01t17:00:00z",
            "",
        ] {
            assert!(parse_wire_expiry(bad, now, tz).is_err(), "{bad}");
        }
        // The tolerant grammar (chats, the CLI's own flags) still takes more.
        assert!(parse_expiry("1h 30m", now, tz).is_ok());
    }
}
