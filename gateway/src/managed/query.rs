//! Query strings as the SDK encodes them: repeated `key[]=v` lists, literal bracketed
//! keys such as `created_at[gte]`, `true`/`false` booleans, RFC 3339 datetimes. Every
//! parse error is a 400 naming the parameter.

use axum::http::Uri;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::DateTime;

use super::limits::{MAX_LIST_PAGE_BYTES, json_bytes};
use crate::error::{ApiError, ApiResult};

/// Parsed query parameters, in order.
#[derive(Debug, Default, Clone)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// Parses the request URI's query.
    pub fn from_uri(uri: &Uri) -> Self {
        let pairs = form_urlencoded::parse(uri.query().unwrap_or("").as_bytes()).into_owned().collect();
        Self(pairs)
    }

    /// The last value of `key`.
    pub fn string(&self, key: &str) -> Option<&str> {
        self.0.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
    }

    /// Every value of `key[]` (or plain repeated `key`).
    pub fn list(&self, key: &str) -> Vec<&str> {
        let bracketed = format!("{key}[]");
        self.0.iter().filter(|(k, _)| k == key || *k == bracketed).map(|(_, v)| v.as_str()).collect()
    }

    /// An integer in `min..=max`.
    pub fn int(&self, key: &str, min: i64, max: i64) -> ApiResult<Option<i64>> {
        let Some(raw) = self.string(key) else { return Ok(None) };
        let value: i64 =
            raw.parse().map_err(|_| ApiError::invalid(format!("{key}: expected an integer, got {raw:?}")))?;
        if !(min..=max).contains(&value) {
            return Err(ApiError::invalid(format!("{key}: must be between {min} and {max}, got {value}")));
        }
        Ok(Some(value))
    }

    /// `true` or `false`.
    pub fn bool(&self, key: &str) -> ApiResult<Option<bool>> {
        match self.string(key) {
            None => Ok(None),
            Some("true") => Ok(Some(true)),
            Some("false") => Ok(Some(false)),
            Some(other) => Err(ApiError::invalid(format!("{key}: expected true or false, got {other:?}"))),
        }
    }

    /// An RFC 3339 datetime as epoch milliseconds.
    pub fn datetime_ms(&self, key: &str) -> ApiResult<Option<i64>> {
        let Some(raw) = self.string(key) else { return Ok(None) };
        parse_datetime_ms(raw).map(Some).ok_or_else(|| {
            ApiError::invalid(format!("{key}: expected an RFC 3339 datetime such as 2026-01-01T00:00:00Z, got {raw:?}"))
        })
    }

    /// `order`: `asc` or `desc`; `default_desc` when absent.
    pub fn descending(&self, default_desc: bool) -> ApiResult<bool> {
        match self.string("order") {
            None => Ok(default_desc),
            Some("desc") => Ok(true),
            Some("asc") => Ok(false),
            Some(other) => Err(ApiError::invalid(format!("order: expected asc or desc, got {other:?}"))),
        }
    }
}

fn parse_datetime_ms(raw: &str) -> Option<i64> {
    if let Ok(parsed) = DateTime::parse_from_rfc3339(raw) {
        return Some(parsed.timestamp_millis());
    }
    // A naive datetime (the SDK sends one without an offset) is taken as UTC.
    chrono::NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S%.f")
        .ok()
        .map(|naive| naive.and_utc().timestamp_millis())
}

pub use agentd_schema::live::rfc3339;

/// Wall-clock time in epoch milliseconds, for wire timestamps.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// An opaque page cursor: the sort key of the last item returned.
pub fn encode_cursor(key: &str) -> String {
    format!("page_{}", URL_SAFE_NO_PAD.encode(key))
}

