//! The dream agent's `memory` tool (docs/api/dreams.md, ADR 0016), run by the worker
//! like a remote tool. Two trees:
//!
//! - `/memories/…`: the dream's output memory store, read-write, through the store's
//!   `AgentMemoryStore` as the dream's session (every change is a memory version
//!   attributed to it). A change is written with the digest just read as its
//!   precondition, so a concurrent writer's change is never overwritten.
//! - `/transcripts/<session_id>.md`: the input sessions' committed transcripts, rendered
//!   read-only (messages, tool uses and results), bounded in size.
//!
//! Crash rule (ADR 0009): a call an earlier, dead attempt may have made is made again,
//! because every command is safe to repeat: a `create` of the same content is a no-op
//! (of other content, it reports the file exists), a `str_replace` whose text is gone,
//! a `delete` or `rename` of a file gone report it, and reads change nothing.

use std::sync::Arc;

use agentd_schema::store::{
    MemoryActor, MemoryContent, MemoryDeletion, MemoryListItem, MemoryQuery, MemoryRow, MemoryUpdate, MemoryWrite,
    NewMemory,
};
use agentd_schema::{Session, Store};
use serde_json::{Value, json};

/// The tool type the worker gives the dream agent's `memory` tool ([`arm`]). It never
/// appears on the wire or in a stored agent: the agents API does not accept it.
pub const TOOL_TYPE: &str = "dream_memory";

/// In a dream's session (its body carries `_dream`, which only the dream service
/// writes), the agent's `custom` tool `memory` is the worker-run memory tool: it is
/// given [`TOOL_TYPE`] for this attempt. A `memory` custom tool of any other session
/// stays a custom tool its client answers.
pub fn arm(session: &Session, agent: &mut Value) {
    if session.body.get("_dream").is_none_or(Value::is_null) {
        return;
    }
    for tool in agent["tools"].as_array_mut().into_iter().flatten() {
        if tool["type"] == "custom" && tool["name"] == "memory" {
            tool["type"] = json!(TOOL_TYPE);
        }
    }
}

/// The most characters of one transcript shown.
const MAX_TRANSCRIPT_CHARS: usize = 60_000;
/// The most characters of one event shown in a transcript.
const MAX_EVENT_CHARS: usize = 4_000;
/// The most memories a listing reads (a store's cap).
const MAX_LISTED: i64 = 2_000;

/// The tool's description and input schema, offered to the model.
pub fn spec() -> (String, Value) {
    let description = "Read and write the dream's memory. `/memories/` is the memory store you write (read-write); \
                       `/transcripts/` holds one read-only transcript per input session. Commands: `view` (path: a \
                       directory lists its files, a file shows its numbered lines), `create` (path, file_text), \
                       `str_replace` (path, old_str, new_str; old_str must occur exactly once), `delete` (path), \
                       `rename` (old_path, new_path).";
    let schema = json!({
        "type": "object",
        "properties": {
            "command": { "type": "string", "enum": ["view", "create", "str_replace", "delete", "rename"] },
            "path": { "type": "string" },
            "file_text": { "type": "string" },
            "old_str": { "type": "string" },
            "new_str": { "type": "string" },
            "old_path": { "type": "string" },
            "new_path": { "type": "string" },
        },
        "required": ["command"],
    });
    (description.to_owned(), schema)
}

/// What the tool works on: the dream's session and stores (its session's `_dream`).
#[derive(Clone)]
pub struct DreamMemory {
    store: Arc<dyn Store>,
    workspace_id: String,
    session_id: String,
    output_store_id: String,
    session_ids: Vec<String>,
}

/// A tool call's answer: text for the model, and whether it is an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// What the model reads.
    pub text: String,
    /// The call failed (the model should correct it).
    pub is_error: bool,
}

fn ok(text: impl Into<String>) -> Answer {
    Answer { text: text.into(), is_error: false }
}

fn err(text: impl Into<String>) -> Answer {
    Answer { text: text.into(), is_error: true }
}

/// Where a tool path points.
enum Target {
    /// `/`: both trees.
    Root,
    /// `/memories` or a directory or file under it, as a memory path (`/a/b.md`; `/`
    /// for the root of the store).
    Memory(String),
    /// `/transcripts` (`None`) or one session's transcript.
    Transcript(Option<String>),
}

