//! The bounds of A2A 1.0 request fields, as `a2a.proto` states them, in one place for
//! every binding: JSON-RPC (1.0, and the v0.3 methods `compat` translates) and HTTP+JSON
//! reach the operations through `dispatch::call` only, and the operations read their
//! bounded fields only through these functions. A field out of bounds is -32602 over
//! JSON-RPC and 400 `INVALID_ARGUMENT` over HTTP+JSON, naming the field in the message,
//! in the ErrorInfo's `metadata.field` and in a `google.rpc.BadRequest` violation
//! ([`A2aError::field`]). Query strings carry every value as text: numbers, booleans and
//! enum numbers are read from their text too (ProtoJSON accepts both spellings).
//!
//! | field | bound |
//! |---|---|
//! | `pageSize` (`ListTasks`) | an int32 from 1 to 100; absent: 50 |
//! | `pageSize` (`ListTaskPushNotificationConfigs`) | an int32 ≥ 0 (0: no limit) |
//! | `historyLength` (`GetTask`, `ListTasks`, `configuration.historyLength`) | an int32 ≥ 0; absent: every message |
//! | `status` | a `TaskState` by name or number; `TASK_STATE_UNSPECIFIED` (0) is no filter |
//! | `statusTimestampAfter` | a ProtoJSON `Timestamp`: RFC 3339, years 0001 to 9999 |
//! | `includeArtifacts` | a boolean |
//! | `pageToken` | a token this server issued for the same listing ([`PageTokens`]) |

use agentd_schema::secrets::SecretBox;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::Value;
use sha2::Sha256;

use super::{A2aError, A2aResult};

/// `ListTasks.pageSize` when absent.
pub const DEFAULT_PAGE_SIZE: usize = 50;
/// The largest `ListTasks.pageSize`.
pub const MAX_PAGE_SIZE: usize = 100;

/// Every `TaskState`, by its number.
const TASK_STATES: [&str; 9] = [
    "TASK_STATE_UNSPECIFIED",
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_AUTH_REQUIRED",
];

/// A value as an error message shows it: its JSON, at most 64 characters.
fn shown(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(64) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text,
    }
}

/// An int32 field (a JSON number, or its text); `None` when absent.
pub fn int32(value: &Value, field: &str) -> A2aResult<Option<i32>> {
    let number = match value {
        Value::Null => return Ok(None),
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(text) => text.trim().parse::<i64>().ok(),
        _ => None,
    };
    let number =
        number.ok_or_else(|| A2aError::field(field, format!("an integer is required, got {}", shown(value))))?;
    i32::try_from(number)
        .map(Some)
        .map_err(|_| A2aError::field(field, format!("must fit in 32 bits (int32), got {number}")))
}

/// A `historyLength`: an int32 ≥ 0, `None` (every message) when absent.
pub fn history_length(value: &Value, field: &str) -> A2aResult<Option<usize>> {
    match int32(value, field)? {
        Some(n) if n < 0 => Err(A2aError::field(field, format!("must not be negative, got {n}"))),
        other => Ok(other.map(|n| n as usize)),
    }
}

/// `ListTasks.pageSize`: 1 to 100, [`DEFAULT_PAGE_SIZE`] when absent.
pub fn page_size(value: &Value, field: &str) -> A2aResult<usize> {
    match int32(value, field)? {
        None => Ok(DEFAULT_PAGE_SIZE),
        Some(n) if (1..=MAX_PAGE_SIZE as i32).contains(&n) => Ok(n as usize),
        Some(n) => Err(A2aError::field(field, format!("must be between 1 and {MAX_PAGE_SIZE}, got {n}"))),
    }
}

/// A `TaskState` filter, by name or number; `None` when absent, empty or unspecified.
pub fn task_state(value: &Value, field: &str) -> A2aResult<Option<&'static str>> {
    let invalid = || {
        A2aError::field(field, format!("expected a TaskState (TASK_STATE_SUBMITTED … or 0 to 8), got {}", shown(value)))
    };
    let state = match value {
        Value::Null => return Ok(None),
        Value::String(text) if text.is_empty() => return Ok(None),
        Value::String(text) => match TASK_STATES.iter().find(|s| **s == text.as_str()) {
            Some(state) => *state,
            None => text.trim().parse::<usize>().ok().and_then(|n| TASK_STATES.get(n).copied()).ok_or_else(invalid)?,
        },
        Value::Number(n) => n.as_u64().and_then(|n| TASK_STATES.get(n as usize).copied()).ok_or_else(invalid)?,
        _ => return Err(invalid()),
    };
    Ok((state != TASK_STATES[0]).then_some(state))
}

