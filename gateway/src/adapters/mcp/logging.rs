//! MCP logging: the `logging` capability. A session picks the least severe level it
//! wants with `logging/setLevel` (kept with the session, in Redis when sessions are
//! shared, so every gateway honours it); a 2026-07-28 request names it in its `_meta`
//! (`io.modelcontextprotocol/logLevel`), which wins. While a `tools/call` runs, the turn's
//! progress — status changes, model requests, messages, tool calls and results, errors —
//! arrives as `notifications/message` at or above that level (logger `agentd`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::sessions::RedisSessions;

/// The logger name of every message.
const LOGGER: &str = "agentd";
/// Levels kept in memory (no shared store) are dropped this long after they were set.
const MEMORY_TTL: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// Severity order, least severe first.
pub(super) fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}

/// A level by its wire name.
pub(super) fn parse(name: &str) -> Option<LoggingLevel> {
    serde_json::from_value(Value::String(name.to_owned())).ok()
}

fn name(level: LoggingLevel) -> String {
    serde_json::to_value(level).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
}

/// The levels sessions chose.
pub(super) struct LogLevels {
    store: Option<Arc<RedisSessions>>,
    memory: Mutex<HashMap<String, (LoggingLevel, Instant)>>,
}

impl LogLevels {
    /// Levels in `store` when sessions are shared, in memory otherwise.
    pub(super) fn new(store: Option<Arc<RedisSessions>>) -> Self {
        Self { store, memory: Mutex::default() }
    }

    /// `logging/setLevel`: the level of the request's session from now on.
    pub(super) async fn set(&self, context: &RequestContext<RoleServer>, level: LoggingLevel) -> Result<(), ErrorData> {
        let Some(session) = super::mcp_session(context) else {
            return Err(ErrorData::invalid_request(
                "logging/setLevel needs an MCP session (the 2025-11-25 initialize handshake); a 2026-07-28 \
                 request names its level in _meta as io.modelcontextprotocol/logLevel",
                None,
            ));
        };
        match &self.store {
            Some(store) => store.set_level(&session, &name(level)).await.map_err(|error| {
                tracing::warn!(%error, "MCP log level not stored");
                ErrorData::internal_error("the MCP session store is unavailable", None)
            }),
            None => {
                let mut memory = self.memory.lock().unwrap_or_else(PoisonError::into_inner);
                memory.retain(|_, (_, set)| set.elapsed() <= MEMORY_TTL);
                memory.insert(session, (level, Instant::now()));
                Ok(())
            }
        }
    }

    /// The level a call logs at: its own `_meta` level, else its session's; `None` logs nothing.
    pub(super) async fn of(&self, context: &RequestContext<RoleServer>) -> Option<LoggingLevel> {
        if let Some(level) = context.meta.log_level() {
            return Some(level);
        }
        let session = super::mcp_session(context)?;
        match &self.store {
            Some(store) => match store.level(&session).await {
                Ok(level) => level.as_deref().and_then(parse),
                Err(error) => {
                    // Logging is best effort: the call goes on without it.
                    tracing::warn!(%error, "MCP log level not read; the call logs nothing");
                    None
                }
            },
            None => self.memory.lock().unwrap_or_else(PoisonError::into_inner).get(&session).map(|(level, _)| *level),
        }
    }
}

/// Log notifications of one call, at or above its level.
pub(super) struct Log {
    pub(super) level: Option<LoggingLevel>,
}

impl Log {
    /// Sends `message` at `level` (with the session it is about) if the caller wants it.
    pub(super) async fn report(
        &self,
        context: &RequestContext<RoleServer>,
        level: LoggingLevel,
        message: &str,
        session_id: &str,
    ) {
        let Some(threshold) = self.level else { return };
        if rank(level) < rank(threshold) {
            return;
        }
        let data = serde_json::json!({ "message": message, "session_id": session_id });
        let notification = LoggingMessageNotificationParam::new(level, data).with_logger(LOGGER);
        if let Err(error) = context.peer.notify_logging_message(notification).await {
            tracing::debug!(%error, "an MCP log notification could not be sent");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_order_and_parse_by_their_wire_names() {
        let names = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
        let ranks: Vec<u8> = names.iter().map(|n| rank(parse(n).expect(n))).collect();
        assert_eq!(ranks, [0, 1, 2, 3, 4, 5, 6, 7]);
        assert_eq!(name(LoggingLevel::Warning), "warning");
        assert!(parse("verbose").is_none());
    }
}
