//! Unit-carrying scenario values: they read `"100Gbps"`, `"1.5us"`, `"4KiB"` and write back the same form.

use serde::de::{self, Deserializer, Visitor};
use serde::{Serialize, Serializer};
use std::fmt;

use crate::units::{self, Bytes, Rate, Time};

/// The longest duration a scenario may state: 10^6 s (11.6 days) in picoseconds. Any sum of a few
/// user times stays far below `u64::MAX`, so time arithmetic cannot wrap.
pub const MAX_TIME_PS: u64 = 1_000_000_000_000_000_000;

/// `v` if it is at most [`MAX_TIME_PS`], else the error message.
pub fn bounded_time(v: u64, text: &str) -> Result<u64, String> {
    if v > MAX_TIME_PS {
        Err(format!(
            "expected a duration of at most {}, found {text:?}",
            units::format_time(MAX_TIME_PS)
        ))
    } else {
        Ok(v)
    }
}

fn unbounded(v: u64, _text: &str) -> Result<u64, String> {
    Ok(v)
}

macro_rules! unit_value {
    ($name:ident, $inner:ty, $parse:path, $format:path, $expect:literal, $allow_int:literal, $bound:path) => {
        #[doc = concat!("A scenario value holding ", $expect, ".")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name(pub $inner);

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(&$format(self.0))
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $name;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expect)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$name, E> {
                        let x = $parse(v).map_err(|e| E::custom(e))?;
                        $bound(x, v).map($name).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$name, E> {
                        if $allow_int && v >= 0 {
                            Ok($name(v as $inner))
                        } else {
                            Err(E::custom(format!("expected {}, found {}", $expect, v)))
                        }
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$name, E> {
                        if $allow_int {
                            Ok($name(v as $inner))
                        } else {
                            Err(E::custom(format!("expected {}, found {}", $expect, v)))
                        }
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$name, E> {
                        Err(E::custom(format!("expected {}, found {}", $expect, v)))
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

unit_value!(
    Duration,
    Time,
    units::parse_time,
    units::format_time,
    "a duration with a unit, like \"500ns\", \"1.5us\" or \"2ms\"",
    false,
    bounded_time
);
unit_value!(
    Size,
    Bytes,
    units::parse_bytes,
    units::format_bytes,
    "a size like \"1500B\", \"4KiB\", \"1MB\" or \"32MiB\"",
    true,
    unbounded
);
unit_value!(
    LinkRate,
    Rate,
    units::parse_rate,
    units::format_rate,
    "a rate like \"100Gbps\" or \"400Gbps\"",
    false,
    unbounded
);
