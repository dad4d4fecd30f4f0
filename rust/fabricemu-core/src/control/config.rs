//! `[control]`: the live control loop's interval and the built-in policy.
//!
//! ```toml
//! [control]
//! interval = "20us"            # telemetry and decisions every 20 us of simulated time
//! policy = "telemetry_aware"   # or "none" (the default): only a Python controller acts
//! ```

use serde::{Deserialize, Serialize};

use crate::config::check::{positive_time, Res};
use crate::config::values::Duration;
use crate::config::ScenarioError;
use crate::units::Time;

/// The interval when `[control]` does not set one.
pub const DEFAULT_INTERVAL_PS: Time = 20_000_000;

/// The shortest interval (a controller called more often than every 100 ns would dominate the
/// run and learn nothing new).
pub const MIN_INTERVAL_PS: Time = 100_000;

/// The built-in policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyName {
    /// No built-in policy: only a Python controller (if any) acts.
    #[default]
    None,
    /// Per collective call, the algorithm with the lowest predicted time (`control::policy`).
    TelemetryAware,
}

impl PolicyName {
    pub fn name(self) -> &'static str {
        match self {
            PolicyName::None => "none",
            PolicyName::TelemetryAware => "telemetry_aware",
        }
    }
}

/// `[control]` as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ControlFile {
    /// Simulated time between two controller calls (default 20us).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Duration>,
    /// `"none"` (default) or `"telemetry_aware"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyName>,
}

/// `[control]` validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlSpec {
    pub interval_ps: Time,
    pub policy: PolicyName,
}

impl Default for ControlSpec {
    fn default() -> Self {
        Self {
            interval_ps: DEFAULT_INTERVAL_PS,
            policy: PolicyName::None,
        }
    }
}

impl ControlFile {
    pub fn validate(&self) -> Res<ControlSpec> {
        let interval_ps = match self.interval {
            Some(d) => positive_time("control.interval", d.0)?,
            None => DEFAULT_INTERVAL_PS,
        };
        if interval_ps < MIN_INTERVAL_PS {
            return Err(ScenarioError::at(
                "control.interval",
                format!(
                    "must be at least {}, found {}",
                    crate::units::format_time(MIN_INTERVAL_PS),
                    crate::units::format_time(interval_ps)
                ),
            ));
        }
        Ok(ControlSpec {
            interval_ps,
            policy: self.policy.unwrap_or_default(),
        })
    }
}

impl ControlFile {
    /// `[control]` with every default written out (see `scenario::normalise`).
    pub fn normalised(spec: &ControlSpec) -> ControlFile {
        ControlFile {
            interval: Some(Duration(spec.interval_ps)),
            policy: Some(spec.policy),
        }
    }
}
