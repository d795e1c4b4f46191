//! `--etcd-prefix`: a [`Kv`] that moves every key under another root, as
//! etcd's `clientv3/namespace` KV does.
//!
//! The rest of the API server builds keys under the logical root
//! [`keys::ROOT`] (`/registry/`, see [`super::keys`]). This decorator is the
//! one place that maps them to the physical root kube-apiserver derives from
//! `--etcd-prefix` (`path.Join("/", prefix)`), and maps keys coming back from
//! the store (ranges, watch events) the other way:
//!
//! | `--etcd-prefix` | logical key | stored key |
//! |---|---|---|
//! | `/registry` (default) | `/registry/pods/ns/a` | `/registry/pods/ns/a` |
//! | `/kube-a/` | `/registry/pods/ns/a` | `/kube-a/pods/ns/a` |
//! | `kube-a` | `/registry/apps/deployments/ns/d` | `/kube-a/apps/deployments/ns/d` |
//! | `/` | `/registry/pods/ns/a` | `/pods/ns/a` |
//!
//! The mapping swaps the leading `/registry` for the root, so the end of a
//! prefix range maps too: `/registry0` (the end of `/registry/`) becomes
//! `/kube-a0`, the end of `/kube-a/`.

use async_trait::async_trait;
use tokio::sync::mpsc;

use super::keys;
use super::kv::{CasResult, EventBatch, KeyValue, Kv, KvBatch, RangeResult, WriteOp};
use super::Result;

/// kube-apiserver's default `--etcd-prefix`.
pub const DEFAULT_PREFIX: &str = "/registry";

/// The logical root without its trailing slash.
fn logical_root() -> &'static [u8] {
    keys::ROOT.trim_end_matches('/').as_bytes()
}

/// `--etcd-prefix` as kube-apiserver normalises it (`path.Join("/",
/// prefix)`), without a trailing slash: `""` for `/`.
pub fn normalize(prefix: &str) -> String {
    let parts: Vec<&str> = prefix.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("/{}", parts.join("/"))
    }
}

/// A [`Kv`] whose keys live under `root` instead of `/registry`.
pub struct PrefixedKv<K> {
    inner: K,
    root: Vec<u8>,
}

impl<K: Kv> PrefixedKv<K> {
    /// Stores the keys of `inner` under `--etcd-prefix` `prefix` (any form
    /// kube accepts: with or without leading and trailing slashes).
    pub fn new(inner: K, prefix: &str) -> Self {
        PrefixedKv { inner, root: normalize(prefix).into_bytes() }
    }

    /// The stored form of a logical key or range end. Keys outside the
    /// logical root (none are built, see [`super::keys`]) pass unchanged.
    fn to_stored(&self, key: &[u8]) -> Vec<u8> {
        match key.strip_prefix(logical_root()) {
            Some(rest) => [self.root.as_slice(), rest].concat(),
            None => key.to_vec(),
        }
    }

    /// The logical form of a stored key.
    fn to_logical(&self, key: Vec<u8>) -> Vec<u8> {
        match key.strip_prefix(self.root.as_slice()) {
            Some(rest) => [logical_root(), rest].concat(),
            None => key,
        }
    }

    fn kv(&self, mut kv: KeyValue) -> KeyValue {
        kv.key = self.to_logical(std::mem::take(&mut kv.key));
        kv
    }

    /// A range end: empty (one key) and `\0` (every key from the start)
    /// keep their meaning.
    fn end(&self, end: &[u8]) -> Vec<u8> {
        if end.is_empty() || end == [0] {
            end.to_vec()
        } else {
            self.to_stored(end)
        }
    }
}

#[async_trait]
impl<K: Kv> Kv for PrefixedKv<K> {
    async fn range(&self, key: &[u8], end: &[u8], revision: i64, limit: i64) -> Result<RangeResult> {
        let mut r = self.inner.range(&self.to_stored(key), &self.end(end), revision, limit).await?;
        r.kvs = r.kvs.into_iter().map(|kv| self.kv(kv)).collect();
        Ok(r)
    }

