//! Deployments and deployment runs (`DeploymentStore`), and the sessions list's
//! `deployment_id` filter.

use std::sync::Arc;

use agentd_schema::ids::{derived_id, new_id};
use agentd_schema::store::{
    DeploymentConfig, DeploymentQuery, DeploymentRunQuery, NewDeployment, NewDeploymentRun, RunTrigger, ScheduleRow,
    SlotClaim,
};
use agentd_schema::{SessionQuery, TimeBounds};

use super::*;

fn config(name: &str, schedule: bool) -> DeploymentConfig {
    DeploymentConfig {
        name: name.into(),
        description: None,
        agent_id: "agent_1".into(),
        agent_version: 1,
        environment_id: "env_1".into(),
        initial_events: json!([{ "type": "user.message", "content": [{ "type": "text", "text": "go" }] }]),
        resources: json!([]),
        vault_ids: vec!["vlt_1".into()],
        metadata: json!({ "k": "v" }),
        budget: None,
        schedule: schedule.then(|| ScheduleRow { expression: "* * * * *".into(), timezone: "UTC".into() }),
        user_profile_id: Some("uprof_1".into()),
        content_capture_ceiling: Some(agentd_schema::capture::Level::Structured),
    }
}

async fn deployment(store: &dyn Store, name: &str, next_slot_ms: Option<i64>) -> (String, String) {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let row = store
        .insert_deployment(NewDeployment {
            id: new_id("depl"),
            workspace_id: ws.clone(),
            organization_id: "org_1".into(),
            config: config(name, next_slot_ms.is_some()),
            next_slot_ms,
        })
        .await
        .unwrap();
    (ws, row.id)
}

fn run(ws: &str, deployment: &str, trigger: RunTrigger) -> NewDeploymentRun {
    let id = new_id("drun");
    NewDeploymentRun {
        planned_session_id: derived_id(&id, "sesn"),
        id,
        workspace_id: ws.to_owned(),
        deployment_id: deployment.to_owned(),
        agent: json!({ "type": "agent", "id": "agent_1", "version": 1 }),
        trigger,
    }
}

fn claim(ws: &str, deployment: &str, expected: i64, slot: i64, next: i64) -> SlotClaim {
    SlotClaim {
        expected_next_ms: expected,
        slot_ms: slot,
        next_ms: next,
        now_ms: slot + 5,
        run: run(ws, deployment, RunTrigger::Schedule(slot)),
    }
}

conformance!(a_deployment_is_written_read_updated_paused_and_archived, |store, _clock| async move {
    let (ws, id) = deployment(store.as_ref(), "nightly", Some(60_000)).await;
    let row = store.get_deployment(&ws, &id).await.unwrap().unwrap();
    assert_eq!(
        (row.config.name.as_str(), row.next_slot_ms, row.paused_reason.clone()),
        ("nightly", Some(60_000), None)
    );
    assert_eq!(row.config.vault_ids, ["vlt_1"]);
    assert_eq!(row.organization_id, "org_1");
    assert_eq!(store.get_deployment("another", &id).await.unwrap(), None, "another workspace sees nothing");

    // An update keeps the next slot unless told otherwise.
    let kept = store.update_deployment(&ws, &id, config("renamed", true), None).await.unwrap().unwrap();
    assert_eq!((kept.config.name.as_str(), kept.next_slot_ms), ("renamed", Some(60_000)));
    let manual = store.update_deployment(&ws, &id, config("manual", false), Some(None)).await.unwrap().unwrap();
    assert_eq!((manual.config.schedule.clone(), manual.next_slot_ms), (None, None));
    let back = store.update_deployment(&ws, &id, config("again", true), Some(Some(120_000))).await.unwrap().unwrap();
    assert_eq!(back.next_slot_ms, Some(120_000));

    let paused = store.set_deployment_paused(&ws, &id, Some(json!({ "type": "manual" })), None).await.unwrap().unwrap();
    assert_eq!((paused.paused_reason.clone(), paused.next_slot_ms), (Some(json!({ "type": "manual" })), Some(120_000)));
    assert!(store.due_deployments(i64::MAX, 10).await.unwrap().is_empty(), "a paused deployment is never due");
    let resumed = store.set_deployment_paused(&ws, &id, None, Some(180_000)).await.unwrap().unwrap();
    assert_eq!((resumed.paused_reason, resumed.next_slot_ms), (None, Some(180_000)));
    assert_eq!(store.due_deployments(180_000, 10).await.unwrap().len(), 1);
    assert!(store.due_deployments(179_999, 10).await.unwrap().is_empty());

    let archived = store.archive_deployment(&ws, &id).await.unwrap().unwrap();
    assert!(archived.archived_at_ms.is_some() && archived.next_slot_ms.is_none());
    let again = store.archive_deployment(&ws, &id).await.unwrap().unwrap();
    assert_eq!(again.archived_at_ms, archived.archived_at_ms, "archiving is idempotent");
    assert_eq!(store.update_deployment(&ws, &id, config("x", true), None).await.unwrap(), None);
    assert_eq!(store.set_deployment_paused(&ws, &id, None, Some(1)).await.unwrap(), None);
    assert!(store.due_deployments(i64::MAX, 10).await.unwrap().is_empty());
    assert_eq!(store.archive_deployment("another", &id).await.unwrap(), None);
});

