//! The blob seam (ADR 0015): the bytes of files and skill archives live in an object
//! store, their metadata in the SQL store. `agentd dev` keeps blobs in a directory under
//! the data directory; production roles use any S3-compatible bucket named by
//! `AGENTD_OBJECT_STORE_URL` (`s3://bucket/prefix`, with the conventional `AWS_*`
//! variables and an endpoint override for MinIO, Ceph or R2), or a shared directory
//! (`file:///…`). Both are the `object_store` crate's implementations; one conformance
//! suite (`tests/tests/blob_conformance.rs`) runs on each.
//!
//! Uploads stream: at most [`PART_BYTES`] × ([`PARTS_IN_FLIGHT`] + 1) of a body are in
//! memory at once, whatever its size. A failed or aborted upload leaves no object.

use std::sync::Arc;

use bytes::Bytes;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::prefix::PrefixStore;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig, WriteMultipart};

/// The size of one part of a streamed upload (S3's smallest part).
pub const PART_BYTES: usize = 5 * 1024 * 1024;

/// Parts of one upload sent at once.
pub const PARTS_IN_FLIGHT: usize = 2;

/// What went wrong with a blob.
#[derive(Debug, thiserror::Error)]
pub enum BlobError {
    /// No object at that key.
    #[error("no blob at {0}")]
    NotFound(String),
    /// The upload went past its size limit; nothing was kept.
    #[error("the upload is larger than {limit} bytes")]
    TooLarge {
        /// The limit, in bytes.
        limit: u64,
    },
    /// The body being uploaded failed (the client went away); nothing was kept.
    #[error("the upload was cut short: {0}")]
    Source(String),
    /// The object store cannot be used (unreachable, refused, misconfigured).
    #[error("the object store is unavailable: {0}")]
    Unavailable(String),
}

impl From<object_store::Error> for BlobError {
    fn from(error: object_store::Error) -> Self {
        match error {
            object_store::Error::NotFound { path, .. } => BlobError::NotFound(path),
            other => BlobError::Unavailable(other.to_string()),
        }
    }
}

/// Which object store holds the blobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlobBackend {
    /// A local (or shared) directory.
    Filesystem,
    /// An S3-compatible bucket.
    S3,
}

impl BlobBackend {
    /// A short name for logs and readiness.
    pub fn name(self) -> &'static str {
        match self {
            BlobBackend::Filesystem => "filesystem",
            BlobBackend::S3 => "s3",
        }
    }
}

/// Where a blob lives: a key made of path segments (`files/<workspace>/<file id>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlobKey(ObjectPath);

impl BlobKey {
    /// The key of an uploaded file's bytes.
    pub fn file(workspace_id: &str, file_id: &str) -> Self {
        Self(ObjectPath::from_iter(["files", workspace_id, file_id]))
    }

    /// The key of one skill version's archive.
    pub fn skill_version(workspace_id: &str, skill_id: &str, version_id: &str) -> Self {
        Self(ObjectPath::from_iter(["skills", workspace_id, skill_id, version_id]))
    }

    /// A key from its stored text (as [`BlobKey::as_str`] wrote it).
    pub fn from_stored(text: &str) -> Self {
        Self(ObjectPath::from(text))
    }

    /// The key as stored in metadata rows.
    pub fn as_str(&self) -> &str {
        self.0.as_ref()
    }
}

impl std::fmt::Display for BlobKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.as_ref())
    }
}

/// S3 credentials and region given explicitly (see [`Blobs::from_url_with_keys`]).
#[derive(Clone)]
pub struct S3Keys {
    /// `AWS_ACCESS_KEY_ID`.
    pub access_key_id: String,
    /// `AWS_SECRET_ACCESS_KEY`.
    pub secret_access_key: String,
    /// `AWS_REGION`.
    pub region: String,
}

impl std::fmt::Debug for S3Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Keys").field("access_key_id", &self.access_key_id).field("region", &self.region).finish()
    }
}

