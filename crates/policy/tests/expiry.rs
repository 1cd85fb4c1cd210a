//! The expiry grammar with a fixed clock, across DST changes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use actiongate_policy::chrono::{DateTime, Duration, TimeZone, Utc};
use actiongate_policy::chrono_tz::{America, Europe, Tz, UTC};
use actiongate_policy::{Expiry, ExpiryError, parse_duration, parse_expiry};

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

fn local(tz: Tz, y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    tz.with_ymd_and_hms(y, mo, d, h, mi, 0)
        .single()
        .unwrap()
        .with_timezone(&Utc)
}

fn at(input: &str, now: DateTime<Utc>, tz: Tz) -> DateTime<Utc> {
    match parse_expiry(input, now, tz).unwrap() {
        Expiry::At(t) => t,
        Expiry::Indefinite => panic!("{input} is indefinite"),
    }
}

#[test]
fn durations_add_to_now() {
    let now = utc(2026, 5, 1, 12, 0);
    for (input, expected) in [
        ("90s", Duration::seconds(90)),
        ("30m", Duration::minutes(30)),
        ("1h", Duration::hours(1)),
        ("2d", Duration::days(2)),
        ("1w", Duration::weeks(1)),
        (" 1h 30m ", Duration::minutes(90)),
    ] {
        assert_eq!(at(input, now, UTC), now + expected, "{input}");
    }
}

#[test]
fn indefinite_never_expires() {
    let now = utc(2026, 5, 1, 12, 0);
    assert_eq!(parse_expiry("indefinite", now, UTC), Ok(Expiry::Indefinite));
    assert_eq!(
        parse_expiry("Indefinite", now, UTC).unwrap().expires_at(),
        None
    );
}

#[test]
fn today_ends_at_next_local_midnight() {
    let now = utc(2026, 5, 1, 12, 0);
    assert_eq!(at("today", now, UTC), utc(2026, 5, 2, 0, 0));
    assert_eq!(at("TODAY", now, UTC), utc(2026, 5, 2, 0, 0));
    // 12:00 UTC is 08:00 in New York (EDT, UTC-4): midnight there is 04:00 UTC.
    assert_eq!(at("today", now, America::New_York), utc(2026, 5, 2, 4, 0));
    // 23:30 UTC on May 1 is already May 2 in Berlin (CEST, UTC+2).
    assert_eq!(
        at("today", utc(2026, 5, 1, 23, 30), Europe::Berlin),
        local(Europe::Berlin, 2026, 5, 3, 0, 0)
    );
}

#[test]
fn today_on_new_york_spring_forward_day() {
    // 2026-03-08: clocks go from 02:00 EST to 03:00 EDT; the day has 23 hours.
    let tz = America::New_York;
    let ten_am = local(tz, 2026, 3, 8, 10, 0);
    assert_eq!(ten_am, utc(2026, 3, 8, 14, 0));
    let end = at("today", ten_am, tz);
    assert_eq!(end, utc(2026, 3, 9, 4, 0));
    assert_eq!(end - ten_am, Duration::hours(14));
    // From just after the day began (EST) it is 23 hours, not 24.
    let start = local(tz, 2026, 3, 8, 0, 0);
    assert_eq!(at("today", start, tz) - start, Duration::hours(23));
}

#[test]
fn today_on_new_york_fall_back_day() {
    // 2026-11-01: 02:00 EDT becomes 01:00 EST; the day has 25 hours.
    let tz = America::New_York;
    let start = local(tz, 2026, 11, 1, 0, 0);
    assert_eq!(at("today", start, tz) - start, Duration::hours(25));
    let ten_am = local(tz, 2026, 11, 1, 10, 0);
    assert_eq!(at("today", ten_am, tz), utc(2026, 11, 2, 5, 0));
}

#[test]
fn today_on_berlin_dst_days() {
    let tz = Europe::Berlin;
    // 2026-03-29: 02:00 CET becomes 03:00 CEST, a 23-hour day.
    let start = local(tz, 2026, 3, 29, 0, 0);
    assert_eq!(start, utc(2026, 3, 28, 23, 0));
    assert_eq!(at("today", start, tz), utc(2026, 3, 29, 22, 0));
    assert_eq!(at("today", start, tz) - start, Duration::hours(23));
    assert_eq!(
        at("today", local(tz, 2026, 3, 29, 10, 0), tz),
        utc(2026, 3, 29, 22, 0)
    );
    // 2026-10-25: 03:00 CEST becomes 02:00 CET, a 25-hour day.
    let start = local(tz, 2026, 10, 25, 0, 0);
    assert_eq!(start, utc(2026, 10, 24, 22, 0));
    assert_eq!(at("today", start, tz), utc(2026, 10, 25, 23, 0));
    assert_eq!(at("today", start, tz) - start, Duration::hours(25));
}

#[test]
fn today_where_midnight_does_not_exist() {
    // America/Santiago skips midnight when DST starts (2026-09-06: 00:00 -> 01:00).
    let tz = actiongate_policy::chrono_tz::America::Santiago;
    let now = utc(2026, 9, 5, 20, 0);
    let end = at("today", now, tz);
    assert!(end > now);
    assert!(end - now < Duration::hours(24));
}

#[test]
fn rfc3339_times_in_the_future_are_accepted() {
    let now = utc(2026, 5, 1, 12, 0);
    assert_eq!(at("2026-05-01T17:00:00Z", now, UTC), utc(2026, 5, 1, 17, 0));
    assert_eq!(
        at("2026-05-01T17:00:00+02:00", now, UTC),
        utc(2026, 5, 1, 15, 0)
    );
}

#[test]
fn past_times_are_errors() {
    let now = utc(2026, 5, 1, 12, 0);
    assert!(matches!(
        parse_expiry("2026-05-01T11:59:59Z", now, UTC),
        Err(ExpiryError::InPast { .. })
    ));
    assert!(matches!(
        parse_expiry("2026-05-01T12:00:00Z", now, UTC),
        Err(ExpiryError::InPast { .. })
    ));
    assert!(matches!(
        parse_expiry("0s", now, UTC),
        Err(ExpiryError::InPast { .. })
    ));
}

#[test]
fn other_input_says_what_is_accepted() {
    let now = utc(2026, 5, 1, 12, 0);
    for input in [
        "",
        "soon",
        "tomorrow",
        "1 hour later",
        "-1h",
        "h1",
        "2026-13-01T00:00:00Z",
        "forever",
    ] {
        let err = parse_expiry(input, now, UTC).unwrap_err();
        let text = err.to_string();
        for word in ["1h", "today", "indefinite", "RFC 3339"] {
            assert!(text.contains(word), "{input:?}: {text}");
        }
    }
}

#[test]
fn plain_durations_for_timeouts() {
    assert_eq!(parse_duration("1m").unwrap().as_secs(), 60);
    assert_eq!(parse_duration("60m").unwrap().as_secs(), 3600);
    assert_eq!(parse_duration("90s").unwrap().as_secs(), 90);
    assert_eq!(parse_duration("2h").unwrap().as_secs(), 7200);
    assert!(matches!(
        parse_duration("0m"),
        Err(ExpiryError::ZeroDuration { .. })
    ));
    let err = parse_duration("ten minutes").unwrap_err();
    assert!(err.to_string().contains("30m"), "{err}");
    assert!(parse_duration("today").is_err());
}