impl DreamMemory {
    /// The tool of a dream's session; `None` for a session that runs no dream.
    pub fn of(store: Arc<dyn Store>, session: &Session) -> Option<Self> {
        let dream = session.body.get("_dream")?;
        Some(Self {
            store,
            workspace_id: session.workspace_id.clone(),
            session_id: session.id.clone(),
            output_store_id: dream["output_store_id"].as_str()?.to_owned(),
            session_ids: dream["session_ids"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect(),
        })
    }

    /// Runs one call. Store failures are reported to the model as errors (the call may
    /// be made again).
    pub async fn run(&self, input: &Value) -> Answer {
        let text = |key: &str| input[key].as_str();
        let result = match text("command") {
            Some("view") => self.view(text("path").unwrap_or("/")).await,
            Some("create") => match (text("path"), text("file_text")) {
                (Some(path), Some(content)) => self.create(path, content).await,
                _ => Ok(err("create needs `path` and `file_text`")),
            },
            Some("str_replace") => match (text("path"), text("old_str"), text("new_str")) {
                (Some(path), Some(old), Some(new)) => self.str_replace(path, old, new).await,
                _ => Ok(err("str_replace needs `path`, `old_str` and `new_str`")),
            },
            Some("delete") => match text("path") {
                Some(path) => self.delete(path).await,
                None => Ok(err("delete needs `path`")),
            },
            Some("rename") => match (text("old_path"), text("new_path")) {
                (Some(old), Some(new)) => self.rename(old, new).await,
                _ => Ok(err("rename needs `old_path` and `new_path`")),
            },
            Some(other) => {
                Ok(err(format!("unknown command {other:?}; use view, create, str_replace, delete or rename")))
            }
            None => Ok(err("the input needs a `command`: view, create, str_replace, delete or rename")),
        };
        result.unwrap_or_else(|error| err(format!("the memory store could not be used ({error}); try again")))
    }

    fn target(path: &str) -> Result<Target, Answer> {
        let trimmed = path.trim();
        let trimmed = if trimmed.len() > 1 { trimmed.trim_end_matches('/') } else { trimmed };
        if trimmed.is_empty() || trimmed == "/" {
            return Ok(Target::Root);
        }
        if trimmed == "/memories" {
            return Ok(Target::Memory("/".to_owned()));
        }
        if let Some(rest) = trimmed.strip_prefix("/memories/") {
            let memory_path = format!("/{rest}");
            agentd_schema::memory::check_path(&memory_path).map_err(|why| err(format!("{path}: {why}")))?;
            return Ok(Target::Memory(memory_path));
        }
        if trimmed == "/transcripts" {
            return Ok(Target::Transcript(None));
        }
        if let Some(name) = trimmed.strip_prefix("/transcripts/") {
            return Ok(Target::Transcript(Some(name.trim_end_matches(".md").to_owned())));
        }
        Err(err(format!("{path}: paths start with /memories/ or /transcripts/")))
    }

    /// The memory path of a path the tool may write.
    fn writable(path: &str) -> Result<String, Answer> {
        match Self::target(path)? {
            Target::Memory(p) if p != "/" => Ok(p),
            Target::Memory(_) | Target::Root => Err(err(format!("{path}: name a file under /memories/"))),
            Target::Transcript(_) => Err(err(format!("{path}: transcripts are read-only; write under /memories/"))),
        }
    }

    async fn view(&self, path: &str) -> anyhow::Result<Answer> {
        let target = match Self::target(path) {
            Ok(target) => target,
            Err(answer) => return Ok(answer),
        };
        match target {
            Target::Root => {
                let count = self.listing("/").await?.len();
                Ok(ok(format!(
                    "/memories/ — the memory store you write ({count} files)\n/transcripts/ — {} session \
                     transcripts (read-only)",
                    self.session_ids.len()
                )))
            }
            Target::Transcript(None) => {
                let lines: Vec<String> = self.session_ids.iter().map(|id| format!("/transcripts/{id}.md")).collect();
                Ok(ok(format!("/transcripts/ ({} files):\n{}", lines.len(), lines.join("\n"))))
            }
            Target::Transcript(Some(id)) => self.transcript(&id).await,
            Target::Memory(memory_path) => {
                if memory_path != "/"
                    && let Some(memory) = self.find(&memory_path).await?
                {
                    return Ok(ok(numbered(&memory_path, memory.content.as_deref().unwrap_or_default())));
                }
                let prefix = if memory_path == "/" { "/".to_owned() } else { format!("{memory_path}/") };
                let listed = self.listing(&prefix).await?;
                if listed.is_empty() && memory_path != "/" {
                    return Ok(err(format!("{path}: no such file or directory")));
                }
                let lines: Vec<String> =
                    listed.iter().map(|m| format!("/memories{} ({} bytes)", m.path, m.content_size_bytes)).collect();
                let shown = if memory_path == "/" { "/memories/".to_owned() } else { format!("/memories{prefix}") };
                Ok(ok(format!("{shown} ({} files):\n{}", lines.len(), lines.join("\n"))))
            }
        }
    }

    /// The memories under a directory prefix (`/` for all), without content.
    async fn listing(&self, prefix: &str) -> anyhow::Result<Vec<MemoryRow>> {
        let query = MemoryQuery {
            path_prefix: (prefix != "/").then(|| prefix.to_owned()),
            limit: MAX_LISTED,
            ..MemoryQuery::default()
        };
        let items = self.store.list_memories(&self.workspace_id, &self.output_store_id, &query).await?;
        Ok(items
            .into_iter()
            .filter_map(|item| match item {
                MemoryListItem::Memory(memory) => Some(memory),
                MemoryListItem::Prefix(_) => None,
            })
            .collect())
    }

    /// The memory at `path`, with its content.
    async fn find(&self, path: &str) -> anyhow::Result<Option<MemoryRow>> {
        let parent = match path.rfind('/') {
            Some(0) | None => "/".to_owned(),
            Some(i) => path[..=i].to_owned(),
        };
        let query = MemoryQuery {
            path_prefix: (parent != "/").then_some(parent),
            depth: 1,
            limit: MAX_LISTED,
            ..MemoryQuery::default()
        };
        let items = self.store.list_memories(&self.workspace_id, &self.output_store_id, &query).await?;
        let found = items.into_iter().find_map(|item| match item {
            MemoryListItem::Memory(memory) if memory.path == path => Some(memory.id),
            _ => None,
        });
        let Some(id) = found else { return Ok(None) };
        Ok(self.store.get_memory(&self.workspace_id, &self.output_store_id, &id, true).await?)
    }

    fn actor(&self) -> MemoryActor {
        MemoryActor::Session(self.session_id.clone())
    }

    async fn create(&self, path: &str, text: &str) -> anyhow::Result<Answer> {
        let memory_path = match Self::writable(path) {
            Ok(p) => p,
            Err(answer) => return Ok(answer),
        };
        let content = match content(text) {
            Ok(content) => content,
            Err(answer) => return Ok(answer),
        };
        let sha = content.sha256.clone();
        let new = NewMemory {
            workspace_id: self.workspace_id.clone(),
            memory_store_id: self.output_store_id.clone(),
            id: agentd_schema::ids::new_id("mem"),
            version_id: agentd_schema::ids::new_id("memver"),
            path: memory_path.clone(),
            content,
            actor: self.actor(),
        };
        Ok(match self.store.create_memory(new).await? {
            MemoryWrite::Written(_) => ok(format!("created {path}")),
            MemoryWrite::PathTaken => match self.find(&memory_path).await? {
                // A repeat of a create that was made (an interrupted call): nothing to do.
                Some(memory) if memory.content_sha256 == sha => ok(format!("{path} already has this content")),
                _ => err(format!("{path} already exists; use str_replace to change it, or delete it first")),
            },
            other => refused(path, other),
        })
    }

    async fn str_replace(&self, path: &str, old: &str, new: &str) -> anyhow::Result<Answer> {
        let memory_path = match Self::writable(path) {
            Ok(p) => p,
            Err(answer) => return Ok(answer),
        };
        if old.is_empty() {
            return Ok(err("old_str must not be empty"));
        }
        let Some(memory) = self.find(&memory_path).await? else {
            return Ok(err(format!("{path}: no such file")));
        };
        let current = memory.content.clone().unwrap_or_default();
        let count = current.matches(old).count();
        if count != 1 {
            return Ok(err(format!(
                "old_str occurs {count} times in {path}; it must occur exactly once (view the file and quote more \
                 context)"
            )));
        }
        let content = match content(&current.replacen(old, new, 1)) {
            Ok(content) => content,
            Err(answer) => return Ok(answer),
        };
        let update = MemoryUpdate {
            workspace_id: self.workspace_id.clone(),
            memory_store_id: self.output_store_id.clone(),
            memory_id: memory.id,
            version_id: agentd_schema::ids::new_id("memver"),
            path: None,
            content: Some(content),
            expected_sha256: Some(memory.content_sha256),
            actor: self.actor(),
        };
        Ok(match self.store.update_memory(update).await? {
            MemoryWrite::Written(_) => ok(format!("edited {path}")),
            other => refused(path, other),
        })
    }

    async fn delete(&self, path: &str) -> anyhow::Result<Answer> {
        let memory_path = match Self::writable(path) {
            Ok(p) => p,
            Err(answer) => return Ok(answer),
        };
        let Some(memory) = self.find(&memory_path).await? else {
            return Ok(err(format!("{path}: no such file (already deleted?)")));
        };
        let deletion = MemoryDeletion {
            workspace_id: self.workspace_id.clone(),
            memory_store_id: self.output_store_id.clone(),
            memory_id: memory.id,
            version_id: agentd_schema::ids::new_id("memver"),
            expected_sha256: Some(memory.content_sha256),
            actor: self.actor(),
        };
        Ok(match self.store.delete_memory(deletion).await? {
            MemoryWrite::Written(_) => ok(format!("deleted {path}")),
            other => refused(path, other),
        })
    }

    async fn rename(&self, old_path: &str, new_path: &str) -> anyhow::Result<Answer> {
        let (from, to) = match (Self::writable(old_path), Self::writable(new_path)) {
            (Ok(from), Ok(to)) => (from, to),
            (Err(answer), _) | (_, Err(answer)) => return Ok(answer),
        };
        let Some(memory) = self.find(&from).await? else {
            return Ok(err(format!("{old_path}: no such file")));
        };
        let update = MemoryUpdate {
            workspace_id: self.workspace_id.clone(),
            memory_store_id: self.output_store_id.clone(),
            memory_id: memory.id,
            version_id: agentd_schema::ids::new_id("memver"),
            path: Some(to),
            content: None,
            expected_sha256: Some(memory.content_sha256),
            actor: self.actor(),
        };
        Ok(match self.store.update_memory(update).await? {
            MemoryWrite::Written(_) => ok(format!("renamed {old_path} to {new_path}")),
            MemoryWrite::PathTaken => err(format!("{new_path} already exists")),
            other => refused(old_path, other),
        })
    }

    /// A session's committed transcript, rendered.
    async fn transcript(&self, id: &str) -> anyhow::Result<Answer> {
        if !self.session_ids.iter().any(|s| s == id) {
            return Ok(err(format!(
                "/transcripts/{id}.md: not a transcript of this dream; view /transcripts/ for the list"
            )));
        }
        let Some(session) = self.store.get_session(&self.workspace_id, id).await? else {
            return Ok(err(format!("/transcripts/{id}.md: the session was deleted")));
        };
        let mut out = format!("# Transcript of session {id}\n");
        if let Some(title) = session.body["title"].as_str().filter(|t| !t.is_empty()) {
            out.push_str(&format!("Title: {title}\n"));
        }
        let mut after = 0;
        let mut truncated = 0usize;
        loop {
            let events = self.store.list_events(id, after, 500).await?;
            let Some(last) = events.last() else { break };
            after = last.seq;
            for event in &events {
                if event.thread_id != id {
                    continue;
                }
                let Some(section) = render_event(&event.kind, &event.body) else { continue };
                if truncated > 0 || out.len() + section.len() > MAX_TRANSCRIPT_CHARS {
                    truncated += 1;
                    continue;
                }
                out.push_str(&section);
            }
        }
        if truncated > 0 {
            out.push_str(&format!(
                "\n[transcript truncated: {truncated} more events are not shown (the transcript is limited to \
                 {MAX_TRANSCRIPT_CHARS} characters)]\n"
            ));
        }
        Ok(ok(out))
    }
}

/// Why a write changed nothing, for the model.
fn refused(path: &str, outcome: MemoryWrite) -> Answer {
    err(match outcome {
        MemoryWrite::Written(_) => return ok(format!("wrote {path}")),
        MemoryWrite::StoreMissing => "the output memory store no longer exists".to_owned(),
        MemoryWrite::StoreArchived => "the output memory store is archived (read-only)".to_owned(),
        MemoryWrite::MemoryMissing => format!("{path}: no such file (deleted meanwhile)"),
        MemoryWrite::PathTaken => format!("{path}: the path is taken"),
        MemoryWrite::StoreFull => "the memory store is full (2,000 files); merge files first".to_owned(),
        MemoryWrite::PreconditionFailed { .. } => {
            format!("{path} was changed by someone else meanwhile; view it again and redo the change")
        }
    })
}

/// A memory's content with its digest, by the memory API's rule (at most 100 KiB).
fn content(text: &str) -> Result<MemoryContent, Answer> {
    agentd_schema::memory::content(text.to_owned()).map_err(|why| err(format!("a file holds {why}")))
}

/// A file's lines, numbered from 1.
fn numbered(path: &str, text: &str) -> String {
    let mut out = format!("/memories{path}:\n");
    for (i, line) in text.lines().enumerate() {
        out.push_str(&format!("{:>6}\t{line}\n", i + 1));
    }
    out
}

/// The text blocks of a content array.
fn blocks_text(content: &Value) -> String {
    match content {
        Value::String(text) => text.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().unwrap_or_default().to_owned(),
                Some(other) => format!("[{other}]"),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

fn clip(text: &str) -> String {
    if text.chars().count() <= MAX_EVENT_CHARS {
        return text.to_owned();
    }
    let head: String = text.chars().take(MAX_EVENT_CHARS).collect();
    format!("{head}… [cut]")
}

/// One event of a transcript, or `None` for events that carry no conversation.
fn render_event(kind: &str, body: &Value) -> Option<String> {
    let section = |heading: String, text: String| Some(format!("\n## {heading}\n{}\n", clip(&text)));
    match kind {
        "user.message" => section("user".into(), blocks_text(&body["content"])),
        "agent.message" => section("agent".into(), blocks_text(&body["content"])),
        "agent.tool_use" | "agent.mcp_tool_use" | "agent.custom_tool_use" => {
            section(format!("tool use: {}", body["name"].as_str().unwrap_or("?")), body["input"].to_string())
        }
        "agent.tool_result" | "agent.mcp_tool_result" | "user.tool_result" | "user.custom_tool_result" => {
            let error = if body["is_error"] == true { " (error)" } else { "" };
            section(format!("tool result{error}"), blocks_text(&body["content"]))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_map_to_trees_and_writes_stay_under_memories() {
        assert!(matches!(DreamMemory::target("/memories/a/b.md"), Ok(Target::Memory(p)) if p == "/a/b.md"));
        assert!(matches!(DreamMemory::target("/memories/"), Ok(Target::Memory(p)) if p == "/"));
        assert!(
            matches!(DreamMemory::target("/transcripts/sesn_x.md"), Ok(Target::Transcript(Some(id))) if id == "sesn_x")
        );
        assert!(DreamMemory::target("/etc/passwd").is_err());
        assert!(DreamMemory::target("/memories/a/../b").is_err());
        assert!(DreamMemory::writable("/transcripts/sesn_x.md").is_err());
        assert!(DreamMemory::writable("/memories").is_err());
    }

    #[test]
    fn transcripts_render_messages_and_tool_calls() {
        let user = render_event("user.message", &json!({ "content": [{ "type": "text", "text": "hi" }] })).unwrap();
        assert_eq!(user, "\n## user\nhi\n");
        let tool = render_event("agent.tool_use", &json!({ "name": "bash", "input": { "command": "ls" } })).unwrap();
        assert!(tool.contains("tool use: bash") && tool.contains("\"command\":\"ls\""), "{tool}");
        assert_eq!(render_event("span.model_request_start", &json!({})), None);
    }

    #[test]
    fn files_are_shown_with_line_numbers() {
        assert_eq!(numbered("/a.md", "x\ny"), "/memories/a.md:\n     1\tx\n     2\ty\n");
    }
}
