//! File metadata (`FileStore`), and the file sweeper over a real store and blobs.

use agentd_schema::blobs::{BlobKey, Blobs};
use agentd_schema::{FileQuery, FileRow, FileState, NewFile};
use bytes::Bytes;

use super::*;

const HOUR_MS: i64 = 3_600_000;

fn new_file(workspace: &str, scope: Option<&str>, expires_at_ms: Option<i64>) -> NewFile {
    let id = agentd_schema::ids::new_id("file");
    NewFile {
        blob_key: BlobKey::file(workspace, &id).as_str().to_owned(),
        id,
        workspace_id: workspace.to_owned(),
        filename: "report.pdf".into(),
        mime_type: "application/pdf".into(),
        downloadable: scope.is_some(),
        scope: scope.map(|id| ("session".to_owned(), id.to_owned())),
        expires_at_ms,
    }
}

/// A file through `uploading` to `ready` with `size` bytes.
async fn ready(store: &dyn Store, new: NewFile, size: i64) -> FileRow {
    let row = store.insert_file(new).await.unwrap();
    store.finish_file(&row.id, size).await.unwrap().expect("the row was uploading")
}

fn page(limit: i64) -> FileQuery {
    FileQuery { limit, ..FileQuery::default() }
}

fn ids(rows: &[FileRow]) -> Vec<&str> {
    rows.iter().map(|row| row.id.as_str()).collect()
}

conformance!(files_are_invisible_until_finished, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let new = new_file(&ws, None, None);
    let inserted = store.insert_file(new.clone()).await.unwrap();
    assert_eq!(inserted.state, FileState::Uploading);
    assert_eq!(inserted.size_bytes, 0);
    assert_eq!(inserted.created_at_ms, clock.now_ms());
    assert_eq!(inserted.blob_key, new.blob_key);
    assert!(!inserted.downloadable);
    assert_eq!(inserted.scope, None);
    assert!(store.list_files(&ws, &page(10)).await.unwrap().is_empty(), "an uploading file is listed");
    // It can be read by id (the API hides it; the store does not).
    assert_eq!(store.get_file(&ws, &inserted.id).await.unwrap().unwrap().state, FileState::Uploading);

    clock.advance(5);
    let finished = store.finish_file(&inserted.id, 1234).await.unwrap().unwrap();
    assert_eq!(finished.state, FileState::Ready);
    assert_eq!(finished.size_bytes, 1234);
    assert_eq!(finished.changed_at_ms, clock.now_ms());
    assert_eq!(ids(&store.list_files(&ws, &page(10)).await.unwrap()), [inserted.id.as_str()]);
    // Finishing twice, or a row that is not uploading, is None.
    assert_eq!(store.finish_file(&inserted.id, 99).await.unwrap(), None);
    assert_eq!(store.finish_file("file_missing", 1).await.unwrap(), None);
    assert_eq!(store.get_file(&ws, &inserted.id).await.unwrap().unwrap().size_bytes, 1234);
});

