//! The closed sets event bodies use: stop reasons, retry statuses, error types,
//! tool permissions, model usage.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// Why a session went idle (`session.status_idle.stop_reason`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StopReason {
    /// The turn completed.
    EndTurn,
    /// Blocked on these tool calls (custom tools, confirmations).
    RequiresAction {
        /// The blocking tool-use event ids.
        event_ids: Vec<String>,
    },
    /// Retries (or the hands, or a remote server) gave up on the turn.
    RetriesExhausted,
    /// The session's budget is reached.
    BudgetReached,
    /// The model refused.
    Refusal,
}

impl StopReason {
    /// The wire `type`.
    pub fn as_str(&self) -> &'static str {
        match self {
            StopReason::EndTurn => "end_turn",
            StopReason::RequiresAction { .. } => "requires_action",
            StopReason::RetriesExhausted => "retries_exhausted",
            StopReason::BudgetReached => "budget_reached",
            StopReason::Refusal => "refusal",
        }
    }

    /// The stop reason of a `session.status_idle` body; `None` when it has none agentd knows.
    pub fn of(body: &Value) -> Option<StopReason> {
        serde_json::from_value(body.get("stop_reason")?.clone()).ok()
    }

    pub(super) fn wire(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    pub(super) fn details(&self) -> Value {
        match self {
            StopReason::Refusal => json!({ "type": "refusal", "category": null, "explanation": null }),
            _ => Value::Null,
        }
    }
}

/// Whether the server retries after a `session.error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RetryStatus {
    /// The server is retrying.
    Retrying,
    /// The turn is dead; the session returns to idle.
    Exhausted,
    /// The session will terminate.
    Terminal,
}

impl RetryStatus {
    /// The wire `type`.
    pub const fn as_str(self) -> &'static str {
        match self {
            RetryStatus::Retrying => "retrying",
            RetryStatus::Exhausted => "exhausted",
            RetryStatus::Terminal => "terminal",
        }
    }

    /// The retry status of a `session.error` body.
    pub fn of(body: &Value) -> Option<RetryStatus> {
        serde_json::from_value(body["error"]["retry_status"]["type"].clone()).ok()
    }
}

/// The `error.type` of a `session.error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorType {
    /// `unknown_error`
    UnknownError,
    /// `model_overloaded_error`
    ModelOverloadedError,
    /// `model_rate_limited_error`
    ModelRateLimitedError,
    /// `model_request_failed_error`
    ModelRequestFailedError,
    /// `mcp_connection_failed_error` (with `mcp_server_name`)
    McpConnectionFailedError,
    /// `mcp_authentication_failed_error` (with `mcp_server_name`)
    McpAuthenticationFailedError,
    /// `billing_error`
    BillingError,
    /// `credential_host_unreachable_error`
    CredentialHostUnreachableError,
    /// `tool_use_limit_reached_error`
    ToolUseLimitReachedError,
    /// `compaction_limit_reached_error`
    CompactionLimitReachedError,
}

/// A `session.error`'s `error` object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionError {
    /// Its type.
    pub kind: ErrorType,
    /// What happened (never a secret).
    pub message: String,
    /// Whether the server retries.
    pub retry: RetryStatus,
    /// The MCP server at fault, for the `mcp_*` errors.
    pub mcp_server_name: Option<String>,
}

impl SessionError {
    /// An error of `kind`.
    pub fn new(kind: ErrorType, message: impl Into<String>, retry: RetryStatus) -> Self {
        Self { kind, message: message.into(), retry, mcp_server_name: None }
    }

    pub(super) fn wire(&self) -> Value {
        let mut error = json!({
            "type": self.kind,
            "message": self.message,
            "retry_status": { "type": self.retry.as_str() },
        });
        if let Some(server) = &self.mcp_server_name {
            error["mcp_server_name"] = json!(server);
        }
        error
    }
}

/// `agent.tool_use` / `agent.mcp_tool_use` permission fields for a resolved policy:
/// `evaluated_permission` and `evaluation`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Permission {
    /// `always_allow`: runs.
    AlwaysAllow,
    /// `always_ask`: waits for a `user.tool_confirmation`.
    AlwaysAsk,
    /// `auto`: the worker's permission judge decides each call (`worker/src/run/judge.rs`):
    /// a call judged safe runs, one judged high-risk is denied; a call it has not judged
    /// asks, reason `indeterminate`.
    Auto(AutoJudgement),
    /// Refused before any policy applied (the tool is not the agent's).
    Deny,
}

