//! Writing a run's output folder: flows.arrow and run.json, each complete or absent.
