//! Helpers shared by kesoku's run-time benchmarks: reading criterion's
//! estimates back, to print the ratios `docs/performance.md` quotes.

use std::path::PathBuf;

/// Where criterion writes its results.
pub fn criterion_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"),
        PathBuf::from,
    );
    target.join("criterion")
}

/// The median time, in nanoseconds, criterion measured for `group/id`.
pub fn median_ns(group: &str, id: &str) -> Option<f64> {
    let path = criterion_dir()
        .join(group)
        .join(id)
        .join("new/estimates.json");
    let text = std::fs::read_to_string(path).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["median"]["point_estimate"].as_f64()
}
