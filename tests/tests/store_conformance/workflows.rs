//! Workflow revisions and project overrides (`WorkflowStore`): a revision is created once
//! per content and reused after; the override moves by compare-and-swap, exactly one of
//! racing saves (or clears) expecting one version wins; an idempotency key replays its
//! first result and refuses another request; a failed save writes nothing; everything is
//! scoped to its workspace, project and definition.

use std::sync::Arc;

use agentd_schema::{ClearOutcome, SaveOutcome, SaveWorkflowRevision, WorkflowKey};

use super::*;

fn key(workspace: &str, project: &str) -> WorkflowKey {
    WorkflowKey { workspace_id: workspace.to_owned(), project: project.to_owned(), definition: "bug-fix".to_owned() }
}

/// A save of content `n` expecting `expected`, under `idempotency_key`.
fn save(key: &WorkflowKey, n: u32, expected: i64, idempotency_key: &str) -> SaveWorkflowRevision {
    let sha = format!("{n:064x}");
    SaveWorkflowRevision {
        key: key.clone(),
        id: format!("wfrev_{sha}"),
        content_sha256: sha,
        declaration: json!({ "name": format!("content {n}") }),
        resolved: json!({ "requires": {} }),
        expected_override_version: expected,
        idempotency_key: idempotency_key.to_owned(),
        request_sha256: format!("request-{n}-{expected}"),
    }
}

fn saved(outcome: SaveOutcome) -> agentd_schema::SavedWorkflowRevision {
    match outcome {
        SaveOutcome::Saved(saved) => saved,
        other => panic!("expected a save, got {other:?}"),
    }
}

conformance!(a_save_creates_or_reuses_its_revision_and_moves_the_override, |store, clock| async move {
    let k = key("ws_1", "web");
    assert_eq!(store.get_workflow_override(&k).await.unwrap(), None, "nothing saved yet");
    let first = saved(store.save_workflow_revision(save(&k, 1, 0, "a")).await.unwrap());
    assert!(!first.reused);
    assert_eq!(first.revision.id, format!("wfrev_{:064x}", 1));
    assert_eq!(first.revision.declaration, json!({ "name": "content 1" }));
    assert_eq!(first.revision.created_at_ms, clock.now_ms());
    assert_eq!(
        (first.override_row.override_version, first.override_row.revision_id.as_deref()),
        (1, Some(first.revision.id.as_str()))
    );
    clock.advance(1_000);
    // Other content, then the first content again: its revision is reused, unchanged.
    let second = saved(store.save_workflow_revision(save(&k, 2, 1, "b")).await.unwrap());
    assert_eq!((second.reused, second.override_row.override_version), (false, 2));
    clock.advance(1_000);
    let again = saved(store.save_workflow_revision(save(&k, 1, 2, "c")).await.unwrap());
    assert!(again.reused, "identical content reuses the revision");
    assert_eq!(again.revision, first.revision, "the same row, created once");
    assert_eq!(again.override_row.override_version, 3);
    assert_eq!(again.override_row.updated_at_ms, clock.now_ms());
    assert_eq!(store.get_workflow_override(&k).await.unwrap(), Some(again.override_row.clone()));
    assert_eq!(store.get_workflow_revision(&k, &second.revision.id).await.unwrap(), Some(second.revision));
});

conformance!(a_stale_version_writes_nothing, |store, _clock| async move {
    let k = key("ws_1", "web");
    saved(store.save_workflow_revision(save(&k, 1, 0, "a")).await.unwrap());
    let stale = store.save_workflow_revision(save(&k, 2, 0, "b")).await.unwrap();
    assert_eq!(stale, SaveOutcome::VersionConflict { current: 1 });
    let ahead = store.save_workflow_revision(save(&k, 2, 5, "b")).await.unwrap();
    assert_eq!(ahead, SaveOutcome::VersionConflict { current: 1 });
    let revision_2 = format!("wfrev_{:064x}", 2);
    assert_eq!(store.get_workflow_revision(&k, &revision_2).await.unwrap(), None, "the new revision rolled back");
    assert_eq!(store.workflow_save_replay(&k, "b").await.unwrap(), None, "the key's claim rolled back");
    // The key is free for the corrected request.
    let retried = saved(store.save_workflow_revision(save(&k, 2, 1, "b")).await.unwrap());
    assert_eq!(retried.override_row.override_version, 2);
});

