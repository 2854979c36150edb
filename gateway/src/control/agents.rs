//! Agent authoring (docs/api/config.md "Agents"): drafts of the workspace's managed
//! agents, their validation and publication, and the publications. Parse → call
//! `domain::agent_drafts` → render; every error a [`Problem`].

use agentd_schema::ids::AgentId;
use agentd_schema::{AgentDraftRow, AgentPublicationRow};
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{Value, json};

use super::problem::{Problem, ProblemResult};
use crate::AppState;
use crate::admission::Tenant;
use crate::domain::agent_drafts::{self, Publish};
use crate::managed::agents::render as render_agent;
use crate::managed::body;
use crate::managed::query::{ChunkedPage, Query, decode_cursor, rfc3339};

fn render_draft(draft: &AgentDraftRow) -> Value {
    json!({
        "type": "agent_draft",
        "agent_id": draft.agent_id,
        "config": draft.body,
        "revision": draft.revision,
        "created_at": rfc3339(draft.created_at_ms),
        "updated_at": rfc3339(draft.updated_at_ms),
    })
}

fn render_publication(publication: &AgentPublicationRow) -> Value {
    json!({
        "type": "agent_publication",
        "fingerprint": publication.fingerprint,
        "agent_id": publication.agent_id,
        "agent_version": publication.agent_version,
        "config": publication.config,
        "created_at": rfc3339(publication.created_at_ms),
    })
}

/// `GET /v1/config/agents`: the workspace's drafts, newest agent first; `limit` (1–100,
/// default 20) and the `page` cursor of the previous page's `next_page`.
pub async fn list(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    uri: Uri,
) -> ProblemResult<Json<Value>> {
    let query = Query::from_uri(&uri);
    let limit = query.int("limit", 1, 100)?.unwrap_or(20);
    let after = query.string("page").map(decode_cursor).transpose()?;
    let store = state.backends.store.as_ref();
    // A draft is up to a request body (a few MiB): a few rows at a time.
    let mut page = ChunkedPage::new(after, limit, 8);
    while let Some((after, n)) = page.next_fetch() {
        let rows = agent_drafts::list(store, &tenant.workspace_id, after.as_deref(), n).await?;
        page.take(&rows, |draft| draft.agent_id.clone(), render_draft);
    }
    Ok(Json(page.finish()))
}

/// `GET /v1/config/agents/{agent_id}`: the draft.
pub async fn retrieve(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent_id): Path<AgentId>,
) -> ProblemResult<Json<Value>> {
    let draft = agent_drafts::get(state.backends.store.as_ref(), &tenant.workspace_id, &agent_id).await?;
    Ok(Json(render_draft(&draft)))
}

/// `PUT /v1/config/agents/{agent_id}`: the body (the agent's configuration fields, as
/// `POST /v1/agents` takes them) becomes the draft whole → 201 when it creates the draft,
/// 200 when it replaces it. Not validated here: see `validate`.
pub async fn put(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent_id): Path<AgentId>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    let config = body::object(&bytes)?;
    let draft = agent_drafts::put(state.backends.store.as_ref(), &tenant.workspace_id, &agent_id, config).await?;
    let status = if draft.revision == 1 { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, Json(render_draft(&draft))).into_response())
}

