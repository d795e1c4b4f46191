//! [`Storage`] over any [`Kv`] (kube-apiserver `storage/etcd3/store.go`).

use std::sync::Arc;

use async_trait::async_trait;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;

use super::kv::{prefix_end, EventKind, KeyValue, Kv, KvEvent, WriteOp};
use super::{Error, EventType, ListOptions, ListResult, Preconditions, Result, RevisionMatch, Storage, TryUpdate, Update, WatchEvent, WatchOptions, WatchStream};

/// Give up a guaranteed update after this many lost races.
const MAX_UPDATE_ATTEMPTS: usize = 64;
/// Largest page read from the store while filtering.
const MAX_FETCH: i64 = 10_000;
/// Watch events buffered per watcher.
const WATCH_BUFFER: usize = 128;

/// The etcd3 store on a [`Kv`].
pub struct KvStorage {
    kv: Arc<dyn Kv>,
}

impl KvStorage {
    /// A store over `kv`.
    pub fn new(kv: Arc<dyn Kv>) -> Self {
        KvStorage { kv }
    }
}

/// Decodes a stored object and sets its resourceVersion.
fn decode(kv: &KeyValue, rv: i64) -> Result<Value> {
    let mut obj: Value = serde_json::from_slice(&kv.value).map_err(|e| Error::Corrupt { key: String::from_utf8_lossy(&kv.key).into_owned(), message: e.to_string() })?;
    let Some(meta) = obj.as_object_mut().map(|o| o.entry("metadata").or_insert_with(|| Value::Object(Default::default()))) else {
        return Err(Error::Corrupt { key: String::from_utf8_lossy(&kv.key).into_owned(), message: "not a JSON object".into() });
    };
    if let Some(m) = meta.as_object_mut() {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
    Ok(obj)
}

/// Strips what is never stored (kube `PrepareObjectForStorage`).
fn encode(obj: &Value) -> Result<Vec<u8>> {
    let mut obj = obj.clone();
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("resourceVersion");
        m.remove("selfLink");
    }
    serde_json::to_vec(&obj).map_err(|e| Error::Internal(e.to_string()))
}

/// kube's continue token (`storage/continue.go`): base64url(JSON).
#[derive(Serialize, Deserialize)]
struct ContinueToken {
    #[serde(rename = "v", default)]
    api_version: String,
    #[serde(rename = "rv", default)]
    resource_version: i64,
    #[serde(rename = "start", default)]
    start_key: String,
}

/// Encodes a continue token for the key after `next_key`'s predecessor at
/// revision `rev` (-1: an inconsistent continuation at the latest revision).
pub(crate) fn encode_continue(next_key: &[u8], prefix: &str, rev: i64) -> Option<String> {
    let key = String::from_utf8_lossy(next_key);
    let start = key.strip_prefix(prefix)?;
    let tok = ContinueToken { api_version: "meta.k8s.io/v1".into(), resource_version: rev, start_key: start.to_string() };
    let json = serde_json::to_vec(&tok).ok()?;
    Some(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json))
}

/// Go's `base64.RawURLEncoding.DecodeString`: no padding, CR and LF
/// skipped, non-zero trailing bits accepted; errors worded as Go's
/// `CorruptInputError` (`illegal base64 data at input byte N`).
fn go_raw_url_base64(token: &str) -> std::result::Result<Vec<u8>, String> {
    use base64::engine::{general_purpose::GeneralPurpose, DecodePaddingMode, GeneralPurposeConfig};
    const ENGINE: GeneralPurpose =
        GeneralPurpose::new(&base64::alphabet::URL_SAFE, GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true).with_decode_padding_mode(DecodePaddingMode::RequireNone));
    let corrupt = |at: usize| format!("illegal base64 data at input byte {at}");
    let mut clean = Vec::with_capacity(token.len());
    let mut last = 0;
    for (i, b) in token.bytes().enumerate() {
        match b {
            b'\r' | b'\n' => {}
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' => {
                clean.push(b);
                last = i;
            }
            _ => return Err(corrupt(i)),
        }
    }
    if clean.len() % 4 == 1 {
        return Err(corrupt(last));
    }
    ENGINE.decode(&clean).map_err(|e| e.to_string())
}