conformance!(racing_saves_expecting_one_version_have_one_winner, |store, _clock| async move {
    let k = key("ws_1", "web");
    saved(store.save_workflow_revision(save(&k, 100, 0, "first")).await.unwrap());
    for round in 0..3_i64 {
        let racers = (0..8_u32).map(|n| {
            let (store, k) = (Arc::clone(&store), k.clone());
            let request = save(&k, n + 10 * (round as u32 + 1), round + 1, &format!("round-{round}-{n}"));
            tokio::spawn(async move { store.save_workflow_revision(request).await.unwrap() })
        });
        let outcomes: Vec<SaveOutcome> =
            futures::future::join_all(racers).await.into_iter().map(|joined| joined.unwrap()).collect();
        let winners: Vec<_> =
            outcomes.iter().filter_map(|o| if let SaveOutcome::Saved(s) = o { Some(s) } else { None }).collect();
        assert_eq!(winners.len(), 1, "exactly one save wins: {outcomes:?}");
        let losers = outcomes.iter().filter(|o| **o == SaveOutcome::VersionConflict { current: round + 2 }).count();
        assert_eq!(losers, 7, "the others see the winner's version: {outcomes:?}");
        let current = store.get_workflow_override(&k).await.unwrap().unwrap();
        assert_eq!(current, winners[0].override_row, "the override points to the winner");
    }
});

conformance!(a_key_replays_its_first_result_and_refuses_another_request, |store, clock| async move {
    let k = key("ws_1", "web");
    let first = saved(store.save_workflow_revision(save(&k, 1, 0, "key")).await.unwrap());
    clock.advance(1_000);
    saved(store.save_workflow_revision(save(&k, 2, 1, "other")).await.unwrap());
    // The same request under the same key: the first result, though the override moved.
    let replay = store.save_workflow_revision(save(&k, 1, 0, "key")).await.unwrap();
    assert_eq!(replay, SaveOutcome::Replayed(first.clone()));
    let (hash, recorded) = store.workflow_save_replay(&k, "key").await.unwrap().unwrap();
    assert_eq!((hash.as_str(), recorded), ("request-1-0", first));
    // Another request under the key changes nothing.
    assert_eq!(store.save_workflow_revision(save(&k, 3, 2, "key")).await.unwrap(), SaveOutcome::KeyReused);
    assert_eq!(store.get_workflow_override(&k).await.unwrap().unwrap().override_version, 2);
    // Keys are per (workspace, project, definition).
    let elsewhere = key("ws_1", "mobile");
    assert_eq!(store.workflow_save_replay(&elsewhere, "key").await.unwrap(), None);
    saved(store.save_workflow_revision(save(&elsewhere, 1, 0, "key")).await.unwrap());
});

conformance!(racing_saves_with_one_key_save_once, |store, _clock| async move {
    let k = key("ws_1", "web");
    let racers = (0..6).map(|_| {
        let (store, k) = (Arc::clone(&store), k.clone());
        tokio::spawn(async move { store.save_workflow_revision(save(&k, 1, 0, "same")).await.unwrap() })
    });
    let outcomes: Vec<SaveOutcome> =
        futures::future::join_all(racers).await.into_iter().map(|joined| joined.unwrap()).collect();
    let first = outcomes.iter().find_map(|o| if let SaveOutcome::Saved(s) = o { Some(s.clone()) } else { None });
    let first = first.expect("one save");
    for outcome in &outcomes {
        assert!(
            *outcome == SaveOutcome::Saved(first.clone()) || *outcome == SaveOutcome::Replayed(first.clone()),
            "{outcomes:?}"
        );
    }
    assert_eq!(outcomes.iter().filter(|o| matches!(o, SaveOutcome::Saved(_))).count(), 1, "{outcomes:?}");
    assert_eq!(store.get_workflow_override(&k).await.unwrap().unwrap().override_version, 1);
});

