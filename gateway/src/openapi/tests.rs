//! The table agrees with the routers both ways, and `docs/openapi.json` is current.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use axum::body::Body as HttpBody;
use axum::http::{Request, StatusCode};
use tower::ServiceExt;

use super::table::{Listener, Method, OPERATIONS};
use crate::test_rig::Rig;

/// How to regenerate the committed document.
const BLESS: &str = "AGENTD_BLESS_OPENAPI=1 cargo nextest run -p agentd-gateway openapi";

/// A concrete path for a template: every parameter a placeholder (no id parses, so scope
/// answers its 404 before a handler acts).
fn concrete(template: &str) -> String {
    template
        .split('/')
        .map(|segment| if segment.starts_with('{') { "placeholder" } else { segment })
        .collect::<Vec<_>>()
        .join("/")
}

fn request(method: Method, path: &str, key: &str) -> Request<HttpBody> {
    let selectors = [
        crate::admission::beta::MANAGED_AGENTS,
        crate::admission::beta::AGENT_MEMORY,
        crate::admission::beta::DREAMING,
        crate::admission::beta::USER_PROFILES,
        crate::admission::beta::WEBHOOKS,
    ]
    .join(",");
    let body = match method {
        Method::Post | Method::Put => HttpBody::from("{}"),
        Method::Get | Method::Delete => HttpBody::empty(),
    };
    Request::builder()
        .method(method.as_str())
        .uri(path)
        .header("x-api-key", key)
        .header("anthropic-beta", selectors)
        .header("content-type", "application/json")
        .body(body)
        .unwrap()
}

/// Whether `router` routes the request: not 405, and not the 404 of an unknown route.
/// A handler still running after a while (a stream, a long poll) was routed.
async fn routed(router: &axum::Router, request: Request<HttpBody>) -> Result<(), String> {
    let Ok(response) = tokio::time::timeout(Duration::from_secs(5), router.clone().oneshot(request)).await else {
        return Ok(());
    };
    let response = response.unwrap();
    let status = response.status();
    let bytes =
        match tokio::time::timeout(Duration::from_secs(2), axum::body::to_bytes(response.into_body(), 1 << 20)).await {
            Ok(Ok(bytes)) => bytes,
            _ => return Ok(()),
        };
    let text = String::from_utf8_lossy(&bytes);
    if status == StatusCode::METHOD_NOT_ALLOWED || (status == StatusCode::NOT_FOUND && text.contains("no route for")) {
        return Err(format!("{status}: {text}"));
    }
    Ok(())
}

#[tokio::test]
async fn every_operation_of_the_table_is_routed() {
    let rig = Rig::new().await;
    let ops = crate::ops_app(rig.state.ops());
    let mut unrouted = Vec::new();
    // The operations listener last: `POST /admin/drain` drains the gateway.
    let mut operations: Vec<_> = OPERATIONS.iter().collect();
    operations.sort_by_key(|op| op.listener != Listener::Public);
    for op in operations {
        let path = concrete(op.path);
        let mut routers = Vec::new();
        if op.listener != Listener::Ops {
            routers.push(("public", &rig.app));
        }
        if op.listener != Listener::Public {
            routers.push(("operations", &ops));
        }
        for (listener, router) in routers {
            if let Err(answer) = routed(router, request(op.method, &path, &rig.key)).await {
                unrouted.push(format!("{} {} ({listener} listener, {}): {answer}", op.method.as_str(), op.path, op.id));
            }
        }
    }
    assert!(unrouted.is_empty(), "table rows no router serves (remove or fix them):\n{}", unrouted.join("\n"));
}

#[test]
fn operation_ids_and_routes_are_unique() {
    let mut ids = BTreeSet::new();
    let mut routes = BTreeSet::new();
    for op in OPERATIONS {
        assert!(ids.insert(op.id), "operationId {} twice", op.id);
        assert!(routes.insert((op.method, op.path)), "{} {} twice", op.method.as_str(), op.path);
    }
}

