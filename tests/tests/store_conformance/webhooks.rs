//! Webhooks (`WebhookStore` and the facts other areas write): a fact reaches the outbox
//! only for enabled subscriptions of its workspace that take its type, inside the
//! fact's transaction; deliveries are claimed under a lease, settled once, and failures
//! disable a subscription at the threshold.

use agentd_schema::{NewResource, WebhookAttempt, WebhookPut, WebhookPutRequest, WebhookSubscriptionRow};

use super::*;

fn subscription(ws: &str, id: &str, types: &[&str]) -> WebhookSubscriptionRow {
    WebhookSubscriptionRow {
        workspace_id: ws.to_owned(),
        id: id.to_owned(),
        organization_id: "org_1".into(),
        url: format!("https://hooks.example/{id}"),
        name: String::new(),
        description: String::new(),
        event_types: types.iter().map(|t| (*t).to_owned()).collect(),
        sealed_secret: "sealed".into(),
        enabled: true,
        disabled_reason: String::new(),
        consecutive_failures: 0,
        created_at_ms: 0,
        updated_at_ms: 0,
    }
}

async fn put(store: &dyn Store, row: WebhookSubscriptionRow, mode: WebhookPut) -> agentd_schema::WebhookPutOutcome {
    store.put_subscription(WebhookPutRequest { row, mode, set_state: true, max: 10 }).await.unwrap()
}

async fn agent(store: &dyn Store, ws: &str) -> String {
    let id = agentd_schema::ids::new_id("agent");
    store
        .create_resource(NewResource {
            id: id.clone(),
            workspace_id: ws.to_owned(),
            kind: "agent".into(),
            parent_id: None,
            body: json!({ "name": "a" }),
            versioned: true,
        })
        .await
        .unwrap();
    id
}

conformance!(subscriptions_are_put_listed_and_deleted_per_workspace, |store, _clock| async move {
    let created =
        put(store.as_ref(), subscription("ws_1", "hook-a", &["agent.created", "agent.archived"]), WebhookPut::Create)
            .await;
    assert!(created.created);
    assert_eq!(created.row.event_types, vec!["agent.archived".to_owned(), "agent.created".to_owned()], "sorted");
    let again = store
        .put_subscription(WebhookPutRequest {
            row: subscription("ws_1", "hook-a", &["agent.created"]),
            mode: WebhookPut::Create,
            set_state: true,
            max: 3,
        })
        .await;
    assert!(matches!(again, Err(StoreError::Conflict(_))), "{again:?}");
    // A replace keeps the secret and, without `set_state`, the state.
    let mut replacement = subscription("ws_1", "hook-a", &["agent.updated"]);
    replacement.sealed_secret = "other".into();
    replacement.enabled = false;
    let replaced = store
        .put_subscription(WebhookPutRequest { row: replacement, mode: WebhookPut::Upsert, set_state: false, max: 3 })
        .await
        .unwrap();
    assert!(!replaced.created && replaced.row.enabled && replaced.row.sealed_secret == "sealed", "{replaced:?}");
    assert_eq!(replaced.row.event_types, vec!["agent.updated".to_owned()]);
    let missing = store
        .put_subscription(WebhookPutRequest {
            row: subscription("ws_1", "hook-z", &["agent.created"]),
            mode: WebhookPut::Replace,
            set_state: true,
            max: 3,
        })
        .await;
    assert!(matches!(missing, Err(StoreError::NotFound { .. })), "{missing:?}");

    assert_eq!(store.get_subscription("ws_2", "hook-a").await.unwrap(), None, "another workspace sees nothing");
    put(store.as_ref(), subscription("ws_1", "hook-b", &["agent.created"]), WebhookPut::Create).await;
    put(store.as_ref(), subscription("ws_1", "hook-c", &["agent.created"]), WebhookPut::Create).await;
    let over = store
        .put_subscription(WebhookPutRequest {
            row: subscription("ws_1", "hook-d", &["agent.created"]),
            mode: WebhookPut::Create,
            set_state: true,
            max: 3,
        })
        .await;
    assert!(matches!(over, Err(StoreError::Conflict(_))), "the limit holds: {over:?}");
    let listed: Vec<String> = store.list_subscriptions("ws_1").await.unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(listed, ["hook-a", "hook-b", "hook-c"]);
    assert!(store.set_subscription_secret("ws_1", "hook-b", "rotated").await.unwrap());
    assert_eq!(store.get_subscription("ws_1", "hook-b").await.unwrap().unwrap().sealed_secret, "rotated");
    assert!(!store.delete_subscription("ws_2", "hook-b").await.unwrap());
    assert!(store.delete_subscription("ws_1", "hook-b").await.unwrap());
    assert!(store.get_subscription("ws_1", "hook-b").await.unwrap().is_none());
});

