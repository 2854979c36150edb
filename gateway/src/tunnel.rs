//! The data path of MCP tunnels (docs/api/tunnels.md, ADR 0026): connectors hold a
//! connection to a gateway, workers reach MCP servers behind them through that gateway.
//!
//! - **Connector → gateway**: `agentd tunnel` sends `GET /tunnel/connect` with its token
//!   and `Upgrade: agentd-tunnel`. The gateway checks the token against the tunnel's
//!   current one, answers 101, and from then on speaks HTTP/2 over the upgraded
//!   connection as the *client*: the connector serves. The gateway records itself as the
//!   tunnel's gateway (the tunnel's `_connected`) so workers know where to go.
//! - **Worker → gateway → connector → MCP server**: a worker sends `CONNECT
//!   <host>:<port>` (an HTTP proxy request) with a credential only agentd's processes can
//!   make (`agentd_schema::tunnels::proxy_credential`: bound to the tunnel's current
//!   token, good for an hour). The gateway opens an HTTP/2
//!   `CONNECT` stream to the tunnel's connector, which dials its upstream, and splices the
//!   two. TLS runs end to end between the worker and the MCP server: the worker verifies
//!   the server against the tunnel's active CA certificates, so neither the gateway nor
//!   the connector sees plaintext. A tunnel without an active certificate carries nothing.
//! - **Cuts**: rotating a token or archiving a tunnel drops its connectors on every
//!   gateway (announced on the bus, `tunnels.cut`). The old token then fails to connect.
//!   A cut that is missed (a lost bus message, a connector mid-handshake) cannot carry
//!   traffic either: every `CONNECT` checks the held connector's token against the
//!   tunnel's current one in the store, and a connector is held only once that check
//!   passed after its handshake.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use agentd_schema::tunnels::{self, TUNNEL};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use hyper::client::conn::http2::SendRequest;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::AppState;
use crate::ops::Backends;

/// The bus channel on which cuts are announced (payload: the tunnel's id).
const CUT_CHANNEL: &str = "tunnels.cut";
/// The `Upgrade` protocol of a connector's connection.
pub const UPGRADE: &str = "agentd-tunnel";
/// How often the gateway pings a connector (and how long it waits for the answer).
const KEEP_ALIVE: Duration = Duration::from_secs(20);
const KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(10);

type Empty = http_body_util::Empty<Bytes>;

/// One connector's connection to this gateway.
struct Held {
    /// Which connection (a reconnect replaces an older one).
    generation: u64,
    /// The token the connector authenticated with (`_token.id`).
    token_id: String,
    /// The workspace of its tunnel.
    workspace_id: String,
    /// Opens streams to the connector.
    send: SendRequest<Empty>,
    /// Closes the connection.
    cancel: CancellationToken,
}

/// The connectors this gateway holds, by tunnel.
#[derive(Default)]
pub struct Connectors {
    advertised: OnceLock<String>,
    held: Mutex<HashMap<String, Held>>,
    generations: std::sync::atomic::AtomicU64,
}

impl Connectors {
    /// A registry holding nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the URL workers reach this gateway at (once, when the listener is bound).
    pub fn advertise(&self, url: String) {
        let _ = self.advertised.set(url);
    }

    /// Drops this gateway's connector of `tunnel_id` and announces the cut to the others.
    pub async fn cut(&self, backends: &Backends, tunnel_id: &str) {
        self.drop_local(tunnel_id);
        if let Some(bus) = &backends.bus
            && let Err(error) = bus.publish(CUT_CHANNEL, Bytes::from(tunnel_id.to_owned())).await
        {
            tracing::warn!(%error, tunnel = tunnel_id, "cannot announce a tunnel cut; other gateways keep its connector");
        }
    }

    fn drop_local(&self, tunnel_id: &str) {
        if let Some(held) = self.held.lock().ok().and_then(|mut held| held.remove(tunnel_id)) {
            tracing::info!(tunnel = tunnel_id, "tunnel connector cut");
            held.cancel.cancel();
        }
    }

    /// A held connector's stream opener, workspace and token id.
    fn held(&self, tunnel_id: &str) -> Option<(SendRequest<Empty>, String, String)> {
        let held = self.held.lock().ok()?;
        held.get(tunnel_id).map(|h| (h.send.clone(), h.workspace_id.clone(), h.token_id.clone()))
    }
}

