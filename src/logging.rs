//! Logs and traces: `tracing` to stderr as text or JSON, plus OTLP span export when
//! `OTEL_EXPORTER_OTLP_ENDPOINT` is set (and no export attempts otherwise).

use std::io::IsTerminal;

use anyhow::{Context, Result};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

use crate::config::LogFormat;

/// Keeps the OTLP pipeline alive; flushes pending spans when dropped.
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown()
        {
            eprintln!("otlp shutdown: {error}");
        }
    }
}

/// Installs the global subscriber. `RUST_LOG` filters (default `info`).
pub fn init(format: LogFormat, role: &str) -> Result<Telemetry> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let fmt = match format {
        LogFormat::Text => tracing_subscriber::fmt::layer()
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .boxed(),
        LogFormat::Json => tracing_subscriber::fmt::layer()
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_writer(std::io::stderr)
            .boxed(),
    };
    let provider = match std::env::var("OTEL_EXPORTER_OTLP_ENDPOINT") {
        Ok(endpoint) if !endpoint.trim().is_empty() => Some(otlp_provider(role)?),
        _ => None,
    };
    let otel = provider.as_ref().map(|provider| tracing_opentelemetry::layer().with_tracer(provider.tracer("agentd")));
    opentelemetry::global::set_text_map_propagator(opentelemetry_sdk::propagation::TraceContextPropagator::new());
    tracing_subscriber::registry()
        .with(filter)
        .with(fmt)
        .with(otel)
        .try_init()
        .context("cannot install the log subscriber")?;
    Ok(Telemetry { provider })
}

fn otlp_provider(role: &str) -> Result<SdkTracerProvider> {
    // The exporter reads OTEL_EXPORTER_OTLP_ENDPOINT (and the other OTEL_* variables).
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_tonic()
        .build()
        .context("cannot build the OTLP span exporter (check OTEL_EXPORTER_OTLP_ENDPOINT)")?;
    let resource = opentelemetry_sdk::Resource::builder()
        .with_service_name("agentd")
        .with_attribute(opentelemetry::KeyValue::new("agentd.role", role.to_owned()))
        .build();
    Ok(SdkTracerProvider::builder().with_batch_exporter(exporter).with_resource(resource).build())
}