conformance!(files_list_newest_first_with_filters, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let (_, session) = session(store.as_ref()).await;
    let mut made = Vec::new();
    for i in 0..5 {
        let scope = (i % 2 == 1).then_some(session.as_str());
        made.push(ready(store.as_ref(), new_file(&ws, scope, None), i).await.id);
        clock.advance(1);
    }
    let newest_first: Vec<&str> = made.iter().rev().map(String::as_str).collect();
    assert_eq!(ids(&store.list_files(&ws, &page(10)).await.unwrap()), newest_first);

    // Limit, then the next page after the last id seen.
    let first = store.list_files(&ws, &page(2)).await.unwrap();
    assert_eq!(ids(&first), newest_first[..2]);
    let next = FileQuery { before_id: Some(first[1].id.clone()), ..page(2) };
    assert_eq!(ids(&store.list_files(&ws, &next).await.unwrap()), newest_first[2..4]);
    let last = FileQuery { before_id: Some(made[1].clone()), ..page(2) };
    assert_eq!(ids(&store.list_files(&ws, &last).await.unwrap()), [made[0].as_str()]);

    // scope_id: the session's files only.
    let scoped = FileQuery { scope_id: Some(session.clone()), ..page(10) };
    let rows = store.list_files(&ws, &scoped).await.unwrap();
    assert_eq!(ids(&rows), [made[3].as_str(), made[1].as_str()]);
    assert!(rows.iter().all(|row| row.scope == Some(("session".to_owned(), session.clone())) && row.downloadable));
    let other_scope = FileQuery { scope_id: Some("sesn_other".into()), ..page(10) };
    assert!(store.list_files(&ws, &other_scope).await.unwrap().is_empty());

    // ids[]: only those, still newest first, combined with the other filters.
    let wanted = FileQuery { ids: vec![made[0].clone(), made[4].clone(), "file_missing".into()], ..page(10) };
    assert_eq!(ids(&store.list_files(&ws, &wanted).await.unwrap()), [made[4].as_str(), made[0].as_str()]);
    let wanted_scoped = FileQuery {
        ids: vec![made[1].clone(), made[2].clone()],
        scope_id: Some(session.clone()),
        before_id: Some(made[4].clone()),
        limit: 10,
    };
    assert_eq!(ids(&store.list_files(&ws, &wanted_scoped).await.unwrap()), [made[1].as_str()]);
});

conformance!(files_past_expiry_are_not_listed, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let now = clock.now_ms();
    let short = ready(store.as_ref(), new_file(&ws, None, Some(now + HOUR_MS)), 1).await;
    let long = ready(store.as_ref(), new_file(&ws, None, Some(now + 2 * HOUR_MS)), 1).await;
    let forever = ready(store.as_ref(), new_file(&ws, None, None), 1).await;
    assert_eq!(store.list_files(&ws, &page(10)).await.unwrap().len(), 3);

    clock.advance(HOUR_MS);
    // Expiry is inclusive: at `expires_at_ms` the file is gone.
    assert_eq!(ids(&store.list_files(&ws, &page(10)).await.unwrap()), [forever.id.as_str(), long.id.as_str()]);
    let row = store.get_file(&ws, &short.id).await.unwrap().unwrap();
    assert!(row.is_expired(clock.now_ms()) && !row.is_live(clock.now_ms()));
    clock.advance(HOUR_MS);
    assert_eq!(ids(&store.list_files(&ws, &page(10)).await.unwrap()), [forever.id.as_str()]);
});

conformance!(file_state_changes_are_compare_and_swap, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let row = ready(store.as_ref(), new_file(&ws, None, None), 7).await;
    assert!(!store.set_file_state(&row.id, FileState::Uploading, FileState::Deleting).await.unwrap());
    assert_eq!(store.get_file(&ws, &row.id).await.unwrap().unwrap().state, FileState::Ready);

    clock.advance(10);
    assert!(store.set_file_state(&row.id, FileState::Ready, FileState::Deleting).await.unwrap());
    let deleting = store.get_file(&ws, &row.id).await.unwrap().unwrap();
    assert_eq!(deleting.state, FileState::Deleting);
    assert_eq!(deleting.changed_at_ms, clock.now_ms());
    // The second of two racing deletes loses.
    assert!(!store.set_file_state(&row.id, FileState::Ready, FileState::Deleting).await.unwrap());
    assert!(store.list_files(&ws, &page(10)).await.unwrap().is_empty(), "a deleting file is listed");
    assert!(!store.set_file_state("file_missing", FileState::Ready, FileState::Deleting).await.unwrap());

    // remove_file is a compare-and-swap too.
    assert!(!store.remove_file(&row.id, FileState::Ready).await.unwrap());
    assert!(store.get_file(&ws, &row.id).await.unwrap().is_some());
    assert!(store.remove_file(&row.id, FileState::Deleting).await.unwrap());
    assert!(store.get_file(&ws, &row.id).await.unwrap().is_none());
    assert!(!store.remove_file(&row.id, FileState::Deleting).await.unwrap());
});

