//! What a memory may be, the rules every writer of memories applies — the memory API
//! (`agentd_gateway::domain::memory`) and the dream agent's memory tool in the worker —
//! so the two cannot drift: the shape of a path, the size of a content, and its digest.

use sha2::{Digest, Sha256};
use unicode_normalization::is_nfc;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

use crate::store::MemoryContent;

/// A memory's `path`, in UTF-8 bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// Segments of a memory's `path`.
pub const MAX_PATH_SEGMENTS: usize = 20;
/// A memory's `content`, in UTF-8 bytes.
pub const MAX_CONTENT_BYTES: usize = 102_400;

/// A text shown in a message: at most 64 characters, escaped.
pub fn shown(value: &str) -> String {
    let head: String = value.chars().take(64).collect();
    if head.len() < value.len() { format!("{head:?}…") } else { format!("{head:?}") }
}

/// Why a character may not appear in a path: control (Cc), format (Cf), or the line and
/// paragraph separators U+2028 and U+2029.
fn forbidden_in_path(c: char) -> Option<&'static str> {
    match c.general_category() {
        GeneralCategory::Control => Some("a control character"),
        GeneralCategory::Format => Some("a format character"),
        GeneralCategory::LineSeparator => Some("the line separator"),
        GeneralCategory::ParagraphSeparator => Some("the paragraph separator"),
        _ => None,
    }
}

/// Checks a memory path; `Err` says why it is refused. A path starts with `/`; has 1 to
/// 20 segments, none empty, `.` or `..`; no control or format characters, U+2028 or
/// U+2029; at most 1,024 bytes; and is already in Unicode NFC. A path that is not NFC
/// is refused, not normalized: the path a writer sends is the path it gets back, and
/// two spellings of one name never become two memories. Paths are case-sensitive.
pub fn check_path(path: &str) -> Result<(), String> {
    if path.len() > MAX_PATH_BYTES {
        return Err(format!("at most {MAX_PATH_BYTES} bytes, got {}", path.len()));
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Err(format!("must start with `/`, got {}", shown(path)));
    };
    if let Some((c, what)) = path.chars().find_map(|c| forbidden_in_path(c).map(|what| (c, what))) {
        return Err(format!("must not contain {what} (U+{:04X})", u32::from(c)));
    }
    let segments: Vec<&str> = rest.split('/').collect();
    if segments.len() > MAX_PATH_SEGMENTS {
        return Err(format!("at most {MAX_PATH_SEGMENTS} segments, got {}", segments.len()));
    }
    if let Some(segment) = segments.iter().find(|s| s.is_empty() || **s == "." || **s == "..") {
        let why = if segment.is_empty() {
            "empty segments (`//`, a trailing `/`, or `/` alone) are refused".to_owned()
        } else {
            format!("`{segment}` segments are refused")
        };
        return Err(format!("{why}, got {}", shown(path)));
    }
    if !is_nfc(path) {
        return Err(format!(
            "must be in Unicode normalization form C (NFC); agentd does not normalize paths, so normalize it before \
             sending, got {}",
            shown(path)
        ));
    }
    Ok(())
}

/// Lowercase hex SHA-256 of `text`'s UTF-8 bytes.
pub fn digest(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// A memory's content with its digest and size; `Err` says why it is refused (more than
/// 102,400 bytes of UTF-8).
pub fn content(text: String) -> Result<MemoryContent, String> {
    if text.len() > MAX_CONTENT_BYTES {
        return Err(format!("at most {MAX_CONTENT_BYTES} bytes of UTF-8, got {}", text.len()));
    }
    let sha256 = digest(&text);
    let size_bytes = text.len() as i64;
    Ok(MemoryContent { text, sha256, size_bytes })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_rule_for_every_writer() {
        assert!(check_path("/notes/é.md").is_ok());
        for refused in ["notes.md", "/a//b", "/a/./b", "/cafe\u{301}.md", "/a\u{200b}b", "/a\u{2028}b", "/a\u{7}"] {
            assert!(check_path(refused).is_err(), "{refused:?}");
        }
        assert!(check_path(&format!("/{}", ["s"; 20].join("/"))).is_ok());
        assert!(check_path(&format!("/{}", ["s"; 21].join("/"))).is_err());
        let hello = content("héllo".to_owned()).unwrap();
        assert_eq!((hello.size_bytes, hello.sha256.len()), (6, 64));
        assert!(content("x".repeat(MAX_CONTENT_BYTES + 1)).is_err());
    }
}
