//! The declaration's rules, one test each: every test fails without its rule.

use serde_json::{Value, json};

use super::declaration::{check_clear, check_save};

/// A valid request: triage → work → (review ↔ work) → done | canceled.
fn valid() -> Value {
    json!({
        "expected_override_version": 0,
        "idempotency_key": "save-1",
        "declaration": {
            "name": "Bug fix",
            "description": "From report to merged fix.",
            "icon": "bug",
            "start": "triage",
            "max_iterations": 5,
            "inputs": {"report": {"type": "string", "description": "the bug report", "required": true}},
            "requires": {"coder": {"description": "where fixes are made", "environment": "env_0123"}},
            "outputs": {"patch": {"from": "states.work.outputs.patch", "description": "the fix"}},
            "states": {
                "triage": {
                    "name": "Triage", "description": "", "icon": "inbox",
                    "state_group": "backlog", "completion": "open",
                    "slots": [{"responsibility": "reviewer", "team": "maintainers"}],
                    "transitions": [
                        {"key": "accept", "name": "Accept", "description": "", "icon": "", "to": "work", "when": "true"},
                        {"key": "reject", "name": "Reject", "description": "", "icon": "", "to": "canceled", "when": "false"}
                    ]
                },
                "work": {
                    "name": "Work", "description": "Fix it.", "icon": "wrench",
                    "state_group": "in_progress", "completion": "open",
                    "instruction": "Fix the bug.", "spec_delivery": "inline", "agent_session": "new",
                    "environment": "coder", "agent_tool_profile": "coding", "wip_limit": 3,
                    "slots": [{"responsibility": "executor", "agent": "workflow.requires.coder"}],
                    "inputs": {"report": "workflow.inputs.report", "env": "workflow.requires.coder", "notes": "states.review.outputs.notes"},
                    "outputs": {"patch": {"type": "resource", "description": "a branch"}},
                    "transitions": [{"key": "submit", "name": "Submit", "description": "", "icon": "", "to": "review", "when": "output.patch != null"}]
                },
                "review": {
                    "name": "Review", "description": "", "icon": "eye",
                    "state_group": "review", "completion": "open",
                    "outputs": {"notes": {"type": "string"}},
                    "transitions": [
                        {"key": "approve", "name": "Approve", "description": "", "icon": "", "to": "done", "when": "approved"},
                        {"key": "rework", "name": "Rework", "description": "", "icon": "", "to": "work", "when": "!approved"}
                    ]
                },
                "done": {"name": "Done", "description": "", "icon": "check", "state_group": "done", "completion": "completed", "transitions": []},
                "canceled": {"name": "Canceled", "description": "", "icon": "x", "state_group": "canceled", "completion": "canceled", "transitions": []}
            }
        }
    })
}

/// The pointers of the problems of `valid()` changed by `change`.
fn refused(change: impl FnOnce(&mut Value)) -> Vec<String> {
    let mut body = valid();
    change(&mut body);
    match check_save(&body) {
        Ok(_) => Vec::new(),
        Err(problems) => problems.into_iter().map(|p| p.path).collect(),
    }
}

fn assert_refused_at(change: impl FnOnce(&mut Value), pointer: &str) {
    let pointers = refused(change);
    assert!(pointers.iter().any(|p| p == pointer), "expected a problem at {pointer}, got {pointers:?}");
}

fn declaration(body: &mut Value) -> &mut Value {
    &mut body["declaration"]
}

fn state<'a>(body: &'a mut Value, key: &str) -> &'a mut Value {
    &mut body["declaration"]["states"][key]
}

fn remove(value: &mut Value, field: &str) {
    value.as_object_mut().unwrap().remove(field);
}

#[test]
fn the_valid_declaration_passes_with_its_requirements() {
    let request = check_save(&valid()).expect("valid");
    assert_eq!(request.expected_override_version, 0);
    assert_eq!(request.idempotency_key, "save-1");
    assert_eq!(request.requires.get("coder").map(String::as_str), Some("env_0123"));
    assert_eq!(request.declaration["start"], "triage");
}

