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
use std::path::{Path, PathBuf};

use fabricemu_core::{output, scenario, Simulation};

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn hashes_file() -> PathBuf {
    crate_dir().join("tests/golden/hashes.txt")
}

/// Every scenario checked: the shipped ones, then the coverage ones, by file name.
fn scenario_files() -> Vec<(String, PathBuf)> {
    let mut all = Vec::new();
    for (label, dir) in [
        ("scenarios", crate_dir().join("../../scenarios")),
        ("golden", crate_dir().join("tests/golden")),
    ] {
        let mut files: Vec<PathBuf> = fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            all.push((format!("{label}/{name}"), f));
        }
    }
    all
}

/// FNV-1a, 64 bits: enough to detect any change of a file (this is no security boundary).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Run one scenario into `dir` as the Python API does and hash each output file.
fn run_and_hash(path: &Path, dir: &Path) -> BTreeMap<String, u64> {
    let text = fs::read_to_string(path).unwrap();
    let (file, spec) =
        scenario::parse_toml(&text, &path.display().to_string()).unwrap_or_else(|e| panic!("{e}"));
    let json = scenario::to_json(&file);
    let _ = fs::remove_dir_all(dir);
    fs::create_dir_all(dir).unwrap();
    let mut sim = Simulation::build(&spec).unwrap_or_else(|e| panic!("{e}"));
    sim.open_traces(dir, &output::metadata(&json, spec.seed))
        .unwrap();
    sim.run_to_end();
    sim.check_conservation().unwrap();
    output::write_outputs(dir, &mut sim, &json, spec.seed, false, 0.0).unwrap();

    let mut hashes = BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = fs::read(&p).unwrap();
        hashes.insert(name, fnv1a(&bytes));
    }
    hashes
}

fn read_recorded() -> BTreeMap<String, u64> {
    let Ok(text) = fs::read_to_string(hashes_file()) else {
        return BTreeMap::new();
    };
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let (key, hash) = l
                .rsplit_once(' ')
                .expect("`<scenario>/<file> <hash>` lines");
            (
                key.to_string(),
                u64::from_str_radix(hash, 16).expect("a hex hash"),
            )
        })
        .collect()
}

#[test]
fn outputs_match_the_recorded_hashes() {
    // The replay scenario names its file relative to this crate, like a user's working directory.
    std::env::set_current_dir(crate_dir()).unwrap();
    let scratch = std::env::temp_dir().join(format!("fabricemu-golden-{}", std::process::id()));
    let mut now = BTreeMap::new();
    for (label, path) in scenario_files() {
        let dir = scratch.join(label.replace('/', "_"));
        for (file, hash) in run_and_hash(&path, &dir) {
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
        fs::write(hashes_file(), text).unwrap();
        return;
    }
    let recorded = read_recorded();
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
