//! Where an agent's `multiagent` keeps its roster (ADR 0022 §1), the one rule every
//! reader of a configuration — stored, rendered or a session's snapshot — goes through:
//! a `coordinator`'s `agents` (advisors among them), and an enabled
//! `subagents.predefined_agents` of a `multiagent_20261001`. (The runner, which takes no
//! dependency on this crate, keeps its own copy for skill mounts.)

use serde_json::Value;

/// The `type` of the merged multiagent configuration.
pub const MERGED_TYPE: &str = "multiagent_20261001";

/// The JSON pointer of the roster list in `multiagent`, if it has one.
pub fn roster_pointer(multiagent: &Value) -> Option<&'static str> {
    match multiagent["type"].as_str()? {
        "coordinator" => Some("/agents"),
        MERGED_TYPE if multiagent["subagents"]["type"] == "enabled" => Some("/subagents/predefined_agents"),
        _ => None,
    }
}

/// The roster entries of `multiagent` (empty when it has none).
pub fn roster(multiagent: &Value) -> &[Value] {
    roster_pointer(multiagent)
        .and_then(|pointer| multiagent.pointer(pointer))
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_roster_is_where_the_type_puts_it() {
        let coordinator = json!({ "type": "coordinator", "agents": [{ "type": "self" }, { "type": "advisor" }] });
        assert_eq!(roster(&coordinator).len(), 2);
        let enabled = json!({ "type": MERGED_TYPE, "subagents": { "type": "enabled", "predefined_agents": [{ "type": "self" }] } });
        assert_eq!(roster_pointer(&enabled), Some("/subagents/predefined_agents"));
        assert_eq!(roster(&enabled).len(), 1);
        let disabled = json!({ "type": MERGED_TYPE, "subagents": { "type": "disabled", "predefined_agents": [{}] } });
        assert!(roster(&disabled).is_empty() && roster(&Value::Null).is_empty());
    }
}
