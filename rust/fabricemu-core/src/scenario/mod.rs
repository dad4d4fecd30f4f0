//! Scenario files: one schema for TOML files and Python dictionaries, validated before any run.

mod error;
mod locate;
pub mod schema;
pub mod spec;
mod validate;
pub mod values;

pub use error::ScenarioError;
pub use schema::ScenarioFile;
pub use spec::*;

/// Parse and validate scenario TOML. `source_name` (a file name, or empty) prefixes error messages.
pub fn parse_toml(
    text: &str,
    source_name: &str,
) -> Result<(ScenarioFile, Scenario), ScenarioError> {
    let with_source = |mut e: ScenarioError| {
        e.source_name = source_name.to_string();
        e
    };
    let file = locate::deserialize_toml(text).map_err(with_source)?;
    let spec = validate::validate(&file).map_err(|e| with_source(locate::position_of(text, e)))?;
    Ok((file, spec))
}

/// Parse and validate a scenario given as JSON (how the Python API passes a dictionary).
pub fn parse_json(text: &str) -> Result<(ScenarioFile, Scenario), ScenarioError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let file: ScenarioFile =
        serde_path_to_error::deserialize(&mut de).map_err(locate::from_json_error)?;
    let spec = validate::validate(&file)?;
    Ok((file, spec))
}

/// The scenario as TOML text (units written back in their exact suffix form).
pub fn to_toml(file: &ScenarioFile) -> String {
    toml::to_string_pretty(file).expect("a ScenarioFile always serialises to TOML")
}

/// The scenario as JSON text (what run.json and the Arrow metadata carry).
pub fn to_json(file: &ScenarioFile) -> String {
    serde_json::to_string(file).expect("a ScenarioFile always serialises to JSON")
}
