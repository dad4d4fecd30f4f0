//! The vocabulary every domain's configuration shares: the validated specs the build and the
//! engine run ([`spec`]), unit-carrying values ([`values`]), the error type ([`ScenarioError`]),
//! common checks ([`check`]) and tables whose `kind` selects their keys ([`kinds`]).
//!
//! Layers: `config` <- each domain's config module (`topology::config`, `workload::<kind>`, ...)
//! <- `scenario` (the file format, error locations, the validation coordinator and the build).
//! Nothing here or in a domain imports `scenario`.

pub mod check;
mod error;
pub mod hosts;
pub mod kinds;
pub mod spec;
pub mod values;

pub use error::ScenarioError;
pub use spec::*;