conformance!(a_clear_removes_only_the_override_by_compare_and_swap, |store, clock| async move {
    let k = key("ws_1", "web");
    assert_eq!(store.clear_workflow_override(&k, 0).await.unwrap(), ClearOutcome::NotFound, "nothing to clear");
    let first = saved(store.save_workflow_revision(save(&k, 1, 0, "a")).await.unwrap());
    assert_eq!(store.clear_workflow_override(&k, 0).await.unwrap(), ClearOutcome::VersionConflict { current: 1 });
    assert_eq!(store.clear_workflow_override(&k, 2).await.unwrap(), ClearOutcome::VersionConflict { current: 1 });
    clock.advance(1_000);
    let ClearOutcome::Cleared(cleared) = store.clear_workflow_override(&k, 1).await.unwrap() else { panic!("cleared") };
    assert_eq!((cleared.revision_id, cleared.override_version, cleared.updated_at_ms), (None, 2, clock.now_ms()));
    assert_eq!(
        store.get_workflow_revision(&k, &first.revision.id).await.unwrap(),
        Some(first.revision.clone()),
        "the revision stays"
    );
    // Clearing again needs the current version; a later save moves on from it.
    assert_eq!(store.clear_workflow_override(&k, 1).await.unwrap(), ClearOutcome::VersionConflict { current: 2 });
    let after = saved(store.save_workflow_revision(save(&k, 1, 2, "b")).await.unwrap());
    assert!(after.reused);
    assert_eq!((after.override_row.override_version, after.override_row.revision_id), (3, Some(first.revision.id)));
    // Racing clears: one wins.
    let racers = (0..6).map(|_| {
        let (store, k) = (Arc::clone(&store), k.clone());
        tokio::spawn(async move { store.clear_workflow_override(&k, 3).await.unwrap() })
    });
    let outcomes: Vec<ClearOutcome> =
        futures::future::join_all(racers).await.into_iter().map(|joined| joined.unwrap()).collect();
    assert_eq!(outcomes.iter().filter(|o| matches!(o, ClearOutcome::Cleared(_))).count(), 1, "{outcomes:?}");
    assert_eq!(store.get_workflow_override(&k).await.unwrap().unwrap().override_version, 4);
});

conformance!(workflows_are_scoped_to_their_workspace_project_and_definition, |store, _clock| async move {
    let mine = key("ws_1", "web");
    let first = saved(store.save_workflow_revision(save(&mine, 1, 0, "a")).await.unwrap());
    for other in [key("ws_2", "web"), key("ws_1", "mobile"), WorkflowKey { definition: "other".into(), ..mine.clone() }]
    {
        assert_eq!(store.get_workflow_override(&other).await.unwrap(), None, "{other:?}");
        assert_eq!(store.get_workflow_revision(&other, &first.revision.id).await.unwrap(), None, "{other:?}");
        assert_eq!(store.clear_workflow_override(&other, 1).await.unwrap(), ClearOutcome::NotFound, "{other:?}");
        // The same content there is its own revision row, with its own override.
        let theirs = saved(store.save_workflow_revision(save(&other, 1, 0, "a")).await.unwrap());
        assert!(!theirs.reused, "{other:?}");
        assert_eq!(theirs.override_row.override_version, 1);
    }
    assert_eq!(store.get_workflow_override(&mine).await.unwrap().unwrap().override_version, 1);
});
