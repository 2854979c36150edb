//! JSON request bodies and field validation helpers. Every failure is a 400 whose
//! message names the field.

use axum::body::Bytes;
use serde_json::{Map, Value};

use super::limits::{self, MAX_METADATA_KEY_CHARS, MAX_METADATA_PAIRS, MAX_METADATA_VALUE_CHARS};
use crate::error::{ApiError, ApiResult};

/// Parses a JSON object body. An empty body (the SDK sends one on body-less POSTs)
/// is an empty object.
pub fn object(bytes: &Bytes) -> ApiResult<Map<String, Value>> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(Map::new());
    }
    match serde_json::from_slice::<Value>(bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(ApiError::invalid("body: expected a JSON object")),
        Err(error) => Err(ApiError::invalid(format!("body: invalid JSON: {error}"))),
    }
}

/// Rejects keys outside `allowed` (fail closed on typos).
pub fn only_known(map: &Map<String, Value>, allowed: &[&str], path: &str) -> ApiResult<()> {
    match map.keys().find(|key| !allowed.contains(&key.as_str())) {
        Some(key) => Err(ApiError::invalid(format!("{}: unknown field", join(path, key)))),
        None => Ok(()),
    }
}

/// One field at fault: where (a JSON pointer, RFC 6901; `""` for the whole body) and
/// what (the message, which names the field itself too).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct FieldError {
    /// The JSON pointer of the field, e.g. `/tools/0/name`.
    pub path: String,
    /// What is wrong with it.
    pub message: String,
}

impl FieldError {
    /// The field error of a message written by the helpers of this module, which start
    /// with the path of the field at fault (`tools[0].name: …`).
    pub fn from_message(message: impl Into<String>) -> Self {
        let message = message.into();
        Self { path: pointer(&message), message }
    }
}

/// `pointer` extended by one reference token, escaped (RFC 6901 §3: `~` is `~0`, `/` is
/// `~1`).
pub fn pointer_join(pointer: &str, token: &str) -> String {
    format!("{pointer}/{}", token.replace('~', "~0").replace('/', "~1"))
}

/// The JSON pointer of the field a message names by the convention of this module
/// (`tools[0].configs[1].name: …` → `/tools/0/configs/1/name`); `""` when the message
/// starts with no field path (or names the body itself).
pub fn pointer(message: &str) -> String {
    let Some((path, _)) = message.split_once(": ") else { return String::new() };
    if path == "body" {
        return String::new();
    }
    let mut out = String::new();
    for segment in path.split('.') {
        let (name, mut indices) = segment.split_at(segment.find('[').unwrap_or(segment.len()));
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-') {
            return String::new();
        }
        out.push('/');
        out.push_str(name);
        while !indices.is_empty() {
            let Some((index, rest)) = indices.strip_prefix('[').and_then(|rest| rest.split_once(']')) else {
                return String::new();
            };
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
                return String::new();
            }
            out.push('/');
            out.push_str(index);
            indices = rest;
        }
    }
    out
}

/// `path.key`, or `key` at the top level.
pub fn join(path: &str, key: &str) -> String {
    if path.is_empty() { key.to_owned() } else { format!("{path}.{key}") }
}

/// A required string of `min..=max` characters.
pub fn string(value: Option<&Value>, path: &str, min: usize, max: usize) -> ApiResult<String> {
    match value {
        Some(Value::String(text)) => {
            let len = text.chars().count();
            if len < min || len > max {
                return Err(ApiError::invalid(format!("{path}: must be {min} to {max} characters, got {len}")));
            }
            Ok(text.clone())
        }
        None | Some(Value::Null) => Err(ApiError::invalid(format!("{path}: required"))),
        Some(other) => Err(ApiError::invalid(format!("{path}: expected a string, got {}", kind(other)))),
    }
}

/// An optional string (`null` and absent are `None`; an empty string clears too).
pub fn optional_string(value: Option<&Value>, path: &str, max: usize) -> ApiResult<Option<String>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) if text.is_empty() => Ok(None),
        Some(_) => string(value, path, 1, max).map(Some),
    }
}

/// An optional boolean.
pub fn optional_bool(value: Option<&Value>, path: &str) -> ApiResult<Option<bool>> {
    match value {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(other) => Err(ApiError::invalid(format!("{path}: expected a boolean, got {}", kind(other)))),
    }
}

