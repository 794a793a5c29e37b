//! `--otlp URL`, or the standard `OTEL_EXPORTER_OTLP_ENDPOINT`: the
//! agent's GenAI spans and metrics exported over OTLP/HTTP (protobuf) to a
//! collector, Jaeger, or any OTLP backend. Shared by the demo and the MCP
//! server (`#[path]`), so a turn whose tools run on the server is one
//! trace. It needs the `otel` feature; without it, `--otlp` is refused
//! with the command that builds it.

use tracing::Subscriber;
use tracing_subscriber::Layer;
use tracing_subscriber::registry::LookupSpan;

/// A layer for the process's subscriber, boxed so that it is one type with
/// or without the feature.
pub(crate) type BoxedLayer<S> = Box<dyn Layer<S> + Send + Sync + 'static>;

/// The exporters, flushed and stopped when dropped at the end of `main`
/// (spans still queued would be lost otherwise).
#[derive(Default)]
pub(crate) struct Exporting {
    #[cfg(feature = "otel")]
    providers: Option<(
        opentelemetry_sdk::trace::SdkTracerProvider,
        opentelemetry_sdk::metrics::SdkMeterProvider,
    )>,
}

impl Drop for Exporting {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some((traces, metrics)) = self.providers.take() {
            if let Err(e) = traces.shutdown() {
                eprintln!("otlp: the last spans were not exported: {e}");
            }
            if let Err(e) = metrics.shutdown() {
                eprintln!("otlp: the last metrics were not exported: {e}");
            }
        }
    }
}

/// Whether the environment names a collector (set but empty is unset, as
/// the specification says).
fn endpoint_in_env() -> bool {
    [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    ]
    .iter()
    .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()))
}

/// The export `url` (a collector's base, such as `http://localhost:4318`)
/// or the environment's asks for, as a layer exporting `service`'s spans,
/// with the GenAI metrics sent through the global meter provider (set
/// here, before any agent is built). `None`: no export asked for.
#[cfg(feature = "otel")]
pub(crate) fn layer<S>(
    service: &'static str,
    url: Option<&str>,
) -> Result<(Option<BoxedLayer<S>>, Exporting), String>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_otlp::{MetricExporter, SpanExporter, WithExportConfig as _};
    use opentelemetry_sdk::Resource;
    use opentelemetry_sdk::metrics::SdkMeterProvider;
    use opentelemetry_sdk::trace::SdkTracerProvider;

    if url.is_none() && !endpoint_in_env() {
        return Ok((None, Exporting::default()));
    }
    // The exporters' reqwest is built without a TLS provider, as kesoku's.
    kesoku::llm::install_crypto_provider();
    let mut spans = SpanExporter::builder().with_http();
    let mut metrics = MetricExporter::builder().with_http();
    if let Some(url) = url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "--otlp {url:?}: not an http(s) URL (a collector's OTLP/HTTP address, such as http://localhost:4318)"
            ));
        }
        // A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is: the signal's path
        // is added.
        let base = url.trim_end_matches('/');
        spans = spans.with_endpoint(format!("{base}/v1/traces"));
        metrics = metrics.with_endpoint(format!("{base}/v1/metrics"));
    }
    let spans = spans
        .build()
        .map_err(|e| format!("otlp: no span exporter: {e}"))?;
    let metrics = metrics
        .build()
        .map_err(|e| format!("otlp: no metric exporter: {e}"))?;
    let resource = Resource::builder().with_service_name(service).build();
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let meters = SdkMeterProvider::builder()
        .with_periodic_exporter(metrics)
        .with_resource(resource)
        .build();
    opentelemetry::global::set_meter_provider(meters.clone());
    let layer = tracing_opentelemetry::layer().with_tracer(traces.tracer(service));
    Ok((
        Some(Box::new(layer)),
        Exporting {
            providers: Some((traces, meters)),
        },
    ))
}

/// Without the `otel` feature: `--otlp` is refused, saying how to build
/// it; an endpoint in the environment is noted and ignored.
#[cfg(not(feature = "otel"))]
pub(crate) fn layer<S>(
    service: &'static str,
    url: Option<&str>,
) -> Result<(Option<BoxedLayer<S>>, Exporting), String>
where
    S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
{
    let example = if service.contains("mcp") {
        "mcp_server"
    } else {
        "demo"
    };
    if url.is_some() {
        return Err(format!(
            "--otlp needs the `otel` feature: cargo run --example {example} --features otel -- --otlp URL"
        ));
    }
    if endpoint_in_env() {
        eprintln!(
            "note: OTEL_EXPORTER_OTLP_ENDPOINT is set, but this {example} was built without the `otel` feature: nothing is exported"
        );
    }
    Ok((None, Exporting::default()))
}