/// What the permission judge made of one `auto` call: `evaluation.evaluated_permission`,
/// and why (`evaluation.reason`, an agentd extension).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AutoJudgement {
    /// The decision.
    pub verdict: AutoVerdict,
    /// The judge's one-sentence reason, or why no judgement was reached.
    pub reason: Option<String>,
}

/// The decision on one `auto` call (`evaluation.evaluated_permission`, with the reason
/// codes the reference lists: `high_risk`, `indeterminate`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoVerdict {
    /// Judged safe: runs like `always_allow` (`{"type":"allow"}`).
    Allow,
    /// Judged high-risk: does not run, and a synthetic error result answers it
    /// (`{"type":"deny","reason_code":"high_risk"}`).
    DenyHighRisk,
    /// Not judged, and not held for the user either (the session's budget is reached):
    /// does not run, as `DenyHighRisk` (`{"type":"deny","reason_code":"indeterminate"}`).
    DenyIndeterminate,
    /// No judgement was reached (the judge failed, or never ran): held for a
    /// confirmation (`{"type":"ask","reason_code":"indeterminate"}`).
    AskIndeterminate,
}

impl AutoVerdict {
    /// Whether the call is denied: it does not run.
    pub const fn denies(self) -> bool {
        matches!(self, AutoVerdict::DenyHighRisk | AutoVerdict::DenyIndeterminate)
    }
}

impl AutoJudgement {
    /// No judgement was reached, for `reason`: the call asks.
    pub fn indeterminate(reason: impl Into<String>) -> Self {
        Self { verdict: AutoVerdict::AskIndeterminate, reason: Some(reason.into()) }
    }
}

impl Permission {
    /// The permission of a configured policy name (`always_allow`, `always_ask`, `auto`);
    /// `auto` not judged yet.
    pub fn of_policy(policy: &str) -> Self {
        match policy {
            "always_allow" => Permission::AlwaysAllow,
            "always_ask" => Permission::AlwaysAsk,
            _ => Permission::Auto(AutoJudgement { verdict: AutoVerdict::AskIndeterminate, reason: None }),
        }
    }

    /// Whether a tool use's body was evaluated under the `auto` policy.
    pub fn is_auto(body: &Value) -> bool {
        body["evaluation"]["type"] == "auto"
    }

    /// Sets the permission fields of a tool use's `body` (replacing any there).
    pub fn apply(self, body: &mut Value) {
        let (permission, evaluation) = match self {
            Permission::AlwaysAllow => ("allow", json!({ "type": "always_allow" })),
            Permission::AlwaysAsk => ("ask", json!({ "type": "always_ask" })),
            Permission::Auto(AutoJudgement { verdict, reason }) => {
                let (permission, evaluated) = match verdict {
                    AutoVerdict::Allow => ("allow", json!({ "type": "allow" })),
                    AutoVerdict::DenyHighRisk => ("deny", json!({ "type": "deny", "reason_code": "high_risk" })),
                    AutoVerdict::DenyIndeterminate => {
                        ("deny", json!({ "type": "deny", "reason_code": "indeterminate" }))
                    }
                    AutoVerdict::AskIndeterminate => ("ask", json!({ "type": "ask", "reason_code": "indeterminate" })),
                };
                let mut evaluation = json!({ "type": "auto", "evaluated_permission": evaluated });
                if let Some(reason) = reason {
                    evaluation["reason"] = json!(reason);
                }
                (permission, evaluation)
            }
            Permission::Deny => {
                body["evaluated_permission"] = json!("deny");
                if let Some(fields) = body.as_object_mut() {
                    fields.remove("evaluation");
                }
                return;
            }
        };
        body["evaluated_permission"] = json!(permission);
        body["evaluation"] = evaluation;
    }
}

/// Token usage of one model request (`span.model_request_end.model_usage`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModelUsage {
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache.
    pub cache_read_input_tokens: u64,
    /// Input tokens written to the prompt cache.
    pub cache_creation_input_tokens: u64,
}
