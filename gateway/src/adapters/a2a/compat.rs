//! A2A v0.3 on the same endpoints: the slash-named JSON-RPC methods, translated to the
//! 1.0 core and back (`kind` discriminators, lowercase-hyphen states, `final` on status
//! updates, `kind`-tagged parts).

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use super::dispatch::{Answer, call, error_response, sse};
use super::tasks::{Item, is_final};
use super::{A2aError, A2aResult, Endpoint};
use crate::AppState;
use crate::admission::Tenant;

/// Serves one v0.3 method.
pub async fn handle(
    state: &AppState,
    tenant: &Tenant,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    method: &str,
    params: &Value,
    id: Value,
) -> Response {
    let (target, params) = match request(method, params) {
        Ok(translated) => translated,
        Err(error) => return error_response(&id, &error),
    };
    match call(state, tenant, endpoint, headers, target, &params).await {
        Ok(Answer::Result(result)) => {
            let result = response(method, &params, result);
            axum::Json(json!({ "jsonrpc": "2.0", "id": id, "result": result })).into_response()
        }
        Ok(Answer::Stream(rx)) => sse(rx, move |item| match item {
            Item::Event(event) => json!({ "jsonrpc": "2.0", "id": id, "result": stream_event(&event) }),
            Item::Error(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error.to_jsonrpc() }),
        }),
        Err(error) => error_response(&id, &error),
    }
}

/// The 1.0 method and params for a v0.3 call.
fn request(method: &str, params: &Value) -> A2aResult<(&'static str, Value)> {
    let mut out = Map::new();
    let copy = |out: &mut Map<String, Value>, from: &str, to: &str| {
        if !params[from].is_null() {
            out.insert(to.to_owned(), params[from].clone());
        }
    };
    let target = match method {
        "message/send" | "message/stream" => {
            out.insert("message".into(), message_in(&params["message"])?);
            let config = &params["configuration"];
            let mut configuration = Map::new();
            // Given as sent: its bounds are checked once, by the 1.0 operation.
            if !config["historyLength"].is_null() {
                configuration.insert("historyLength".into(), config["historyLength"].clone());
            }
            if config["blocking"] == false {
                configuration.insert("returnImmediately".into(), json!(true));
            }
            if config["pushNotificationConfig"].is_object() {
                configuration.insert("taskPushNotificationConfig".into(), push_in(&config["pushNotificationConfig"]));
            }
            out.insert("configuration".into(), Value::Object(configuration));
            copy(&mut out, "metadata", "metadata");
            if method == "message/send" { "SendMessage" } else { "SendStreamingMessage" }
        }
        "tasks/get" => {
            copy(&mut out, "id", "id");
            copy(&mut out, "historyLength", "historyLength");
            "GetTask"
        }
        "tasks/cancel" => {
            copy(&mut out, "id", "id");
            "CancelTask"
        }
        "tasks/resubscribe" => {
            copy(&mut out, "id", "id");
            "SubscribeToTask"
        }
        "tasks/pushNotificationConfig/set" => {
            let Value::Object(config) = push_in(&params["pushNotificationConfig"]) else {
                return Err(A2aError::params("pushNotificationConfig: an object is required"));
            };
            out = config;
            copy(&mut out, "taskId", "taskId");
            "CreateTaskPushNotificationConfig"
        }
        "tasks/pushNotificationConfig/get" | "tasks/pushNotificationConfig/delete" => {
            copy(&mut out, "id", "taskId");
            copy(&mut out, "pushNotificationConfigId", "id");
            if method.ends_with("get") { "GetTaskPushNotificationConfig" } else { "DeleteTaskPushNotificationConfig" }
        }
        "tasks/pushNotificationConfig/list" => {
            copy(&mut out, "id", "taskId");
            "ListTaskPushNotificationConfigs"
        }
        "agent/getAuthenticatedExtendedCard" => "GetExtendedAgentCard",
        other => return Err(A2aError::method(other)),
    };
    Ok((target, Value::Object(out)))
}

fn push_in(config: &Value) -> Value {
    let mut out = json!({});
    for field in ["id", "url", "token"] {
        if !config[field].is_null() {
            out[field] = config[field].clone();
        }
    }
    let auth = &config["authentication"];
    if auth.is_object() {
        let scheme = auth["schemes"].as_array().and_then(|s| s.first()).cloned().unwrap_or(Value::Null);
        let mut authentication = json!({ "scheme": scheme });
        if !auth["credentials"].is_null() {
            authentication["credentials"] = auth["credentials"].clone();
        }
        out["authentication"] = authentication;
    }
    out
}