conformance!(deployments_list_filters_by_status_agent_and_archive, |store, _clock| async move {
    let (ws, first) = deployment(store.as_ref(), "a", None).await;
    let (_, second) = deployment(store.as_ref(), "b", None).await;
    let (_, third) = deployment(store.as_ref(), "c", None).await;
    store.set_deployment_paused(&ws, &second, Some(json!({ "type": "manual" })), None).await.unwrap();
    store.archive_deployment(&ws, &third).await.unwrap();
    let list = |query: DeploymentQuery| {
        let (store, ws) = (Arc::clone(&store), ws.clone());
        async move { store.list_deployments(&ws, &query).await.unwrap().into_iter().map(|d| d.id).collect::<Vec<_>>() }
    };
    let base = DeploymentQuery { limit: 10, ..DeploymentQuery::default() };
    assert_eq!(list(base.clone()).await, [second.clone(), first.clone()]);
    assert_eq!(
        list(DeploymentQuery { include_archived: true, ..base.clone() }).await,
        [third, second.clone(), first.clone()]
    );
    assert_eq!(list(DeploymentQuery { paused: Some(true), ..base.clone() }).await, vec![second.clone()]);
    assert_eq!(list(DeploymentQuery { paused: Some(false), ..base.clone() }).await, vec![first.clone()]);
    assert_eq!(list(DeploymentQuery { agent_id: Some("agent_2".into()), ..base.clone() }).await, Vec::<String>::new());
    assert_eq!(list(DeploymentQuery { before_id: Some(second), ..base }).await, [first]);
});

