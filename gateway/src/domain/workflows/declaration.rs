//! The save request of a workflow revision and its declaration, checked completely before
//! anything is read or stored (docs/api/workflows.md "Validation"): every problem is
//! collected, each with the JSON pointer of its field, none stops the others being found.
//! Unknown fields are refused at every level. The references between parts of the
//! declaration (`start`, `to`, slots, inputs, environments, workflow outputs) must
//! resolve inside it; the environments `requires` names are resolved against the
//! workspace by the service afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::RangeInclusive;

use serde_json::{Map, Value};

use crate::managed::body::{FieldError, pointer_join as join};

/// Characters of a key of `states`, `requires`, `inputs` and `outputs`, and of a transition.
pub const MAX_KEY_CHARS: usize = 64;
/// Characters of a `name`.
pub const MAX_NAME_CHARS: usize = 256;
/// Characters of a `description`.
pub const MAX_DESCRIPTION_CHARS: usize = 4_096;
/// Characters of an `icon` (a name, an emoji or a URL).
pub const MAX_ICON_CHARS: usize = 2_048;
/// Characters of a state's `instruction`.
pub const MAX_INSTRUCTION_CHARS: usize = 65_536;
/// Characters of a transition's `when` predicate.
pub const MAX_WHEN_CHARS: usize = 4_096;
/// Characters of a reference (`workflow.inputs.x`, a slot's `actor`, an environment id).
pub const MAX_REFERENCE_CHARS: usize = 256;
/// Characters of an `idempotency_key`.
pub const MAX_IDEMPOTENCY_KEY_CHARS: usize = 255;
/// States of a declaration.
pub const MAX_STATES: usize = 100;
/// Transitions of one state.
pub const MAX_TRANSITIONS: usize = 50;
/// Slots of one state.
pub const MAX_SLOTS: usize = 16;
/// Entries of one `requires`, `inputs` or `outputs` map.
pub const MAX_ENTRIES: usize = 100;
/// `max_iterations`: how often a cycle may revisit a state.
pub const ITERATIONS: RangeInclusive<i64> = 1..=1_000;
/// `wip_limit`: how many Issues a state may hold at once.
pub const WIP_LIMIT: RangeInclusive<i64> = 1..=1_000;

const REQUEST_FIELDS: &[&str] = &["expected_override_version", "idempotency_key", "declaration"];
const DECLARATION_FIELDS: &[&str] =
    &["name", "description", "icon", "start", "states", "inputs", "requires", "outputs", "max_iterations"];
const STATE_FIELDS: &[&str] = &[
    "name",
    "description",
    "icon",
    "state_group",
    "completion",
    "transitions",
    "instruction",
    "spec_delivery",
    "agent_session",
    "environment",
    "agent_tool_profile",
    "slots",
    "inputs",
    "outputs",
    "wip_limit",
];
const TRANSITION_FIELDS: &[&str] = &["key", "name", "description", "icon", "to", "when"];
const SLOT_FIELDS: &[&str] = &["responsibility", "agent", "actor", "team"];
const REQUIREMENT_FIELDS: &[&str] = &["description", "environment"];
const INPUT_FIELDS: &[&str] = &["type", "description", "required"];
const STATE_OUTPUT_FIELDS: &[&str] = &["type", "description"];
const WORKFLOW_OUTPUT_FIELDS: &[&str] = &["from", "description"];

/// `state_group` values.
pub const STATE_GROUPS: &[&str] = &["backlog", "todo", "in_progress", "review", "waiting", "done", "canceled"];
/// `completion` values; the last two make a state terminal.
pub const COMPLETIONS: &[&str] = &["open", "completed", "canceled"];
/// `spec_delivery` values.
pub const SPEC_DELIVERIES: &[&str] = &["inline", "query"];
/// `agent_session` values: a new agent session on entering the state, or the Issue's.
pub const AGENT_SESSIONS: &[&str] = &["new", "reuse"];
/// A slot's `responsibility` values; `executor` is the agent that works the state.
pub const RESPONSIBILITIES: &[&str] = &["executor", "reviewer", "approver", "observer"];
/// The value types of workflow inputs.
pub const VALUE_TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array"];
/// The types of state outputs: a value, or a `resource` the state realizes.
pub const OUTPUT_TYPES: &[&str] = &["string", "number", "integer", "boolean", "object", "array", "resource"];