/// A blob being read: its size and its bytes as a stream.
pub struct BlobRead {
    /// Size in bytes.
    pub size: u64,
    /// The bytes, in order.
    pub stream: BoxStream<'static, Result<Bytes, BlobError>>,
}

/// The object store behind files and skills.
#[derive(Clone)]
pub struct Blobs {
    store: Arc<dyn ObjectStore>,
    backend: BlobBackend,
    /// Where, for logs (no credentials).
    location: String,
}

impl std::fmt::Debug for Blobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Blobs").field("backend", &self.backend).field("location", &self.location).finish()
    }
}

impl Blobs {
    /// Blobs in `dir` (created if absent).
    pub fn filesystem(dir: &std::path::Path) -> Result<Self, BlobError> {
        std::fs::create_dir_all(dir)
            .map_err(|error| BlobError::Unavailable(format!("cannot create {}: {error}", dir.display())))?;
        let store = LocalFileSystem::new_with_prefix(dir)?.with_automatic_cleanup(true);
        Ok(Self { store: Arc::new(store), backend: BlobBackend::Filesystem, location: dir.display().to_string() })
    }

    /// Blobs at `url`: `file:///dir` or `s3://bucket[/prefix]`. For S3, credentials and
    /// region come from the conventional `AWS_*` variables; `endpoint` (or
    /// `AWS_ENDPOINT_URL`) points at an S3-compatible server, `http://` allowed.
    pub fn from_url(url: &str, endpoint: Option<&str>) -> Result<Self, BlobError> {
        Self::open(url, endpoint, AmazonS3Builder::from_env)
    }

    /// As [`Blobs::from_url`], with S3 credentials given rather than read from the
    /// environment (tests and tools that talk to a server of their own).
    pub fn from_url_with_keys(url: &str, endpoint: Option<&str>, keys: &S3Keys) -> Result<Self, BlobError> {
        Self::open(url, endpoint, || {
            AmazonS3Builder::new()
                .with_access_key_id(&keys.access_key_id)
                .with_secret_access_key(&keys.secret_access_key)
                .with_region(&keys.region)
        })
    }

    fn open(url: &str, endpoint: Option<&str>, builder: impl FnOnce() -> AmazonS3Builder) -> Result<Self, BlobError> {
        if let Some(dir) = url.strip_prefix("file://") {
            if !dir.starts_with('/') {
                return Err(BlobError::Unavailable(format!("{url}: a file:// URL needs an absolute path")));
            }
            return Self::filesystem(std::path::Path::new(dir));
        }
        let Some(rest) = url.strip_prefix("s3://") else {
            return Err(BlobError::Unavailable(format!("{url}: expected s3://bucket/prefix or file:///dir")));
        };
        let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
        if bucket.is_empty() {
            return Err(BlobError::Unavailable(format!("{url}: the URL names no bucket")));
        }
        // A store that is down answers within seconds (the API's 503), not after the
        // client's default three minutes of retries.
        let retry = RetryConfig {
            backoff: BackoffConfig::default(),
            max_retries: 3,
            retry_timeout: std::time::Duration::from_secs(8),
        };
        let mut builder = builder().with_bucket_name(bucket).with_retry(retry);
        let endpoint = endpoint.map(str::to_owned).or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        if let Some(endpoint) = &endpoint {
            builder = builder.with_endpoint(endpoint).with_allow_http(endpoint.starts_with("http://"));
        }
        let s3 = builder.build()?;
        let prefix = prefix.trim_matches('/');
        let store: Arc<dyn ObjectStore> =
            if prefix.is_empty() { Arc::new(s3) } else { Arc::new(PrefixStore::new(s3, ObjectPath::from(prefix))) };
        let location = match endpoint {
            Some(endpoint) => format!("{url} at {endpoint}"),
            None => url.to_owned(),
        };
        Ok(Self { store, backend: BlobBackend::S3, location })
    }

    /// Which object store this is.
    pub fn backend(&self) -> BlobBackend {
        self.backend
    }

