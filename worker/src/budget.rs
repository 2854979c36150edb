//! Budget reconciliation in the worker: the `session.usage` snapshot after every model
//! request, and the budget stop before every step once the ceiling is reached
//! (`agentd_schema::budget` has the arithmetic).

use agentd_schema::budget::Standing;
use agentd_schema::events::MODELS_KEY;
use agentd_schema::{EventType, NewEvent, Session, StopReason};
use serde_json::{Value, json};

use crate::agent_loop::Decision;
use crate::event::Event;
use crate::providers::Usage;

/// Turns a decision into the budget stop once the ceiling is reached: no model request
/// is admitted, and a turn that would end normally ends with `budget_reached`.
/// `session.budget_reached` is committed once per budget (again only after the
/// budget is changed). Idles that wait for the client (requires_action) stand.
pub fn within_budget(decision: Decision, history: &[Event], session: &Session, standing: &Standing) -> Decision {
    let ends_turn = decision.ends_turn();
    let before = match decision {
        Decision::CallModel { before, .. } => {
            before.into_iter().filter(|e| !e.is(EventType::SessionStatusRunning)).collect()
        }
        Decision::Idle { mut events } if ends_turn => {
            events.pop();
            events
        }
        other => return other,
    };
    let last_budget_change =
        history.iter().rposition(|e| e.is(EventType::SessionUpdated) && e.stored().body.get("budget").is_some());
    let already = history
        .iter()
        .enumerate()
        .any(|(i, e)| e.is(EventType::SessionBudgetReached) && last_budget_change.is_none_or(|change| i > change));
    let thread_id = history.first().map_or(session.id.as_str(), Event::thread_id);
    let mut events = before;
    let mut usage = session.usage.clone();
    strip_models(&mut usage);
    usage["list_cost"] = standing.list_cost();
    let budget = &session.body["budget"];
    if !already {
        events.push(NewEvent::budget_reached(thread_id, budget.clone(), usage.clone()));
    }
    events.push(NewEvent::session_usage(thread_id, usage, budget.clone()));
    events.push(NewEvent::status_idle(thread_id, StopReason::BudgetReached));
    Decision::Idle { events }
}

/// What a model request needs to reconcile usage afterwards.
pub struct Reconcile {
    /// The session's cumulative usage before the request.
    pub before: Value,
    /// The session body (budget and price snapshot).
    pub body: Value,
    /// The request's model when it is not the session's (a child thread's agent, ADR
    /// 0022 §7): its tokens also count under `usage._models[model]`, priced at that
    /// model's rates (`_price_snapshot.models`).
    pub model: Option<String>,
}

/// The per-model part of a usage is the store's bookkeeping, never shown.
fn strip_models(usage: &mut Value) {
    if let Some(usage) = usage.as_object_mut() {
        usage.remove(MODELS_KEY);
    }
}

impl Reconcile {
    /// Where the session stands against its budget once `request` is counted.
    pub fn standing(&self, request: &Usage) -> Standing {
        Standing::of(&self.body, &self.usage(request))
    }

    /// The `session.usage` snapshot after a request: cumulative usage including it, and
    /// its list cost when the session froze prices.
    pub fn snapshot(&self, thread_id: &str, request: &Usage) -> NewEvent {
        let mut usage = self.usage(request);
        let list_cost = Standing::of(&self.body, &usage).list_cost();
        strip_models(&mut usage);
        if !list_cost.is_null() {
            usage["list_cost"] = list_cost;
        }
        NewEvent::session_usage(thread_id, usage, self.body["budget"].clone())
    }

    /// The session's cumulative usage including `request` (without its list cost), with
    /// its per-model part (`_models`) as the store will have it.
    fn usage(&self, request: &Usage) -> Value {
        let mut usage = add(&self.before, request);
        // Web tool calls since the last request are in `before` already (the store
        // counts them as their results commit).
        if self.before["server_tool_use"].is_object() {
            usage["server_tool_use"] = self.before["server_tool_use"].clone();
        }
        let mut models = self.before[MODELS_KEY].as_object().cloned().unwrap_or_default();
        if let Some(model) = &self.model {
            let spent = add(models.get(model).unwrap_or(&Value::Null), request);
            models.insert(model.clone(), spent);
        }
        if !models.is_empty() {
            usage[MODELS_KEY] = Value::Object(models);
        }
        usage
    }
}

/// The token counts of the usage `before` plus `request`.
fn add(before: &Value, request: &Usage) -> Value {
    let n = |key: &str| before[key].as_u64().unwrap_or(0);
    let cache_5m = before["cache_creation"]["ephemeral_5m_input_tokens"].as_u64().unwrap_or(0);
    json!({
        "input_tokens": n("input_tokens") + request.input_tokens,
        "output_tokens": n("output_tokens") + request.output_tokens,
        "cache_read_input_tokens": n("cache_read_input_tokens") + request.cache_read_input_tokens,
        "cache_creation": { "ephemeral_5m_input_tokens": cache_5m + request.cache_creation_input_tokens, "ephemeral_1h_input_tokens": 0 },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_on_another_model_counts_under_its_model_and_the_snapshot_hides_it() {
        let before = json!({ "input_tokens": 10, "output_tokens": 1, "_models": { "small": { "input_tokens": 4 } } });
        let request = Usage { input_tokens: 5, output_tokens: 2, ..Usage::default() };
        let reconcile = Reconcile { before: before.clone(), body: json!({}), model: Some("small".into()) };
        let usage = reconcile.usage(&request);
        assert_eq!((usage["input_tokens"].as_u64(), usage["output_tokens"].as_u64()), (Some(15), Some(3)));
        assert_eq!(usage[MODELS_KEY]["small"]["input_tokens"], 9);
        assert_eq!(usage[MODELS_KEY]["small"]["output_tokens"], 2);
        let snapshot = reconcile.snapshot("sthr_a", &request);
        assert!(snapshot.body["usage"].get(MODELS_KEY).is_none(), "{}", snapshot.body);
        // The primary's model: the per-model part is carried, not added to.
        let primary = Reconcile { before, body: json!({}), model: None };
        assert_eq!(primary.usage(&request)[MODELS_KEY]["small"]["input_tokens"], 4);
    }
}
