//! The environment work queue (`WorkStore`).

use super::*;

conformance!(work_items_move_through_the_protocol_states, |store, clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let created = store.ensure_work_item(&workspace, "env_a", &session, "self_hosted").await.unwrap().unwrap();
    assert_eq!(created.state, "queued");
    assert!(
        store.ensure_work_item(&workspace, "env_a", &session, "self_hosted").await.unwrap().is_none(),
        "one open item per session"
    );
    let source = WorkSource::Environment("env_a".into());
    assert!(store.poll_work(&WorkSource::Environment("env_b".into()), 5_000, "h0").await.unwrap().is_none());
    let offered = store.poll_work(&source, 5_000, "hash-1").await.unwrap().unwrap();
    assert_eq!(offered.id, created.id);
    let stats = store.work_stats("env_a").await.unwrap();
    assert_eq!((stats.depth, stats.pending), (0, 1));
    assert!(
        store.poll_work(&source, 5_000, "hash-2").await.unwrap().is_none(),
        "offered items wait for the reclaim time"
    );
    clock.advance(5_001);
    let token = "wst-test-token";
    let reoffered = store.poll_work(&source, 5_000, &agentd_schema::ids::secret_hash(token)).await.unwrap().unwrap();
    assert_eq!(reoffered.id, created.id, "an unacked item is offered again after reclaim_older_than_ms");
    // Heartbeats need an ack first; the ack happens once.
    assert!(matches!(
        store.heartbeat_work("env_a", &created.id, "NO_HEARTBEAT", None).await.unwrap(),
        Some(Heartbeat::NotAcked(_))
    ));
    let acked = store.ack_work("env_a", &created.id).await.unwrap().unwrap();
    assert_eq!(acked.state, "starting");
    assert!(store.ack_work("env_a", &created.id).await.unwrap().is_err(), "a second ack conflicts");
    // First heartbeat claims with NO_HEARTBEAT; later ones echo the previous string.
    let Some(Heartbeat::Recorded { item: first, extended: true }) =
        store.heartbeat_work("env_a", &created.id, "NO_HEARTBEAT", Some(10)).await.unwrap()
    else {
        panic!("first heartbeat refused")
    };
    assert_eq!((first.state.as_str(), first.ttl_seconds), ("active", 10));
    let stamp = first.last_heartbeat.clone().unwrap();
    assert!(matches!(
        store.heartbeat_work("env_a", &created.id, "NO_HEARTBEAT", None).await.unwrap(),
        Some(Heartbeat::PreconditionFailed(_))
    ));
    assert!(matches!(
        store.heartbeat_work("env_a", &created.id, "2020-01-01T00:00:00Z", None).await.unwrap(),
        Some(Heartbeat::PreconditionFailed(_))
    ));
    let Some(Heartbeat::Recorded { item: second, extended: true }) =
        store.heartbeat_work("env_a", &created.id, &stamp, None).await.unwrap()
    else {
        panic!("echoed heartbeat refused")
    };
    assert_ne!(second.last_heartbeat.as_deref(), Some(stamp.as_str()), "every heartbeat string is new");
    // The sessions token of the current offer resolves until the item stops.
    let resolved = store.resolve_sessions_token(token).await.unwrap().expect("the current offer's token resolves");
    assert_eq!((resolved.work_id.as_str(), resolved.session_id.as_str()), (created.id.as_str(), session.as_str()));
    assert!(store.resolve_sessions_token("hash-1").await.unwrap().is_none());
    // Graceful stop of a held item asks it to stop; heartbeats are then not compared.
    let stopping = store.stop_work("env_a", &created.id, false).await.unwrap().unwrap().unwrap();
    assert_eq!(stopping.state, "stopping");
    assert!(matches!(
        store.heartbeat_work("env_a", &created.id, "anything", None).await.unwrap(),
        Some(Heartbeat::Recorded { extended: false, .. })
    ));
    let stopped = store.stop_work("env_a", &created.id, true).await.unwrap().unwrap().unwrap();
    assert_eq!(stopped.state, "stopped");
    assert!(store.stop_work("env_a", &created.id, true).await.unwrap().unwrap().is_err(), "already stopped");
    assert!(store.resolve_sessions_token(token).await.unwrap().is_none(), "a stopped item's token is dead");
    // A stopped item frees the session for a new one.
    assert!(store.ensure_work_item(&workspace, "env_a", &session, "self_hosted").await.unwrap().is_some());
    let patched =
        store.update_work_metadata("env_a", &created.id, &json!({ "a": "1", "b": null })).await.unwrap().unwrap();
    assert_eq!(patched.metadata, json!({ "a": "1" }));
    assert_eq!(store.list_work("env_a", None, 10).await.unwrap().len(), 2);
});

conformance!(lost_work_leases_are_reoffered_then_given_up, |store, clock| async move {
    let (workspace, session) = session(store.as_ref()).await;
    let item = store.ensure_work_item(&workspace, "env_c", &session, "cloud").await.unwrap().unwrap();
    let cloud = WorkSource::Cloud { workspace_id: workspace.clone() };
    for round in 1..=2 {
        let offered = store.poll_work(&cloud, 5_000, &format!("hash-{round}")).await.unwrap().unwrap();
        assert_eq!(offered.id, item.id);
        store.ack_work("env_c", &item.id).await.unwrap().unwrap();
        assert!(store.expire_work_leases(2).await.unwrap().is_empty(), "the lease is live");
        clock.advance(30_001);
        let lost = store.expire_work_leases(2).await.unwrap();
        let current = store.get_work("env_c", &item.id).await.unwrap().unwrap();
        if round == 1 {
            assert!(lost.is_empty());
            assert_eq!((current.state.as_str(), current.lost_leases), ("queued", 1), "offered again");
        } else {
            assert_eq!(lost.len(), 1, "given up after the second lost lease");
            assert_eq!(lost[0].session_id, session);
            assert_eq!(current.state, "stopped");
        }
    }
});