conformance!(racing_claimers_fire_each_slot_once, |store, _clock| async move {
    let (ws, id) = deployment(store.as_ref(), "minutely", Some(60_000)).await;
    // Slot after slot, eight schedulers race for each: one run per slot.
    let mut expected = 60_000;
    for _ in 0..3 {
        let (slot, next) = (expected, expected + 60_000);
        let racers = (0..8).map(|_| {
            let (store, ws, id) = (Arc::clone(&store), ws.clone(), id.clone());
            tokio::spawn(async move { store.claim_deployment_slot(&id, claim(&ws, &id, slot, slot, next)).await })
        });
        let won: Vec<_> =
            futures::future::join_all(racers).await.into_iter().filter_map(|joined| joined.unwrap().unwrap()).collect();
        assert_eq!(won.len(), 1, "exactly one scheduler claims slot {slot}");
        assert_eq!(won[0].trigger, RunTrigger::Schedule(slot));
        let row = store.get_deployment(&ws, &id).await.unwrap().unwrap();
        assert_eq!((row.next_slot_ms, row.last_run_at_ms), (Some(next), Some(slot + 5)));
        expected = next;
    }
    // A stale claim (the value read before the last advance) changes nothing.
    assert_eq!(store.claim_deployment_slot(&id, claim(&ws, &id, 60_000, 60_000, 120_000)).await.unwrap(), None);
    let runs = store
        .list_deployment_runs(
            &ws,
            &DeploymentRunQuery { deployment_id: Some(id.clone()), limit: 10, ..Default::default() },
        )
        .await
        .unwrap();
    let mut slots: Vec<_> = runs.iter().map(|r| r.trigger).collect();
    slots.sort_by_key(|t| match t {
        RunTrigger::Schedule(s) => *s,
        RunTrigger::Manual => 0,
    });
    assert_eq!(slots, [RunTrigger::Schedule(60_000), RunTrigger::Schedule(120_000), RunTrigger::Schedule(180_000)]);
    // Even a claim that expected the right value cannot add a second run for a slot.
    let twice = store.claim_deployment_slot(&id, claim(&ws, &id, 240_000, 120_000, 300_000)).await;
    assert!(matches!(twice, Err(StoreError::Conflict(_))), "{twice:?}");
    assert_eq!(store.get_deployment(&ws, &id).await.unwrap().unwrap().next_slot_ms, Some(240_000), "rolled back");
    // Paused: not claimable.
    store.set_deployment_paused(&ws, &id, Some(json!({ "type": "manual" })), None).await.unwrap();
    assert_eq!(store.claim_deployment_slot(&id, claim(&ws, &id, 240_000, 240_000, 300_000)).await.unwrap(), None);
});

conformance!(a_run_records_its_session_or_error_once, |store, _clock| async move {
    let (ws, id) = deployment(store.as_ref(), "d", Some(60_000)).await;
    let manual = store.insert_deployment_run(run(&ws, &id, RunTrigger::Manual)).await.unwrap();
    assert_eq!((manual.session_id.clone(), manual.error.clone()), (None, None));
    assert_eq!(store.unfinished_deployment_runs(i64::MAX, 10).await.unwrap().len(), 1);
    let racers = (0..6).map(|n| {
        let (store, run_id, session) = (Arc::clone(&store), manual.id.clone(), manual.planned_session_id.clone());
        tokio::spawn(async move {
            if n % 2 == 0 {
                store.record_deployment_run_session(&run_id, &session).await.unwrap()
            } else {
                store
                    .record_deployment_run_error(&run_id, json!({ "type": "unknown_error", "message": "m" }), false)
                    .await
                    .unwrap()
            }
        })
    });
    let won: Vec<_> = futures::future::join_all(racers).await.into_iter().filter_map(|r| r.unwrap()).collect();
    assert_eq!(won.len(), 1, "one outcome is recorded");
    assert!(store.unfinished_deployment_runs(i64::MAX, 10).await.unwrap().is_empty());
    assert_eq!(store.get_deployment_run(&ws, &manual.id).await.unwrap().unwrap(), won[0]);
    assert_eq!(store.get_deployment_run("another", &manual.id).await.unwrap(), None);

    // A scheduled run's error pauses its deployment, in the same transaction.
    let scheduled = store.claim_deployment_slot(&id, claim(&ws, &id, 60_000, 60_000, 120_000)).await.unwrap().unwrap();
    let error = json!({ "type": "agent_archived_error", "message": "agent agent_1 is archived" });
    store.record_deployment_run_error(&scheduled.id, error.clone(), true).await.unwrap().unwrap();
    let paused = store.get_deployment(&ws, &id).await.unwrap().unwrap();
    assert_eq!(paused.paused_reason, Some(json!({ "type": "error", "error": error })));
});