    async fn compare_and_write(&self, key: &[u8], expected_mod_revision: i64, op: WriteOp) -> Result<CasResult> {
        let mut r = self.inner.compare_and_write(&self.to_stored(key), expected_mod_revision, op).await?;
        r.current = r.current.map(|kv| self.kv(kv));
        Ok(r)
    }

    async fn watch(&self, key: &[u8], end: &[u8], start_revision: i64) -> Result<mpsc::Receiver<EventBatch>> {
        let mut stored = self.inner.watch(&self.to_stored(key), &self.end(end), start_revision).await?;
        let (tx, rx) = mpsc::channel(stored.max_capacity());
        let root = self.root.clone();
        tokio::spawn(async move {
            let map = |key: Vec<u8>| match key.strip_prefix(root.as_slice()) {
                Some(rest) => [logical_root(), rest].concat(),
                None => key,
            };
            loop {
                let batch = tokio::select! {
                    b = stored.recv() => b,
                    _ = tx.closed() => return,
                };
                let Some(batch) = batch else { return };
                let batch = batch.map(|b| KvBatch {
                    revision: b.revision,
                    events: b
                        .events
                        .into_iter()
                        .map(|mut e| {
                            e.kv.key = map(std::mem::take(&mut e.kv.key));
                            if let Some(p) = e.prev.as_mut() {
                                p.key = map(std::mem::take(&mut p.key));
                            }
                            e
                        })
                        .collect(),
                });
                if tx.send(batch).await.is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_normalise_like_kube() {
        for (flag, root) in [("/registry", "/registry"), ("/registry/", "/registry"), ("kube-a", "/kube-a"), ("/a//b/", "/a/b"), ("/", ""), ("", "")] {
            assert_eq!(normalize(flag), root, "{flag}");
        }
    }

    /// A Kv that only records nothing: the mapping is pure.
    struct Nothing;

    #[async_trait]
    impl Kv for Nothing {
        async fn range(&self, _: &[u8], _: &[u8], _: i64, _: i64) -> Result<RangeResult> {
            Ok(RangeResult::default())
        }
        async fn compare_and_write(&self, _: &[u8], _: i64, _: WriteOp) -> Result<CasResult> {
            Ok(CasResult::default())
        }
        async fn watch(&self, _: &[u8], _: &[u8], _: i64) -> Result<mpsc::Receiver<EventBatch>> {
            Ok(mpsc::channel(1).1)
        }
    }

    #[test]
    fn keys_and_range_ends_map_both_ways() {
        let cases: [(&str, &[u8], &[u8]); 6] = [
            ("/registry", b"/registry/pods/ns/a", b"/registry/pods/ns/a"),
            ("/kube-a/", b"/registry/pods/ns/a", b"/kube-a/pods/ns/a"),
            ("kube-a", b"/registry0", b"/kube-a0"),
            ("/", b"/registry/pods/ns/a", b"/pods/ns/a"),
            ("/", b"/registry0", b"0"),
            ("/x", b"/registry/apps/deployments/", b"/x/apps/deployments/"),
        ];
        for (prefix, logical, stored) in cases {
            let kv = PrefixedKv::new(Nothing, prefix);
            assert_eq!(kv.to_stored(logical), stored, "{prefix}");
            assert_eq!(kv.to_logical(stored.to_vec()), logical, "{prefix}");
        }
        let kv = PrefixedKv::new(Nothing, "/x");
        assert_eq!(kv.end(b""), b"");
        assert_eq!(kv.end(b"\0"), b"\0");
        // The logical prefix range's end is the stored prefix range's end.
        assert_eq!(kv.end(&super::super::kv::prefix_end(keys::ROOT.as_bytes())), super::super::kv::prefix_end(b"/x/"));
    }
}
