//! Scenario files: one schema for TOML files and Python dictionaries, in three phases. `parse`
//! reads the text into [`ScenarioFile`] (every key typed, every error located); `validate` checks
//! it into a [`Scenario`] (pure: no file read, no random draw); `build` makes the fabric, the flow
//! plan and the faults once ([`Built`]), which the engine runs as it is.
//!
//! This module owns the file format, the location of errors and the coordinator; each section's
//! struct and checks live in the domain that owns it (see [`schema`]).

mod build;
mod locate;
pub mod normalise;
pub mod schema;
mod validate;

pub use crate::config::spec::*;
pub use crate::config::{check, kinds, spec, values, ScenarioError};
pub use build::{build, Built};
pub use normalise::normalise;
pub use schema::ScenarioFile;

fn with_source(source_name: &str) -> impl Fn(ScenarioError) -> ScenarioError + '_ {
    move |mut e| {
        e.source_name = source_name.to_string();
        e
    }
}

/// Parse and validate scenario TOML. `source_name` (a file name, or empty) prefixes error messages.
pub fn parse_toml(
    text: &str,
    source_name: &str,
) -> Result<(ScenarioFile, Scenario), ScenarioError> {
    let mut file = locate::deserialize_toml(text).map_err(with_source(source_name))?;
    // Files the scenario names (a graph topology's) are relative to its folder.
    let path = std::path::Path::new(source_name);
    if !source_name.is_empty() && path.is_file() {
        if let Some(dir) = path.parent() {
            file.topology.set_base_dir(dir);
        }
    }
    let spec = validate::validate(&file)
        .map_err(|e| with_source(source_name)(locate::position_of(text, e)))?;
    Ok((file, spec))
}

/// Parse, validate and build scenario TOML: everything that can fail before the first event fails
/// here, with the key path, line and column of the cause.
pub fn load_toml(text: &str, source_name: &str) -> Result<(ScenarioFile, Built), ScenarioError> {
    let (file, spec) = parse_toml(text, source_name)?;
    let built = build(&spec).map_err(|e| with_source(source_name)(locate::position_of(text, e)))?;
    Ok((file, built))
}

/// Parse and validate a scenario given as JSON (how the Python API passes a dictionary).
pub fn parse_json(text: &str) -> Result<(ScenarioFile, Scenario), ScenarioError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let file: ScenarioFile =
        serde_path_to_error::deserialize(&mut de).map_err(locate::from_json_error)?;
    let spec = validate::validate(&file)?;
    Ok((file, spec))
}

/// Parse, validate and build a scenario given as JSON.
pub fn load_json(text: &str) -> Result<(ScenarioFile, Built), ScenarioError> {
    let (file, spec) = parse_json(text)?;
    Ok((file, build(&spec)?))
}

/// The scenario as TOML text (units written back in their exact suffix form).
pub fn to_toml(file: &ScenarioFile) -> String {
    toml::to_string_pretty(file).expect("a ScenarioFile always serialises to TOML")
}

/// The scenario as JSON text (what run.json and the Arrow metadata carry).
pub fn to_json(file: &ScenarioFile) -> String {
    serde_json::to_string(file).expect("a ScenarioFile always serialises to JSON")
}

/// The normalised scenario (every default written out, see [`normalise`]) as JSON text: what
/// run.json, the Arrow metadata and the Python `Scenario` carry.
pub fn normalised_json(file: &ScenarioFile, spec: &Scenario) -> String {
    to_json(&normalise(file, spec))
}