/// A save request whose every field is valid.
#[derive(Debug, Clone)]
pub struct SaveRequest {
    /// The override version the caller saw.
    pub expected_override_version: i64,
    /// The caller's idempotency key.
    pub idempotency_key: String,
    /// The declaration, as written.
    pub declaration: Map<String, Value>,
    /// Each requirement's environment reference, by requirement key (not yet resolved).
    pub requires: BTreeMap<String, String>,
}

/// A clear request whose field is valid: the override version the caller saw.
pub fn check_clear(body: &Value) -> Result<i64, Vec<FieldError>> {
    let mut c = Checker::default();
    let version = c.object(body, "").and_then(|map| {
        c.only(map, &["expected_override_version"], "");
        c.version(map, "")
    });
    match version {
        Some(version) if c.problems.is_empty() => Ok(version),
        _ => Err(c.problems),
    }
}

/// Checks a save request (`body`) and its declaration; every problem with its pointer.
pub fn check_save(body: &Value) -> Result<SaveRequest, Vec<FieldError>> {
    let mut c = Checker::default();
    let Some(map) = c.object(body, "") else { return Err(c.problems) };
    c.only(map, REQUEST_FIELDS, "");
    let version = c.version(map, "");
    let key = c.text(map, "idempotency_key", "", 1..=MAX_IDEMPOTENCY_KEY_CHARS, true);
    let declaration = c.required(map, "declaration", "").and_then(|value| c.object(value, "/declaration"));
    let requires = declaration.map(|d| c.declaration(d)).unwrap_or_default();
    match (version, key, declaration) {
        (Some(expected_override_version), Some(key), Some(declaration)) if c.problems.is_empty() => Ok(SaveRequest {
            expected_override_version,
            idempotency_key: key.to_owned(),
            declaration: declaration.clone(),
            requires,
        }),
        _ => Err(c.problems),
    }
}

/// What a state input or a workflow output refers to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Reference<'a> {
    /// `workflow.inputs.<input>`.
    Input(&'a str),
    /// `workflow.requires.<role>`.
    Requirement(&'a str),
    /// `states.<state>.outputs.<output>`.
    StateOutput(&'a str, &'a str),
}

impl<'a> Reference<'a> {
    fn parse(text: &'a str) -> Option<Self> {
        let parts: Vec<&str> = text.split('.').collect();
        match parts.as_slice() {
            ["workflow", "inputs", input] if is_key(input) => Some(Reference::Input(input)),
            ["workflow", "requires", role] if is_key(role) => Some(Reference::Requirement(role)),
            ["states", state, "outputs", output] if is_key(state) && is_key(output) => {
                Some(Reference::StateOutput(state, output))
            }
            _ => None,
        }
    }
}

/// The keys a declaration's references may name.
#[derive(Debug, Default)]
struct Names<'a> {
    states: BTreeSet<&'a str>,
    inputs: BTreeSet<&'a str>,
    requires: BTreeSet<&'a str>,
    /// Each state's output keys.
    outputs: BTreeMap<&'a str, BTreeSet<&'a str>>,
}

impl Names<'_> {
    /// Why `reference` names nothing, if it does not.
    fn unresolved(&self, reference: &Reference<'_>) -> Option<String> {
        match reference {
            Reference::Input(input) if !self.inputs.contains(input) => {
                Some(format!("names input {input:?}, which workflow.inputs does not declare"))
            }
            Reference::Requirement(role) if !self.requires.contains(role) => {
                Some(format!("names requirement {role:?}, which workflow.requires does not declare"))
            }
            Reference::StateOutput(state, _) if !self.states.contains(state) => {
                Some(format!("names state {state:?}, which states does not declare"))
            }
            Reference::StateOutput(state, output) if !self.outputs.get(state).is_some_and(|o| o.contains(output)) => {
                Some(format!("names output {output:?} of state {state:?}, which that state does not declare"))
            }
            _ => None,
        }
    }
}

