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
    /// Whether a span export failure was reported already.
    #[cfg(feature = "otel")]
    spans_reported: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Drop for Exporting {
    fn drop(&mut self) {
        #[cfg(feature = "otel")]
        if let Some((traces, metrics)) = self.providers.take() {
            // A failed export was reported once already.
            if let Err(e) = traces.shutdown()
                && !self
                    .spans_reported
                    .load(std::sync::atomic::Ordering::Relaxed)
            {
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

/// The export `url` (a collector's base, such as `http://localhost:4318`,
/// or its traces URL, `.../v1/traces`) or the environment's asks for, as a
/// layer exporting `service`'s spans (`OTEL_SERVICE_NAME` names it when
/// set), with the GenAI metrics sent through the global meter provider
/// (set here, before any agent is built). `None`: no export asked for.
///
/// The layer keeps kesoku's spans and events, and the dependencies' from
/// `WARN`: a dependency's debug events would be span events (hyper's, 8 a
/// model call). `RUST_LOG` (`target=level,...`), when set, decides instead.
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
    let mut shown = "the collector in OTEL_EXPORTER_OTLP_ENDPOINT".to_owned();
    if let Some(url) = url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            return Err(format!(
                "--otlp {url:?}: not an http(s) URL (a collector's OTLP/HTTP address, such as http://localhost:4318)"
            ));
        }
        // A base URL, as OTEL_EXPORTER_OTLP_ENDPOINT is, or one signal's
        // URL: each signal's path is added to the base.
        let base = url.trim_end_matches('/');
        let base = ["/v1/traces", "/v1/metrics"]
            .iter()
            .find_map(|signal| base.strip_suffix(signal))
            .unwrap_or(base);
        spans = spans.with_endpoint(format!("{base}/v1/traces"));
        metrics = metrics.with_endpoint(format!("{base}/v1/metrics"));
        base.clone_into(&mut shown);
    }
    let spans = spans
        .build()
        .map_err(|e| format!("otlp: no span exporter: {e}"))?;
    let metrics = metrics
        .build()
        .map_err(|e| format!("otlp: no metric exporter: {e}"))?;
    // The SDK's resource reads OTEL_SERVICE_NAME (and
    // OTEL_RESOURCE_ATTRIBUTES); the process's own name only without it.
    let named = std::env::var_os("OTEL_SERVICE_NAME").is_some_and(|v| !v.is_empty());
    let resource = if named {
        Resource::builder().build()
    } else {
        Resource::builder().with_service_name(service).build()
    };
    let spans = ReportFailure::new(spans, shown);
    let spans_reported = std::sync::Arc::clone(&spans.reported);
    let traces = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let meters = SdkMeterProvider::builder()
        .with_periodic_exporter(metrics)
        .with_resource(resource)
        .build();
    opentelemetry::global::set_meter_provider(meters.clone());
    let layer = tracing_opentelemetry::layer()
        .with_tracer(traces.tracer(service))
        .with_filter(filter()?);
    Ok((
        Some(Box::new(layer)),
        Exporting {
            providers: Some((traces, meters)),
            spans_reported,
        },
    ))
}

/// What the exporting layer keeps: `RUST_LOG`'s targets and levels when
/// set, else kesoku's (and the examples') at every level, and the
/// dependencies' warnings.
#[cfg(feature = "otel")]
fn filter() -> Result<tracing_subscriber::filter::Targets, String> {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    if let Ok(spec) = std::env::var("RUST_LOG")
        && !spec.trim().is_empty()
    {
        return spec
            .parse::<Targets>()
            .map_err(|e| format!("RUST_LOG {spec:?}: {e} (use target=level,... or a level)"));
    }
    Ok(Targets::new()
        .with_target("kesoku", LevelFilter::TRACE)
        .with_target("demo", LevelFilter::TRACE)
        .with_target("mcp_server", LevelFilter::TRACE)
        .with_default(LevelFilter::WARN))
}

/// A span exporter that says, once, on stderr, that spans were lost: the
/// SDK drops a failed batch silently.
#[cfg(feature = "otel")]
#[derive(Debug)]
struct ReportFailure<E> {
    inner: E,
    /// Where the spans go, for the message.
    collector: String,
    reported: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

#[cfg(feature = "otel")]
impl<E> ReportFailure<E> {
    fn new(inner: E, collector: String) -> Self {
        ReportFailure {
            inner,
            collector,
            reported: std::sync::Arc::default(),
        }
    }
}

#[cfg(feature = "otel")]
impl<E: opentelemetry_sdk::trace::SpanExporter> opentelemetry_sdk::trace::SpanExporter
    for ReportFailure<E>
{
    async fn export(
        &self,
        batch: Vec<opentelemetry_sdk::trace::SpanData>,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        let count = batch.len();
        let result = self.inner.export(batch).await;
        if let Err(e) = &result
            && !self
                .reported
                .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            eprintln!(
                "otlp: {count} spans could not be exported to {}: {e} (later failures are not reported)",
                self.collector
            );
        }
        result
    }

    fn shutdown_with_timeout(
        &self,
        timeout: std::time::Duration,
    ) -> opentelemetry_sdk::error::OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn force_flush(&self) -> opentelemetry_sdk::error::OTelSdkResult {
        self.inner.force_flush()
    }

    fn set_resource(&mut self, resource: &opentelemetry_sdk::Resource) {
        self.inner.set_resource(resource);
    }
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