/// A ProtoJSON `Timestamp` (RFC 3339, years 0001 to 9999) as epoch milliseconds; `None`
/// when absent or empty.
pub fn timestamp(value: &Value, field: &str) -> A2aResult<Option<i64>> {
    let text = match value {
        Value::Null => return Ok(None),
        Value::String(text) if text.is_empty() => return Ok(None),
        Value::String(text) => text,
        other => {
            return Err(A2aError::field(field, format!("an RFC 3339 timestamp is required, got {}", shown(other))));
        }
    };
    let parsed = chrono::DateTime::parse_from_rfc3339(text)
        .map_err(|_| A2aError::field(field, format!("not an RFC 3339 timestamp: {}", shown(value))))?;
    if !(1..=9999).contains(&chrono::Datelike::year(&parsed.naive_utc())) {
        return Err(A2aError::field(field, format!("must fall in the years 0001 to 9999, got {}", shown(value))));
    }
    Ok(Some(parsed.timestamp_millis()))
}

/// A boolean field (or its text); `false` when absent.
pub fn boolean(value: &Value, field: &str) -> A2aResult<bool> {
    match value {
        Value::Null => Ok(false),
        Value::Bool(flag) => Ok(*flag),
        Value::String(text) if text == "true" => Ok(true),
        Value::String(text) if text == "false" || text.is_empty() => Ok(false),
        other => Err(A2aError::field(field, format!("true or false is required, got {}", shown(other)))),
    }
}

/// A string field's value; `None` when absent or empty.
pub fn text<'a>(value: &'a Value, field: &str) -> A2aResult<Option<&'a str>> {
    match value {
        Value::Null => Ok(None),
        Value::String(text) => Ok(Some(text.as_str()).filter(|t| !t.is_empty())),
        other => Err(A2aError::field(field, format!("a string is required, got {}", shown(other)))),
    }
}

/// `ListTasks`' parameters, within their bounds.
#[derive(Debug, Clone, PartialEq)]
pub struct ListTasks {
    /// `contextId`.
    pub context: Option<String>,
    /// `status`: the state every task listed is in.
    pub status: Option<&'static str>,
    /// `statusTimestampAfter`, epoch ms.
    pub after_ms: Option<i64>,
    /// `pageSize`.
    pub page_size: usize,
    /// `pageToken`, still to be opened with [`PageTokens::open`].
    pub page_token: Option<String>,
    /// `historyLength`.
    pub history: Option<usize>,
    /// `includeArtifacts`.
    pub artifacts: bool,
}

impl ListTasks {
    /// Reads `ListTasks`' parameters; the first one out of bounds is the error.
    pub fn parse(params: &Value) -> A2aResult<Self> {
        Ok(Self {
            context: text(&params["contextId"], "contextId")?.map(str::to_owned),
            status: task_state(&params["status"], "status")?,
            after_ms: timestamp(&params["statusTimestampAfter"], "statusTimestampAfter")?,
            page_size: page_size(&params["pageSize"], "pageSize")?,
            page_token: text(&params["pageToken"], "pageToken")?.map(str::to_owned),
            history: history_length(&params["historyLength"], "historyLength")?,
            artifacts: boolean(&params["includeArtifacts"], "includeArtifacts")?,
        })
    }
}

/// `ListTaskPushNotificationConfigs`' paging: `pageSize` an int32 ≥ 0; no page token,
/// since every config of a task fits one page (at most 10) and the answer never issues
/// one — a token given is not this server's.
pub fn push_paging(params: &Value) -> A2aResult<()> {
    if let Some(n) = int32(&params["pageSize"], "pageSize")?.filter(|n| *n < 0) {
        return Err(A2aError::field("pageSize", format!("must not be negative, got {n}")));
    }
    if text(&params["pageToken"], "pageToken")?.is_some() {
        return Err(A2aError::field("pageToken", "not a page token of this listing (every config fits one page)"));
    }
    Ok(())
}