/// The operations the table says take a credential or none are exactly the ones
/// admission lets in without one (`admission::auth::is_public`: the A2A agent cards).
#[test]
fn the_operations_open_without_a_key_are_the_ones_admission_opens() {
    use super::table::Auth;
    for op in OPERATIONS {
        let method = axum::http::Method::from_bytes(op.method.as_str().as_bytes()).unwrap();
        let public = crate::admission::auth::is_public(&method, op.path);
        assert_eq!(public, op.auth == Auth::Optional, "{} {}", op.method.as_str(), op.path);
    }
}

/// Where a router function's routes are mounted: (file under `gateway/src`, function) →
/// (prefixes, listener). A function not listed here fails the test: say where it is mounted.
const MOUNTS: &[(&str, &str, &[&str], Listener)] = &[
    ("managed/mod.rs", "router", &["/v1"], Listener::Public),
    ("control/mod.rs", "router", &["/v1"], Listener::Public),
    ("control/mod.rs", "providers_router", &["/v1"], Listener::Public),
    ("control/mod.rs", "protocols_router", &["/v1"], Listener::Public),
    ("durable.rs", "router", &["/v1"], Listener::Public),
    ("lib.rs", "adapters_router", &["/v1"], Listener::Public),
    ("openapi/mod.rs", "router", &["/v1"], Listener::Public),
    ("adapters/a2a/mod.rs", "router", &["/v1"], Listener::Public),
    ("adapters/a2a/mod.rs", "well_known_router", &[""], Listener::Public),
    // Nested twice by `adapters::a2a::router`.
    ("adapters/a2a/rest.rs", "router", &["/v1/a2a", "/v1/a2a/agents/{agent_id}"], Listener::Public),
    ("consent_page.rs", "router", &[""], Listener::Public),
    ("tunnel.rs", "router", &[""], Listener::Public),
    ("projects.rs", "router", &["/api"], Listener::Public),
    ("ops.rs", "public_router", &[""], Listener::Public),
    ("ops.rs", "router", &[""], Listener::Ops),
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its unit tests.
fn code(text: &str) -> &str {
    let end = text.find("#[cfg(test)]\nmod tests {").unwrap_or(text.len());
    &text[..end]
}

/// The text from `open` (a `(`) to its matching `)`.
fn balanced(text: &str, open: usize) -> &str {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return &text[open..=open + i];
                }
            }
            _ => {}
        }
    }
    &text[open..]
}

/// The methods a `.route(…)` call registers: `get(`, `post(`, … as whole words.
fn methods(call: &str) -> Vec<Method> {
    let mut found = Vec::new();
    for (name, method) in
        [("get(", Method::Get), ("post(", Method::Post), ("put(", Method::Put), ("delete(", Method::Delete)]
    {
        for (at, _) in call.match_indices(name) {
            let before = call[..at].chars().next_back();
            if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_') {
                found.push(method);
            }
        }
    }
    found
}