conformance!(files_to_sweep_selects_expired_and_stale_rows, |store, clock| async move {
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let start = clock.now_ms();
    let expiring = ready(store.as_ref(), new_file(&ws, None, Some(start + HOUR_MS)), 1).await;
    let live = ready(store.as_ref(), new_file(&ws, None, Some(start + 10 * HOUR_MS)), 1).await;
    let _forever = ready(store.as_ref(), new_file(&ws, None, None), 1).await;
    let stale_upload = store.insert_file(new_file(&ws, None, None)).await.unwrap();
    let stale_delete = ready(store.as_ref(), new_file(&ws, None, None), 1).await;
    assert!(store.set_file_state(&stale_delete.id, FileState::Ready, FileState::Deleting).await.unwrap());
    let tombstone = ready(store.as_ref(), new_file(&ws, None, Some(start + 1)), 1).await;
    assert!(store.set_file_state(&tombstone.id, FileState::Ready, FileState::Expired).await.unwrap());

    clock.advance(2 * HOUR_MS);
    // Rows changed since `stale_before` are left alone: an upload in progress.
    let fresh_upload = store.insert_file(new_file(&ws, None, None)).await.unwrap();
    let now = clock.now_ms();
    let stale_before = now - HOUR_MS;
    let mut due: Vec<String> =
        store.files_to_sweep(now, stale_before, 100).await.unwrap().into_iter().map(|row| row.id).collect();
    due.sort();
    let mut expected = vec![expiring.id.clone(), stale_upload.id.clone(), stale_delete.id.clone()];
    expected.sort();
    assert_eq!(due, expected, "not swept: {} (live), {} (fresh upload)", live.id, fresh_upload.id);

    // The limit bounds a pass.
    assert_eq!(store.files_to_sweep(now, stale_before, 2).await.unwrap().len(), 2);
    // Nothing is stale yet when `stale_before` is earlier than every change.
    let only_expired = store.files_to_sweep(now, start - 1, 100).await.unwrap();
    assert_eq!(ids(&only_expired), [expiring.id.as_str()]);
});

conformance!(files_of_another_workspace_are_invisible, |store, clock| async move {
    let _ = clock;
    let ours = store.ensure_workspace("acme", "default").await.unwrap().id;
    let theirs = store.ensure_workspace("globex", "default").await.unwrap().id;
    assert_ne!(ours, theirs);
    let mine = ready(store.as_ref(), new_file(&ours, None, None), 1).await;
    let other = ready(store.as_ref(), new_file(&theirs, None, None), 1).await;
    assert!(store.get_file(&theirs, &mine.id).await.unwrap().is_none());
    assert!(store.get_file(&ours, &other.id).await.unwrap().is_none());
    assert_eq!(ids(&store.list_files(&ours, &page(10)).await.unwrap()), [mine.id.as_str()]);
    assert_eq!(ids(&store.list_files(&theirs, &page(10)).await.unwrap()), [other.id.as_str()]);
    let by_id = FileQuery { ids: vec![mine.id.clone()], ..page(10) };
    assert!(store.list_files(&theirs, &by_id).await.unwrap().is_empty());
});

