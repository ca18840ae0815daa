//! Where fetched precedents are kept: a local folder or an S3 bucket, under stable keys.
//!
//! Writes are idempotent (the same key is overwritten with the same document on a
//! redelivery) and atomic (a reader never sees half a file: local writes go to a temporary
//! name and are renamed; S3 PUTs are atomic by nature).

use std::path::{Path, PathBuf};

use aws_sdk_s3::primitives::ByteStream;

use crate::aws::aws_code;
use crate::law::BoxFuture;

/// A document store failure, described by kind: no path contents, no document, no AWS
/// request details.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocError {
    #[error("document key {0:?} is not allowed (A-Z a-z 0-9 / _ . -, no '..', not absolute)")]
    InvalidKey(String),
    #[error("local document store: {0}")]
    Io(String),
    #[error("S3 document store: {0}")]
    S3(String),
}

/// A store of JSON documents by key.
pub trait DocumentStore: Send + Sync + std::fmt::Debug {
    /// Writes `body` under `key`, replacing what was there.
    fn put<'a>(&'a self, key: &'a str, body: &'a [u8]) -> BoxFuture<'a, Result<(), DocError>>;
    /// Reads `key`; `None` when absent.
    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, DocError>>;
}

/// The stable key of a precedent's document.
pub fn precedent_key(id: &str) -> Result<String, DocError> {
    crate::law::check_precedent_id(id).map_err(|_| DocError::InvalidKey(id.chars().take(24).collect()))?;
    Ok(format!("prec/{id}.json"))
}

fn check_key(key: &str) -> Result<(), DocError> {
    let ok = !key.is_empty()
        && key.len() <= 512
        && !key.starts_with('/')
        && !key
            .split('/')
            .any(|part| part.is_empty() || part == "." || part == "..")
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'_' | b'.' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(DocError::InvalidKey(key.chars().take(64).collect()))
    }
}

/// Documents as files under a folder (`DOCUMENT_DIR`).
#[derive(Debug, Clone)]
pub struct LocalDir {
    root: PathBuf,
}

impl LocalDir {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    fn path(&self, key: &str) -> Result<PathBuf, DocError> {
        check_key(key)?;
        Ok(self.root.join(Path::new(key)))
    }
}

fn io(what: &str, e: std::io::Error) -> DocError {
    DocError::Io(format!("{what}: {}", e.kind()))
}

impl DocumentStore for LocalDir {
    fn put<'a>(&'a self, key: &'a str, body: &'a [u8]) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move {
            let path = self.path(key)?;
            if let Some(dir) = path.parent() {
                tokio::fs::create_dir_all(dir)
                    .await
                    .map_err(|e| io("creating the folder", e))?;
            }
            let tmp = path.with_extension(format!("tmp-{:016x}", rand::random::<u64>()));
            tokio::fs::write(&tmp, body).await.map_err(|e| io("writing", e))?;
            if let Err(e) = tokio::fs::rename(&tmp, &path).await {
                let _ = tokio::fs::remove_file(&tmp).await;
                return Err(io("renaming into place", e));
            }
            Ok(())
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, DocError>> {
        Box::pin(async move {
            match tokio::fs::read(self.path(key)?).await {
                Ok(b) => Ok(Some(b)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(io("reading", e)),
            }
        })
    }
}

/// Documents as objects in an S3 bucket (`DOCUMENT_BUCKET`).
#[derive(Debug, Clone)]
pub struct S3Documents {
    client: aws_sdk_s3::Client,
    bucket: String,
}

impl S3Documents {
    /// A store over `bucket`. With an endpoint override (`AWS_ENDPOINT_URL`, a local
    /// emulator), path-style addressing is used, since emulators serve no bucket subdomains.
    pub fn new(sdk: &aws_config::SdkConfig, bucket: impl Into<String>) -> Self {
        let cfg = aws_sdk_s3::config::Builder::from(sdk)
            .force_path_style(sdk.endpoint_url().is_some())
            .build();
        Self {
            client: aws_sdk_s3::Client::from_conf(cfg),
            bucket: bucket.into(),
        }
    }

    /// The client, for set-up in tools and tests.
    pub fn client(&self) -> &aws_sdk_s3::Client {
        &self.client
    }
}

impl DocumentStore for S3Documents {
    fn put<'a>(&'a self, key: &'a str, body: &'a [u8]) -> BoxFuture<'a, Result<(), DocError>> {
        Box::pin(async move {
            check_key(key)?;
            self.client
                .put_object()
                .bucket(&self.bucket)
                .key(key)
                .content_type("application/json; charset=utf-8")
                .body(ByteStream::from(body.to_vec()))
                .send()
                .await
                .map_err(|e| DocError::S3(aws_code(&e)))?;
            Ok(())
        })
    }

    fn get<'a>(&'a self, key: &'a str) -> BoxFuture<'a, Result<Option<Vec<u8>>, DocError>> {
        Box::pin(async move {
            check_key(key)?;
            let out = match self
                .client
                .get_object()
                .bucket(&self.bucket)
                .key(key)
                .send()
                .await
            {
                Ok(out) => out,
                Err(e) if e.as_service_error().is_some_and(|s| s.is_no_such_key()) => return Ok(None),
                Err(e) => return Err(DocError::S3(aws_code(&e))),
            };
            let bytes = out
                .body
                .collect()
                .await
                .map_err(|_| DocError::S3("body could not be read".into()))?;
            Ok(Some(bytes.into_bytes().to_vec()))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_checked() {
        assert_eq!(precedent_key("240001").expect("key"), "prec/240001.json");
        for bad in ["", "12a", "../1", "1/2"] {
            assert!(precedent_key(bad).is_err(), "{bad}");
        }
        for bad in ["../x.json", "/etc/passwd", "a//b", "a/./b", "a b", "prec/ü.json"] {
            assert!(check_key(bad).is_err(), "{bad}");
        }
        assert!(check_key("prec/1.json").is_ok());
    }
}