conformance!(runs_list_filters_and_sessions_list_by_deployment, |store, clock| async move {
    let (ws, id) = deployment(store.as_ref(), "d", Some(60_000)).await;
    let (_, other) = deployment(store.as_ref(), "e", None).await;
    let ok = store.insert_deployment_run(run(&ws, &id, RunTrigger::Manual)).await.unwrap();
    clock.advance(10);
    let failed = store.claim_deployment_slot(&id, claim(&ws, &id, 60_000, 60_000, 120_000)).await.unwrap().unwrap();
    clock.advance(10);
    let elsewhere = store.insert_deployment_run(run(&ws, &other, RunTrigger::Manual)).await.unwrap();
    for created in [&ok, &elsewhere] {
        store
            .create_session(NewSession {
                id: created.planned_session_id.clone(),
                workspace_id: ws.clone(),
                status: "idle".into(),
                body: json!({ "deployment_id": created.deployment_id }),
                agent_id: None,
                agent_version: None,
            })
            .await
            .unwrap();
        store.record_deployment_run_session(&created.id, &created.planned_session_id).await.unwrap().unwrap();
    }
    store
        .record_deployment_run_error(&failed.id, json!({ "type": "unknown_error", "message": "m" }), false)
        .await
        .unwrap();
    let list = |query: DeploymentRunQuery| {
        let (store, ws) = (Arc::clone(&store), ws.clone());
        async move { store.list_deployment_runs(&ws, &query).await.unwrap().into_iter().map(|r| r.id).collect::<Vec<_>>() }
    };
    let of = DeploymentRunQuery { deployment_id: Some(id.clone()), limit: 10, ..Default::default() };
    assert_eq!(list(of.clone()).await, [failed.id.clone(), ok.id.clone()]);
    assert_eq!(
        list(DeploymentRunQuery { deployment_id: Some(new_id("depl")), ..of.clone() }).await,
        Vec::<String>::new()
    );
    assert_eq!(list(DeploymentRunQuery { has_error: Some(true), ..of.clone() }).await, vec![failed.id.clone()]);
    assert_eq!(list(DeploymentRunQuery { has_error: Some(false), ..of.clone() }).await, vec![ok.id.clone()]);
    assert_eq!(
        list(DeploymentRunQuery { trigger_type: Some("manual".into()), ..of.clone() }).await,
        vec![ok.id.clone()]
    );
    assert_eq!(
        list(DeploymentRunQuery { trigger_type: Some("schedule".into()), ..of.clone() }).await,
        vec![failed.id.clone()]
    );
    let at = failed.created_at_ms;
    let bounded = |created: TimeBounds| DeploymentRunQuery { created, ..of.clone() };
    assert_eq!(list(bounded(TimeBounds { gt: Some(at), ..Default::default() })).await, Vec::<String>::new());
    assert_eq!(list(bounded(TimeBounds { gte: Some(at), ..Default::default() })).await, vec![failed.id.clone()]);
    assert_eq!(list(bounded(TimeBounds { lt: Some(at), ..Default::default() })).await, vec![ok.id.clone()]);
    assert_eq!(
        list(bounded(TimeBounds { lte: Some(at), ..Default::default() })).await,
        [failed.id.clone(), ok.id.clone()]
    );
    assert_eq!(list(DeploymentRunQuery { before_id: Some(failed.id.clone()), ..of }).await, vec![ok.id.clone()]);

    let sessions = |deployment: String| {
        let (store, ws) = (Arc::clone(&store), ws.clone());
        async move {
            let query = SessionQuery { deployment_id: Some(deployment), limit: 10, ..Default::default() };
            store.list_sessions(&ws, &query).await.unwrap().into_iter().map(|s| s.id).collect::<Vec<_>>()
        }
    };
    assert_eq!(sessions(id.clone()).await, vec![ok.planned_session_id.clone()]);
    assert_eq!(sessions(other).await, vec![elsewhere.planned_session_id.clone()]);
    assert!(sessions(new_id("depl")).await.is_empty());
    let all = SessionQuery { limit: 10, ..Default::default() };
    assert_eq!(store.list_sessions(&ws, &all).await.unwrap().len(), 2, "no filter: every session");
});