/// Where a page of `ListTasks` ends: the last task's creation time and id (the listing's
/// order, newest first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cursor {
    /// The task's `created_at_ms`.
    pub created_at_ms: i64,
    /// The task's id.
    pub id: String,
}

/// `ListTasks` page tokens: `v1.<cursor>.<tag>`, the cursor base64url of
/// `<created_at_ms>.<task id>`, the tag the first 16 bytes of HMAC-SHA256 over
/// `v1.<cursor>`, the workspace and the listing's filters (`contextId`, `status`,
/// `statusTimestampAfter`), under a key derived from the server's sealing key for this
/// use only. A token is only good for the listing that issued it: another workspace's,
/// other filters', an altered one or one never issued is -32602 naming `pageToken`. A
/// key rotated out still opens the tokens it signed.
pub struct PageTokens {
    /// The key new tokens are signed with.
    current: [u8; 32],
    /// Every key a token may have been signed with (the current one first).
    keys: Vec<[u8; 32]>,
    scope: String,
}

/// The label of the page-token key derived from the sealing key.
const KEY_LABEL: &str = "a2a-page-tokens";
const VERSION: &str = "v1";
const TAG_BYTES: usize = 16;

impl PageTokens {
    /// The tokens of `query` in `workspace_id`.
    pub fn new(secrets: &SecretBox, workspace_id: &str, query: &ListTasks) -> Self {
        let scope = serde_json::json!([workspace_id, query.context, query.status, query.after_ms]).to_string();
        Self { current: secrets.derive_key(KEY_LABEL), keys: secrets.derived_keys(KEY_LABEL), scope }
    }