/// Every (listener, method, path) the gateway's sources register with `.route("…", …)`.
fn routes_in_sources() -> BTreeSet<(&'static str, Method, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut routes = BTreeSet::new();
    let mut unmounted = Vec::new();
    let needle = concat!(".route", "(");
    for file in files {
        let relative = file.strip_prefix(&root).unwrap().to_string_lossy().replace('\\', "/");
        if relative == "test_rig.rs" || relative.ends_with("/tests.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let code = code(&text);
        for (at, _) in code.match_indices(needle) {
            let call = balanced(code, at + needle.len() - 1);
            let Some(literal) = call[1..].trim_start().strip_prefix('"').and_then(|rest| rest.split('"').next()) else {
                panic!("{relative}: a route whose path is not a string literal: {call}");
            };
            let function = code[..at].rsplit("fn ").next().unwrap().split(['(', '<']).next().unwrap().trim();
            let Some((_, _, prefixes, listener)) =
                MOUNTS.iter().find(|(file, name, _, _)| *file == relative && *name == function)
            else {
                unmounted.push(format!("{relative}::{function} ({literal})"));
                continue;
            };
            for prefix in *prefixes {
                for method in methods(call) {
                    let listeners: &[&str] = match listener {
                        Listener::Public => &["public"],
                        Listener::Ops => &["operations"],
                        Listener::Both => &["public", "operations"],
                    };
                    for name in listeners {
                        routes.insert((*name, method, format!("{prefix}{literal}")));
                    }
                }
            }
        }
    }
    assert!(
        unmounted.is_empty(),
        "router functions this test does not know the mount point of (add them to MOUNTS):\n{}",
        unmounted.join("\n")
    );
    routes
}

fn routes_in_table() -> BTreeSet<(&'static str, Method, String)> {
    let mut routes = BTreeSet::new();
    for op in OPERATIONS {
        let listeners: &[&str] = match op.listener {
            Listener::Public => &["public"],
            Listener::Ops => &["operations"],
            Listener::Both => &["public", "operations"],
        };
        for name in listeners {
            routes.insert((*name, op.method, op.path.to_owned()));
        }
    }
    routes
}

#[test]
fn every_route_in_the_sources_is_in_the_table() {
    let sources = routes_in_sources();
    let mut table = routes_in_table();
    // The MCP endpoint is a `route_service` at a configured path (rmcp's service); its
    // rows are checked by routing above.
    let mcp = concat!(".route_service", "(&settings.path");
    let mcp_source =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/adapters/mcp/mod.rs")).unwrap();
    assert!(mcp_source.contains(mcp), "the MCP endpoint moved: update this test and the table's mcp rows");
    table.retain(|(_, _, path)| path != super::DEFAULT_MCP_PATH);
    let missing: Vec<_> =
        sources.difference(&table).map(|(l, m, p)| format!("{} {p} ({l} listener)", m.as_str())).collect();
    let stale: Vec<_> =
        table.difference(&sources).map(|(l, m, p)| format!("{} {p} ({l} listener)", m.as_str())).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "routes without a row in gateway/src/openapi/table.rs:\n{}\nrows without a route:\n{}\n(then: {BLESS})",
        missing.join("\n"),
        stale.join("\n")
    );
}

#[test]
fn the_committed_document_is_current() {
    let generated = super::document_json(super::DEFAULT_MCP_PATH);
    let committed_path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/openapi.json");
    if std::env::var_os("AGENTD_BLESS_OPENAPI").is_some() {
        std::fs::write(&committed_path, &generated).unwrap();
        return;
    }
    let committed = std::fs::read_to_string(&committed_path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()))
            + 1;
        panic!("docs/openapi.json differs from the generated document (first at line {line}); regenerate it: {BLESS}");
    }
}

#[test]
fn the_document_is_openapi_3_1_with_every_operation() {
    let document: serde_json::Value = serde_json::from_str(&super::document_json(super::DEFAULT_MCP_PATH)).unwrap();
    assert_eq!(document["openapi"], "3.1.0");
    let mut count = 0;
    let mut ids = BTreeMap::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        for (method, operation) in item.as_object().unwrap() {
            if ["get", "post", "put", "delete"].contains(&method.as_str()) {
                count += 1;
                ids.insert(operation["operationId"].as_str().unwrap().to_owned(), path.clone());
            }
        }
    }
    // `/readyz` is one path item for both listeners.
    assert_eq!(count, OPERATIONS.len());
    assert_eq!(ids["skills.file"], "/v1/ext/skills/{skill_id}/versions/{version}/files/{path}");
    let drain = &document["paths"]["/admin/drain"];
    assert_eq!(drain["servers"][0]["url"], "http://{ops_addr}", "{drain}");
    let put = &document["paths"]["/v1/config/agents/{agent_id}"]["put"];
    assert_eq!(put["responses"]["4XX"]["$ref"], "#/components/responses/Problem");
    let send = &document["paths"]["/v1/sessions/{session_id}/events"]["post"];
    assert_eq!(send["responses"]["4XX"]["$ref"], "#/components/responses/ManagedError");
    assert_eq!(send["parameters"][1]["schema"]["enum"][0], crate::admission::beta::MANAGED_AGENTS);
}

#[tokio::test]
async fn the_document_is_served_with_an_api_key() {
    let rig = Rig::new().await;
    let answer = rig.call("GET", "/v1/openapi.json", serde_json::Value::Null).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(answer.text, super::document_json(super::DEFAULT_MCP_PATH));
    let anonymous = Request::get("/v1/openapi.json").body(HttpBody::empty()).unwrap();
    assert_eq!(rig.send(anonymous).await.status, StatusCode::UNAUTHORIZED);
}
