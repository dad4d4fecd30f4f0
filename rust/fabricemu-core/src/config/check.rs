//! Small checks every domain's validation uses, each failure naming its key path.

use super::error::ScenarioError;

pub type Res<T> = Result<T, ScenarioError>;

/// A required integer in `min..=max` (`what` says what it counts).
pub fn count(path: &str, v: Option<i64>, min: i64, max: i64, what: &str) -> Res<u32> {
    match v {
        None => Err(ScenarioError::at(path, format!("missing: expected {what}"))),
        Some(x) if x < min || x > max => Err(ScenarioError::at(
            path,
            format!("expected {what} in {min}..={max}, found {x}"),
        )),
        Some(x) => Ok(x as u32),
    }
}

pub fn host_id(path: String, v: i64, n_hosts: u32) -> Res<u32> {
    if v < 0 || v >= n_hosts as i64 {
        return Err(ScenarioError::at(
            path,
            format!(
                "host id {v} is out of range: this topology has hosts 0..={}",
                n_hosts - 1
            ),
        ));
    }
    Ok(v as u32)
}

/// A list of distinct host ids (`path.j` names a bad entry).
pub fn host_list(path: &str, list: &[i64], n_hosts: u32) -> Res<Vec<u32>> {
    let mut out = Vec::with_capacity(list.len());
    let mut seen = vec![false; n_hosts as usize];
    for (j, &h) in list.iter().enumerate() {
        let id = host_id(format!("{path}.{j}"), h, n_hosts)?;
        if std::mem::replace(&mut seen[id as usize], true) {
            return Err(ScenarioError::at(
                format!("{path}.{j}"),
                format!("host {id} is listed twice"),
            ));
        }
        out.push(id);
    }
    Ok(out)
}

/// `hosts` if given (distinct ids, at least two), else every host.
pub fn hosts_or_all(path: &str, hosts: Option<&[i64]>, n_hosts: u32, what: &str) -> Res<Vec<u32>> {
    let hosts = match hosts {
        None => (0..n_hosts).collect(),
        Some(list) => host_list(path, list, n_hosts)?,
    };
    if hosts.len() < 2 {
        return Err(ScenarioError::at(
            path,
            format!("{what} needs at least two hosts"),
        ));
    }
    Ok(hosts)
}

pub fn positive_size(path: &str, v: u64) -> Res<u64> {
    if v == 0 {
        return Err(ScenarioError::at(path, "expected a positive size"));
    }
    Ok(v)
}

pub fn positive_time(path: &str, v: u64) -> Res<u64> {
    if v == 0 {
        return Err(ScenarioError::at(path, "expected a positive duration"));
    }
    Ok(v)
}

pub fn fraction(path: &str, v: f64, lo: f64, hi: f64) -> Res<f64> {
    if !(v.is_finite() && v >= lo && v <= hi) {
        return Err(ScenarioError::at(
            path,
            format!("expected a number in {lo}..={hi}, found {v}"),
        ));
    }
    Ok(v)
}

/// A list of priorities as a bit mask (`default` alone when absent).
pub fn priority_mask(path: &str, list: Option<&Vec<i64>>, default: u8) -> Res<u8> {
    let Some(list) = list else {
        return Ok(1 << default);
    };
    let mut mask = 0u8;
    for (i, &p) in list.iter().enumerate() {
        if !(0..8).contains(&p) {
            return Err(ScenarioError::at(
                format!("{path}.{i}"),
                format!("expected a priority in 0..=7, found {p}"),
            ));
        }
        mask |= 1 << p;
    }
    Ok(mask)
}

pub fn quoted_list(names: &[&str]) -> String {
    names
        .iter()
        .map(|n| format!("\"{n}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `gap` repeated `times` times must stay within the time range of a scenario
/// ([`super::values::MAX_TIME_PS`]), so that no time the run computes from them can wrap.
pub fn within_time_range(path: &str, gap: u64, times: u32, what: &str) -> Res<()> {
    let max = super::values::MAX_TIME_PS;
    if gap.saturating_mul(times as u64) > max {
        return Err(ScenarioError::at(
            path,
            format!(
                "{} x {times} more {what} exceeds the longest time a scenario may span ({})",
                crate::units::format_time(gap),
                crate::units::format_time(max)
            ),
        ));
    }
    Ok(())
}
