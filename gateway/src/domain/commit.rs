//! Committing input: life of a turn steps 2–3 (one store transaction with the run and
//! its outbox row, then the publish), appends that drive no run, and the hands a
//! session's agent needs. Callers have admitted the input (`input`, `sessions`).

use std::collections::HashMap;

use agentd_schema::{NewEvent, Session, StoredEvent, Submission, live};

use super::error::{DomainError, DomainResult};
use crate::AppState;
use crate::admission::Tenant;

/// Life of a turn, steps 2–3: commit the input with the run and its outbox row in one
/// transaction, then publish the submission and the committed events. A failed publish
/// is left to the outbox relay. Callers have admitted the input.
pub(crate) async fn submit_and_publish(
    state: &AppState,
    session_id: &str,
    events: Vec<NewEvent>,
) -> DomainResult<Vec<StoredEvent>> {
    submit_to_threads(state, session_id, session_id, Vec::new(), events).await
}

/// [`submit_and_publish`] making the runs of `thread_id` and of each of `also_wake`
/// runnable (ADR 0022 §8: one request may answer calls on several threads of the
/// session; each event names its own thread).
pub(crate) async fn submit_to_threads(
    state: &AppState,
    session_id: &str,
    thread_id: &str,
    also_wake: Vec<String>,
    events: Vec<NewEvent>,
) -> DomainResult<Vec<StoredEvent>> {
    let (Some(queue), Some(bus)) = (&state.backends.queue, &state.backends.bus) else {
        return Err(DomainError::Unavailable("durable ingress is not configured on this process".to_owned()));
    };
    let store = state.backends.store.as_ref();
    let submitted = store
        .submit(Submission {
            session_id: session_id.to_owned(),
            thread_id: thread_id.to_owned(),
            events,
            max_attempts: state.max_attempts,
            trace_context: trace_context(),
            also_wake,
        })
        .await?;
    for outbox in std::iter::once(&submitted.outbox).chain(&submitted.also) {
        if let Err(error) = state.outbox.publish(queue.as_ref(), outbox).await {
            tracing::warn!(%error, run = %submitted.run_id, "submission publish deferred to the outbox relay");
        }
    }
    live::publish_committed(bus.as_ref(), &submitted.events).await;
    Ok(submitted.events)
}

/// W3C trace context to ride with a submission, so the worker's span joins this trace
/// (empty when no OTLP exporter is configured).
pub(crate) fn trace_context() -> Vec<(String, String)> {
    let mut context = HashMap::new();
    opentelemetry::global::get_text_map_propagator(|propagator| {
        use tracing_opentelemetry::OpenTelemetrySpanExt;
        propagator.inject_context(&tracing::Span::current().context(), &mut context);
    });
    context.into_iter().collect()
}

/// Publishes submissions a change wrote to the outbox, after its commit (the outbox relay
/// retries any that fail).
pub(crate) async fn publish_outbox(state: &AppState, messages: &[agentd_schema::OutboxMessage]) {
    let Some(queue) = &state.backends.queue else { return };
    for message in messages {
        if let Err(error) = state.outbox.publish(queue.as_ref(), message).await {
            tracing::warn!(%error, "a submission's publish deferred to the outbox relay");
        }
    }
}

/// Appends events that drive no run (an interrupt) and publishes them.
pub(crate) async fn append_and_publish(
    state: &AppState,
    session_id: &str,
    events: Vec<NewEvent>,
) -> DomainResult<Vec<StoredEvent>> {
    let stored = state.backends.store.append_events(session_id, events).await?;
    if let Some(bus) = &state.backends.bus {
        live::publish_committed(bus.as_ref(), &stored).await;
    }
    Ok(stored)
}

/// Queues a work item for the session's hands unless one is open, and wakes pollers.
pub(crate) async fn queue_hands(state: &AppState, tenant: &Tenant, session: &Session) -> DomainResult<()> {
    let Some(bus) = &state.backends.bus else { return Ok(()) };
    let environment_id = session.body["environment_id"].as_str().unwrap_or_default();
    let store = state.backends.store.as_ref();
    let Some(environment) = store.get_resource(&tenant.workspace_id, "environment", environment_id).await? else {
        return Ok(());
    };
    agentd_schema::hands::ensure(
        store,
        bus.as_ref(),
        &session.workspace_id,
        environment_id,
        &session.id,
        agentd_schema::hands::hands_of(&environment.body),
    )
    .await?;
    Ok(())
}
