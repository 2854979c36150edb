//! Input a turn waits for, asked of the MCP client (2025-11-25 handshake, a client that
//! declared form elicitation): when the session idles `requires_action`, each awaited
//! call becomes an `elicitation/create` on the call's stream — a custom tool's call asks
//! for an `answer` (committed as `user.custom_tool_result`), a tool that needs
//! confirmation asks whether to `allow` it (`user.tool_confirmation`) — and the call
//! goes on until the turn settles. Declining answers the call too: an error result, or
//! a denial. Other clients get the `isError` result that says how to answer through the
//! managed API (docs/api/mcp.md).

use std::time::Duration;

use agentd_schema::{EventType, NewEvent};
use rmcp::model::{ElicitRequestParams, ElicitationAction};
use rmcp::service::{ElicitationMode, RequestContext};
use rmcp::{ErrorData, RoleServer};
use serde_json::{Value, json};

/// How long the client's user has to answer one question.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// A call the turn waits for.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Awaited {
    /// The id of its tool-use event.
    pub id: String,
    /// A custom tool's call (an answer is due), else a call awaiting confirmation.
    pub custom: bool,
    pub name: String,
    pub input: Value,
}

impl Awaited {
    /// What the client's user is asked, and the form of the answer.
    fn request(&self) -> Result<ElicitRequestParams, ErrorData> {
        let (message, schema) = if self.custom {
            let question = match self.input["question"].as_str() {
                Some(question) => question.to_owned(),
                None => self.input.to_string(),
            };
            (
                format!("The agent asks (tool `{}`): {question}", self.name),
                json!({
                    "type": "object",
                    "properties": { "answer": { "type": "string", "title": "Answer" } },
                    "required": ["answer"],
                }),
            )
        } else {
            (
                format!("The agent wants to run `{}` with {}. Allow it?", self.name, self.input),
                json!({
                    "type": "object",
                    "properties": { "allow": { "type": "boolean", "title": "Allow" } },
                    "required": ["allow"],
                }),
            )
        };
        serde_json::from_value(json!({ "mode": "form", "message": message, "requestedSchema": schema }))
            .map_err(|error| ErrorData::internal_error(format!("an elicitation could not be formed: {error}"), None))
    }

    /// The session input the client's reply makes.
    fn answer(&self, action: ElicitationAction, content: Option<&Value>) -> Value {
        let accepted = action == ElicitationAction::Accept;
        if self.custom {
            let (text, failed) = match content.map(|c| &c["answer"]) {
                Some(Value::String(answer)) if accepted => (answer.clone(), false),
                Some(other) if accepted && !other.is_null() => (other.to_string(), false),
                _ if action == ElicitationAction::Cancel => ("the user cancelled the question".to_owned(), true),
                _ => ("the user declined to answer".to_owned(), true),
            };
            return json!({
                "type": EventType::UserCustomToolResult, "custom_tool_use_id": self.id, "is_error": failed,
                "content": [{ "type": "text", "text": text }],
            });
        }
        let allowed = accepted && content.is_some_and(|c| c["allow"] == true);
        let mut confirmation = json!({
            "type": EventType::UserToolConfirmation, "tool_use_id": self.id,
            "result": if allowed { "allow" } else { "deny" },
        });
        if !allowed {
            confirmation["deny_message"] = json!("the user did not allow it (MCP elicitation)");
        }
        confirmation
    }
}

/// Whether this call may ask its client: a handshake-era session (its requests name an
/// `Mcp-Session-Id`) whose client declared form elicitation. The 2026-07-28 protocol
/// forbids server-to-client requests.
pub(super) fn possible(context: &RequestContext<RoleServer>) -> bool {
    super::mcp_session(context).is_some() && context.peer.supported_elicitation_modes().contains(&ElicitationMode::Form)
}

/// Asks the client about each call and returns the input its answers make for `session_id`.
pub(super) async fn ask(
    context: &RequestContext<RoleServer>,
    session_id: &str,
    calls: &[Awaited],
) -> Result<Vec<NewEvent>, String> {
    let mut answers = Vec::new();
    for call in calls {
        let request = call.request().map_err(|error| error.message.to_string())?;
        let reply = context
            .peer
            .create_elicitation_with_timeout(request, Some(ANSWER_TIMEOUT))
            .await
            .map_err(|error| format!("the client did not answer the question of `{}`: {error}", call.name))?;
        answers.push(NewEvent::new(session_id, call.answer(reply.action, reply.content.as_ref())));
    }
    Ok(answers)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(custom: bool, input: Value) -> Awaited {
        Awaited { id: "sevt_1".into(), custom, name: "ask".into(), input }
    }

    #[test]
    fn a_custom_call_asks_for_an_answer_and_commits_it() {
        let ask = call(true, json!({ "question": "Which colour?" }));
        let request = serde_json::to_value(ask.request().unwrap()).unwrap();
        assert_eq!(request["message"], "The agent asks (tool `ask`): Which colour?");
        assert_eq!(request["requestedSchema"]["required"], json!(["answer"]));
        let answer = ask.answer(ElicitationAction::Accept, Some(&json!({ "answer": "blue" })));
        assert_eq!(answer["custom_tool_use_id"], "sevt_1");
        assert_eq!((answer["is_error"].clone(), answer["content"][0]["text"].clone()), (json!(false), json!("blue")));
        let declined = ask.answer(ElicitationAction::Decline, None);
        assert_eq!(declined["is_error"], true);
    }

    #[test]
    fn a_confirmation_is_allowed_only_by_an_accepted_yes() {
        let run = call(false, json!({ "command": "ls" }));
        let request = serde_json::to_value(run.request().unwrap()).unwrap();
        assert!(request["message"].as_str().unwrap().contains("Allow it?"));
        assert_eq!(run.answer(ElicitationAction::Accept, Some(&json!({ "allow": true })))["result"], "allow");
        let no = run.answer(ElicitationAction::Accept, Some(&json!({ "allow": false })));
        assert_eq!((no["result"].clone(), no["type"].clone()), (json!("deny"), json!("user.tool_confirmation")));
        assert_eq!(run.answer(ElicitationAction::Cancel, None)["result"], "deny");
    }
}
