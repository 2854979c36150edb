//! The machine-readable contract (ADR 0021): an OpenAPI 3.1 document of every route agentd
//! serves, built with utoipa's builders from one table ([`table::OPERATIONS`]) and served
//! at `GET /v1/openapi.json` (an API key, as every `/v1` route). `docs/openapi.json` is
//! the committed copy; the tests in `tests.rs` prove that the table and the routers
//! agree both ways and that the committed copy is current.
//!
//! Wire shapes are the official SDKs' (and the protocols'): request and success bodies
//! are generic JSON objects here; the error shapes are named components, one per surface.

pub mod table;
#[cfg(test)]
mod tests;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use serde_json::{Value, json};
use utoipa::openapi::path::{
    HttpMethod, OperationBuilder, ParameterBuilder, ParameterIn, PathItem, PathItemBuilder, PathsBuilder,
};
use utoipa::openapi::request_body::RequestBodyBuilder;
use utoipa::openapi::security::{ApiKey, ApiKeyValue, Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::server::{ServerBuilder, ServerVariableBuilder};
use utoipa::openapi::tag::TagBuilder;
use utoipa::openapi::{
    ComponentsBuilder, ContentBuilder, InfoBuilder, OpenApi, OpenApiBuilder, Ref, RefOr, Required, ResponseBuilder,
    ResponsesBuilder, Schema,
};

use self::table::{Answer, Auth, Body, Errors, Listener, OPERATIONS, Operation, Tag};
use crate::AppState;

/// The MCP endpoint's path in the committed document (`AGENTD_MCP_PATH`'s default); a
/// gateway serves its own.
pub const DEFAULT_MCP_PATH: &str = "/v1/mcp";

/// `GET /v1/openapi.json`, relative to `/v1` (merged with the managed routes, so it
/// passes the same admission).
pub fn router() -> Router<AppState> {
    Router::new().route("/openapi.json", get(serve))
}

async fn serve(State(state): State<AppState>) -> Response {
    ([(header::CONTENT_TYPE, "application/json")], document_json(&state.mcp.path)).into_response()
}

/// The document as served (pretty JSON with a final newline), the MCP endpoint at `mcp_path`.
pub fn document_json(mcp_path: &str) -> String {
    let mut text = document(mcp_path).to_pretty_json().expect("an OpenAPI document serializes");
    text.push('\n');
    text
}

/// The document, the MCP endpoint at `mcp_path`.
pub fn document(mcp_path: &str) -> OpenApi {
    let mut paths = PathsBuilder::new();
    let mut items: std::collections::BTreeMap<String, PathItem> = Default::default();
    for op in OPERATIONS {
        let path = if op.tag == Tag::Mcp { mcp_path.to_owned() } else { openapi_path(op.path) };
        let item = PathItem::new(http_method(op), operation(op));
        match items.get_mut(&path) {
            Some(existing) => existing.merge_operations(item),
            None => {
                items.insert(path, item);
            }
        }
    }
    for (path, mut item) in items {
        let ops_only =
            OPERATIONS.iter().filter(|op| openapi_path(op.path) == path).all(|op| op.listener == Listener::Ops);
        if ops_only {
            item = PathItemBuilder::from(item).servers(Some([ops_server()])).build();
        }
        paths = paths.path(path, item);
    }
    OpenApiBuilder::new()
        .info(
            InfoBuilder::new()
                .title("agentd")
                .version(env!("CARGO_PKG_VERSION"))
                .description(Some(DESCRIPTION))
                .build(),
        )
        .paths(paths.build())
        .components(Some(components()))
        .tags(Some(
            Tag::ALL.iter().map(|tag| TagBuilder::new().name(tag.name()).description(Some(tag.description())).build()),
        ))
        .build()
}

const DESCRIPTION: &str = "Every route agentd serves, generated from its route table (gateway/src/openapi). \
Request and success bodies are the official SDKs' and protocols' wire shapes and are left generic here; \
each operation names the error shape it answers in. Every `/v1` route is also served under \
`/v1/workspaces/{workspace}/…` (the workspace path projection). Operations tagged `operations` other than \
`/readyz` are served on the operations listener (`AGENTD_OPS_ADDR`), not the public one.";

/// axum's `{*rest}` wildcard is OpenAPI's `{rest}` (one parameter spanning segments).
fn openapi_path(path: &str) -> String {
    path.replace("{*", "{")
}

fn http_method(op: &Operation) -> HttpMethod {
    match op.method {
        table::Method::Get => HttpMethod::Get,
        table::Method::Post => HttpMethod::Post,
        table::Method::Put => HttpMethod::Put,
        table::Method::Delete => HttpMethod::Delete,
    }
}

fn operation(op: &Operation) -> utoipa::openapi::path::Operation {
    let mut builder = OperationBuilder::new().operation_id(Some(op.id)).summary(Some(op.summary)).tag(op.tag.name());
    for name in table::path_parameters(op.path) {
        builder = builder.parameter(
            ParameterBuilder::new()
                .name(name)
                .parameter_in(ParameterIn::Path)
                .required(Required::True)
                .description(Some(table::parameter_description(name)))
                .schema(Some(schema(json!({ "type": "string" })))),
        );
    }
    if let Some(selector) = op.beta {
        builder = builder.parameter(
            ParameterBuilder::new()
                .name("anthropic-beta")
                .parameter_in(ParameterIn::Header)
                .required(Required::True)
                .description(Some("The beta selector this family requires (it may be listed with others)."))
                .schema(Some(schema(json!({ "type": "string", "enum": [selector] })))),
        );
    }
    if let Some(body) = request_body(op.body) {
        builder = builder.request_body(Some(body));
    }
    builder = match op.auth {
        Auth::Credential => builder
            .security(SecurityRequirement::new("api_key", Vec::<String>::new()))
            .security(SecurityRequirement::new("bearer", Vec::<String>::new())),
        Auth::Optional => builder
            .security(SecurityRequirement::new("api_key", Vec::<String>::new()))
            .security(SecurityRequirement::new("bearer", Vec::<String>::new()))
            .security(SecurityRequirement::default()),
        Auth::OpsToken => builder
            .security(SecurityRequirement::new("ops_token", Vec::<String>::new()))
            .security(SecurityRequirement::default()),
        Auth::None => builder.security(SecurityRequirement::default()),
    };
    let mut responses = ResponsesBuilder::new();
    for status in op.status {
        responses = responses.response(status.to_string(), success(op.answer, *status));
    }
    let error = Ref::from_response_name(op.errors.component());
    responses = responses.response("4XX", error.clone()).response("5XX", error);
    builder.responses(responses.build()).build()
}

fn request_body(body: Body) -> Option<utoipa::openapi::request_body::RequestBody> {
    let (content_type, body_schema, required) = match body {
        Body::None => return None,
        Body::Json => ("application/json", json!({ "type": "object" }), Required::True),
        Body::Optional => ("application/json", json!({ "type": "object" }), Required::False),
        Body::Multipart => (
            "multipart/form-data",
            json!({ "type": "object", "properties": { "file": { "type": "string", "contentMediaType": "application/octet-stream" } } }),
            Required::True,
        ),
        Body::Form => (
            "application/x-www-form-urlencoded",
            json!({ "type": "object", "required": ["purpose", "choice"], "properties": {
                "purpose": { "type": "string" }, "choice": { "type": "string", "enum": ["grant", "withdraw"] } } }),
            Required::True,
        ),
    };
    Some(
        RequestBodyBuilder::new()
            .required(Some(required))
            .content(content_type, ContentBuilder::new().schema(Some(schema(body_schema))).build())
            .build(),
    )
}

fn success(answer: Answer, status: u16) -> utoipa::openapi::Response {
    let object = || ContentBuilder::new().schema(Some(schema(json!({ "type": "object" })))).build();
    let text = || ContentBuilder::new().schema(Some(schema(json!({ "type": "string" })))).build();
    let builder = ResponseBuilder::new();
    let builder = match (answer, status) {
        (_, 204) | (Answer::Empty, _) => builder.description("No content."),
        (Answer::Json, _) => {
            builder.description("The resource, in the SDK's wire shape.").content("application/json", object())
        }
        (Answer::Sse, _) => builder.description("A stream of server-sent events.").content("text/event-stream", text()),
        (Answer::JsonOrSse, _) => builder
            .description("A JSON answer, or a stream of server-sent events for streaming methods.")
            .content("application/json", object())
            .content("text/event-stream", text()),
        (Answer::Bytes, _) => builder.description("The bytes.").content(
            "application/octet-stream",
            ContentBuilder::new()
                .schema(Some(schema(json!({ "type": "string", "contentMediaType": "application/octet-stream" }))))
                .build(),
        ),
        (Answer::Text, _) => builder.description("Prometheus text exposition.").content("text/plain", text()),
        (Answer::Html, _) => builder.description("The page.").content("text/html", text()),
    };
    builder.build()
}

fn ops_server() -> utoipa::openapi::server::Server {
    ServerBuilder::new()
        .url("http://{ops_addr}")
        .description(Some("The operations listener (AGENTD_OPS_ADDR)."))
        .parameter("ops_addr", ServerVariableBuilder::new().default_value("127.0.0.1:9464"))
        .build()
}

fn components() -> utoipa::openapi::Components {
    let mut builder = ComponentsBuilder::new()
        .security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "x-api-key",
                "An API key of the workspace.",
            ))),
        )
        .security_scheme(
            "bearer",
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An API key, environment key, runner key, sessions token or application access token; \
                 which routes each reaches is docs/SECURITY.md's.",
                    ))
                    .build(),
            ),
        )
        .security_scheme(
            "ops_token",
            SecurityScheme::Http(
                Http::builder()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("AGENTD_OPS_TOKEN, when the operator configured one."))
                    .build(),
            ),
        );
    for errors in Errors::ALL {
        builder = builder.schema(errors.component(), schema(errors.schema())).response(
            errors.component(),
            ResponseBuilder::new().description(errors.description()).content(
                errors.content_type(),
                ContentBuilder::new().schema(Some(Ref::from_schema_name(errors.component()))).build(),
            ),
        );
    }
    builder.build()
}

/// A schema from its JSON form.
fn schema(value: Value) -> RefOr<Schema> {
    RefOr::T(serde_json::from_value(value).expect("a valid schema"))
}
