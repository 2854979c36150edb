//! The blob seam's conformance suite (ADR 0015): every case runs on the filesystem
//! backend (a temp directory, as in `agentd dev`) and on a real S3-compatible server
//! (`AGENTD_TEST_S3_ENDPOINT`, moto's standalone server under `scripts/test`), in a
//! bucket created for the case and removed after it.

use std::time::{Duration, Instant};

use agentd_schema::blobs::{BlobError, BlobKey, Blobs, PART_BYTES, S3Keys};
use agentd_tests::backends::{TestBucket, s3_endpoint};
use bytes::Bytes;
use futures::{StreamExt, TryStreamExt, stream};

const MIB: usize = 1024 * 1024;

/// Which backend a case runs on.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Filesystem,
    S3,
}

/// The process-wide rustls provider, as the `agentd` binary installs it (the S3 client
/// has none of its own).
fn install_crypto() {
    let _ = agentd_tests::http();
}

fn test_keys() -> S3Keys {
    S3Keys { access_key_id: "test".into(), secret_access_key: "test".into(), region: "us-east-1".into() }
}

/// Runs `body` on a fresh store of `backend`, then removes the store; a panic in `body`
/// is resumed after the cleanup.
async fn run<F, Fut>(backend: Backend, body: F)
where
    F: FnOnce(Blobs) -> Fut,
    Fut: Future<Output = ()>,
{
    use futures::FutureExt;
    match backend {
        Backend::Filesystem => {
            let dir = tempfile::tempdir().unwrap();
            let blobs = Blobs::filesystem(&dir.path().join("blobs")).unwrap();
            body(blobs).await;
        }
        Backend::S3 => {
            let Some(endpoint) = s3_endpoint() else {
                eprintln!(
                    "SKIPPED: AGENTD_TEST_S3_ENDPOINT is unset, so the S3 side of the blob suite did not run \
                     (scripts/test starts a server and sets it)"
                );
                return;
            };
            let bucket = TestBucket::create(&endpoint).await;
            let blobs = Blobs::from_url_with_keys(&bucket.url("agentd"), Some(&endpoint), &test_keys()).unwrap();
            let outcome = std::panic::AssertUnwindSafe(body(blobs)).catch_unwind().await;
            bucket.remove().await;
            if let Err(panic) = outcome {
                std::panic::resume_unwind(panic);
            }
        }
    }
}

/// One case, as a module with a `filesystem` and an `s3` test.
macro_rules! blob_conformance {
    ($name:ident, $body:expr) => {
        mod $name {
            use super::*;

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn filesystem() {
                run(Backend::Filesystem, $body).await;
            }

            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn s3() {
                run(Backend::S3, $body).await;
            }
        }
    };
}

fn key() -> BlobKey {
    BlobKey::file("wrkspc_test", &agentd_schema::ids::new_id("file"))
}

/// `len` bytes that repeat no short pattern (xorshift), so a part out of place shows.
fn random_bytes(len: usize, seed: u64) -> Vec<u8> {
    let mut state = seed | 1;
    let mut out = Vec::with_capacity(len + 8);
    while out.len() < len {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        out.extend_from_slice(&state.to_le_bytes());
    }
    out.truncate(len);
    out
}

/// `bytes` as a stream of `chunk`-sized pieces, the way an upload body arrives.
fn chunks(bytes: &[u8], chunk: usize) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send + use<> {
    let pieces: Vec<Result<Bytes, std::io::Error>> =
        bytes.chunks(chunk).map(|piece| Ok(Bytes::copy_from_slice(piece))).collect();
    stream::iter(pieces)
}

async fn read_all(blobs: &Blobs, key: &BlobKey) -> (u64, Vec<u8>) {
    let read = blobs.read(key).await.unwrap();
    let size = read.size;
    let pieces: Vec<Bytes> = read.stream.try_collect().await.unwrap();
    (size, pieces.concat())
}

blob_conformance!(small_round_trip, |blobs: Blobs| async move {
    let key = key();
    let body = random_bytes(100_000, 1);
    let size = blobs.put_stream(&key, chunks(&body, 16 * 1024), u64::MAX).await.unwrap();
    assert_eq!(size, body.len() as u64);
    assert!(blobs.exists(&key).await.unwrap());
    assert_eq!(blobs.get(&key).await.unwrap().as_ref(), body.as_slice());

    // One request, and an empty body.
    let other = self::key();
    blobs.put(&other, Bytes::from_static(b"hello")).await.unwrap();
    assert_eq!(blobs.get(&other).await.unwrap().as_ref(), b"hello");
    let empty = self::key();
    assert_eq!(blobs.put_stream(&empty, chunks(&[], 1), 10).await.unwrap(), 0);
    assert_eq!(read_all(&blobs, &empty).await, (0, Vec::new()));
});

blob_conformance!(multipart_round_trip_is_byte_exact, |blobs: Blobs| async move {
    // Three parts and a short tail, in chunks that do not divide the part size.
    let key = key();
    let body = random_bytes(3 * PART_BYTES + 123_457, 2);
    let size = blobs.put_stream(&key, chunks(&body, 64 * 1024 + 3), u64::MAX).await.unwrap();
    assert_eq!(size, body.len() as u64);
    let (read_size, read) = read_all(&blobs, &key).await;
    assert_eq!(read_size, body.len() as u64, "read reports the stored size");
    assert!(read == body, "the bytes read back differ from the bytes stored");
    assert!(blobs.get(&key).await.unwrap().as_ref() == body.as_slice());
});