#[test]
fn unknown_fields_are_refused_at_every_level() {
    assert_refused_at(|b| b["extra"] = json!(1), "/extra");
    assert_refused_at(|b| declaration(b)["join_policy"] = json!("all"), "/declaration/join_policy");
    assert_refused_at(|b| state(b, "work")["retries"] = json!(1), "/declaration/states/work/retries");
    assert_refused_at(
        |b| state(b, "work")["transitions"][0]["priority"] = json!(1),
        "/declaration/states/work/transitions/0/priority",
    );
    assert_refused_at(|b| state(b, "work")["slots"][0]["role"] = json!("x"), "/declaration/states/work/slots/0/role");
    assert_refused_at(|b| declaration(b)["requires"]["coder"]["kind"] = json!("x"), "/declaration/requires/coder/kind");
    assert_refused_at(
        |b| declaration(b)["inputs"]["report"]["default"] = json!("x"),
        "/declaration/inputs/report/default",
    );
    assert_refused_at(|b| declaration(b)["outputs"]["patch"]["type"] = json!("x"), "/declaration/outputs/patch/type");
    assert_refused_at(
        |b| state(b, "work")["outputs"]["patch"]["from"] = json!("x"),
        "/declaration/states/work/outputs/patch/from",
    );
    // A pointer escapes `/` and `~` (RFC 6901).
    assert_refused_at(|b| b["a/b~c"] = json!(1), "/a~1b~0c");
}

#[test]
fn required_fields_must_be_present() {
    for field in ["expected_override_version", "idempotency_key", "declaration"] {
        assert_refused_at(|b| remove(b, field), &format!("/{field}"));
    }
    for field in ["name", "description", "icon", "start", "states"] {
        assert_refused_at(|b| remove(declaration(b), field), &format!("/declaration/{field}"));
    }
    for field in ["name", "description", "icon", "state_group", "completion", "transitions"] {
        assert_refused_at(|b| remove(state(b, "work"), field), &format!("/declaration/states/work/{field}"));
    }
    for field in ["key", "name", "description", "icon", "to", "when"] {
        let at = format!("/declaration/states/work/transitions/0/{field}");
        assert_refused_at(|b| remove(&mut state(b, "work")["transitions"][0], field), &at);
    }
    for field in ["description", "environment"] {
        assert_refused_at(
            |b| remove(&mut declaration(b)["requires"]["coder"], field),
            &format!("/declaration/requires/coder/{field}"),
        );
    }
}

#[test]
fn fields_must_have_their_types() {
    assert_refused_at(|b| b["expected_override_version"] = json!("0"), "/expected_override_version");
    assert_refused_at(|b| b["expected_override_version"] = json!(-1), "/expected_override_version");
    assert_refused_at(|b| b["expected_override_version"] = json!(1.5), "/expected_override_version");
    assert_refused_at(|b| b["idempotency_key"] = json!(7), "/idempotency_key");
    assert_refused_at(|b| b["declaration"] = json!([]), "/declaration");
    assert_refused_at(|b| declaration(b)["name"] = json!(null), "/declaration/name");
    assert_refused_at(|b| declaration(b)["states"] = json!([]), "/declaration/states");
    assert_refused_at(|b| state(b, "work")["transitions"] = json!({}), "/declaration/states/work/transitions");
    assert_refused_at(|b| state(b, "work")["slots"] = json!({}), "/declaration/states/work/slots");
    assert_refused_at(|b| state(b, "work")["inputs"]["report"] = json!(1), "/declaration/states/work/inputs/report");
    assert_refused_at(
        |b| declaration(b)["inputs"]["report"]["required"] = json!("yes"),
        "/declaration/inputs/report/required",
    );
    assert_refused_at(
        |b| declaration(b)["inputs"]["report"]["type"] = json!("date"),
        "/declaration/inputs/report/type",
    );
    assert_refused_at(
        |b| state(b, "work")["outputs"]["patch"]["type"] = json!("file"),
        "/declaration/states/work/outputs/patch/type",
    );
    assert!(check_save(&json!([1])).is_err(), "the body is an object");
}