    /// Where the blobs are, for logs.
    pub fn location(&self) -> &str {
        &self.location
    }

    /// Checks that the store answers: one listing of the root (an S3 bucket that does
    /// not exist, or credentials it refuses, fail here).
    pub async fn ping(&self) -> Result<(), BlobError> {
        self.store.list_with_delimiter(Some(&ObjectPath::from("health"))).await?;
        Ok(())
    }

    /// Stores `body` at `key`, streaming: small bodies in one request, larger ones in
    /// parts. More than `limit` bytes is [`BlobError::TooLarge`]; a body that fails is
    /// [`BlobError::Source`]. Either way nothing stays at `key`. Returns the size.
    pub async fn put_stream<S, E>(&self, key: &BlobKey, body: S, limit: u64) -> Result<u64, BlobError>
    where
        S: Stream<Item = Result<Bytes, E>> + Send,
        E: std::fmt::Display,
    {
        let mut body = std::pin::pin!(body);
        let mut size: u64 = 0;
        let mut head: Vec<Bytes> = Vec::new();
        let mut head_bytes = 0usize;
        let mut upload: Option<WriteMultipart> = None;
        let outcome: Result<(), BlobError> = async {
            while let Some(chunk) = body.next().await {
                let chunk = chunk.map_err(|error| BlobError::Source(error.to_string()))?;
                size += chunk.len() as u64;
                if size > limit {
                    return Err(BlobError::TooLarge { limit });
                }
                match upload.as_mut() {
                    Some(upload) => {
                        upload.wait_for_capacity(PARTS_IN_FLIGHT).await?;
                        upload.put(chunk);
                    }
                    None if head_bytes + chunk.len() <= PART_BYTES => {
                        head_bytes += chunk.len();
                        head.push(chunk);
                    }
                    None => {
                        let mut parts =
                            WriteMultipart::new_with_chunk_size(self.store.put_multipart(&key.0).await?, PART_BYTES);
                        for bytes in head.drain(..) {
                            parts.put(bytes);
                        }
                        parts.put(chunk);
                        upload = Some(parts);
                    }
                }
            }
            Ok(())
        }
        .await;
        match (outcome, upload) {
            (Ok(()), Some(upload)) => {
                upload.finish().await?;
            }
            (Ok(()), None) => {
                self.store.put(&key.0, PutPayload::from_iter(head)).await?;
            }
            (Err(error), Some(upload)) => {
                if let Err(abort) = upload.abort().await {
                    tracing::warn!(key = %key, error = %abort, "aborting a failed upload failed");
                }
                return Err(error);
            }
            (Err(error), None) => return Err(error),
        }
        Ok(size)
    }

    /// Stores `bytes` at `key` in one request.
    pub async fn put(&self, key: &BlobKey, bytes: Bytes) -> Result<(), BlobError> {
        self.store.put(&key.0, PutPayload::from(bytes)).await?;
        Ok(())
    }

    /// Reads the blob at `key` as a stream.
    pub async fn read(&self, key: &BlobKey) -> Result<BlobRead, BlobError> {
        let result = self.store.get(&key.0).await?;
        let size = result.meta.size;
        let stream = result.into_stream().map_err(BlobError::from).boxed();
        Ok(BlobRead { size, stream })
    }

    /// Reads the whole blob at `key` into memory (skill archives, model inputs).
    pub async fn get(&self, key: &BlobKey) -> Result<Bytes, BlobError> {
        Ok(self.store.get(&key.0).await?.bytes().await?)
    }

    /// Removes the blob at `key`; a key with no blob is not an error.
    pub async fn delete(&self, key: &BlobKey) -> Result<(), BlobError> {
        match self.store.delete(&key.0).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(error) => Err(error.into()),
        }
    }

    /// Whether a blob exists at `key` (for tests and sweeps).
    pub async fn exists(&self, key: &BlobKey) -> Result<bool, BlobError> {
        match self.store.head(&key.0).await {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(error) => Err(error.into()),
        }
    }
}
