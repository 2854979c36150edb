//! `read`, `write` and `edit`: file access confined to the workdir.

use std::io::{BufReader, Read, Write};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::path::Confinement;
use super::{MAX_LINE_CHARS, ToolOutput, clip_line, parse_input, read_line_capped};

/// Cap on the text `read` returns in one call.
pub(crate) const MAX_READ_TEXT_BYTES: usize = 256 * 1024;
/// Largest image `read` returns.
pub(crate) const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;
/// Largest PDF `read` returns.
pub(crate) const MAX_PDF_BYTES: u64 = 20 * 1024 * 1024;
/// How much of a file's start is inspected for NUL bytes to call it binary.
pub(crate) const BINARY_SNIFF_BYTES: u64 = 8 * 1024;

#[derive(Deserialize)]
struct ReadInput {
    file_path: String,
    view_range: Option<Vec<i64>>,
}

#[derive(Deserialize)]
struct WriteInput {
    file_path: String,
    content: String,
}

#[derive(Deserialize)]
struct EditInput {
    file_path: String,
    old_string: String,
    new_string: String,
    replace_all: Option<bool>,
}

/// `read`: numbered text lines, or an image/document block for images and PDFs.
pub(crate) fn read(conf: &Confinement, input: &Value) -> ToolOutput {
    let input: ReadInput = match parse_input("read", input) {
        Ok(input) => input,
        Err(output) => return output,
    };
    let (start, end) = match input.view_range.as_deref() {
        None => (1, None),
        Some(&[start, end]) if start >= 1 && (end <= 0 || end >= start) => {
            (start as u64, (end > 0).then_some(end as u64))
        }
        Some(&[start, end]) => {
            return ToolOutput::error(format!(
                "invalid view_range [{start}, {end}]: start must be >= 1 and end must be >= start (or <= 0 for end of file)"
            ));
        }
        Some(other) => {
            return ToolOutput::error(format!(
                "invalid view_range: expected [start, end], got {} numbers",
                other.len()
            ));
        }
    };
    let path = match conf.resolve(&input.file_path) {
        Ok(path) => path,
        Err(message) => return ToolOutput::error(message),
    };
    let (file, meta) = match conf.open_read(&path) {
        Ok(opened) => opened,
        Err(message) => return ToolOutput::error(message),
    };
    if meta.is_dir() {
        return ToolOutput::error(format!("is a directory: {}; use glob to list files", path.given));
    }
    if !meta.is_file() {
        return ToolOutput::error(format!("not a regular file: {}", path.given));
    }
    let extension = path.rel.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).unwrap_or_default();
    let media = match extension.as_str() {
        "png" => Some(("image", "image/png", MAX_IMAGE_BYTES)),
        "jpg" | "jpeg" => Some(("image", "image/jpeg", MAX_IMAGE_BYTES)),
        "gif" => Some(("image", "image/gif", MAX_IMAGE_BYTES)),
        "webp" => Some(("image", "image/webp", MAX_IMAGE_BYTES)),
        "pdf" => Some(("document", "application/pdf", MAX_PDF_BYTES)),
        _ => None,
    };
    match media {
        Some((kind, media_type, limit)) => read_binary(file, &path.given, kind, media_type, limit),
        None => read_text(file, &path.given, start, end),
    }
}

fn read_binary(file: std::fs::File, given: &str, kind: &str, media_type: &str, limit: u64) -> ToolOutput {
    let mut data = Vec::new();
    if let Err(e) = file.take(limit + 1).read_to_end(&mut data) {
        return ToolOutput::error(format!("cannot read {given}: {e}"));
    }
    if data.len() as u64 > limit {
        return ToolOutput::error(format!("{given} is larger than the {limit}-byte limit for {media_type} files"));
    }
    let encoded = base64::engine::general_purpose::STANDARD.encode(&data);
    ToolOutput {
        content: vec![json!({
            "type": kind,
            "source": {"type": "base64", "media_type": media_type, "data": encoded},
        })],
        is_error: false,
    }
}