/// Go's `encoding/json` quoting of an offending byte (`quoteChar`).
fn go_quote_char(c: u8) -> String {
    match c {
        b'\'' => r"'\''".to_string(),
        b'"' => "'\"'".to_string(),
        0x07 => r"'\a'".into(),
        0x08 => r"'\b'".into(),
        0x0c => r"'\f'".into(),
        b'\n' => r"'\n'".into(),
        b'\r' => r"'\r'".into(),
        b'\t' => r"'\t'".into(),
        0x0b => r"'\v'".into(),
        b'\\' => r"'\\'".into(),
        0x00..=0x1f | 0x7f => format!(r"'\x{c:02x}'"),
        0x80..=0xa0 | 0xad => format!(r"'\u{c:04x}'"),
        _ => format!("'{}'", char::from(c)),
    }
}

/// The `encoding/json` error Go reports for the token's JSON, as far as it
/// can be told from the first bytes; otherwise serde's.
fn go_json_error(raw: &[u8], e: &serde_json::Error) -> String {
    match raw.iter().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')) {
        None => "unexpected end of JSON input".into(),
        Some(&c) if !matches!(c, b'{' | b'[' | b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n') => {
            format!("invalid character {} looking for beginning of value", go_quote_char(c))
        }
        Some(_) => e.to_string(),
    }
}

/// Returns (start key, revision) of a continue token; a negative revision
/// marks an inconsistent continuation at the latest revision (kube hands one
/// out with a 410 after compaction). Checks and wording follow kube's
/// `storage.DecodeContinue`.
pub(crate) fn decode_continue(token: &str, prefix: &str) -> Result<(Vec<u8>, i64)> {
    let raw = go_raw_url_base64(token).map_err(Error::InvalidContinue)?;
    let tok: ContinueToken = serde_json::from_slice(&raw).map_err(|e| Error::InvalidContinue(go_json_error(&raw, &e)))?;
    if tok.api_version != "meta.k8s.io/v1" {
        return Err(Error::InvalidContinue(format!("server does not recognize this encoded version {}", tok.api_version)));
    }
    if tok.resource_version == 0 {
        return Err(Error::InvalidContinue("incorrect encoded start resourceVersion (version meta.k8s.io/v1)".into()));
    }
    if tok.start_key.is_empty() {
        return Err(Error::InvalidContinue("encoded start key empty (version meta.k8s.io/v1)".into()));
    }
    // kube rejects a start key that Go's path.Clean would change, so it
    // cannot range above the prefix.
    let key = tok.start_key.strip_prefix('/').unwrap_or(&tok.start_key);
    if key.split('/').any(|seg| seg.is_empty() || seg == "." || seg == "..") {
        return Err(Error::InvalidContinue(tok.start_key));
    }
    Ok((format!("{prefix}{key}").into_bytes(), tok.resource_version.max(-1)))
}

/// The token that continues the list of `token` at the latest revision,
/// which kube sends in the `metadata.continue` of the 410 for a compacted
/// continue token ("an inconsistent list").
///
/// # Errors
/// [`Error::InvalidContinue`] for a malformed token.
pub fn inconsistent_continue(token: &str, prefix: &str) -> Result<String> {
    let (key, _) = decode_continue(token, prefix)?;
    encode_continue(&key, prefix, -1).ok_or_else(|| Error::InvalidContinue("encoded start key empty".into()))
}

fn to_event(e: &KvEvent) -> Result<Option<WatchEvent>> {
    match e.kind {
        EventKind::Put => {
            let object = decode(&e.kv, e.kv.mod_revision)?;
            let prev = match &e.prev {
                Some(p) => Some(decode(p, p.mod_revision)?),
                None => None,
            };
            let kind = if e.kv.create_revision == e.kv.mod_revision || prev.is_none() { EventType::Added } else { EventType::Modified };
            Ok(Some(WatchEvent::new(kind, object, prev)))
        }
        EventKind::Delete => {
            // Without the previous value there is nothing to show.
            let Some(p) = &e.prev else { return Ok(None) };
            let object = decode(p, e.kv.mod_revision)?;
            let prev = decode(p, p.mod_revision)?;
            Ok(Some(WatchEvent::new(EventType::Deleted, object, Some(prev))))
        }
    }
}

impl KvStorage {
    async fn get_kv(&self, key: &str) -> Result<Option<KeyValue>> {
        let r = self.kv.range(key.as_bytes(), &[], 0, 0).await?;
        Ok(r.kvs.into_iter().next())
    }
}