blob_conformance!(size_limit_at_and_over, |blobs: Blobs| async move {
    let body = random_bytes(2 * PART_BYTES + MIB, 3);
    let limit = body.len() as u64;

    // Exactly at the limit: kept.
    let at = key();
    assert_eq!(blobs.put_stream(&at, chunks(&body, MIB), limit).await.unwrap(), limit);
    assert!(blobs.exists(&at).await.unwrap());
    assert_eq!(read_all(&blobs, &at).await.0, limit);

    // One byte over, past the first parts: refused, and nothing left behind.
    let over = key();
    match blobs.put_stream(&over, chunks(&body, MIB), limit - 1).await {
        Err(BlobError::TooLarge { limit: reported }) => assert_eq!(reported, limit - 1),
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(!blobs.exists(&over).await.unwrap(), "an upload over the limit left an object");

    // Over the limit before the first part: the same.
    let small = key();
    match blobs.put_stream(&small, chunks(&body[..1000], 100), 999).await {
        Err(BlobError::TooLarge { limit: 999 }) => {}
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert!(!blobs.exists(&small).await.unwrap());
});

blob_conformance!(failing_source_leaves_nothing, |blobs: Blobs| async move {
    // The body fails after two parts went out: the multipart upload is aborted.
    let key = key();
    let good = random_bytes(2 * PART_BYTES + MIB, 4);
    let body = chunks(&good, MIB).chain(stream::iter([Err(std::io::Error::other("client went away"))]));
    match blobs.put_stream(&key, body, u64::MAX).await {
        Err(BlobError::Source(message)) => assert!(message.contains("client went away"), "{message}"),
        other => panic!("expected Source, got {other:?}"),
    }
    assert!(!blobs.exists(&key).await.unwrap(), "a failed multipart upload left an object");

    // It fails within the first part: nothing was sent.
    let small = self::key();
    let body = chunks(&good[..1000], 100).chain(stream::iter([Err(std::io::Error::other("reset"))]));
    assert!(matches!(blobs.put_stream(&small, body, u64::MAX).await, Err(BlobError::Source(_))));
    assert!(!blobs.exists(&small).await.unwrap());
});

blob_conformance!(delete_removes_and_missing_is_ok, |blobs: Blobs| async move {
    let key = key();
    blobs.put(&key, Bytes::from_static(b"bytes")).await.unwrap();
    assert!(blobs.exists(&key).await.unwrap());
    blobs.delete(&key).await.unwrap();
    assert!(!blobs.exists(&key).await.unwrap());
    assert!(matches!(blobs.get(&key).await, Err(BlobError::NotFound(_))));
    assert!(matches!(blobs.read(&key).await, Err(BlobError::NotFound(_))));
    // Deleting again, or a key that never existed, is not an error.
    blobs.delete(&key).await.unwrap();
    blobs.delete(&self::key()).await.unwrap();
});

blob_conformance!(read_streams_with_its_size, |blobs: Blobs| async move {
    let key = key();
    let body = random_bytes(PART_BYTES + 17, 5);
    blobs.put_stream(&key, chunks(&body, MIB), u64::MAX).await.unwrap();
    let read = blobs.read(&key).await.unwrap();
    assert_eq!(read.size, body.len() as u64);
    let mut seen = 0usize;
    let mut pieces = 0usize;
    let mut stream = read.stream;
    while let Some(piece) = stream.next().await {
        let piece = piece.unwrap();
        assert_eq!(piece.as_ref(), &body[seen..seen + piece.len()]);
        seen += piece.len();
        pieces += 1;
    }
    assert_eq!(seen, body.len());
    assert!(pieces >= 1);
});

blob_conformance!(ping_answers, |blobs: Blobs| async move {
    blobs.ping().await.unwrap();
});

/// A store that does not answer fails its ping, within the bounded retry budget rather
/// than the client's default minutes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_of_an_unreachable_store_fails_in_bounded_time() {
    install_crypto();
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let blobs =
        Blobs::from_url_with_keys("s3://agentd-unreachable/prefix", Some(&format!("http://{closed}")), &test_keys())
            .unwrap();
    let started = Instant::now();
    let outcome = tokio::time::timeout(Duration::from_secs(30), blobs.ping()).await;
    let elapsed = started.elapsed();
    match outcome {
        Ok(Err(BlobError::Unavailable(_))) => {}
        Ok(other) => panic!("expected Unavailable, got {other:?}"),
        Err(_) => panic!("ping of an unreachable store did not return within 30 s"),
    }
    assert!(elapsed < Duration::from_secs(20), "ping took {elapsed:?}");
}

/// A bucket that does not exist on a server that answers fails the ping too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_of_a_missing_bucket_fails() {
    let Some(endpoint) = s3_endpoint() else {
        eprintln!("SKIPPED: AGENTD_TEST_S3_ENDPOINT is unset (scripts/test sets it)");
        return;
    };
    install_crypto();
    let blobs =
        Blobs::from_url_with_keys("s3://agentd-no-such-bucket-anywhere/p", Some(&endpoint), &test_keys()).unwrap();
    assert!(matches!(blobs.ping().await, Err(BlobError::Unavailable(_))));
}