/// An optional array (`null` and absent are empty).
pub fn array<'a>(value: Option<&'a Value>, path: &str, max: usize) -> ApiResult<&'a [Value]> {
    match value {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) if items.len() <= max => Ok(items),
        Some(Value::Array(items)) => {
            Err(ApiError::invalid(format!("{path}: at most {max} items, got {}", items.len())))
        }
        Some(other) => Err(ApiError::invalid(format!("{path}: expected an array, got {}", kind(other)))),
    }
}

/// A JSON object.
pub fn as_object<'a>(value: &'a Value, path: &str) -> ApiResult<&'a Map<String, Value>> {
    value.as_object().ok_or_else(|| ApiError::invalid(format!("{path}: expected an object, got {}", kind(value))))
}

/// The `type` discriminator of a tagged object.
pub fn tag<'a>(map: &'a Map<String, Value>, path: &str) -> ApiResult<&'a str> {
    match map.get("type") {
        Some(Value::String(tag)) => Ok(tag),
        None | Some(Value::Null) => Err(ApiError::invalid(format!("{path}.type: required"))),
        Some(other) => Err(ApiError::invalid(format!("{path}.type: expected a string, got {}", kind(other)))),
    }
}

/// Metadata: at most 16 string pairs, keys ≤ 64 and values ≤ 512 characters.
pub fn metadata(map: &Map<String, Value>, path: &str) -> ApiResult<Map<String, Value>> {
    if map.len() > MAX_METADATA_PAIRS {
        return Err(ApiError::invalid_with_code(
            "invalid_metadata",
            format!("{path}: at most {MAX_METADATA_PAIRS} keys, got {}", map.len()),
        ));
    }
    for (key, value) in map {
        if key.is_empty() || key.chars().count() > MAX_METADATA_KEY_CHARS {
            // The key itself may be huge: name it by its length, not its text.
            let shown: String = key.chars().take(MAX_METADATA_KEY_CHARS).collect();
            return Err(ApiError::invalid_with_code(
                "invalid_metadata",
                format!("{path}: key {shown:?} must be 1 to {MAX_METADATA_KEY_CHARS} characters"),
            ));
        }
        match value {
            Value::String(text) if text.chars().count() <= MAX_METADATA_VALUE_CHARS => {}
            Value::String(_) => {
                return Err(ApiError::invalid_with_code(
                    "invalid_metadata",
                    format!("{path}.{key}: at most {MAX_METADATA_VALUE_CHARS} characters"),
                ));
            }
            other => return Err(ApiError::invalid(format!("{path}.{key}: expected a string, got {}", kind(other)))),
        }
    }
    Ok(map.clone())
}

/// A JSON value stored as sent: at most `max` bytes of compact JSON.
pub fn bounded_json<'a>(value: &'a Value, path: &str, max: usize) -> ApiResult<&'a Value> {
    let size = limits::json_bytes(value);
    if size > max {
        return Err(ApiError::invalid(format!("{path}: at most {max} bytes of JSON, got {size}")));
    }
    Ok(value)
}

/// An optional `metadata` field of a create body (absent or `null` is empty).
pub fn optional_metadata(value: Option<&Value>) -> ApiResult<Map<String, Value>> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(value) => metadata(as_object(value, "metadata")?, "metadata"),
    }
}

/// Applies a metadata patch: string values upsert, `null` deletes.
pub fn patch_metadata(stored: &Value, patch: &Value, path: &str) -> ApiResult<Value> {
    let mut merged = stored.as_object().cloned().unwrap_or_default();
    match patch {
        Value::Null => merged.clear(),
        Value::Object(changes) => {
            for (key, value) in changes {
                match value {
                    Value::Null => {
                        merged.remove(key);
                    }
                    other => {
                        merged.insert(key.clone(), other.clone());
                    }
                }
            }
        }
        other => return Err(ApiError::invalid(format!("{path}: expected an object, got {}", kind(other)))),
    }
    Ok(Value::Object(metadata(&merged, path)?))
}

/// A JSON type name for error messages.
pub fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_names_its_field_as_a_json_pointer() {
        assert_eq!(pointer("tools[0].configs[12].name: required"), "/tools/0/configs/12/name");
        assert_eq!(pointer("model.effort.type: expected a string"), "/model/effort/type");
        assert_eq!(pointer("name: required"), "/name");
        assert_eq!(pointer("body: invalid JSON: eof"), "");
        assert_eq!(pointer("agent agent_x is archived"), "");
        assert_eq!(pointer("the body is not JSON: x"), "");
        assert_eq!(pointer("tools[x]: no"), "");
        assert_eq!(pointer("tools[0: no"), "");
    }
}
