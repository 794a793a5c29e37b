//! What telemetry costs a step: the same warm turn (a tool call, its
//! result, the answer: two model calls, each a real `ClaudeLlm` building
//! its request in full, dropped by a [`Sink`]) on a session of about
//! 1,000 stored messages in memory, first with no subscriber, then with
//! tracing-opentelemetry exporting every span to an SDK tracer (batched,
//! to an exporter that drops them) and the GenAI metrics aggregated by an
//! SDK meter provider (exported once a minute, in memory).
//!
//! Run with `cargo bench -p kesoku-bench --features otel --bench telemetry -- --warm-up-time 1 --measurement-time 5`.
//! The cost per step printed at the end is the difference of this run's
//! medians.

#![allow(missing_docs)]

use std::sync::Arc;

use criterion::{Criterion, SamplingMode};
use kesoku::llm::{Agent, ClaudeLlm, Llm};
use kesoku::store::{MemoryStore, Store};
use kesoku_bench::{Encoded, Sink};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanData, SpanExporter};
use tracing_subscriber::layer::SubscriberExt as _;

/// Stored messages before the timed turns.
const N: usize = 1_000;
/// Timed turns per session before a fresh one (N grows by 4 a turn).
const TURNS_PER_SESSION: u64 = 250;

/// Where a collector would be: every batch of spans dropped.
#[derive(Debug)]
struct Discard;

impl SpanExporter for Discard {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        std::hint::black_box(batch);
        Ok(())
    }
}

/// One case: an agent built now (so that it takes the global meter as it
/// is then), its warm turns timed, per step.
fn case(c: &mut Criterion, rt: &tokio::runtime::Runtime, name: &str) {
    let tools = kesoku_bench::weather_tools();
    let claude: Arc<dyn Llm> = Arc::new(ClaudeLlm::new("k").with_transport(Sink::new("claude")));
    let store = Arc::new(MemoryStore::new());
    let agent = Agent::builder(Encoded {
        backend: claude,
        script: kesoku_bench::weather_script(),
    })
    .registry(tools)
    .store(Arc::clone(&store) as Arc<dyn Store>)
    .max_steps(2)
    .build()
    .expect("an agent");
    let mut group = c.benchmark_group("telemetry");
    group.sample_size(20).sampling_mode(SamplingMode::Flat);
    let mut sessions = kesoku_bench::WarmSessions::new(store, N, TURNS_PER_SESSION);
    group.bench_function(name, |b| {
        b.iter_custom(|iters| rt.block_on(sessions.steps(&agent, iters)));
    });
    group.finish();
}

fn main() {
    let mut c = Criterion::default()
        .output_directory(&kesoku_bench::criterion_dir())
        .configure_from_args();
    let rt = kesoku_bench::runtime();
    case(&mut c, &rt, "no_subscriber");
    // From here on, for every thread: spans to the SDK, metrics to a
    // meter provider.
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(Discard)
        .build();
    let meters = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(InMemoryMetricExporter::default()).build())
        .build();
    opentelemetry::global::set_meter_provider(meters.clone());
    tracing::subscriber::set_global_default(
        tracing_subscriber::registry()
            .with(tracing_opentelemetry::layer().with_tracer(traces.tracer("bench"))),
    )
    .expect("the first subscriber");
    case(&mut c, &rt, "otel");
    c.final_summary();
    let median = |id: &str| kesoku_bench::median_ns("telemetry", id);
    if let (Some(off), Some(on)) = (median("no_subscriber"), median("otel")) {
        println!(
            "\ntelemetry (medians, µs per step): no subscriber {:.1} | OpenTelemetry {:.1} | cost {:.1} µs a step ({:.2}×)",
            off / 1e3,
            on / 1e3,
            (on - off) / 1e3,
            on / off
        );
    }
    let _ = traces.shutdown();
    let _ = meters.shutdown();
}
