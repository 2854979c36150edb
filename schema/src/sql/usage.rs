//! The usage projection's arithmetic: what each committed event adds to a cumulative
//! usage object (the session's, and each thread's once it has child threads). Pure;
//! the appending transactions write the result.

use serde_json::{Value, json};

use crate::events::{MODEL_KEY, MODEL_USAGE_KEY, MODELS_KEY};

/// Adds one model usage (`span.model_request_end`'s `model_usage` shape) to a
/// cumulative usage object.
pub(super) fn add(total: &mut Value, model_usage: &Value) {
    let field = |usage: &Value, key: &str| usage[key].as_i64().unwrap_or(0);
    for key in ["input_tokens", "output_tokens", "cache_read_input_tokens"] {
        total[key] = json!(field(total, key) + field(model_usage, key));
    }
    let created = field(model_usage, "cache_creation_input_tokens");
    let previous = total["cache_creation"]["ephemeral_5m_input_tokens"].as_i64().unwrap_or(0);
    total["cache_creation"] =
        json!({ "ephemeral_5m_input_tokens": previous + created, "ephemeral_1h_input_tokens": 0 });
}

/// Adds `model_usage` spent on `model` (when named) to `total` and to
/// `total._models[model]`, the part priced at that model's rates (ADR 0022 §7).
fn add_on_model(total: &mut Value, model: Option<&str>, model_usage: &Value) {
    add(total, model_usage);
    if let Some(model) = model {
        if !total[MODELS_KEY].is_object() {
            total[MODELS_KEY] = json!({});
        }
        add(&mut total[MODELS_KEY][model], model_usage);
    }
}

/// Adds what `event` spent to `total`; whether it spent anything: a model request
/// (`span.model_request_end`, under `_models` too when it carries `_model`), the
/// outcome grader's tokens (docs/api/outcomes.md), a web tool call that went out
/// (`server_tool_use`, `web.rs`) and the advisor's call (`agent.tool_result` with
/// `_model_usage`).
pub(super) fn add_event(total: &mut Value, kind: &str, body: &Value) -> bool {
    match kind {
        "span.model_request_end" => {
            add_on_model(total, body[MODEL_KEY].as_str(), &body["model_usage"]);
            true
        }
        "span.outcome_evaluation_end" => {
            add(total, &body["usage"]);
            true
        }
        "agent.tool_result" => {
            let mut changed = crate::web::count_server_tool_use(total, body);
            let spent = &body[MODEL_USAGE_KEY];
            if spent.is_object() {
                add_on_model(total, spent["model"].as_str(), &spent["usage"]);
                changed = true;
            }
            changed
        }
        _ => false,
    }
}

/// Whether an event spends anything ([`add_event`] would change a usage object).
pub(super) fn spends(kind: &str, body: &Value) -> bool {
    add_event(&mut json!({}), kind, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Adds `body` (an event, typed by its `type`) to `total`.
    fn add_body(total: &mut Value, body: Value) -> bool {
        add_event(total, body["type"].as_str().unwrap_or_default(), &body)
    }

    #[test]
    fn spans_add_to_the_total_and_a_named_model_also_under_models() {
        let usage = json!({ "input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 1,
                            "cache_creation_input_tokens": 3 });
        let mut total = json!({});
        assert!(add_body(&mut total, json!({ "type": "span.model_request_end", "model_usage": usage })));
        assert!(total.get(MODELS_KEY).is_none());
        let span = json!({ "type": "span.model_request_end", "model_usage": usage, "_model": "small" });
        assert!(add_body(&mut total, span));
        assert_eq!(total["input_tokens"], 20);
        assert_eq!(total["cache_creation"]["ephemeral_5m_input_tokens"], 6);
        assert_eq!(total[MODELS_KEY]["small"]["input_tokens"], 10);
        assert_eq!(total[MODELS_KEY]["small"]["output_tokens"], 2);
    }

    #[test]
    fn the_advisors_result_counts_like_a_span_and_other_results_do_not() {
        let mut total = json!({});
        let advice = json!({ "type": "agent.tool_result", "tool_use_id": "sevt_x",
                             "_model_usage": { "model": "big", "usage": { "input_tokens": 7, "output_tokens": 1 } } });
        assert!(add_body(&mut total, advice));
        assert_eq!(
            (total["input_tokens"].as_i64(), total[MODELS_KEY]["big"]["input_tokens"].as_i64()),
            (Some(7), Some(7))
        );
        let plain = json!({ "type": "agent.tool_result", "tool_use_id": "sevt_y" });
        assert!(!add_body(&mut total, plain));
        assert!(!add_body(&mut total, json!({ "type": "agent.message" })));
    }
}
