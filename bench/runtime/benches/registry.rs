//! Collecting a registry of 1,000 `#[tool]`s and rendering every schema.
//!
//! Run with `cargo bench -p kesoku-bench --bench registry`.

#![allow(missing_docs)]

use std::hint::black_box;

use criterion::Criterion;
use kesoku::ToolRegistry;

include!(concat!(env!("OUT_DIR"), "/tools.rs"));

fn main() {
    let mut c = Criterion::default()
        .output_directory(&kesoku_bench::criterion_dir())
        .configure_from_args();
    let registry = ToolRegistry::from_inventory().expect("no duplicate names");
    assert_eq!(registry.len(), 1000);
    let mut group = c.benchmark_group("registry_1000");
    group.bench_function("collect", |b| {
        b.iter(|| ToolRegistry::from_inventory().expect("no duplicate names"));
    });
    group.bench_function("render_all_schemas", |b| {
        b.iter(|| {
            for t in &registry {
                black_box(t.schema().expect("static tool").parameters_json());
            }
        });
    });
    group.bench_function("cached_schemas", |b| {
        b.iter(|| {
            for t in &registry {
                black_box(t.parameters_ref());
            }
        });
    });
    group.bench_function("lookup_by_name", |b| {
        b.iter(|| registry.get(black_box("generated_500")).is_some());
    });
    group.finish();
    c.final_summary();
}
