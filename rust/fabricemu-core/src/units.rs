//! Physical units of the core: time in integer picoseconds, sizes in bytes, rates in bits per second.
//!
//! Users write quantities with suffixes (`"100Gbps"`, `"1.5us"`, `"32MiB"`); they are parsed here
//! exactly (decimal fractions are parsed as rationals, never through `f64`), so `"1.5us"` is exactly
//! 1_500_000 ps. Serialisation delay is computed in `u128` and rounded up.

use std::fmt;

/// Picoseconds per second.
pub const PS_PER_SEC: u64 = 1_000_000_000_000;

/// Simulated time, in picoseconds.
pub type Time = u64;
/// A size, in bytes.
pub type Bytes = u64;
/// A link rate, in bits per second.
pub type Rate = u64;

/// Exact time to serialise `bytes` onto a link of `rate` bits per second, rounded up to a whole ps.
#[inline]
pub fn serialisation_ps(bytes: u64, rate_bps: Rate) -> Time {
    // In u64 whenever the product fits (every packet size): the same quotient without a 128-bit
    // division.
    match bytes.checked_mul(8 * PS_PER_SEC) {
        Some(num) => num.div_ceil(rate_bps),
        None => (bytes as u128 * 8 * PS_PER_SEC as u128).div_ceil(rate_bps as u128) as Time,
    }
}

/// Why a unit string could not be parsed (the caller adds the key path and position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitError {
    pub expected: &'static str,
    pub found: String,
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "expected {}, found {:?}", self.expected, self.found)
    }
}

impl std::error::Error for UnitError {}

/// Split `"1.5us"` into the number part and the suffix.
fn split_number(s: &str) -> (&str, &str) {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|&(_, c)| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    (s[..end].trim(), s[end..].trim())
}

/// Parse a non-negative decimal `"12.25"` times `scale` exactly; `None` if it is not a whole number
/// of the base unit or overflows.
fn scaled_decimal(num: &str, scale: u128) -> Option<u128> {
    let num: String = num.chars().filter(|&c| c != '_').collect();
    if num.is_empty() || num.starts_with('.') && num.len() == 1 {
        return None;
    }
    let (int_part, frac_part) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num.as_str(), ""),
    };
    if !int_part.chars().all(|c| c.is_ascii_digit())
        || !frac_part.chars().all(|c| c.is_ascii_digit())
    {
        return None;
    }
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let int_val: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    let mut value = int_val.checked_mul(scale)?;
    if !frac_part.is_empty() {
        let frac: u128 = frac_part.parse().ok()?;
        let denom = 10u128.checked_pow(frac_part.len() as u32)?;
        let scaled = frac.checked_mul(scale)?;
        if scaled % denom != 0 {
            return None; // not representable exactly in the base unit
        }
        value = value.checked_add(scaled / denom)?;
    }
    Some(value)
}

fn parse_with(
    s: &str,
    table: &[(&str, u128)],
    default_unit: Option<u128>,
    expected: &'static str,
) -> Result<u64, UnitError> {
    let err = || UnitError {
        expected,
        found: s.to_string(),
    };
    let (num, suffix) = split_number(s);
    let scale = if suffix.is_empty() {
        default_unit.ok_or_else(err)?
    } else {
        table
            .iter()
            .find(|(name, _)| *name == suffix)
            .map(|&(_, v)| v)
            .ok_or_else(err)?
    };
    let v = scaled_decimal(num, scale).ok_or_else(err)?;
    u64::try_from(v).map_err(|_| err())
}

const TIME_UNITS: &[(&str, u128)] = &[
    ("ps", 1),
    ("ns", 1_000),
    ("us", 1_000_000),
    ("µs", 1_000_000),
    ("ms", 1_000_000_000),
    ("s", 1_000_000_000_000),
];

const SIZE_UNITS: &[(&str, u128)] = &[
    ("B", 1),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
];

const RATE_UNITS: &[(&str, u128)] = &[
    ("bps", 1),
    ("Kbps", 1_000),
    ("Mbps", 1_000_000),
    ("Gbps", 1_000_000_000),
    ("Tbps", 1_000_000_000_000),
];

/// A duration such as `"500ns"`, `"1.5us"`, `"2ms"`, `"1s"`, `"250ps"` -> picoseconds.
pub fn parse_time(s: &str) -> Result<Time, UnitError> {
    parse_with(
        s,
        TIME_UNITS,
        None,
        "a duration with a unit, like \"500ns\", \"1.5us\" or \"2ms\"",
    )
}