conformance!(facts_reach_only_subscribers_of_their_type_and_workspace, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "hooks").await.unwrap().id;
    put(store.as_ref(), subscription(&ws, "created", &["agent.created"]), WebhookPut::Create).await;
    put(store.as_ref(), subscription(&ws, "archived", &["agent.archived"]), WebhookPut::Create).await;
    let mut off = subscription(&ws, "off", &["agent.created"]);
    off.enabled = false;
    put(store.as_ref(), off, WebhookPut::Create).await;
    put(store.as_ref(), subscription("ws_elsewhere", "other", &["agent.created"]), WebhookPut::Create).await;

    let id = agent(store.as_ref(), &ws).await;
    store.archive_resource(&ws, "agent", &id).await.unwrap();
    clock.advance(5);
    store.archive_resource(&ws, "agent", &id).await.unwrap();
    let created = store.list_deliveries(&ws, "created", 10).await.unwrap();
    assert_eq!(created.len(), 1, "{created:?}");
    let delivery = &created[0];
    assert_eq!((delivery.event_type.as_str(), delivery.resource_id.as_str()), ("agent.created", id.as_str()));
    assert_eq!(
        (delivery.state.as_str(), delivery.attempts, delivery.organization_id.as_str()),
        ("pending", 0, "org_1")
    );
    assert_eq!(delivery.id, format!("{}.created", delivery.event_id));
    assert_eq!(store.list_deliveries(&ws, "archived", 10).await.unwrap().len(), 1, "archiving twice reports once");
    assert!(store.list_deliveries(&ws, "off", 10).await.unwrap().is_empty(), "a disabled subscription gets nothing");
    assert!(store.list_deliveries("ws_elsewhere", "other", 10).await.unwrap().is_empty());

    // A session's turn: its status events become webhook events in the appending transaction.
    put(
        store.as_ref(),
        subscription(&ws, "turns", &["session.status_run_started", "session.status_idled"]),
        WebhookPut::Create,
    )
    .await;
    let session = agentd_schema::ids::new_id("sesn");
    store
        .create_session(NewSession {
            id: session.clone(),
            workspace_id: ws.clone(),
            status: "idle".into(),
            body: json!({}),
            agent_id: None,
            agent_version: None,
        })
        .await
        .unwrap();
    store.append_events(&session, vec![status_event(&session, "session.status_running")]).await.unwrap();
    store
        .append_events(&session, vec![agent_event(&session, "hi"), status_event(&session, "session.status_idle")])
        .await
        .unwrap();
    let mut turns: Vec<String> =
        store.list_deliveries(&ws, "turns", 10).await.unwrap().into_iter().map(|d| d.event_type).collect();
    turns.sort();
    assert_eq!(turns, ["session.status_idled", "session.status_run_started"]);
});

