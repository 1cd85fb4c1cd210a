//! Durations in settings, typed when the settings are loaded: `30s`,
//! `5m`, `1h 30m`, `200us`, `0s`. A value that does not parse stops the
//! daemon at start with the setting's name, never at use.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A duration written as text in the config file and the environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub Duration);

impl Dur {
    /// `n` seconds.
    pub const fn secs(n: u64) -> Dur {
        Dur(Duration::from_secs(n))
    }

    /// `n` milliseconds.
    pub const fn millis(n: u64) -> Dur {
        Dur(Duration::from_millis(n))
    }

    /// `n` microseconds.
    pub const fn micros(n: u64) -> Dur {
        Dur(Duration::from_micros(n))
    }

    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_zero() {
            f.write_str("0s")
        } else {
            write!(f, "{}", humantime::format_duration(self.0))
        }
    }
}

impl std::str::FromStr for Dur {
    type Err = String;

    fn from_str(s: &str) -> Result<Dur, String> {
        match s.trim() {
            "0" => Ok(Dur(Duration::ZERO)),
            t => humantime::parse_duration(t)
                .map(Dur)
                .map_err(|e| format!("'{s}' is not a duration such as 30s, 5m or 1h ({e})")),
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Reads text, and the number 0 (an environment variable `...=0` reaches
/// the settings as a number).
struct DurVisitor;

impl serde::de::Visitor<'_> for DurVisitor {
    type Value = Dur;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as 30s, 5m or 1h")
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Dur, E> {
        v.parse().map_err(E::custom)
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Dur, E> {
        match v {
            0 => Ok(Dur(Duration::ZERO)),
            n => Err(E::custom(format!(
                "{n} has no unit; write it with one, e.g. {n}s or {n}ms"
            ))),
        }
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Dur, E> {
        match u64::try_from(v) {
            Ok(n) => self.visit_u64(n),
            Err(_) => Err(E::custom("a duration cannot be negative")),
        }
    }
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Dur, D::Error> {
        d.deserialize_any(DurVisitor)
    }
}

/// How long something is kept: a duration, or `forever` (also
/// `indefinite`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Keep {
    /// Never dropped.
    Forever,
    /// Dropped once older than this.
    For(Dur),
}

impl Keep {
    /// The duration; `None` for ever.
    pub fn duration(self) -> Option<std::time::Duration> {
        match self {
            Keep::Forever => None,
            Keep::For(d) => Some(d.get()),
        }
    }
}

impl Serialize for Keep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Keep::Forever => s.serialize_str("forever"),
            Keep::For(d) => d.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Keep {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Keep, D::Error> {
        struct KeepVisitor;
        impl serde::de::Visitor<'_> for KeepVisitor {
            type Value = Keep;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 30d, or forever")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Keep, E> {
                match v.trim() {
                    "forever" | "indefinite" => Ok(Keep::Forever),
                    t => t
                        .parse()
                        .map(Keep::For)
                        .map_err(|e: String| E::custom(format!("{e}, or forever"))),
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Keep, E> {
                DurVisitor.visit_u64(v).map(Keep::For)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Keep, E> {
                DurVisitor.visit_i64(v).map(Keep::For)
            }
        }
        d.deserialize_any(KeepVisitor)
    }
}

/// How often something recurring happens: a duration, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Every {
    /// Never.
    Off,
    /// Once per this.
    Each(Dur),
}

impl Every {
    /// The period; `None` when `off`.
    pub fn get(self) -> Option<Duration> {
        match self {
            Every::Off => None,
            Every::Each(d) => Some(d.get()),
        }
    }
}

impl Serialize for Every {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Every::Off => s.serialize_str("off"),
            Every::Each(d) => d.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Every {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Every, D::Error> {
        struct EveryVisitor;
        impl serde::de::Visitor<'_> for EveryVisitor {
            type Value = Every;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a duration such as 10m, or off")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Every, E> {
                match v.trim() {
                    "off" => Ok(Every::Off),
                    t => t
                        .parse()
                        .map(Every::Each)
                        .map_err(|e: String| E::custom(format!("{e}, or off"))),
                }
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> Result<Every, E> {
                if v {
                    Err(E::custom("give a duration such as 10m, or off"))
                } else {
                    Ok(Every::Off)
                }
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<Every, E> {
                DurVisitor.visit_u64(v).map(Every::Each)
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<Every, E> {
                DurVisitor.visit_i64(v).map(Every::Each)
            }
        }
        d.deserialize_any(EveryVisitor)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn durations_round_trip_through_their_text() {
        for text in ["30s", "5m", "1h 30m", "200us", "0s", "3days"] {
            let d: Dur = text.parse().unwrap();
            let again: Dur = d.to_string().parse().unwrap();
            assert_eq!(d, again, "{text}");
        }
        assert_eq!("0".parse::<Dur>().unwrap(), Dur(Duration::ZERO));
    }

    #[test]
    fn the_number_zero_is_a_duration_and_other_numbers_need_a_unit() {
        assert_eq!(
            serde_json::from_str::<Dur>("0").unwrap(),
            Dur(Duration::ZERO)
        );
        let err = serde_json::from_str::<Dur>("30").unwrap_err().to_string();
        assert!(err.contains("30s"), "{err}");
    }

    #[test]
    fn a_bad_duration_says_what_a_good_one_looks_like() {
        let err = "soon".parse::<Dur>().unwrap_err();
        assert!(err.contains("30s"), "{err}");
    }

    #[test]
    fn keep_reads_forever_and_durations() {
        let k: Keep = serde_json::from_str("\"forever\"").unwrap();
        assert_eq!(k, Keep::Forever);
        let k: Keep = serde_json::from_str("\"30d\"").unwrap();
        assert_eq!(k, Keep::For(Dur::secs(30 * 86400)));
        assert!(serde_json::from_str::<Keep>("\"later\"").is_err());
    }

    #[test]
    fn every_reads_off_and_durations() {
        let e: Every = serde_json::from_str("\"off\"").unwrap();
        assert_eq!(e, Every::Off);
        assert_eq!(e.get(), None);
        let e: Every = serde_json::from_str("\"10m\"").unwrap();
        assert_eq!(e.get(), Some(Duration::from_secs(600)));
        let err = serde_json::from_str::<Every>("\"sometimes\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("or off"), "{err}");
    }
}
