//! The agent's tools: how a call is classified from the agent's configuration, and
//! the tool specs offered to the model. Of the built-in toolset, the sandbox tools go
//! to the hands and `web_fetch` / `web_search` run in the worker, as do the primary
//! thread's thread tools (`threads/`).

use agentd_schema::web::WebTool;
use serde_json::{Value, json};

use crate::providers::ToolSpec;
use crate::threads::{Armed, ThreadTool};

/// How a tool call is handled, from the agent's tool configuration.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolClass {
    /// A custom tool: the client answers with `user.custom_tool_result`.
    Custom,
    /// A built-in toolset tool with its resolved permission policy.
    Builtin {
        /// `always_allow`, `always_ask` or `auto`.
        policy: String,
    },
    /// An `a2a_agent` tool (an agentd extension): another agent called over A2A.
    A2a {
        /// `always_allow`, `always_ask` or `auto`.
        policy: String,
    },
    /// The dream agent's `memory` tool, run by the worker (`dream_memory.rs`).
    Memory,
    /// A server-side tool of the built-in toolset (`web_fetch`, `web_search`), run by
    /// the worker (`web/`), with its resolved permission policy.
    Web {
        /// Which one.
        tool: WebTool,
        /// `always_allow`, `always_ask` or `auto`.
        policy: String,
    },
    /// A thread tool of the primary thread (`threads/`): the worker dispatches it to a
    /// child thread and waits for the reply.
    Thread(ThreadTool),
    /// `consult_advisor` (`run/advisor.rs`), run by the worker.
    Advisor,
    /// Not a tool of this agent.
    Unknown,
}

/// The sandbox tools of `agent_toolset_20260401` offered to the model, with schemas.
const BUILTIN_TOOLS: &[(&str, &str, &str)] = &[
    (
        "bash",
        "Run a shell command in the session's sandbox.",
        r#"{"type":"object","properties":{"command":{"type":"string"},"restart":{"type":"boolean"},"timeout_ms":{"type":"integer"}}}"#,
    ),
    (
        "read",
        "Read a file.",
        r#"{"type":"object","properties":{"file_path":{"type":"string"},"view_range":{"type":"array","items":{"type":"integer"}}},"required":["file_path"]}"#,
    ),
    (
        "write",
        "Write a file.",
        r#"{"type":"object","properties":{"file_path":{"type":"string"},"content":{"type":"string"}},"required":["file_path","content"]}"#,
    ),
    (
        "edit",
        "Replace text in a file.",
        r#"{"type":"object","properties":{"file_path":{"type":"string"},"old_string":{"type":"string"},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}},"required":["file_path","old_string","new_string"]}"#,
    ),
    (
        "glob",
        "Find files by pattern.",
        r#"{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"]}"#,
    ),
    (
        "grep",
        "Search file contents by regex.",
        r#"{"type":"object","properties":{"pattern":{"type":"string"},"path":{"type":"string"}},"required":["pattern"]}"#,
    ),
];

/// Classifies a tool name against the agent's `tools`.
pub fn classify(agent: &Value, name: &str) -> ToolClass {
    for tool in agent["tools"].as_array().into_iter().flatten() {
        match tool["type"].as_str() {
            Some("custom") if tool["name"] == name => return ToolClass::Custom,
            Some(crate::dream_memory::TOOL_TYPE) if tool["name"] == name => return ToolClass::Memory,
            Some(crate::threads::TOOL_TYPE) if let Some(armed) = crate::threads::class(tool, name) => {
                return match armed {
                    Armed::Thread(tool) => ToolClass::Thread(tool),
                    Armed::Advisor => ToolClass::Advisor,
                };
            }
            Some("a2a_agent") if tool["name"] == name => {
                let policy = tool["permission_policy"]["type"].as_str().unwrap_or("always_allow");
                return ToolClass::A2a { policy: policy.to_owned() };
            }
            Some("agent_toolset_20260401") if is_builtin(name) || WebTool::of(name).is_some() => {
                let config = tool["configs"].as_array().into_iter().flatten().find(|c| c["name"] == name);
                let enabled = config
                    .and_then(|c| c["enabled"].as_bool())
                    .or(tool["default_config"]["enabled"].as_bool())
                    .unwrap_or(true);
                if !enabled {
                    return ToolClass::Unknown;
                }
                let policy = config
                    .and_then(|c| c["permission_policy"]["type"].as_str())
                    .or(tool["default_config"]["permission_policy"]["type"].as_str())
                    .unwrap_or("always_allow")
                    .to_owned();
                return match WebTool::of(name) {
                    Some(tool) => ToolClass::Web { tool, policy },
                    None => ToolClass::Builtin { policy },
                };
            }
            _ => {}
        }
    }
    ToolClass::Unknown
}

/// The tools offered to the model.
pub fn tool_specs(agent: &Value) -> Vec<ToolSpec> {
    let mut specs = Vec::new();
    for tool in agent["tools"].as_array().into_iter().flatten() {
        match tool["type"].as_str() {
            Some("custom") => specs.push(ToolSpec {
                name: tool["name"].as_str().unwrap_or_default().to_owned(),
                description: tool["description"].as_str().unwrap_or_default().to_owned(),
                input_schema: tool["input_schema"].clone(),
            }),
            Some("agent_toolset_20260401") => {
                for (name, description, schema) in BUILTIN_TOOLS {
                    if classify(agent, name) != ToolClass::Unknown {
                        specs.push(ToolSpec {
                            name: (*name).to_owned(),
                            description: (*description).to_owned(),
                            input_schema: serde_json::from_str(schema).unwrap_or_default(),
                        });
                    }
                }
                for tool in WebTool::ALL {
                    if classify(agent, tool.name()) != ToolClass::Unknown {
                        let (description, input_schema) = crate::web::spec(tool);
                        specs.push(ToolSpec { name: tool.name().to_owned(), description: description.to_owned(), input_schema });
                    }
                }
            }
            Some("a2a_agent") => specs.push(ToolSpec {
                name: tool["name"].as_str().unwrap_or_default().to_owned(),
                description: tool["description"]
                    .as_str()
                    .map_or_else(|| format!("Send a message to the agent at {}.", tool["url"].as_str().unwrap_or_default()), str::to_owned),
                input_schema: json!({
                    "type": "object",
                    "properties": { "message": { "type": "string", "description": "The message to send to the agent." } },
                    "required": ["message"],
                }),
            }),
            Some(crate::dream_memory::TOOL_TYPE) => {
                let (description, input_schema) = crate::dream_memory::spec();
                specs.push(ToolSpec {
                    name: tool["name"].as_str().unwrap_or("memory").to_owned(),
                    description,
                    input_schema,
                });
            }
            Some(crate::threads::TOOL_TYPE) => specs.extend(crate::threads::specs(tool)),
            // MCP tools are listed from their servers at run time (`mcp.rs`).
            _ => {}
        }
    }
    specs
}

/// Whether `name` is a sandbox tool of the built-in toolset (run by the hands).
pub fn is_builtin(name: &str) -> bool {
    BUILTIN_TOOLS.iter().any(|(n, _, _)| *n == name)
}
