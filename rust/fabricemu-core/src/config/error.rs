//! Scenario errors: what was wrong, at which key, where in the file.

use std::fmt;

/// A scenario that failed to parse or validate. `path` is the dotted key path (`topology.k`,
/// `workload.0.size`); `line`/`column` are 1-based positions in the source text when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    pub source_name: String,
    pub path: String,
    pub line: Option<usize>,
    pub column: Option<usize>,
    pub message: String,
}

impl ScenarioError {
    pub fn at(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            source_name: String::new(),
            path: path.into(),
            line: None,
            column: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.source_name.is_empty() {
            write!(f, "{}", self.source_name)?;
            if let Some(line) = self.line {
                write!(f, ":{line}")?;
                if let Some(col) = self.column {
                    write!(f, ":{col}")?;
                }
            }
            write!(f, ": ")?;
        } else if let Some(line) = self.line {
            write!(f, "line {line}")?;
            if let Some(col) = self.column {
                write!(f, ", column {col}")?;
            }
            write!(f, ": ")?;
        }
        if !self.path.is_empty() {
            write!(f, "{}: ", self.path)?;
        }
        write!(f, "{}", self.message)
    }
}

impl std::error::Error for ScenarioError {}
