//! Golden outputs: every shipped scenario (scenarios/*.toml) and every coverage scenario
//! (tests/golden/*.toml) produces exactly the Arrow files and run.json figures recorded in
//! tests/golden/hashes.txt. A refactor proves itself here: outputs must stay byte-identical.
//!
//! When a change is *meant* to alter outputs, re-record with
//! `FABRICEMU_BLESS=1 cargo test --workspace --profile ci --test golden` and say why in the
//! commit. Each run is written as the Python API writes it (normalised scenario JSON in the
//! metadata, traces streamed); wall-clock figures are set to zero so run.json is comparable, and
//! its `parallel` section (how the engine ran, which varies with the machine) is left out of
//! the hash (`common::comparable`).
//!
//! Each scenario runs *as its normalised form* (`fabricemu validate --normalised`: every default
//! filled in), so this one pass also proves that the normalised scenario reproduces the original's
//! outputs; tests/integration/normalise.rs proves that both parse to the same specification.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use fabricemu_core::scenario::{self, normalise, parse_toml};

mod common;
use common::{crate_dir, golden_hashes, golden_hashes_file, golden_scenarios, run_and_hash};

#[test]
fn outputs_match_the_recorded_hashes() {
    // The replay scenario names its file relative to this crate, like a user's working directory.
    std::env::set_current_dir(crate_dir()).unwrap();
    let scratch = common::test_root().join("golden");
    // The scenarios are independent: run them on every core (CI time), collect in label order.
    let scenarios = golden_scenarios();
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = std::sync::atomic::AtomicUsize::new(0);
    let now: BTreeMap<String, u64> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                s.spawn(|| {
                    let mut hashes = Vec::new();
                    loop {
                        let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        let Some((label, path)) = scenarios.get(i) else {
                            return hashes;
                        };
                        hashes.extend(run_golden(label, path, &scratch));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a golden scenario panicked"))
            .collect()
    });
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

/// Run one golden scenario in its normalised form; its outputs' hashes keyed `label/file`.
fn run_golden(label: &str, path: &Path, scratch: &Path) -> Vec<(String, u64)> {
    let dir = scratch.join(label.replace('/', "_"));
    let text = fs::read_to_string(path).unwrap();
    // The scenario's path as the source: files it names are resolved beside it.
    let source = path.display().to_string();
    let (file, spec) =
        parse_toml(&text, &source).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let normalised = scenario::to_toml(&normalise(&file, &spec));
    run_and_hash(&normalised, &source, &dir)
        .into_iter()
        .map(|(file, hash)| (format!("{label}/{file}"), hash))
        .collect()
}