/// Every gateway drops the connectors a cut names, wherever it was decided.
pub fn spawn_cutter(state: AppState, stop: CancellationToken) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let Some(bus) = state.backends.bus.clone() else { return };
        let mut subscription = match bus.subscribe(CUT_CHANNEL).await {
            Ok(subscription) => subscription,
            Err(error) => {
                tracing::error!(%error, "cannot follow tunnel cuts; rotated tokens keep their connectors here");
                return;
            }
        };
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                item = subscription.next() => match item {
                    Some(agentd_proto::bus::BusItem::Message(id)) => {
                        state.tunnels.drop_local(&String::from_utf8_lossy(&id));
                    }
                    // Cuts may have been lost: every CONNECT checks its connector's token
                    // against the store anyway, so a missed cut carries no traffic.
                    Some(agentd_proto::bus::BusItem::Gap) => {}
                    None => return,
                },
            }
        }
    })
}

/// The connectors' route (outside `/v1`; the tunnel's token authorizes it).
pub fn router() -> axum::Router<AppState> {
    axum::Router::new().route("/tunnel/connect", axum::routing::get(connect))
}

fn refuse(status: StatusCode, message: &str) -> Response {
    (status, axum::Json(json!({ "type": "error", "error": { "type": "tunnel_error", "message": message } })))
        .into_response()
}