#[async_trait]
impl Storage for KvStorage {
    async fn get(&self, key: &str) -> Result<Value> {
        let kv = self.get_kv(key).await?.ok_or(Error::NotFound)?;
        decode(&kv, kv.mod_revision)
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        let end = prefix_end(prefix.as_bytes());
        let (mut from, mut rev) = match &opts.continue_token {
            Some(t) if !t.is_empty() => {
                let (k, r) = decode_continue(t, prefix)?;
                (k, r.max(0))
            }
            _ if opts.revision_match == RevisionMatch::NotOlderThan => (prefix.as_bytes().to_vec(), 0),
            _ => (prefix.as_bytes().to_vec(), opts.revision),
        };
        let limit = opts.limit.max(0);
        let mut fetch = if limit > 0 { limit } else { 0 };
        let mut items = Vec::new();
        let mut next: Option<Vec<u8>> = None;
        loop {
            let r = self.kv.range(&from, &end, rev, fetch).await?;
            if rev == 0 {
                rev = r.revision;
            }
            let n = r.kvs.len();
            for (i, kv) in r.kvs.iter().enumerate() {
                let obj = decode(kv, kv.mod_revision)?;
                if opts.predicate.as_ref().is_none_or(|p| p(&obj)) {
                    items.push(obj);
                }
                if limit > 0 && items.len() as i64 == limit {
                    if i + 1 < n || r.more {
                        let mut k = kv.key.clone();
                        k.push(0);
                        next = Some(k);
                    }
                    break;
                }
            }
            if next.is_some() || (limit > 0 && items.len() as i64 == limit) || !r.more {
                break;
            }
            let Some(last) = r.kvs.last() else { break };
            from = last.key.clone();
            from.push(0);
            if fetch > 0 {
                fetch = (fetch * 2).min(MAX_FETCH);
            }
        }
        if opts.continue_token.is_none() && opts.revision_match == RevisionMatch::NotOlderThan && opts.revision > rev {
            return Err(Error::TooLargeResourceVersion { requested: opts.revision, current: rev });
        }
        let continue_token = next.and_then(|k| encode_continue(&k, prefix, rev));
        Ok(ListResult { items, revision: rev, continue_token, ..Default::default() })
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Value> {
        let bytes = encode(&obj)?;
        let r = self.kv.compare_and_write(key.as_bytes(), 0, WriteOp::Put(bytes.clone())).await?;
        if !r.succeeded {
            return Err(Error::AlreadyExists);
        }
        let kv = KeyValue { key: key.as_bytes().to_vec(), value: bytes, create_revision: r.revision, mod_revision: r.revision };
        decode(&kv, r.revision)
    }

    async fn guaranteed_update(&self, key: &str, preconditions: &Preconditions, try_update: &mut dyn TryUpdate) -> Result<Value> {
        let mut current = self.get_kv(key).await?;
        for _ in 0..MAX_UPDATE_ATTEMPTS {
            let (cur_obj, cur_rev) = match &current {
                Some(kv) => (Some(decode(kv, kv.mod_revision)?), kv.mod_revision),
                None => (None, 0),
            };
            if let Some(o) = &cur_obj {
                preconditions.check(o)?;
            }
            let update = try_update.try_update(cur_obj.clone()).await.map_err(|s| Error::Aborted(Box::new(s)))?;
            let op = match update {
                Update::Unchanged => return cur_obj.ok_or(Error::NotFound),
                Update::Delete => {
                    if cur_obj.is_none() {
                        return Err(Error::NotFound);
                    }
                    WriteOp::Delete
                }
                Update::Put(obj) => WriteOp::Put(encode(&obj)?),
            };
            let r = self.kv.compare_and_write(key.as_bytes(), cur_rev, op.clone()).await?;
            if r.succeeded {
                return match (op, cur_obj) {
                    (WriteOp::Delete, Some(mut old)) => {
                        old["metadata"]["resourceVersion"] = Value::String(r.revision.to_string());
                        Ok(old)
                    }
                    (WriteOp::Put(bytes), old) => {
                        let create = current.as_ref().map(|c| c.create_revision).filter(|_| old.is_some()).unwrap_or(r.revision);
                        decode(&KeyValue { key: key.as_bytes().to_vec(), value: bytes, create_revision: create, mod_revision: r.revision }, r.revision)
                    }
                    (WriteOp::Delete, None) => Err(Error::NotFound),
                };
            }
            current = r.current;
        }
        Err(Error::Internal(format!("too many conflicting updates of {key}")))
    }

    async fn delete(&self, key: &str, preconditions: &Preconditions) -> Result<Value> {
        let mut f = |cur: Option<Value>| -> std::result::Result<Update, crate::errors::Status> { Ok(if cur.is_some() { Update::Delete } else { Update::Unchanged }) };
        self.guaranteed_update(key, preconditions, &mut f).await
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream> {
        let (start, end) = if opts.recursive { (key.as_bytes().to_vec(), prefix_end(key.as_bytes())) } else { (key.as_bytes().to_vec(), Vec::new()) };
        let (tx, rx) = mpsc::channel(WATCH_BUFFER);
        let pred = opts.predicate.clone();
        let mut initial = Vec::new();
        let from = if opts.wants_initial_events() {
            // The current state as ADDED events, then changes after it.
            let r = self.kv.range(&start, &end, 0, 0).await?;
            if opts.revision > r.revision {
                return Err(Error::TooLargeResourceVersion { requested: opts.revision, current: r.revision });
            }
            for kv in &r.kvs {
                let obj = decode(kv, kv.mod_revision)?;
                if pred.as_ref().is_none_or(|p| p(&obj)) {
                    initial.push(WatchEvent::new(EventType::Added, obj, None));
                }
            }
            if opts.initial_events_end {
                initial.push(WatchEvent::bookmark(r.revision, true));
            }
            r.revision + 1
        } else if opts.revision == 0 {
            self.current_revision().await? + 1
        } else {
            opts.revision + 1
        };
        let mut events = self.kv.watch(&start, &end, from).await?;
        let bookmarks = opts.bookmarks;
        tokio::spawn(async move {
            for e in initial {
                if tx.send(Ok(e)).await.is_err() {
                    return;
                }
            }
            loop {
                let batch = tokio::select! {
                    b = events.recv() => b,
                    _ = tx.closed() => return,
                };
                let Some(batch) = batch else { return };
                let batch = match batch {
                    Ok(b) => b,
                    Err(e) => {
                        let _ = tx.send(Err(e)).await;
                        return;
                    }
                };
                if batch.events.is_empty() {
                    if bookmarks && tx.try_send(Ok(WatchEvent::bookmark(batch.revision, false))).is_err() && tx.is_closed() {
                        return;
                    }
                    continue;
                }
                for e in &batch.events {
                    let ev = match to_event(e) {
                        Ok(Some(ev)) => match ev.filtered(pred.as_ref()) {
                            Some(ev) => Ok(ev),
                            None => continue,
                        },
                        Ok(None) => continue,
                        Err(e) => Err(e),
                    };
                    let stop = ev.is_err();
                    if tx.send(ev).await.is_err() || stop {
                        return;
                    }
                }
            }
        });
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<i64> {
        Ok(self.kv.range(super::keys::ROOT.as_bytes(), &[], 0, 1).await?.revision)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn continue_token_round_trips_like_kube() {
        let t = encode_continue(b"/registry/configmaps/default/b\0", "/registry/configmaps/default/", 42).unwrap_or_default();
        let (k, rv) = decode_continue(&t, "/registry/configmaps/default/").unwrap_or_default();
        assert_eq!(k, b"/registry/configmaps/default/b\0");
        assert_eq!(rv, 42);
        assert!(decode_continue("!!", "/p/").is_err());
        let bad = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(br#"{"v":"meta.k8s.io/v1","rv":1,"start":"../x"}"#);
        assert!(decode_continue(&bad, "/p/").is_err());
    }
}

#[cfg(test)]
mod depth_tests {
    use serde_json::Value;

    fn nested(depth: usize) -> String {
        format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    /// The stored-depth limit is exactly what the decoder of stored
    /// objects reads back.
    #[test]
    fn the_stored_depth_limit_is_the_decoders() {
        let limit = super::super::MAX_STORED_DEPTH;
        let ok: Value = serde_json::from_str(&nested(limit)).unwrap_or(Value::Null);
        assert_eq!(crate::meta::nesting_depth(&ok), limit);
        assert!(serde_json::from_str::<Value>(&nested(limit + 1)).is_err());
    }
}