/// Decodes a cursor made by [`encode_cursor`]; a foreign or corrupt one is a 400.
pub fn decode_cursor(cursor: &str) -> ApiResult<String> {
    cursor
        .strip_prefix("page_")
        .and_then(|encoded| URL_SAFE_NO_PAD.decode(encoded).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .ok_or_else(|| ApiError::invalid(format!("page: invalid or expired cursor {cursor:?}")))
}

/// The `{"data":…,"next_page":…}` page of cursor-paginated lists. `rows` holds up to
/// `limit + 1` items; the extra one only says whether another page exists. A page also
/// ends once its items have passed [`MAX_LIST_PAGE_BYTES`] of JSON; its cursor then
/// points at the last item returned, so the next page starts right after it.
pub fn cursor_page<T>(
    rows: Vec<T>,
    limit: i64,
    key: impl Fn(&T) -> String,
    render: impl Fn(&T) -> serde_json::Value,
) -> serde_json::Value {
    bounded_page(rows, limit, MAX_LIST_PAGE_BYTES, key, render)
}

/// Like [`cursor_page`], for lists whose items may be large (agents, events): rows are
/// read `chunk` at a time after the cursor, so the rows held at once are a few, not
/// `limit + 1`, and the page ends on its count or its byte bound. The caller reads what
/// [`ChunkedPage::next_fetch`] asks for (up to `n` rows after the key `after`, in listing
/// order) and hands them to [`ChunkedPage::take`] until it asks for nothing more.
#[derive(Debug)]
pub struct ChunkedPage {
    after: Option<String>,
    limit: usize,
    chunk: usize,
    max_bytes: usize,
    data: Vec<serde_json::Value>,
    bytes: usize,
    last: Option<String>,
    more: Option<bool>,
}

impl ChunkedPage {
    /// A page of at most `limit` items after the cursor key `after`, read `chunk` rows at a time.
    pub fn new(after: Option<String>, limit: i64, chunk: i64) -> Self {
        Self::bounded(after, limit, chunk, MAX_LIST_PAGE_BYTES)
    }

    fn bounded(after: Option<String>, limit: i64, chunk: i64, max_bytes: usize) -> Self {
        let (limit, chunk) = (limit.max(1) as usize, chunk.max(1) as usize);
        Self { after, limit, chunk, max_bytes, data: Vec::new(), bytes: 0, last: None, more: None }
    }

    fn ask(&self) -> usize {
        (self.limit - self.data.len()).min(self.chunk)
    }

    /// The next read, `(after, n)`: one row more than it can take, which says whether
    /// the list goes on; `None` once the page is complete.
    pub fn next_fetch(&self) -> Option<(Option<String>, i64)> {
        self.more.is_none().then(|| (self.after.clone(), self.ask() as i64 + 1))
    }

    /// Takes the rows of the last read.
    pub fn take<T>(&mut self, rows: &[T], key: impl Fn(&T) -> String, render: impl Fn(&T) -> serde_json::Value) {
        let ask = self.ask();
        for row in rows.iter().take(ask) {
            if self.bytes > self.max_bytes {
                self.more = Some(true);
                return;
            }
            let item = render(row);
            self.bytes += json_bytes(&item) + 1;
            self.data.push(item);
            self.last = Some(key(row));
        }
        if rows.len() <= ask {
            self.more = Some(false);
        } else if self.data.len() >= self.limit || self.bytes > self.max_bytes {
            self.more = Some(true);
        } else {
            self.after = self.last.clone();
        }
    }

    /// The `{"data":…,"next_page":…}` page.
    pub fn finish(self) -> serde_json::Value {
        let next_page = if self.more == Some(true) { self.last.map(|last| encode_cursor(&last)) } else { None };
        serde_json::json!({ "data": self.data, "next_page": next_page })
    }
}

fn bounded_page<T>(
    mut rows: Vec<T>,
    limit: i64,
    max_bytes: usize,
    key: impl Fn(&T) -> String,
    render: impl Fn(&T) -> serde_json::Value,
) -> serde_json::Value {
    let more = rows.len() as i64 > limit;
    rows.truncate(limit as usize);
    let mut data = Vec::with_capacity(rows.len());
    let mut bytes = 0;
    for row in &rows {
        if bytes > max_bytes {
            break;
        }
        let item = render(row);
        bytes += json_bytes(&item) + 1;
        data.push(item);
    }
    let cut = data.len() < rows.len();
    let last = data.len().checked_sub(1).and_then(|i| rows.get(i));
    let next_page = if more || cut { last.map(|last| encode_cursor(&key(last))) } else { None };
    serde_json::json!({ "data": data, "next_page": next_page })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bracketed_lists_and_bounds_parse() {
        let uri: Uri = "/x?statuses%5B%5D=idle&statuses%5B%5D=running&created_at%5Bgte%5D=2026-01-01T00%3A00%3A00%2B00%3A00&limit=5"
            .parse()
            .unwrap();
        let query = Query::from_uri(&uri);
        assert_eq!(query.list("statuses"), ["idle", "running"]);
        assert_eq!(query.datetime_ms("created_at[gte]").unwrap(), Some(1_767_225_600_000));
        assert_eq!(query.int("limit", 1, 100).unwrap(), Some(5));
        assert!(query.int("limit", 10, 100).is_err());
    }

    #[test]
    fn a_page_ends_once_past_its_byte_bound_and_its_cursor_resumes_after_the_last_item() {
        let rows: Vec<i64> = (1..=10).collect();
        let item = |n: &i64| serde_json::json!({ "n": n, "pad": "x".repeat(100) });
        // Each item is ~117 bytes: past 250 bytes after the third.
        let page = bounded_page(rows.clone(), 10, 250, |n| n.to_string(), item);
        assert_eq!(page["data"].as_array().unwrap().len(), 3);
        assert_eq!(decode_cursor(page["next_page"].as_str().unwrap()).unwrap(), "3");
        // A single item larger than the bound is still returned, alone.
        let page = bounded_page(rows.clone(), 10, 10, |n| n.to_string(), item);
        assert_eq!(page["data"].as_array().unwrap().len(), 1);
        assert_eq!(decode_cursor(page["next_page"].as_str().unwrap()).unwrap(), "1");
        // Under the bound, the count bound alone decides, and the last page has no cursor.
        let page = bounded_page(rows.clone(), 10, 1 << 20, |n| n.to_string(), item);
        assert_eq!(page["data"].as_array().unwrap().len(), 10);
        assert!(page["next_page"].is_null());
        let page = bounded_page(rows, 4, 1 << 20, |n| n.to_string(), item);
        assert_eq!(decode_cursor(page["next_page"].as_str().unwrap()).unwrap(), "4");
    }

    #[test]
    fn chunked_pages_hold_a_few_rows_at_once_and_skip_nothing() {
        let rows: Vec<i64> = (1..=30).collect();
        let item = |n: &i64| serde_json::json!({ "n": n, "pad": "x".repeat(100) });
        let mut largest_read = 0;
        let mut page = |after: Option<&str>, limit: i64, max: usize| {
            let mut page = ChunkedPage::bounded(after.map(str::to_owned), limit, 8, max);
            while let Some((after, n)) = page.next_fetch() {
                largest_read = largest_read.max(n);
                let after: i64 = after.map_or(0, |a| a.parse().unwrap());
                let read: Vec<i64> = rows.iter().copied().filter(|r| *r > after).take(n as usize).collect();
                page.take(&read, |n| n.to_string(), item);
            }
            page.finish()
        };
        let ids = |page: &serde_json::Value| -> Vec<i64> {
            page["data"].as_array().unwrap().iter().map(|i| i["n"].as_i64().unwrap()).collect()
        };
        // The count bound, across reads of at most 8 + 1 rows.
        let first = page(None, 20, 1 << 20);
        assert_eq!(ids(&first), (1..=20).collect::<Vec<_>>());
        let cursor = decode_cursor(first["next_page"].as_str().unwrap()).unwrap();
        let rest = page(Some(&cursor), 20, 1 << 20);
        assert_eq!(ids(&rest), (21..=30).collect::<Vec<_>>());
        assert!(rest["next_page"].is_null(), "the last page has no cursor");
        // The byte bound: ~117 bytes an item, past 250 after the third.
        let cut = page(None, 20, 250);
        assert_eq!(ids(&cut), [1, 2, 3]);
        assert_eq!(decode_cursor(cut["next_page"].as_str().unwrap()).unwrap(), "3");
        // A page that ends exactly at the end of the list has no cursor; one before it has.
        let exact = page(Some("22"), 8, 1 << 20);
        assert_eq!(ids(&exact), (23..=30).collect::<Vec<_>>());
        assert!(exact["next_page"].is_null());
        let limited = page(Some("21"), 8, 1 << 20);
        assert_eq!(decode_cursor(limited["next_page"].as_str().unwrap()).unwrap(), "29");
        assert_eq!(largest_read, 9, "never more than a chunk and one row at once");
    }

    #[test]
    fn cursors_round_trip_and_reject_garbage() {
        assert_eq!(decode_cursor(&encode_cursor("agent_01")).unwrap(), "agent_01");
        assert!(decode_cursor("nonsense").is_err());
    }
}