fn message_in(message: &Value) -> A2aResult<Value> {
    if !message.is_object() {
        return Err(A2aError::params("message: an object is required"));
    }
    let role = match message["role"].as_str() {
        Some("user") => "ROLE_USER",
        Some("agent") => "ROLE_AGENT",
        other => {
            return Err(A2aError::params(format!("message.role: expected user, got {}", other.unwrap_or("nothing"))));
        }
    };
    let mut parts = Vec::new();
    for (i, part) in message["parts"].as_array().into_iter().flatten().enumerate() {
        parts.push(match part["kind"].as_str() {
            Some("text") => json!({ "text": part["text"] }),
            Some("data") => json!({ "data": part["data"] }),
            Some("file") => json!({ "url": part["file"]["uri"] }),
            _ => return Err(A2aError::params(format!("message.parts[{i}].kind: expected text, data or file"))),
        });
    }
    let mut out = json!({ "role": role, "parts": parts });
    for field in ["messageId", "contextId", "taskId", "metadata"] {
        if !message[field].is_null() {
            out[field] = message[field].clone();
        }
    }
    Ok(out)
}

fn state_out(state: &Value) -> Value {
    let name = state.as_str().unwrap_or("TASK_STATE_UNSPECIFIED").trim_start_matches("TASK_STATE_");
    json!(if name == "UNSPECIFIED" { "unknown".to_owned() } else { name.to_lowercase().replace('_', "-") })
}

fn parts_out(parts: &Value) -> Value {
    json!(
        parts
            .as_array()
            .into_iter()
            .flatten()
            .map(|p| if p.get("text").is_some() {
                json!({ "kind": "text", "text": p["text"] })
            } else if p.get("data").is_some() {
                json!({ "kind": "data", "data": p["data"] })
            } else {
                json!({ "kind": "file", "file": { "uri": p["url"] } })
            })
            .collect::<Vec<_>>()
    )
}

fn message_out(message: &Value) -> Value {
    let mut out = json!({
        "kind": "message",
        "messageId": message["messageId"],
        "role": if message["role"] == "ROLE_AGENT" { "agent" } else { "user" },
        "parts": parts_out(&message["parts"]),
    });
    for field in ["contextId", "taskId", "metadata"] {
        if !message[field].is_null() {
            out[field] = message[field].clone();
        }
    }
    out
}

fn status_out(status: &Value) -> Value {
    let mut out = json!({ "state": state_out(&status["state"]) });
    if !status["timestamp"].is_null() {
        out["timestamp"] = status["timestamp"].clone();
    }
    if status["message"].is_object() {
        out["message"] = message_out(&status["message"]);
    }
    out
}

fn artifact_out(artifact: &Value) -> Value {
    let mut out = json!({ "artifactId": artifact["artifactId"], "parts": parts_out(&artifact["parts"]) });
    if !artifact["name"].is_null() {
        out["name"] = artifact["name"].clone();
    }
    out
}

fn task_out(task: &Value) -> Value {
    let mut out = json!({ "kind": "task", "id": task["id"], "contextId": task["contextId"], "status": status_out(&task["status"]) });
    if let Some(history) = task["history"].as_array() {
        out["history"] = json!(history.iter().map(message_out).collect::<Vec<_>>());
    }
    if let Some(artifacts) = task["artifacts"].as_array() {
        out["artifacts"] = json!(artifacts.iter().map(artifact_out).collect::<Vec<_>>());
    }
    out
}

fn push_out(config: &Value) -> Value {
    let mut inner = json!({ "id": config["id"], "url": config["url"] });
    if !config["token"].is_null() {
        inner["token"] = config["token"].clone();
    }
    if !config["authentication"]["scheme"].is_null() {
        inner["authentication"] = json!({ "schemes": [config["authentication"]["scheme"]] });
    }
    json!({ "taskId": config["taskId"], "pushNotificationConfig": inner })
}

/// A 1.0 `StreamResponse` as a v0.3 stream result.
fn stream_event(event: &Value) -> Value {
    if event["task"].is_object() {
        return task_out(&event["task"]);
    }
    if event["message"].is_object() {
        return message_out(&event["message"]);
    }
    if let Some(update) = event.get("statusUpdate") {
        let final_ = is_final(update["status"]["state"].as_str().unwrap_or(""));
        return json!({
            "kind": "status-update", "taskId": update["taskId"], "contextId": update["contextId"],
            "status": status_out(&update["status"]), "final": final_,
        });
    }
    if let Some(update) = event.get("artifactUpdate") {
        return json!({
            "kind": "artifact-update", "taskId": update["taskId"], "contextId": update["contextId"],
            "artifact": artifact_out(&update["artifact"]),
            "append": update["append"] == true, "lastChunk": update["lastChunk"] == true,
        });
    }
    event.clone()
}

/// A 1.0 result as the v0.3 result of `method`.
fn response(method: &str, _params: &Value, result: Value) -> Value {
    match method {
        "message/send" => stream_event(&result),
        "tasks/get" | "tasks/cancel" => task_out(&result),
        "tasks/pushNotificationConfig/set" | "tasks/pushNotificationConfig/get" => push_out(&result),
        "tasks/pushNotificationConfig/list" => {
            json!(result["configs"].as_array().into_iter().flatten().map(push_out).collect::<Vec<_>>())
        }
        "tasks/pushNotificationConfig/delete" => Value::Null,
        _ => result,
    }
}