/// A key of `states`, `requires`, `inputs`, `outputs` or a transition: a letter or `_`,
/// then letters, digits, `_` or `-`, at most [`MAX_KEY_CHARS`] (no `.`: references are
/// dotted).
pub fn is_key(key: &str) -> bool {
    let mut chars = key.chars();
    key.len() <= MAX_KEY_CHARS
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// What [`is_key`] asks, for the problems that cite it.
const KEY_RULE: &str = "must be a key: a letter or _, then letters, digits, _ or -, at most 64 characters";

/// Collects problems.
#[derive(Debug, Default)]
struct Checker {
    problems: Vec<FieldError>,
}

impl Checker {
    fn problem(&mut self, pointer: &str, what: impl std::fmt::Display) {
        let shown = if pointer.is_empty() { "body" } else { pointer };
        self.problems.push(FieldError { path: pointer.to_owned(), message: format!("{shown}: {what}") });
    }

    fn object<'a>(&mut self, value: &'a Value, pointer: &str) -> Option<&'a Map<String, Value>> {
        let map = value.as_object();
        if map.is_none() {
            self.problem(pointer, "must be an object");
        }
        map
    }

    /// Refuses the fields of `map` not in `allowed`.
    fn only(&mut self, map: &Map<String, Value>, allowed: &[&str], pointer: &str) {
        for key in map.keys().filter(|key| !allowed.contains(&key.as_str())) {
            self.problem(&join(pointer, key), "unknown field");
        }
    }

    fn required<'a>(&mut self, map: &'a Map<String, Value>, field: &str, pointer: &str) -> Option<&'a Value> {
        let value = map.get(field);
        if value.is_none() {
            self.problem(&join(pointer, field), "required");
        }
        value
    }

    /// A string field of `chars` characters, without control characters.
    fn text<'a>(
        &mut self,
        map: &'a Map<String, Value>,
        field: &str,
        pointer: &str,
        chars: RangeInclusive<usize>,
        required: bool,
    ) -> Option<&'a str> {
        let at = join(pointer, field);
        let value = if required { self.required(map, field, pointer)? } else { map.get(field)? };
        let Some(text) = value.as_str() else {
            self.problem(&at, "must be a string");
            return None;
        };
        let count = text.chars().count();
        if !chars.contains(&count) {
            self.problem(&at, format!("must be {} to {} characters, not {count}", chars.start(), chars.end()));
            return None;
        }
        if text.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\t' | '\r')) {
            self.problem(&at, "must not contain control characters");
            return None;
        }
        Some(text)
    }

    /// A string field that is one of `allowed`.
    fn one_of<'a>(
        &mut self,
        map: &'a Map<String, Value>,
        field: &str,
        pointer: &str,
        allowed: &[&str],
        required: bool,
    ) -> Option<&'a str> {
        let text = self.text(map, field, pointer, 1..=MAX_KEY_CHARS, required)?;
        if !allowed.contains(&text) {
            self.problem(&join(pointer, field), format!("must be one of {}, not {text:?}", allowed.join(", ")));
            return None;
        }
        Some(text)
    }

    /// An optional integer field in `range`.
    fn integer(&mut self, map: &Map<String, Value>, field: &str, pointer: &str, range: RangeInclusive<i64>) {
        let Some(value) = map.get(field) else { return };
        match value.as_i64() {
            Some(n) if range.contains(&n) => {}
            _ => self.problem(
                &join(pointer, field),
                format!("must be an integer from {} to {}", range.start(), range.end()),
            ),
        }
    }

    /// `expected_override_version`: a required integer, 0 or more.
    fn version(&mut self, map: &Map<String, Value>, pointer: &str) -> Option<i64> {
        let value = self.required(map, "expected_override_version", pointer)?;
        match value.as_i64() {
            Some(version) if version >= 0 => Some(version),
            _ => {
                let at = join(pointer, "expected_override_version");
                self.problem(&at, "must be an integer, 0 or more (0: no override yet)");
                None
            }
        }
    }

    /// A map of at most `max` entries with valid keys (at least one when `required`),
    /// each an object of `fields`: the valid ones with their pointers.
    fn entries<'a>(
        &mut self,
        map: &'a Map<String, Value>,
        field: &str,
        pointer: &str,
        fields: &[&str],
        (required, max): (bool, usize),
    ) -> Vec<(&'a str, &'a Map<String, Value>, String)> {
        let at = join(pointer, field);
        let value = if required { self.required(map, field, pointer) } else { map.get(field) };
        let Some(entries) = value.and_then(|value| self.object(value, &at)) else { return Vec::new() };
        if entries.len() > max {
            self.problem(&at, format!("has {} entries; at most {max}", entries.len()));
        }
        if required && entries.is_empty() {
            self.problem(&at, "must have at least one entry");
        }
        let mut found = Vec::new();
        for (key, entry) in entries {
            let entry_at = join(&at, key);
            if !is_key(key) {
                self.problem(&entry_at, KEY_RULE);
                continue;
            }
            if let Some(object) = self.object(entry, &entry_at) {
                self.only(object, fields, &entry_at);
                found.push((key.as_str(), object, entry_at));
            }
        }
        found
    }

    /// The name, description and icon every declaration, state and transition has.
    fn labels(&mut self, map: &Map<String, Value>, pointer: &str) {
        self.text(map, "name", pointer, 1..=MAX_NAME_CHARS, true);
        self.text(map, "description", pointer, 0..=MAX_DESCRIPTION_CHARS, true);
        self.text(map, "icon", pointer, 0..=MAX_ICON_CHARS, true);
    }

    /// A reference field that must parse (as one of `allowed` kinds) and resolve.
    fn reference(&mut self, text: &str, at: &str, names: &Names<'_>, allowed: fn(&Reference<'_>) -> bool, form: &str) {
        match Reference::parse(text).filter(allowed) {
            None => self.problem(at, format!("must be a reference of the form {form}, not {text:?}")),
            Some(reference) => {
                if let Some(why) = names.unresolved(&reference) {
                    self.problem(at, why);
                }
            }
        }
    }

    /// The declaration; returns each requirement's environment reference.
    fn declaration(&mut self, d: &Map<String, Value>) -> BTreeMap<String, String> {
        let at = "/declaration";
        self.only(d, DECLARATION_FIELDS, at);
        self.labels(d, at);
        self.integer(d, "max_iterations", at, ITERATIONS);
        let states = self.entries(d, "states", at, STATE_FIELDS, (true, MAX_STATES));
        let inputs = self.entries(d, "inputs", at, INPUT_FIELDS, (false, MAX_ENTRIES));
        let requires = self.entries(d, "requires", at, REQUIREMENT_FIELDS, (false, MAX_ENTRIES));
        let outputs = self.entries(d, "outputs", at, WORKFLOW_OUTPUT_FIELDS, (false, MAX_ENTRIES));
        let mut names = Names {
            states: states.iter().map(|(key, _, _)| *key).collect(),
            inputs: inputs.iter().map(|(key, _, _)| *key).collect(),
            requires: requires.iter().map(|(key, _, _)| *key).collect(),
            outputs: BTreeMap::new(),
        };
        for (key, state, state_at) in &states {
            let declared = self.entries(state, "outputs", state_at, STATE_OUTPUT_FIELDS, (false, MAX_ENTRIES));
            for (_, output, output_at) in &declared {
                self.one_of(output, "type", output_at, OUTPUT_TYPES, true);
                self.text(output, "description", output_at, 0..=MAX_DESCRIPTION_CHARS, false);
            }
            names.outputs.insert(*key, declared.iter().map(|(output, _, _)| *output).collect());
        }
        if let Some(start) = self.text(d, "start", at, 1..=MAX_KEY_CHARS, true)
            && !names.states.contains(start)
        {
            self.problem(&join(at, "start"), format!("names state {start:?}, which states does not declare"));
        }
        for (_, input, input_at) in &inputs {
            self.one_of(input, "type", input_at, VALUE_TYPES, true);
            self.text(input, "description", input_at, 0..=MAX_DESCRIPTION_CHARS, false);
            if input.get("required").is_some_and(|r| !r.is_boolean()) {
                self.problem(&join(input_at, "required"), "must be a boolean");
            }
        }
        let mut environments = BTreeMap::new();
        for (role, requirement, requirement_at) in &requires {
            self.text(requirement, "description", requirement_at, 0..=MAX_DESCRIPTION_CHARS, true);
            if let Some(environment) =
                self.text(requirement, "environment", requirement_at, 1..=MAX_REFERENCE_CHARS, true)
            {
                environments.insert((*role).to_owned(), environment.to_owned());
            }
        }
        for (_, output, output_at) in &outputs {
            self.text(output, "description", output_at, 0..=MAX_DESCRIPTION_CHARS, false);
            if let Some(from) = self.text(output, "from", output_at, 1..=MAX_REFERENCE_CHARS, true) {
                let state_output = |r: &Reference<'_>| matches!(r, Reference::StateOutput(..));
                self.reference(from, &join(output_at, "from"), &names, state_output, "states.<state>.outputs.<output>");
            }
        }
        for (_, state, state_at) in &states {
            self.state(state, state_at, &names);
        }
        environments
    }

    fn state(&mut self, state: &Map<String, Value>, at: &str, names: &Names<'_>) {
        self.labels(state, at);
        self.one_of(state, "state_group", at, STATE_GROUPS, true);
        let completion = self.one_of(state, "completion", at, COMPLETIONS, true);
        self.text(state, "instruction", at, 0..=MAX_INSTRUCTION_CHARS, false);
        self.one_of(state, "spec_delivery", at, SPEC_DELIVERIES, false);
        self.one_of(state, "agent_session", at, AGENT_SESSIONS, false);
        if let Some(profile) = self.text(state, "agent_tool_profile", at, 1..=MAX_KEY_CHARS, false)
            && !is_key(profile)
        {
            self.problem(&join(at, "agent_tool_profile"), KEY_RULE);
        }
        self.integer(state, "wip_limit", at, WIP_LIMIT);
        if let Some(environment) = self.text(state, "environment", at, 1..=MAX_KEY_CHARS, false)
            && !names.requires.contains(environment)
        {
            let why = format!("names requirement {environment:?}, which workflow.requires does not declare");
            self.problem(&join(at, "environment"), why);
        }
        if let Some(inputs) = state.get("inputs") {
            let inputs_at = join(at, "inputs");
            if let Some(inputs) = self.object(inputs, &inputs_at) {
                if inputs.len() > MAX_ENTRIES {
                    self.problem(&inputs_at, format!("has {} entries; at most {MAX_ENTRIES}", inputs.len()));
                }
                for (key, reference) in inputs {
                    let input_at = join(&inputs_at, key);
                    if !is_key(key) {
                        self.problem(&input_at, KEY_RULE);
                    }
                    match reference.as_str() {
                        Some(text) if text.chars().count() <= MAX_REFERENCE_CHARS => {
                            let form =
                                "workflow.inputs.<input>, workflow.requires.<role> or states.<state>.outputs.<output>";
                            self.reference(text, &input_at, names, |_| true, form);
                        }
                        _ => self.problem(
                            &input_at,
                            format!("must be a reference string of at most {MAX_REFERENCE_CHARS} characters"),
                        ),
                    }
                }
            }
        }
        self.slots(state, at, names);
        self.transitions(state, at, names, completion);
    }

    fn slots(&mut self, state: &Map<String, Value>, at: &str, names: &Names<'_>) {
        let Some(slots) = state.get("slots") else { return };
        let slots_at = join(at, "slots");
        let Some(slots) = slots.as_array() else {
            self.problem(&slots_at, "must be an array");
            return;
        };
        if slots.len() > MAX_SLOTS {
            self.problem(&slots_at, format!("has {} slots; at most {MAX_SLOTS}", slots.len()));
        }
        let mut executors = 0;
        for (index, slot) in slots.iter().enumerate() {
            let slot_at = join(&slots_at, &index.to_string());
            let Some(slot) = self.object(slot, &slot_at) else { continue };
            self.only(slot, SLOT_FIELDS, &slot_at);
            let responsibility = self.one_of(slot, "responsibility", &slot_at, RESPONSIBILITIES, true);
            let agent = self.text(slot, "agent", &slot_at, 1..=MAX_REFERENCE_CHARS, false);
            let actor = self.text(slot, "actor", &slot_at, 1..=MAX_REFERENCE_CHARS, false);
            let team = self.text(slot, "team", &slot_at, 1..=MAX_REFERENCE_CHARS, false);
            match responsibility {
                Some("executor") => {
                    executors += 1;
                    if executors == 2 {
                        self.problem(&slot_at, "a state has at most one executor slot");
                    }
                    for (field, value) in [("actor", actor), ("team", team)] {
                        if value.is_some() {
                            self.problem(
                                &join(&slot_at, field),
                                "an executor slot names its agent, not an actor or team",
                            );
                        }
                    }
                    match agent {
                        Some(agent) => {
                            let requirement = |r: &Reference<'_>| matches!(r, Reference::Requirement(_));
                            self.reference(
                                agent,
                                &join(&slot_at, "agent"),
                                names,
                                requirement,
                                "workflow.requires.<role>",
                            );
                        }
                        None if !slot.contains_key("agent") => {
                            self.problem(&join(&slot_at, "agent"), "required in an executor slot")
                        }
                        None => {}
                    }
                }
                Some(_) => {
                    if slot.contains_key("agent") {
                        self.problem(&join(&slot_at, "agent"), "only an executor slot names an agent");
                    }
                    if slot.contains_key("actor") == slot.contains_key("team") {
                        self.problem(&slot_at, "a slot other than the executor names exactly one of actor or team");
                    }
                }
                None => {}
            }
        }
    }

    fn transitions(&mut self, state: &Map<String, Value>, at: &str, names: &Names<'_>, completion: Option<&str>) {
        let Some(transitions) = self.required(state, "transitions", at) else { return };
        let transitions_at = join(at, "transitions");
        let Some(transitions) = transitions.as_array() else {
            self.problem(&transitions_at, "must be an array");
            return;
        };
        if transitions.len() > MAX_TRANSITIONS {
            self.problem(&transitions_at, format!("has {} transitions; at most {MAX_TRANSITIONS}", transitions.len()));
        }
        if let Some(terminal @ ("completed" | "canceled")) = completion
            && !transitions.is_empty()
        {
            self.problem(&transitions_at, format!("a terminal state (completion {terminal}) has no transitions"));
        }
        let mut keys = BTreeSet::new();
        for (index, transition) in transitions.iter().enumerate() {
            let transition_at = join(&transitions_at, &index.to_string());
            let Some(transition) = self.object(transition, &transition_at) else { continue };
            self.only(transition, TRANSITION_FIELDS, &transition_at);
            self.labels(transition, &transition_at);
            self.text(transition, "when", &transition_at, 1..=MAX_WHEN_CHARS, true);
            if let Some(key) = self.text(transition, "key", &transition_at, 1..=MAX_KEY_CHARS, true) {
                if !is_key(key) {
                    self.problem(&join(&transition_at, "key"), KEY_RULE);
                } else if !keys.insert(key) {
                    self.problem(
                        &join(&transition_at, "key"),
                        format!("{key:?} is the key of an earlier transition of this state"),
                    );
                }
            }
            if let Some(to) = self.text(transition, "to", &transition_at, 1..=MAX_KEY_CHARS, true)
                && !names.states.contains(to)
            {
                self.problem(&join(&transition_at, "to"), format!("names state {to:?}, which states does not declare"));
            }
        }
    }
}
