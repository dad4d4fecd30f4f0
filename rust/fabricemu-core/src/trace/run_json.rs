//! run.json: the scenario, seed, version and run statistics.