/// `DELETE /v1/config/agents/{agent_id}`: discards the draft → 204.
pub async fn discard(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent_id): Path<AgentId>,
) -> ProblemResult<StatusCode> {
    agent_drafts::discard(state.backends.store.as_ref(), &tenant.workspace_id, &agent_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /v1/config/agents/{agent_id}/validate` (empty body or `{}`) → 200
/// `{"valid", "errors": [{"path", "message"}], "config"}`: every problem of the draft,
/// and when there is none the configuration publishing it would write.
pub async fn validate(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent_id): Path<AgentId>,
    bytes: Bytes,
) -> ProblemResult<Json<Value>> {
    body::only_known(&body::object(&bytes)?, &[], "")?;
    let catalog = state.catalogs.of(&tenant.workspace_id)?;
    let store = state.backends.store.as_ref();
    let checked = agent_drafts::validate(store, &catalog, &tenant.workspace_id, &agent_id).await?;
    Ok(Json(match checked {
        Ok(config) => json!({ "valid": true, "errors": [], "config": config }),
        Err(errors) => json!({ "valid": false, "errors": errors, "config": null }),
    }))
}

/// `POST /v1/config/agents/{agent_id}/publish` (empty body or `{}`) → the publication
/// with the agent as it is now (`agent`): 201 when this call recorded the publication,
/// 200 when the same content was published before. An invalid draft is a 422 listing
/// every problem.
pub async fn publish(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(agent_id): Path<AgentId>,
    bytes: Bytes,
) -> ProblemResult<Response> {
    body::only_known(&body::object(&bytes)?, &[], "")?;
    let catalog = state.catalogs.of(&tenant.workspace_id)?;
    let store = state.backends.store.as_ref();
    match agent_drafts::publish(store, &catalog, &tenant.workspace_id, &agent_id).await? {
        Publish::Rejected(errors) => Err(Problem::validation(errors)),
        Publish::Published(published) => {
            let mut body = render_publication(&published.publication);
            body["agent"] = render_agent(&published.agent);
            let status = if published.created { StatusCode::CREATED } else { StatusCode::OK };
            Ok((status, Json(body)).into_response())
        }
    }
}

/// `GET /v1/config/publications/{fingerprint}`.
pub async fn publication(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(fingerprint): Path<String>,
) -> ProblemResult<Json<Value>> {
    let row = agent_drafts::publication(state.backends.store.as_ref(), &tenant.workspace_id, &fingerprint).await?;
    Ok(Json(render_publication(&row)))
}

/// `GET /v1/config/publications/{fingerprint}/export`: the published configuration alone,
/// a body `POST /v1/agents` (or `PUT /v1/config/agents/{agent_id}`) takes as it is.
pub async fn export(
    State(state): State<AppState>,
    Extension(tenant): Extension<Tenant>,
    Path(fingerprint): Path<String>,
) -> ProblemResult<Json<Value>> {
    let row = agent_drafts::publication(state.backends.store.as_ref(), &tenant.workspace_id, &fingerprint).await?;
    Ok(Json(row.config))
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;
    use serde_json::json;

    use crate::test_rig::Rig;

    fn model() -> String {
        agentd_schema::catalog::current().models().first().expect("a model in the catalog").id.clone()
    }

    #[tokio::test]
    async fn draft_validate_publish_and_publish_again() {
        let rig = Rig::new().await;
        let agent = agentd_schema::ids::new_id("agent");
        let draft = format!("/v1/config/agents/{agent}");
        assert_eq!(rig.call("GET", &draft, json!(null)).await.status, StatusCode::NOT_FOUND);

        // An invalid draft is stored as written; validate lists every problem.
        let broken = json!({"name": "", "model": "no-such-model", "tools": [{"type": "nope"}, {"type": "custom"}], "surprise": 1});
        let put = rig.call("PUT", &draft, broken.clone()).await;
        assert_eq!((put.status, put.body["revision"].as_i64()), (StatusCode::CREATED, Some(1)), "{}", put.text);
        assert_eq!(put.body["config"], broken);
        let checked = rig.call("POST", &format!("{draft}/validate"), json!({})).await;
        assert_eq!(checked.status, StatusCode::OK, "{}", checked.text);
        assert_eq!(checked.body["valid"], false);
        let paths: Vec<&str> =
            checked.body["errors"].as_array().unwrap().iter().map(|e| e["path"].as_str().unwrap()).collect();
        for path in ["/surprise", "/name", "/model/id", "/tools/0/type", "/tools/1/name"] {
            assert!(paths.contains(&path), "{path} in {paths:?}");
        }
        let refused = rig.call("POST", &format!("{draft}/publish"), json!({})).await;
        assert_eq!(refused.status, StatusCode::UNPROCESSABLE_ENTITY, "{}", refused.text);
        assert_eq!(refused.body["code"], "validation_failed");
        assert_eq!(refused.body["errors"], checked.body["errors"]);
        assert_eq!(rig.call("GET", &format!("/v1/agents/{agent}"), json!(null)).await.status, StatusCode::NOT_FOUND);

        // A valid draft publishes a new agent with the path's id, then is idempotent.
        let put = rig.call("PUT", &draft, json!({"id": agent, "name": "drafted", "model": model()})).await;
        assert_eq!((put.status, put.body["revision"].as_i64()), (StatusCode::OK, Some(2)), "{}", put.text);
        let first = rig.send(rig.request("POST", &format!("{draft}/publish"), axum::body::Body::empty())).await;
        assert_eq!(first.status, StatusCode::CREATED, "{}", first.text);
        assert_eq!(
            (first.body["agent"]["id"].as_str(), first.body["agent"]["version"].as_i64()),
            (Some(agent.as_str()), Some(1))
        );
        let fingerprint = first.body["fingerprint"].as_str().unwrap().to_owned();
        let again = rig.call("POST", &format!("{draft}/publish"), json!({})).await;
        assert_eq!(again.status, StatusCode::OK, "{}", again.text);
        assert_eq!(again.body["fingerprint"], fingerprint.as_str());
        assert_eq!(again.body["agent"]["version"], 1, "no new version for the same content");
        // A change is a new version, through the managed update's rules.
        rig.call("PUT", &draft, json!({"name": "renamed", "model": model()})).await;
        let second = rig.call("POST", &format!("{draft}/publish"), json!({})).await;
        assert_eq!((second.status, second.body["agent"]["version"].as_i64()), (StatusCode::CREATED, Some(2)));
        assert_ne!(second.body["fingerprint"], fingerprint.as_str());
        let managed = rig.call("GET", &format!("/v1/agents/{agent}"), json!(null)).await;
        assert_eq!((managed.body["name"].as_str(), managed.body["version"].as_i64()), (Some("renamed"), Some(2)));

        let publication = rig.call("GET", &format!("/v1/config/publications/{fingerprint}"), json!(null)).await;
        assert_eq!(publication.status, StatusCode::OK, "{}", publication.text);
        assert_eq!(
            (publication.body["agent_version"].as_i64(), publication.body["config"]["name"].as_str()),
            (Some(1), Some("drafted"))
        );
        let export = rig.call("GET", &format!("/v1/config/publications/{fingerprint}/export"), json!(null)).await;
        assert_eq!(export.body, publication.body["config"]);
        let listed = rig.call("GET", "/v1/config/agents?limit=1", json!(null)).await;
        assert_eq!(listed.body["data"][0]["agent_id"], agent.as_str(), "{}", listed.text);
        assert_eq!(rig.call("DELETE", &draft, json!(null)).await.status, StatusCode::NO_CONTENT);
        assert_eq!(rig.call("DELETE", &draft, json!(null)).await.status, StatusCode::NOT_FOUND);
    }
}
