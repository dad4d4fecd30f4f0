//! Golden outputs: every shipped scenario (scenarios/*.toml) and every coverage scenario
//! (tests/golden/*.toml) produces exactly the Arrow files and run.json figures recorded in
//! tests/golden/hashes.txt. A refactor proves itself here: outputs must stay byte-identical.
//!
//! When a change is *meant* to alter outputs, re-record with
//! `FABRICEMU_BLESS=1 cargo test --release -p fabricemu-core --test golden` and say why in the
//! commit. Each run is written as the Python API writes it (normalised scenario JSON in the
//! metadata, traces streamed); wall-clock figures are set to zero so run.json is comparable.

use std::collections::BTreeMap;
use std::fs;

mod common;
use common::{crate_dir, golden_hashes, golden_hashes_file, golden_scenarios, run_and_hash};

#[test]
fn outputs_match_the_recorded_hashes() {
    // The replay scenario names its file relative to this crate, like a user's working directory.
    std::env::set_current_dir(crate_dir()).unwrap();
    let scratch = std::env::temp_dir().join(format!("fabricemu-golden-{}", std::process::id()));
    let mut now = BTreeMap::new();
    for (label, path) in golden_scenarios() {
        let dir = scratch.join(label.replace('/', "_"));
        let text = fs::read_to_string(&path).unwrap();
        for (file, hash) in run_and_hash(&text, &path.display().to_string(), &dir) {
            now.insert(format!("{label}/{file}"), hash);
        }
    }
    if std::env::var_os("FABRICEMU_GOLDEN_KEEP").is_none() {
        let _ = fs::remove_dir_all(&scratch);
    }

    if std::env::var_os("FABRICEMU_BLESS").is_some() {
        let mut text = String::from(
            "# FNV-1a 64 of every output file of every golden scenario (tests/golden.rs).\n",
        );
        for (key, hash) in &now {
            text.push_str(&format!("{key} {hash:016x}\n"));
        }
        fs::write(golden_hashes_file(), text).unwrap();
        return;
    }
    let recorded = golden_hashes();
    let mut differences = Vec::new();
    for (key, hash) in &now {
        match recorded.get(key) {
            Some(r) if r == hash => {}
            Some(r) => differences.push(format!("{key}: {hash:016x}, recorded {r:016x}")),
            None => differences.push(format!("{key}: new output, not recorded")),
        }
    }
    for key in recorded.keys().filter(|k| !now.contains_key(*k)) {
        differences.push(format!("{key}: recorded, no longer written"));
    }
    assert!(
        differences.is_empty(),
        "outputs changed (re-record with FABRICEMU_BLESS=1 only if meant):\n{}",
        differences.join("\n")
    );
}