conformance!(deliveries_are_leased_settled_and_failures_disable, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "leases").await.unwrap().id;
    put(store.as_ref(), subscription(&ws, "hook", &["agent.created"]), WebhookPut::Create).await;
    for _ in 0..3 {
        agent(store.as_ref(), &ws).await;
    }
    // A deferred claim is pending again later, its attempt not counted.
    let deferred = store.claim_deliveries(60_000, 1).await.unwrap();
    let retry_at_ms = clock.now_ms() + 500;
    store.settle_delivery(&deferred[0], WebhookAttempt::Deferred { retry_at_ms }).await.unwrap();
    let claimed = store.claim_deliveries(60_000, 3).await.unwrap();
    assert_eq!(claimed.len(), 2, "the deferred one is not due yet");
    assert!(claimed.iter().all(|d| d.attempts == 1));
    clock.advance(500);
    let rest = store.claim_deliveries(60_000, 10).await.unwrap();
    assert_eq!(rest.len(), 1, "leased rows are not claimed twice");
    assert_eq!((rest[0].id.as_str(), rest[0].attempts), (deferred[0].id.as_str(), 1));
    assert!(store.claim_deliveries(60_000, 10).await.unwrap().is_empty());

    store.settle_delivery(&claimed[0], WebhookAttempt::Delivered { status: 204 }).await.unwrap();
    let retry_at = clock.now_ms() + 1_000;
    let failure = |retry_at_ms| WebhookAttempt::Failed {
        status: Some(503),
        error: "HTTP 503".into(),
        retry_at_ms,
        disable_after: 2,
    };
    store.settle_delivery(&claimed[1], failure(Some(retry_at))).await.unwrap();
    assert!(store.claim_deliveries(60_000, 10).await.unwrap().is_empty(), "not due yet");
    clock.advance(1_000);
    let again = store.claim_deliveries(60_000, 10).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!((again[0].id.as_str(), again[0].attempts), (claimed[1].id.as_str(), 2));
    store.settle_delivery(&again[0], failure(None)).await.unwrap();
    let hook = store.get_subscription(&ws, "hook").await.unwrap().unwrap();
    assert!(!hook.enabled && hook.disabled_reason.contains("2 consecutive"), "{hook:?}");
    assert_eq!(hook.consecutive_failures, 2);
    let pending = store.list_deliveries(&ws, "hook", 10).await.unwrap();
    let third = pending.iter().find(|d| d.id == rest[0].id).unwrap();
    assert_eq!(third.state, "canceled", "disabling cancels what is still pending");
    store.settle_delivery(&rest[0], WebhookAttempt::Canceled).await.unwrap();

    let shown = store.list_deliveries(&ws, "hook", 10).await.unwrap();
    let mut states: Vec<&str> = shown.iter().map(|d| d.state.as_str()).collect();
    states.sort();
    assert_eq!(states, ["canceled", "delivered", "failed"]);
    let failed = shown.iter().find(|d| d.state == "failed").unwrap();
    assert_eq!((failed.last_status, failed.last_error.as_deref()), (Some(503), Some("HTTP 503")));

    // Re-enabling clears the reason and the count; a success would too.
    let mut enabled = subscription(&ws, "hook", &["agent.created"]);
    enabled.enabled = true;
    let outcome = put(store.as_ref(), enabled, WebhookPut::Replace).await;
    assert!(outcome.row.enabled && outcome.row.disabled_reason.is_empty() && outcome.row.consecutive_failures == 0);

    clock.advance(10_000);
    assert_eq!(store.purge_deliveries(clock.now_ms(), 100).await.unwrap(), 3);
    assert!(store.list_deliveries(&ws, "hook", 10).await.unwrap().is_empty());
});

conformance!(a_delivery_canceled_in_flight_is_not_revived_by_its_retry, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "in-flight").await.unwrap().id;
    put(store.as_ref(), subscription(&ws, "hook", &["agent.created"]), WebhookPut::Create).await;
    agent(store.as_ref(), &ws).await;
    let claimed = store.claim_deliveries(60_000, 10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    // Its owner disables the subscription while the send is in flight.
    let mut off = subscription(&ws, "hook", &["agent.created"]);
    off.enabled = false;
    put(store.as_ref(), off, WebhookPut::Replace).await;
    let failed = WebhookAttempt::Failed {
        status: Some(503),
        error: "HTTP 503".into(),
        retry_at_ms: Some(clock.now_ms() + 1_000),
        disable_after: 20,
    };
    store.settle_delivery(&claimed[0], failed).await.unwrap();
    let shown = store.list_deliveries(&ws, "hook", 10).await.unwrap();
    assert_eq!(shown[0].state, "canceled", "the retry does not bring it back");
    let mut on = subscription(&ws, "hook", &["agent.created"]);
    on.enabled = true;
    put(store.as_ref(), on, WebhookPut::Replace).await;
    clock.advance(2_000);
    assert!(store.claim_deliveries(60_000, 10).await.unwrap().is_empty(), "re-enabling sends nothing old");
});
