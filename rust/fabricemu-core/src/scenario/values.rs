//! Unit-carrying scenario values: they read `"100Gbps"`, `"1.5us"`, `"4KiB"` and write back the same form.

use serde::de::{self, Deserializer, Visitor};
use serde::{Serialize, Serializer};
use std::fmt;

use crate::units::{self, Bytes, Rate, Time};

macro_rules! unit_value {
    ($name:ident, $inner:ty, $parse:path, $format:path, $expect:literal, $allow_int:literal) => {
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
                        $parse(v).map($name).map_err(|e| E::custom(e))
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
    false
);
unit_value!(
    Size,
    Bytes,
    units::parse_bytes,
    units::format_bytes,
    "a size like \"1500B\", \"4KiB\", \"1MB\" or \"32MiB\"",
    true
);
unit_value!(
    LinkRate,
    Rate,
    units::parse_rate,
    units::format_rate,
    "a rate like \"100Gbps\" or \"400Gbps\"",
    false
);