conformance!(sweeper_expires_files_and_finishes_stale_uploads, |store, clock| async move {
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::filesystem(&dir.path().join("blobs")).unwrap();
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let start = clock.now_ms();

    let expiring = ready(store.as_ref(), new_file(&ws, None, Some(start + HOUR_MS)), 5).await;
    let kept = ready(store.as_ref(), new_file(&ws, None, Some(start + 100 * HOUR_MS)), 5).await;
    // An upload whose client or gateway went away: row and part of its bytes.
    let abandoned = store.insert_file(new_file(&ws, None, None)).await.unwrap();
    for row in [&expiring, &kept, &abandoned] {
        blobs.put(&BlobKey::from_stored(&row.blob_key), Bytes::from_static(b"bytes")).await.unwrap();
    }

    // Before anything is due, a pass does nothing.
    assert_eq!(agentd_gateway::domain::files::sweep(store.as_ref(), &blobs, clock.now_ms()).await.unwrap(), 0);

    clock.advance(2 * HOUR_MS);
    let now = clock.now_ms();
    let done = agentd_gateway::domain::files::sweep(store.as_ref(), &blobs, now).await.unwrap();
    assert_eq!(done, 2);

    let tomb = store.get_file(&ws, &expiring.id).await.unwrap().expect("the expired row stays as a tombstone");
    assert_eq!(tomb.state, FileState::Expired);
    assert!(!blobs.exists(&BlobKey::from_stored(&expiring.blob_key)).await.unwrap(), "expired bytes kept");

    assert!(store.get_file(&ws, &abandoned.id).await.unwrap().is_none(), "the stale upload's row stays");
    assert!(!blobs.exists(&BlobKey::from_stored(&abandoned.blob_key)).await.unwrap(), "stale upload bytes kept");

    let still = store.get_file(&ws, &kept.id).await.unwrap().unwrap();
    assert_eq!(still.state, FileState::Ready);
    assert!(blobs.exists(&BlobKey::from_stored(&kept.blob_key)).await.unwrap());

    // A second pass finds nothing left to do; the tombstone is not swept again.
    assert_eq!(agentd_gateway::domain::files::sweep(store.as_ref(), &blobs, now).await.unwrap(), 0);
    assert_eq!(store.get_file(&ws, &expiring.id).await.unwrap().unwrap().state, FileState::Expired);
});

conformance!(an_upload_that_fails_leaves_no_row_and_no_object, |store, _clock| async move {
    use agentd_gateway::domain::{DomainError, files};
    let dir = tempfile::tempdir().unwrap();
    let blobs = Blobs::filesystem(&dir.path().join("blobs")).unwrap();
    let ws = store.ensure_workspace("acme", "default").await.unwrap().id;
    let upload = || files::Upload { workspace_id: ws.clone(), filename: Some("a.bin".into()), ..Default::default() };
    let chunk = || Ok::<_, String>(Bytes::from(vec![7u8; 3 * 1024 * 1024]));
    let objects = || {
        walkdir::WalkDir::new(dir.path()).into_iter().filter_map(Result::ok).filter(|e| e.file_type().is_file()).count()
    };

    // The body breaks after 6 MiB (past the first part): the client went away.
    let broken = futures::stream::iter(vec![chunk(), chunk(), Err("connection reset".to_owned())]);
    let refused = files::store(&store, &blobs, upload(), broken, 100 * 1024 * 1024).await.unwrap_err();
    assert!(matches!(refused, DomainError::Invalid { .. }), "{refused:?}");
    // Past the limit, in the middle of the second part.
    let large = futures::stream::iter(vec![chunk(), chunk(), chunk()]);
    let refused = files::store(&store, &blobs, upload(), large, 8 * 1024 * 1024).await.unwrap_err();
    assert!(matches!(refused, DomainError::TooLarge(_)), "{refused:?}");
    assert!(store.files_to_sweep(i64::MAX, i64::MAX, 10).await.unwrap().is_empty(), "no row was left behind");
    assert_eq!(objects(), 0, "no object was left behind");

    // The same body, whole: one ready file of exactly its bytes.
    let whole = futures::stream::iter(vec![chunk(), chunk(), chunk()]);
    let row = files::store(&store, &blobs, upload(), whole, 100 * 1024 * 1024).await.unwrap();
    assert_eq!((row.state, row.size_bytes), (FileState::Ready, 9 * 1024 * 1024));
    let bytes = blobs.get(&BlobKey::from_stored(&row.blob_key)).await.unwrap();
    assert!(bytes.len() == 9 * 1024 * 1024 && bytes.iter().all(|b| *b == 7));
    assert_eq!(objects(), 1);
});