/// `GET /tunnel/connect`: a connector's connection, upgraded to HTTP/2 (the gateway
/// being the client).
pub async fn connect(State(state): State<AppState>, mut request: Request) -> Response {
    if state.lifecycle.is_draining() {
        return refuse(StatusCode::SERVICE_UNAVAILABLE, "this gateway is draining; connect to another");
    }
    let token = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default()
        .to_owned();
    // Before anything is read: a connection attempt draws from its client address's
    // keyless bucket (a connector backs off on 429 like on any other refusal).
    let bucket = match state.trusted_proxies.client(&request) {
        Some(ip) => format!("{}:{ip}", crate::admission::auth::ANONYMOUS_BUCKET),
        None => crate::admission::auth::ANONYMOUS_BUCKET.to_owned(),
    };
    match state.limiter.admit(&bucket, crate::admission::limiter::OperationClass::Read).await {
        Ok(decision) if decision.allowed => {}
        Ok(_) => return refuse(StatusCode::TOO_MANY_REQUESTS, "too many tunnel connection attempts; retry later"),
        Err(_) => return refuse(StatusCode::SERVICE_UNAVAILABLE, "the rate limiter is unavailable"),
    }
    let Some((tunnel_id, workspace_id)) = tunnels::tunnel_of_token(&token) else {
        return refuse(StatusCode::UNAUTHORIZED, "not a tunnel token");
    };
    let tunnel = match state.backends.store.get_resource(&workspace_id, TUNNEL, &tunnel_id).await {
        Ok(Some(tunnel)) => tunnel,
        Ok(None) => return refuse(StatusCode::UNAUTHORIZED, "the tunnel token is not valid"),
        Err(error) if error.is_unavailable() => return refuse(StatusCode::SERVICE_UNAVAILABLE, "the store is down"),
        Err(error) => {
            tracing::error!(%error, "reading a tunnel failed");
            return refuse(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
        }
    };
    let current = tunnel.body["_token"]["sha256"].as_str().unwrap_or_default();
    if tunnel.archived_at_ms.is_some() || current.is_empty() || current != tunnels::token_digest(&token) {
        return refuse(StatusCode::UNAUTHORIZED, "the tunnel token is not valid (rotated, or the tunnel is archived)");
    }
    let upgrades = request.headers().get(header::UPGRADE).and_then(|v| v.to_str().ok()) == Some(UPGRADE);
    if !upgrades {
        return refuse(StatusCode::BAD_REQUEST, "expected `Upgrade: agentd-tunnel`");
    }
    let on_upgrade = hyper::upgrade::on(&mut request);
    let token_id = tunnel.body["_token"]["id"].as_str().unwrap_or_default().to_owned();
    tokio::spawn(hold(state.clone(), tunnel_id, workspace_id, token_id, on_upgrade));
    Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "upgrade")
        .header(header::UPGRADE, UPGRADE)
        .body(Body::empty())
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// Holds one connector's connection until it ends or is cut.
async fn hold(
    state: AppState,
    tunnel_id: String,
    workspace_id: String,
    token_id: String,
    on_upgrade: hyper::upgrade::OnUpgrade,
) {
    let upgraded = match on_upgrade.await {
        Ok(upgraded) => upgraded,
        Err(error) => return tracing::info!(%error, tunnel = %tunnel_id, "a connector left before its upgrade"),
    };
    let mut builder = hyper::client::conn::http2::Builder::new(TokioExecutor::new());
    builder.timer(TokioTimer::new()).keep_alive_interval(KEEP_ALIVE).keep_alive_timeout(KEEP_ALIVE_TIMEOUT);
    let (send, connection) = match builder.handshake(upgraded).await {
        Ok(handshake) => handshake,
        Err(error) => return tracing::info!(%error, tunnel = %tunnel_id, "a connector's HTTP/2 handshake failed"),
    };
    // Drive the connection from the start, so streams opened right after it is held go out.
    let cancel = CancellationToken::new();
    let driver = tokio::spawn({
        let (cancel, tunnel_id) = (cancel.clone(), tunnel_id.clone());
        async move {
            tokio::select! {
                () = cancel.cancelled() => {}
                ended = connection => if let Err(error) = ended {
                    tracing::info!(%error, tunnel = %tunnel_id, "tunnel connector's connection ended");
                },
            }
        }
    });
    // A rotation or archive between the token check and now found nothing to cut here:
    // check again before holding the connector.
    let current = state.backends.store.get_resource(&workspace_id, TUNNEL, &tunnel_id).await;
    let still_valid = matches!(&current, Ok(Some(tunnel)) if tunnel.archived_at_ms.is_none()
        && tunnel.body["_token"]["id"].as_str() == Some(token_id.as_str()));
    if !still_valid {
        cancel.cancel();
        return tracing::info!(tunnel = %tunnel_id, "a connector's token was revoked during its handshake");
    }
    let generation = state.tunnels.generations.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if let Ok(mut held) = state.tunnels.held.lock() {
        let connector = Held {
            generation,
            token_id: token_id.clone(),
            workspace_id: workspace_id.clone(),
            send,
            cancel: cancel.clone(),
        };
        if let Some(older) = held.insert(tunnel_id.clone(), connector) {
            older.cancel.cancel();
        }
    }
    record_gateway(&state, &tunnel_id, &workspace_id, Some(&token_id)).await;
    tracing::info!(tunnel = %tunnel_id, "tunnel connector connected");
    let _ = driver.await;
    let current = match state.tunnels.held.lock() {
        Ok(mut held) if held.get(&tunnel_id).is_some_and(|h| h.generation == generation) => {
            held.remove(&tunnel_id);
            true
        }
        _ => false,
    };
    // The last connector of this tunnel here is gone: workers should not be sent here.
    if current {
        record_gateway(&state, &tunnel_id, &workspace_id, None).await;
    }
}

/// Writes this gateway's URL into the tunnel (`_connected`) for workers to proxy
/// through, or (`token_id` `None`) clears it if it still names this gateway.
async fn record_gateway(state: &AppState, tunnel_id: &str, workspace_id: &str, token_id: Option<&str>) {
    let Some(url) = state.tunnels.advertised.get().cloned() else {
        return tracing::error!(
            "this gateway has no advertised URL (AGENTD_ADVERTISE_URL): workers cannot reach its tunnel connectors"
        );
    };
    let store = state.backends.store.as_ref();
    for _ in 0..8 {
        let Ok(Some(tunnel)) = store.get_resource(workspace_id, TUNNEL, tunnel_id).await else { return };
        let mut body = tunnel.body.clone();
        match token_id {
            Some(token_id) => {
                let at_ms = crate::managed::query::now_ms();
                body["_connected"] = json!({ "gateway": url, "token_id": token_id, "at_ms": at_ms });
            }
            None if body["_connected"]["gateway"].as_str() == Some(url.as_str()) => body["_connected"] = Value::Null,
            None => return,
        }
        let update = agentd_schema::ResourceUpdate {
            workspace_id: workspace_id.to_owned(),
            kind: TUNNEL.into(),
            id: tunnel_id.to_owned(),
            expected_version: tunnel.version,
            body,
            versioned: false,
        };
        match store.update_resource(update).await {
            Err(agentd_schema::StoreError::Conflict(_)) => continue,
            Err(error) => return tracing::warn!(%error, tunnel = tunnel_id, "cannot record the tunnel's gateway"),
            Ok(_) => return,
        }
    }
}

/// `CONNECT host:port` from a worker: a stream to the MCP server behind the host's tunnel.
pub async fn proxy(state: AppState, mut request: Request) -> Response {
    let Some(authority) = request.uri().authority().cloned() else {
        return refuse(StatusCode::BAD_REQUEST, "CONNECT needs host:port");
    };
    let Some(tunnel_id) = tunnels::tunnel_of_host(authority.host()) else {
        return refuse(StatusCode::FORBIDDEN, "this gateway proxies only to tunnel domains");
    };
    let presented = request
        .headers()
        .get(header::PROXY_AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or_default();
    let held = state.tunnels.held(&tunnel_id);
    let key = state.secrets.derive_key(tunnels::PROXY_KEY_LABEL);
    let now_s = crate::managed::query::now_ms() / 1000;
    let token_id = held.as_ref().map(|(_, _, token_id)| token_id.as_str()).unwrap_or_default();
    if !tunnels::proxy_credential_holds(&key, &tunnel_id, token_id, presented, now_s) {
        return match held {
            Some(_) => refuse(StatusCode::PROXY_AUTHENTICATION_REQUIRED, "not an agentd worker's tunnel credential"),
            None => refuse(StatusCode::BAD_GATEWAY, "the tunnel's connector is not connected to this gateway"),
        };
    }
    let Some((mut send, workspace_id, token_id)) = held else {
        return refuse(StatusCode::BAD_GATEWAY, "the tunnel's connector is not connected to this gateway");
    };
    // The connector's token must still be the tunnel's (a missed cut carries nothing),
    // and the tunnel must trust a CA certificate.
    let store = state.backends.store.as_ref();
    let checked = async {
        let tunnel = store.get_resource(&workspace_id, TUNNEL, &tunnel_id).await?;
        let trusted = tunnels::trusted_certificates(store, &workspace_id, &tunnel_id, now_s * 1000).await?;
        Ok::<_, agentd_schema::StoreError>((tunnel, trusted))
    };
    match checked.await {
        Ok((Some(tunnel), _))
            if tunnel.archived_at_ms.is_some() || tunnel.body["_token"]["id"].as_str() != Some(token_id.as_str()) =>
        {
            state.tunnels.drop_local(&tunnel_id);
            return refuse(StatusCode::BAD_GATEWAY, "the tunnel's connector holds a token that was revoked");
        }
        Ok((None, _)) => {
            state.tunnels.drop_local(&tunnel_id);
            return refuse(StatusCode::BAD_GATEWAY, "the tunnel is gone");
        }
        Ok((_, trusted)) if trusted.is_empty() => {
            return refuse(StatusCode::FORBIDDEN, "the tunnel has no active CA certificate: it carries no traffic");
        }
        Ok(_) => {}
        Err(error) if error.is_unavailable() => return refuse(StatusCode::SERVICE_UNAVAILABLE, "the store is down"),
        Err(error) => {
            tracing::error!(%error, "reading a tunnel failed");
            return refuse(StatusCode::INTERNAL_SERVER_ERROR, "internal error");
        }
    }
    let opening = hyper::Request::builder()
        .method(Method::CONNECT)
        .uri(authority.as_str())
        .body(Empty::new())
        .map_err(|e| e.to_string());
    let upstream = async {
        let opening = opening?;
        send.ready().await.map_err(|e| e.to_string())?;
        let answer = send.send_request(opening).await.map_err(|e| e.to_string())?;
        if answer.status() != StatusCode::OK {
            return Err(format!("the connector answered {}", answer.status()));
        }
        hyper::upgrade::on(answer).await.map_err(|e| e.to_string())
    };
    let upstream = match tokio::time::timeout(Duration::from_secs(10), upstream).await {
        Ok(Ok(upstream)) => upstream,
        Ok(Err(error)) => {
            return refuse(StatusCode::BAD_GATEWAY, &format!("the tunnel did not open a stream: {error}"));
        }
        Err(_) => return refuse(StatusCode::GATEWAY_TIMEOUT, "the tunnel's connector did not answer in 10 s"),
    };
    let client = hyper::upgrade::on(&mut request);
    tokio::spawn(async move {
        let Ok(client) = client.await else { return };
        let (mut client, mut upstream) = (TokioIo::new(client), TokioIo::new(upstream));
        if let Err(error) = tokio::io::copy_bidirectional(&mut client, &mut upstream).await {
            tracing::debug!(%error, tunnel = %tunnel_id, "a tunnel stream ended");
        }
    });
    let mut answer = StatusCode::OK.into_response();
    answer.headers_mut().insert("x-agentd-tunnel", HeaderValue::from_static("open"));
    answer
}