/// A size such as `"4KiB"`, `"1MB"`, `"1500B"` (a bare number is bytes) -> bytes.
pub fn parse_bytes(s: &str) -> Result<Bytes, UnitError> {
    parse_with(
        s,
        SIZE_UNITS,
        Some(1),
        "a size like \"1500B\", \"4KiB\", \"1MB\" or \"32MiB\"",
    )
}

/// A rate such as `"100Gbps"`, `"400Gbps"`, `"2.5Gbps"` -> bits per second.
pub fn parse_rate(s: &str) -> Result<Rate, UnitError> {
    let r = parse_with(
        s,
        RATE_UNITS,
        None,
        "a rate like \"100Gbps\" or \"400Gbps\"",
    )?;
    if r == 0 {
        return Err(UnitError {
            expected: "a positive rate like \"100Gbps\"",
            found: s.to_string(),
        });
    }
    Ok(r)
}

/// Format picoseconds with the largest unit that keeps it exact (for `to_toml` and messages).
pub fn format_time(ps: Time) -> String {
    for &(name, scale) in TIME_UNITS.iter().rev() {
        if name == "µs" {
            continue;
        }
        let scale = scale as u64;
        if ps >= scale && ps.is_multiple_of(scale) {
            return format!("{}{}", ps / scale, name);
        }
    }
    format!("{ps}ps")
}

/// Format a byte count exactly (`4096` -> `"4KiB"`, `1000000` -> `"1MB"`).
pub fn format_bytes(b: Bytes) -> String {
    for &(name, scale) in SIZE_UNITS.iter().rev() {
        let scale = scale as u64;
        if scale > 1 && b >= scale && b.is_multiple_of(scale) {
            return format!("{}{}", b / scale, name);
        }
    }
    format!("{b}B")
}

/// Format a rate exactly (`100_000_000_000` -> `"100Gbps"`).
pub fn format_rate(r: Rate) -> String {
    for &(name, scale) in RATE_UNITS.iter().rev() {
        let scale = scale as u64;
        if r >= scale && r.is_multiple_of(scale) {
            return format!("{}{}", r / scale, name);
        }
    }
    format!("{r}bps")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_exact() {
        assert_eq!(parse_time("500ns").unwrap(), 500_000);
        assert_eq!(parse_time("1.5us").unwrap(), 1_500_000);
        assert_eq!(parse_time("2ms").unwrap(), 2_000_000_000);
        assert_eq!(parse_time("0.001ps").ok(), None);
        assert_eq!(parse_time("3").ok(), None, "a bare number has no unit");
        assert!(parse_time("5 parsecs").is_err());
        assert!(parse_time("-1us").is_err());
    }

    #[test]
    fn sizes_and_rates() {
        assert_eq!(parse_bytes("4KiB").unwrap(), 4096);
        assert_eq!(parse_bytes("1MB").unwrap(), 1_000_000);
        assert_eq!(parse_bytes("32MiB").unwrap(), 32 << 20);
        assert_eq!(parse_bytes("1500").unwrap(), 1500);
        assert_eq!(parse_rate("100Gbps").unwrap(), 100_000_000_000);
        assert_eq!(parse_rate("2.5Gbps").unwrap(), 2_500_000_000);
        assert!(parse_rate("0Gbps").is_err());
        assert!(parse_rate("100GB").is_err());
    }

    #[test]
    fn serialisation_rounds_up() {
        // 1500 B at 100 Gbps = 120 ns exactly.
        assert_eq!(serialisation_ps(1500, 100_000_000_000), 120_000);
        // 1 B at 3 bps = 8/3 s, rounded up.
        assert_eq!(serialisation_ps(1, 3), 2_666_666_666_667);
    }

    #[test]
    fn formatting_round_trips() {
        for s in ["500ns", "1500ns", "2ms", "4KiB", "1MB", "100Gbps", "250ps"] {
            let t = parse_time(s).map(format_time);
            let b = parse_bytes(s).map(format_bytes);
            let r = parse_rate(s).map(format_rate);
            assert!(
                t.as_deref() == Ok(s) || b.as_deref() == Ok(s) || r.as_deref() == Ok(s),
                "{s}"
            );
        }
    }
}