#[test]
fn start_names_a_state() {
    assert_refused_at(|b| declaration(b)["start"] = json!("nowhere"), "/declaration/start");
}

#[test]
fn states_are_at_least_one_with_valid_keys() {
    assert_refused_at(|b| declaration(b)["states"] = json!({}), "/declaration/states");
    assert_refused_at(
        |b| declaration(b)["states"]["a.b"] = state(&mut valid(), "done").clone(),
        "/declaration/states/a.b",
    );
}

#[test]
fn state_group_is_one_of_its_values() {
    assert_refused_at(|b| state(b, "work")["state_group"] = json!("doing"), "/declaration/states/work/state_group");
}

#[test]
fn completion_is_one_of_its_values() {
    assert_refused_at(|b| state(b, "done")["completion"] = json!("finished"), "/declaration/states/done/completion");
}

#[test]
fn spec_delivery_and_agent_session_are_closed_sets() {
    assert_refused_at(|b| state(b, "work")["spec_delivery"] = json!("email"), "/declaration/states/work/spec_delivery");
    assert_refused_at(
        |b| state(b, "work")["agent_session"] = json!("forever"),
        "/declaration/states/work/agent_session",
    );
    assert_refused_at(
        |b| state(b, "work")["agent_tool_profile"] = json!("a b"),
        "/declaration/states/work/agent_tool_profile",
    );
}

#[test]
fn every_transition_goes_to_a_declared_state() {
    assert_refused_at(
        |b| state(b, "work")["transitions"][0]["to"] = json!("limbo"),
        "/declaration/states/work/transitions/0/to",
    );
}

#[test]
fn transition_keys_are_unique_within_a_state() {
    assert_refused_at(
        |b| state(b, "review")["transitions"][1]["key"] = json!("approve"),
        "/declaration/states/review/transitions/1/key",
    );
    // The same key in two states is fine.
    assert!(refused(|b| state(b, "triage")["transitions"][0]["key"] = json!("approve")).is_empty());
}

#[test]
fn terminal_states_have_no_transitions() {
    for terminal in ["done", "canceled"] {
        let transition =
            json!({"key": "reopen", "name": "Reopen", "description": "", "icon": "", "to": "work", "when": "true"});
        let at = format!("/declaration/states/{terminal}/transitions");
        assert_refused_at(|b| state(b, terminal)["transitions"] = json!([transition]), &at);
    }
}

#[test]
fn a_state_has_at_most_one_executor_slot() {
    assert_refused_at(
        |b| {
            let executor = json!({"responsibility": "executor", "agent": "workflow.requires.coder"});
            state(b, "work")["slots"].as_array_mut().unwrap().push(executor);
        },
        "/declaration/states/work/slots/1",
    );
}

#[test]
fn an_executor_names_a_declared_requirement() {
    let at = "/declaration/states/work/slots/0/agent";
    assert_refused_at(|b| state(b, "work")["slots"][0]["agent"] = json!("agent_123"), at);
    assert_refused_at(|b| state(b, "work")["slots"][0]["agent"] = json!("workflow.inputs.report"), at);
    assert_refused_at(|b| state(b, "work")["slots"][0]["agent"] = json!("workflow.requires.reviewer"), at);
    assert_refused_at(|b| remove(&mut state(b, "work")["slots"][0], "agent"), at);
}

#[test]
fn other_slots_name_exactly_one_actor_or_team() {
    let at = "/declaration/states/triage/slots/0";
    assert_refused_at(|b| remove(&mut state(b, "triage")["slots"][0], "team"), at);
    assert_refused_at(|b| state(b, "triage")["slots"][0]["actor"] = json!("alice"), at);
    assert_refused_at(
        |b| state(b, "triage")["slots"][0]["agent"] = json!("workflow.requires.coder"),
        &format!("{at}/agent"),
    );
    assert_refused_at(
        |b| state(b, "triage")["slots"][0]["responsibility"] = json!("boss"),
        &format!("{at}/responsibility"),
    );
}