    fn mac(&self, key: &[u8], signed: &str) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes keys of any length");
        mac.update(signed.as_bytes());
        mac.update(b"\n");
        mac.update(self.scope.as_bytes());
        mac
    }

    /// The token of the page after `cursor`.
    pub fn issue(&self, cursor: &Cursor) -> String {
        let payload = URL_SAFE_NO_PAD.encode(format!("{}.{}", cursor.created_at_ms, cursor.id));
        let signed = format!("{VERSION}.{payload}");
        let tag = self.mac(&self.current, &signed).finalize().into_bytes();
        format!("{signed}.{}", URL_SAFE_NO_PAD.encode(&tag[..TAG_BYTES]))
    }

    /// The cursor `token` carries, when this listing issued it.
    pub fn open(&self, token: &str) -> A2aResult<Cursor> {
        let refused = || {
            A2aError::field(
                "pageToken",
                "not a page token of this listing; send the nextPageToken of the previous page, with the same filters",
            )
        };
        let (signed, tag) = token.rsplit_once('.').ok_or_else(refused)?;
        let tag = URL_SAFE_NO_PAD.decode(tag).map_err(|_| refused())?;
        let payload = signed.strip_prefix("v1.").ok_or_else(refused)?;
        if tag.len() != TAG_BYTES
            || !self.keys.iter().any(|key| self.mac(key, signed).verify_truncated_left(&tag).is_ok())
        {
            return Err(refused());
        }
        let payload = URL_SAFE_NO_PAD.decode(payload).map_err(|_| refused())?;
        let payload = String::from_utf8(payload).map_err(|_| refused())?;
        let (created, id) = payload.split_once('.').ok_or_else(refused)?;
        Ok(Cursor { created_at_ms: created.parse().map_err(|_| refused())?, id: id.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn field_of(error: A2aError) -> (i64, String) {
        (error.code(), error.field.unwrap_or_default())
    }

    #[test]
    fn page_size_is_one_to_a_hundred() {
        assert_eq!(page_size(&Value::Null, "pageSize").unwrap(), 50);
        for (given, want) in [(json!(1), 1), (json!(100), 100), (json!("7"), 7), (json!(20.0), 20)] {
            assert_eq!(page_size(&given, "pageSize").unwrap(), want, "{given}");
        }
        for given in [
            json!(0),
            json!(-1),
            json!(101),
            json!("0"),
            json!("ten"),
            json!(1.5),
            json!(true),
            json!(4_294_967_296_i64),
        ] {
            let error = page_size(&given, "pageSize").unwrap_err();
            assert_eq!(field_of(error), (-32602, "pageSize".to_owned()), "{given}");
        }
    }

    #[test]
    fn history_length_is_a_non_negative_int32() {
        assert_eq!(history_length(&Value::Null, "historyLength").unwrap(), None);
        assert_eq!(history_length(&json!(0), "historyLength").unwrap(), Some(0));
        assert_eq!(history_length(&json!("3"), "historyLength").unwrap(), Some(3));
        for given in [json!(-1), json!("-2"), json!(2_147_483_648_i64), json!([1])] {
            let error = history_length(&given, "configuration.historyLength").unwrap_err();
            assert_eq!(field_of(error), (-32602, "configuration.historyLength".to_owned()), "{given}");
        }
    }

    #[test]
    fn status_is_a_known_state_by_name_or_number() {
        assert_eq!(task_state(&json!("TASK_STATE_WORKING"), "status").unwrap(), Some("TASK_STATE_WORKING"));
        assert_eq!(task_state(&json!(3), "status").unwrap(), Some("TASK_STATE_COMPLETED"));
        assert_eq!(task_state(&json!("6"), "status").unwrap(), Some("TASK_STATE_INPUT_REQUIRED"));
        for none in [Value::Null, json!(""), json!("TASK_STATE_UNSPECIFIED"), json!(0)] {
            assert_eq!(task_state(&none, "status").unwrap(), None, "{none}");
        }
        for given in [json!("TASK_STATE_BOGUS"), json!("working"), json!(9), json!(-1), json!({})] {
            assert_eq!(field_of(task_state(&given, "status").unwrap_err()).1, "status", "{given}");
        }
    }

    #[test]
    fn timestamps_are_rfc_3339_within_proto_range() {
        assert_eq!(timestamp(&json!("1970-01-01T00:00:01Z"), "t").unwrap(), Some(1000));
        assert_eq!(timestamp(&json!("1970-01-01T01:00:01+01:00"), "t").unwrap(), Some(1000));
        assert_eq!(timestamp(&json!(""), "t").unwrap(), None);
        for given in [
            json!("yesterday"),
            json!("2024-13-01T00:00:00Z"),
            json!("2024-01-01"),
            json!(17),
            json!("0000-12-31T23:00:00Z"),
        ] {
            assert_eq!(
                field_of(timestamp(&given, "statusTimestampAfter").unwrap_err()).1,
                "statusTimestampAfter",
                "{given}"
            );
        }
    }

    #[test]
    fn list_parameters_parse_or_name_their_field() {
        let parsed =
            ListTasks::parse(&json!({ "contextId": "c", "status": 2, "pageSize": "5", "includeArtifacts": "true" }))
                .unwrap();
        assert_eq!(
            parsed,
            ListTasks {
                context: Some("c".into()),
                status: Some("TASK_STATE_WORKING"),
                after_ms: None,
                page_size: 5,
                page_token: None,
                history: None,
                artifacts: true,
            }
        );
        for (params, field) in [
            (json!({ "includeArtifacts": "yes" }), "includeArtifacts"),
            (json!({ "contextId": 7 }), "contextId"),
            (json!({ "pageToken": false }), "pageToken"),
            (json!({ "historyLength": -1 }), "historyLength"),
        ] {
            assert_eq!(field_of(ListTasks::parse(&params).unwrap_err()).1, field, "{params}");
        }
        assert!(push_paging(&json!({ "pageSize": 0 })).is_ok());
        assert_eq!(field_of(push_paging(&json!({ "pageSize": -3 })).unwrap_err()).1, "pageSize");
        assert_eq!(field_of(push_paging(&json!({ "pageToken": "x" })).unwrap_err()).1, "pageToken");
    }

    /// Both bindings answer a bound broken the same way, through `dispatch::call`.
    #[tokio::test]
    async fn both_bindings_refuse_a_bound_naming_the_field() {
        let rig = crate::test_rig::Rig::new().await;
        let rpc = |method: &str, params: Value| json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        for (method, params, query, field) in [
            ("ListTasks", json!({"pageSize": 0}), "/v1/a2a/tasks?pageSize=0", "pageSize"),
            ("ListTasks", json!({"pageSize": 101}), "/v1/a2a/tasks?pageSize=101", "pageSize"),
            ("ListTasks", json!({"historyLength": -1}), "/v1/a2a/tasks?historyLength=-1", "historyLength"),
            ("ListTasks", json!({"status": "TASK_STATE_DONE"}), "/v1/a2a/tasks?status=TASK_STATE_DONE", "status"),
            (
                "ListTasks",
                json!({"statusTimestampAfter": "soon"}),
                "/v1/a2a/tasks?statusTimestampAfter=soon",
                "statusTimestampAfter",
            ),
            (
                "ListTasks",
                json!({"pageToken": "invalid-token-xyz"}),
                "/v1/a2a/tasks?pageToken=invalid-token-xyz",
                "pageToken",
            ),
            ("GetTask", json!({"id": "t", "historyLength": -2}), "/v1/a2a/tasks/t?historyLength=-2", "historyLength"),
        ] {
            let answer = rig.call("POST", "/v1/a2a", rpc(method, params.clone())).await;
            let error = &answer.body["error"];
            assert_eq!(
                (error["code"].as_i64(), &error["data"][0]["metadata"]["field"]),
                (Some(-32602), &json!(field)),
                "{params}: {}",
                answer.text
            );
            assert!(error["message"].as_str().unwrap().starts_with(&format!("{field}: ")), "{}", answer.text);
            let rest = rig.call("GET", query, Value::Null).await;
            assert_eq!(rest.status, axum::http::StatusCode::BAD_REQUEST, "{query}: {}", rest.text);
            assert_eq!(rest.body["error"]["status"], "INVALID_ARGUMENT");
            assert_eq!(rest.body["error"]["details"][1]["fieldViolations"][0]["field"], json!(field), "{}", rest.text);
        }
        // v0.3 too (its history length goes to the same bound).
        let legacy = rig.call("POST", "/v1/a2a", rpc("tasks/get", json!({"id": "t", "historyLength": -1}))).await;
        assert_eq!(legacy.body["error"]["code"], -32602, "{}", legacy.text);
        let push = rig.call("GET", "/v1/a2a/tasks/t/pushNotificationConfigs?pageToken=x", Value::Null).await;
        assert_eq!(
            (push.status.as_u16(), &push.body["error"]["details"][0]["metadata"]["field"]),
            (400, &json!("pageToken"))
        );
    }

    #[test]
    fn page_tokens_open_only_for_the_listing_that_issued_them() {
        let secrets = SecretBox::from_encoded(&SecretBox::generate_key()).unwrap();
        let query = ListTasks::parse(&json!({ "contextId": "c" })).unwrap();
        let tokens = PageTokens::new(&secrets, "wrkspc_a", &query);
        let cursor = Cursor { created_at_ms: 1_700_000_000_000, id: "6f1c1c52-3b1e-4d5e-9a8f-2c1d7b9e4a10".into() };
        let token = tokens.issue(&cursor);
        assert_eq!(tokens.open(&token).unwrap(), cursor);
        let other_workspace = PageTokens::new(&secrets, "wrkspc_b", &query);
        let other_filter = PageTokens::new(&secrets, "wrkspc_a", &ListTasks::parse(&json!({ "status": 3 })).unwrap());
        let other_key =
            PageTokens::new(&SecretBox::from_encoded(&SecretBox::generate_key()).unwrap(), "wrkspc_a", &query);
        for tokens in [other_workspace, other_filter, other_key] {
            assert_eq!(field_of(tokens.open(&token).unwrap_err()).1, "pageToken");
        }
        let forged = format!("v1.{}.{}", URL_SAFE_NO_PAD.encode("1.other-task"), token.rsplit_once('.').unwrap().1);
        for bad in [forged.as_str(), "", "invalid-token-xyz", cursor.id.as_str(), &token[..token.len() - 2]] {
            assert_eq!(field_of(tokens.open(bad).unwrap_err()).1, "pageToken", "{bad}");
        }
    }
}
