//! The built-in tool set `agent_toolset_20260401`: `bash`, `read`, `write`, `edit`, `glob` and
//! `grep`, run against one session's sandbox workdir.
//!
//! The file tools (`read`, `write`, `edit`, `glob`, `grep`) run in the runner process itself, so
//! every path they touch is confined to the workdir by `path::Confinement`: lexical `..`
//! checks, symlink checks, and `openat2(RESOLVE_BENEATH)` for the actual open so a sandboxed
//! process racing a symlink swap cannot redirect the runner outside. `bash` runs in the
//! sandbox shell (see [`crate::sandbox`]) and is confined by the isolation level instead.

pub(crate) mod bash;
pub(crate) mod files;
pub(crate) mod path;
pub(crate) mod search;

use serde::de::DeserializeOwned;
use serde_json::{Value, json};

/// Name of the tool set these tools implement.
pub const TOOLSET: &str = "agent_toolset_20260401";

/// Names of the tools in [`TOOLSET`].
pub const TOOL_NAMES: [&str; 6] = ["bash", "read", "write", "edit", "glob", "grep"];

/// Longest line, in characters, that `read` and `grep` show before cutting it.
pub(crate) const MAX_LINE_CHARS: usize = 2000;

/// The result of one tool call, shaped like a `tool_result` content list.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    /// Never empty: text blocks `{"type":"text","text":..}`, or image/document blocks.
    pub content: Vec<Value>,
    /// True when the call failed; the content then explains why.
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful result holding one text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![text_block(text)], is_error: false }
    }

    /// A failed result holding one text block with the reason.
    pub fn error(text: impl Into<String>) -> Self {
        Self { content: vec![text_block(text)], is_error: true }
    }

    /// The concatenated text of all text blocks, for logs and tests.
    pub fn text_content(&self) -> String {
        self.content.iter().filter_map(|b| b.get("text").and_then(Value::as_str)).collect::<Vec<_>>().join("\n")
    }
}

/// A `{"type":"text"}` content block.
pub fn text_block(text: impl Into<String>) -> Value {
    json!({"type": "text", "text": text.into()})
}

/// Decodes a tool's input object, turning a malformed input into an `is_error` result.
pub(crate) fn parse_input<T: DeserializeOwned>(tool: &str, input: &Value) -> Result<T, ToolOutput> {
    if !input.is_object() {
        return Err(ToolOutput::error(format!("invalid input for tool '{tool}': expected a JSON object")));
    }
    serde_json::from_value(input.clone())
        .map_err(|e| ToolOutput::error(format!("invalid input for tool '{tool}': {e}")))
}

/// Cuts `line` to [`MAX_LINE_CHARS`] characters, marking the cut.
pub(crate) fn clip_line(line: &str) -> std::borrow::Cow<'_, str> {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        Some((at, _)) => format!("{} [line truncated]", &line[..at]).into(),
        None => line.into(),
    }
}

/// Reads one line (without its `\n` or `\r\n`) into `buf`, keeping at most `max` bytes of it
/// and discarding the rest, so a huge file without newlines cannot exhaust memory.
/// Returns `Ok(false)` at end of input.
pub(crate) fn read_line_capped(
    reader: &mut impl std::io::BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<bool> {
    buf.clear();
    let mut any = false;
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            break;
        }
        any = true;
        let (take, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (chunk.len(), false),
        };
        let room = max.saturating_sub(buf.len());
        buf.extend_from_slice(&chunk[..take.min(room)]);
        reader.consume(if done { take + 1 } else { take });
        if done {
            break;
        }
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
    }
    Ok(any)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_line_capped_splits_and_caps() {
        let data = b"ab\r\ncdefgh\nlast";
        let mut r = std::io::BufReader::with_capacity(3, &data[..]);
        let mut buf = Vec::new();
        let mut lines = Vec::new();
        while read_line_capped(&mut r, &mut buf, 4).unwrap() {
            lines.push(String::from_utf8(buf.clone()).unwrap());
        }
        assert_eq!(lines, ["ab", "cdef", "last"]);
    }

    #[test]
    fn clip_line_marks_cut() {
        let long = "x".repeat(MAX_LINE_CHARS + 5);
        let clipped = clip_line(&long);
        assert!(clipped.starts_with(&"x".repeat(MAX_LINE_CHARS)));
        assert!(clipped.ends_with("[line truncated]"));
        assert_eq!(clip_line("short"), "short");
    }

    #[test]
    fn malformed_input_is_error() {
        #[derive(serde::Deserialize, Debug)]
        #[allow(dead_code)]
        struct In {
            file_path: String,
        }
        let err = parse_input::<In>("read", &json!({"path": 1})).unwrap_err();
        assert!(err.is_error);
        assert!(err.text_content().contains("missing field `file_path`"), "{err:?}");
        assert!(parse_input::<In>("read", &json!("x")).unwrap_err().is_error);
    }
}
