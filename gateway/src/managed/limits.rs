//! Every size the managed API bounds, in one place (the table in docs/api/limits.md
//! lists them with the fields they apply to). Character counts are Unicode scalar
//! values; byte counts are of the compact JSON the gateway stores.
//!
//! Where the wire reference documents a maximum (metadata, `system`, tool counts,
//! `display_name`, `role_arn`, …) the constant is that number; the others are agentd's
//! own and chosen so that the largest agent still fits a request body with room to
//! spare, and a list page stays a few MiB however large its items are.

/// A whole request body. Larger bodies are refused with 413 before they are read.
pub const MAX_BODY_BYTES: usize = 2 * 1024 * 1024;

/// Stop adding items to a list page once it has passed this many bytes of JSON; the
/// page then ends early with a cursor to the next item, so nothing is skipped.
pub const MAX_LIST_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// An agent's whole configuration as stored (and embedded in every session of it).
pub const MAX_AGENT_BYTES: usize = 1024 * 1024;
/// Agent and environment `name`.
pub const MAX_NAME_CHARS: usize = 256;
/// Agent and environment `description`.
pub const MAX_DESCRIPTION_CHARS: usize = 2048;
/// Agent `system` (wire: "Up to 100,000 characters").
pub const MAX_SYSTEM_CHARS: usize = 100_000;
/// Model ids and skill ids.
pub const MAX_ID_CHARS: usize = 256;
/// Tools across all toolsets of an agent (wire: "Maximum of 256 tools").
pub const MAX_TOOLS: usize = 256;
/// Agent `mcp_servers` (wire: "Maximum 20").
pub const MAX_MCP_SERVERS: usize = 20;
/// MCP server names (wire: "1-255 characters").
pub const MAX_MCP_SERVER_NAME_CHARS: usize = 255;
/// Tool names: custom, `a2a_agent` and MCP tool configs (wire: "1-128 characters").
pub const MAX_TOOL_NAME_CHARS: usize = 128;
/// A custom or `a2a_agent` tool's `description`.
pub const MAX_TOOL_DESCRIPTION_CHARS: usize = 10_000;
/// A custom tool's `input_schema`, stored as sent.
pub const MAX_INPUT_SCHEMA_BYTES: usize = 64 * 1024;
/// One entry of an `agent_toolset_20260401` `configs` list, stored as sent.
pub const MAX_TOOL_CONFIG_BYTES: usize = 16 * 1024;
/// An agent's `multiagent` object as sent.
pub const MAX_MULTIAGENT_BYTES: usize = 16 * 1024;
/// Agents of a `coordinator` roster (wire: "1–20 entries") and of a
/// `multiagent_20261001` member's `predefined_agents` (wire: "At most 20").
pub const MAX_ROSTER_AGENTS: usize = 20;
/// Agent `skills`.
pub const MAX_SKILLS: usize = 64;
/// Every URL field (MCP servers, A2A agents, repositories, token endpoints).
pub const MAX_URL_CHARS: usize = 2048;
/// `execution_identity.role_arn` (wire: "Maximum 2048 characters").
pub const MAX_ROLE_ARN_CHARS: usize = 2048;

/// Metadata pairs (wire: "Maximum 16 pairs").
pub const MAX_METADATA_PAIRS: usize = 16;
/// Metadata keys (wire: "keys up to 64 chars").
pub const MAX_METADATA_KEY_CHARS: usize = 64;
/// Metadata values (wire: "values up to 512 chars").
pub const MAX_METADATA_VALUE_CHARS: usize = 512;

/// Session `title`.
pub const MAX_TITLE_CHARS: usize = 1024;
/// Session `vault_ids` (wire: "Maximum 50").
pub const MAX_VAULT_IDS: usize = 50;
/// Session `initial_events` and events per `events.send` (wire: "Maximum 50 events").
pub const MAX_EVENTS_PER_REQUEST: usize = 50;
/// Resources attached to a session.
pub const MAX_SESSION_RESOURCES: usize = 100;
/// A resource's `mount_path`.
pub const MAX_MOUNT_PATH_CHARS: usize = 1024;
/// A `github_repository` resource's `checkout`, stored as sent.
pub const MAX_CHECKOUT_BYTES: usize = 1024;
/// A `memory_store` resource's `instructions` (wire: "Max 4096 chars").
pub const MAX_INSTRUCTIONS_CHARS: usize = 4096;
/// Access tokens stored sealed (repository tokens).
pub const MAX_TOKEN_CHARS: usize = 4096;

/// Content blocks in one event's `content`.
pub const MAX_CONTENT_BLOCKS: usize = 1000;
/// A text block's `text`.
pub const MAX_TEXT_CHARS: usize = 1_000_000;
/// A content source's `data`, `url` or `file_id` (the body limit binds first).
pub const MAX_SOURCE_CHARS: usize = MAX_BODY_BYTES;
/// `user.define_outcome` `description` and text rubric `content`.
pub const MAX_OUTCOME_CHARS: usize = 100_000;
/// `deny_message` of a tool confirmation.
pub const MAX_DENY_MESSAGE_CHARS: usize = 10_000;

/// Text blocks of one live-inbox message.
pub const MAX_INBOX_BLOCKS: usize = 100;
/// One live-inbox text block.
pub const MAX_INBOX_TEXT_CHARS: usize = 100_000;

/// Vault and credential `display_name` (wire: "1-255 characters").
pub const MAX_DISPLAY_NAME_CHARS: usize = 255;
/// A credential's secret values (tokens, client secrets, secret values).
pub const MAX_SECRET_BYTES: usize = 16_384;
/// Entries of a credential's `networking.allowed_hosts`.
pub const MAX_ALLOWED_HOSTS: usize = 16;

/// Package names per package manager of an environment.
pub const MAX_PACKAGES: usize = 1000;
/// One package specification (`name==version`).
pub const MAX_PACKAGE_CHARS: usize = 256;
/// Entries of an environment's `networking.allowed_hosts`.
pub const MAX_ENVIRONMENT_HOSTS: usize = 256;
/// One host of an environment's `networking.allowed_hosts`.
pub const MAX_HOST_CHARS: usize = 255;

/// Compact JSON size of `value`, for the byte limits above.
pub fn json_bytes(value: &serde_json::Value) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Writing a `Value` to an infallible writer cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}
