//! Conversions between chrono times and the integer milliseconds stored.

use chrono::{DateTime, TimeZone, Utc};

/// Milliseconds since the Unix epoch, as stored in every time column.
pub fn to_ms(t: DateTime<Utc>) -> i64 {
    t.timestamp_millis()
}

/// The stored milliseconds back as a UTC time; out-of-range values (never
/// written by us) clamp to the epoch rather than failing a whole read.
pub fn from_ms(ms: i64) -> DateTime<Utc> {
    Utc.timestamp_millis_opt(ms).single().unwrap_or_default()
}

/// `from_ms` for nullable columns.
pub fn opt_from_ms(ms: Option<i64>) -> Option<DateTime<Utc>> {
    ms.map(from_ms)
}

/// Now, truncated to whole milliseconds so that what is returned equals what
/// is read back later.
pub fn now() -> DateTime<Utc> {
    from_ms(to_ms(Utc::now()))
}

pub use actiongate_api::rfc3339;