fn read_text(file: std::fs::File, given: &str, start: u64, end: Option<u64>) -> ToolOutput {
    let mut head = Vec::new();
    let mut file = file;
    if let Err(e) = (&mut file).take(BINARY_SNIFF_BYTES).read_to_end(&mut head) {
        return ToolOutput::error(format!("cannot read {given}: {e}"));
    }
    if head.contains(&0) {
        return ToolOutput::error(format!("{given} looks like a binary file; use bash to inspect it"));
    }
    let mut reader = BufReader::new(std::io::Cursor::new(head).chain(file));
    let mut out = String::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    let mut truncated = false;
    loop {
        match read_line_capped(&mut reader, &mut line, MAX_LINE_CHARS * 4) {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => return ToolOutput::error(format!("cannot read {given}: {e}")),
        }
        number += 1;
        if number < start {
            continue;
        }
        if end.is_some_and(|end| number > end) {
            break;
        }
        let text = String::from_utf8_lossy(&line);
        let entry = format!("{number:>6}\t{}\n", clip_line(&text));
        if out.len() + entry.len() > MAX_READ_TEXT_BYTES {
            truncated = true;
            break;
        }
        out.push_str(&entry);
    }
    if number == 0 {
        return ToolOutput::text("(empty file)");
    }
    if number < start {
        return ToolOutput::error(format!(
            "view_range start {start} is past the end of {given}, which has {number} line(s)"
        ));
    }
    if truncated {
        out.push_str(&format!("[output truncated at {MAX_READ_TEXT_BYTES} bytes; use view_range to read the rest]\n"));
    }
    ToolOutput::text(out)
}

/// `write`: creates or replaces a file, creating parent directories.
pub(crate) fn write(conf: &Confinement, max_bytes: u64, input: &Value) -> ToolOutput {
    let input: WriteInput = match parse_input("write", input) {
        Ok(input) => input,
        Err(output) => return output,
    };
    if let Some(message) = over_limit(&input.file_path, input.content.len(), max_bytes) {
        return ToolOutput::error(message);
    }
    let path = match conf.resolve(&input.file_path) {
        Ok(path) => path,
        Err(message) => return ToolOutput::error(message),
    };
    let mut file = match conf.open_write(&path, true) {
        Ok(file) => file,
        Err(message) => return ToolOutput::error(message),
    };
    if let Err(e) = file.write_all(input.content.as_bytes()) {
        return ToolOutput::error(format!("cannot write {}: {e}", path.given));
    }
    ToolOutput::text(format!("wrote {} bytes to {}", input.content.len(), input.file_path))
}

/// `edit`: exact string replacement in an existing UTF-8 file.
pub(crate) fn edit(conf: &Confinement, max_bytes: u64, input: &Value) -> ToolOutput {
    let input: EditInput = match parse_input("edit", input) {
        Ok(input) => input,
        Err(output) => return output,
    };
    if input.old_string.is_empty() {
        return ToolOutput::error("old_string must not be empty");
    }
    if input.old_string == input.new_string {
        return ToolOutput::error("old_string and new_string are identical; nothing to edit");
    }
    let path = match conf.resolve(&input.file_path) {
        Ok(path) => path,
        Err(message) => return ToolOutput::error(message),
    };
    let (file, meta) = match conf.open_read(&path) {
        Ok(opened) => opened,
        Err(message) => return ToolOutput::error(message),
    };
    if !meta.is_file() {
        return ToolOutput::error(format!("not a regular file: {}", path.given));
    }
    let mut bytes = Vec::new();
    let read_cap = if max_bytes == 0 { u64::MAX } else { max_bytes + 1 };
    if let Err(e) = file.take(read_cap).read_to_end(&mut bytes) {
        return ToolOutput::error(format!("cannot read {}: {e}", path.given));
    }
    if max_bytes > 0 && bytes.len() as u64 > max_bytes {
        return ToolOutput::error(format!(
            "{} is larger than the sandbox file size limit of {max_bytes} bytes; edit it with bash",
            path.given
        ));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutput::error(format!("{} is not valid UTF-8 text; edit it with bash", path.given));
    };
    let count = text.matches(input.old_string.as_str()).count();
    let replace_all = input.replace_all.unwrap_or(false);
    let edited = match count {
        0 => return ToolOutput::error(format!("old_string not found in {}", path.given)),
        1 => text.replacen(&input.old_string, &input.new_string, 1),
        n if !replace_all => {
            return ToolOutput::error(format!(
                "old_string occurs {n} times in {}; add more context to make it unique, or set replace_all to true",
                path.given
            ));
        }
        _ => text.replace(&input.old_string, &input.new_string),
    };
    if let Some(message) = over_limit(&path.given, edited.len(), max_bytes) {
        return ToolOutput::error(message);
    }
    let mut file = match conf.open_write(&path, false) {
        Ok(file) => file,
        Err(message) => return ToolOutput::error(message),
    };
    if let Err(e) = file.write_all(edited.as_bytes()) {
        return ToolOutput::error(format!("cannot write {}: {e}", path.given));
    }
    ToolOutput::text(format!("edited {}: {count} replacement(s)", input.file_path))
}

fn over_limit(given: &str, len: usize, max_bytes: u64) -> Option<String> {
    (max_bytes > 0 && len as u64 > max_bytes)
        .then(|| format!("{given} would be {len} bytes, over the sandbox file size limit of {max_bytes} bytes"))
}