#[test]
fn state_inputs_reference_what_exists() {
    let at = "/declaration/states/work/inputs/report";
    for reference in [
        "workflow.inputs.missing",
        "workflow.requires.missing",
        "states.missing.outputs.notes",
        "states.review.outputs.missing",
        "workflow.outputs.patch",
        "env.HOME",
        "states.review.outputs",
    ] {
        assert_refused_at(|b| state(b, "work")["inputs"]["report"] = json!(reference), at);
    }
}

#[test]
fn workflow_outputs_project_state_outputs() {
    let at = "/declaration/outputs/patch/from";
    assert_refused_at(|b| declaration(b)["outputs"]["patch"]["from"] = json!("states.work.outputs.nothing"), at);
    assert_refused_at(|b| declaration(b)["outputs"]["patch"]["from"] = json!("workflow.inputs.report"), at);
}

#[test]
fn a_state_environment_names_a_requirement() {
    assert_refused_at(|b| state(b, "work")["environment"] = json!("env_0123"), "/declaration/states/work/environment");
}

#[test]
fn iterations_and_wip_limits_are_bounded() {
    for bad in [json!(0), json!(1001), json!("5"), json!(2.5)] {
        assert_refused_at(|b| declaration(b)["max_iterations"] = bad.clone(), "/declaration/max_iterations");
        assert_refused_at(|b| state(b, "work")["wip_limit"] = bad.clone(), "/declaration/states/work/wip_limit");
    }
    assert!(refused(|b| declaration(b)["max_iterations"] = json!(1000)).is_empty());
    assert!(refused(|b| state(b, "work")["wip_limit"] = json!(1)).is_empty());
}

#[test]
fn strings_are_bounded() {
    assert_refused_at(|b| declaration(b)["name"] = json!("x".repeat(257)), "/declaration/name");
    assert_refused_at(|b| declaration(b)["name"] = json!(""), "/declaration/name");
    assert_refused_at(|b| declaration(b)["description"] = json!("x".repeat(4097)), "/declaration/description");
    assert_refused_at(
        |b| state(b, "work")["instruction"] = json!("x".repeat(65_537)),
        "/declaration/states/work/instruction",
    );
    assert_refused_at(
        |b| state(b, "work")["transitions"][0]["when"] = json!(""),
        "/declaration/states/work/transitions/0/when",
    );
    assert_refused_at(|b| b["idempotency_key"] = json!("k".repeat(256)), "/idempotency_key");
    assert_refused_at(|b| b["idempotency_key"] = json!(""), "/idempotency_key");
    assert_refused_at(|b| declaration(b)["name"] = json!("a\u{0}b"), "/declaration/name");
}

#[test]
fn collections_are_bounded() {
    assert_refused_at(
        |b| {
            let transition = state(b, "work")["transitions"][0].clone();
            let many: Vec<Value> = (0..51)
                .map(|i| {
                    let mut t = transition.clone();
                    t["key"] = json!(format!("t{i}"));
                    t
                })
                .collect();
            state(b, "work")["transitions"] = json!(many);
        },
        "/declaration/states/work/transitions",
    );
    assert_refused_at(
        |b| state(b, "triage")["slots"] = json!(vec![json!({"responsibility": "observer", "actor": "a"}); 17]),
        "/declaration/states/triage/slots",
    );
}

#[test]
fn every_problem_is_reported_not_only_the_first() {
    let pointers = refused(|b| {
        b["extra"] = json!(1);
        declaration(b)["start"] = json!("nowhere");
        state(b, "work")["state_group"] = json!("doing");
        state(b, "done")["transitions"] = state(&mut valid(), "review")["transitions"].clone();
    });
    for pointer in
        ["/extra", "/declaration/start", "/declaration/states/work/state_group", "/declaration/states/done/transitions"]
    {
        assert!(pointers.iter().any(|p| p == pointer), "{pointer} in {pointers:?}");
    }
}

#[test]
fn a_clear_takes_only_its_version() {
    assert_eq!(check_clear(&json!({"expected_override_version": 3})), Ok(3));
    for body in [
        json!({}),
        json!({"expected_override_version": -1}),
        json!({"expected_override_version": 1, "x": 1}),
        json!([]),
    ] {
        assert!(check_clear(&body).is_err(), "{body}");
    }
}
