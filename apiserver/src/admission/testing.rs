//! Test helpers for the built-in plugins: an in-memory [`Storage`] whose
//! guaranteed update is optimistic (read, decide without a lock, then write
//! only if the revision is unchanged, else read again), as the real store's
//! compare-and-write is, and a way to run a plugin on attributes.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use parking_lot::Mutex;
use serde_json::Value;

use super::{Attributes, Kind, Operation, Resource};
use crate::authn::UserInfo;
use crate::storage::{Error, ListOptions, ListResult, Preconditions, Result, Storage, TryUpdate, Update, WatchOptions, WatchStream};
use crate::warning::Warnings;

/// The last revision, and each key's object with its revision.
type State = (i64, BTreeMap<String, (Value, i64)>);

/// Objects by key with their revisions.
#[derive(Default)]
pub struct MemStorage {
    objects: Mutex<State>,
}

impl MemStorage {
    /// A store holding `objects` at their keys.
    pub fn with(objects: impl IntoIterator<Item = (String, Value)>) -> Arc<Self> {
        let s = MemStorage::default();
        {
            let mut g = s.objects.lock();
            for (k, v) in objects {
                g.0 += 1;
                let rev = g.0;
                g.1.insert(k, (v, rev));
            }
        }
        Arc::new(s)
    }

    fn read(&self, key: &str) -> Option<(Value, i64)> {
        self.objects.lock().1.get(key).map(|(v, r)| {
            let mut v = v.clone();
            v["metadata"]["resourceVersion"] = Value::String(r.to_string());
            (v, *r)
        })
    }
}

#[async_trait]
impl Storage for MemStorage {
    async fn get(&self, key: &str) -> Result<Value> {
        self.read(key).map(|(v, _)| v).ok_or(Error::NotFound)
    }

    async fn list(&self, prefix: &str, _opts: &ListOptions) -> Result<ListResult> {
        let items = self.objects.lock().1.iter().filter(|(k, _)| k.starts_with(prefix)).map(|(_, (v, _))| v.clone()).collect();
        Ok(ListResult { items, ..Default::default() })
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Value> {
        let mut g = self.objects.lock();
        if g.1.contains_key(key) {
            return Err(Error::AlreadyExists);
        }
        g.0 += 1;
        let rev = g.0;
        g.1.insert(key.to_string(), (obj.clone(), rev));
        Ok(obj)
    }

    async fn guaranteed_update(&self, key: &str, preconditions: &Preconditions, try_update: &mut dyn TryUpdate) -> Result<Value> {
        loop {
            let current = self.read(key);
            if let Some((o, _)) = &current {
                preconditions.check(o)?;
            }
            let seen = current.as_ref().map(|(_, r)| *r);
            // Let other tasks run between the read and the write.
            tokio::task::yield_now().await;
            let update = try_update.try_update(current.clone().map(|(v, _)| v)).await.map_err(|s| Error::Aborted(Box::new(s)))?;
            tokio::task::yield_now().await;
            let mut g = self.objects.lock();
            if g.1.get(key).map(|(_, r)| *r) != seen {
                continue;
            }
            return match update {
                Update::Unchanged => current.map(|(v, _)| v).ok_or(Error::NotFound),
                Update::Delete => g.1.remove(key).map(|(v, _)| v).ok_or(Error::NotFound),
                Update::Put(v) => {
                    g.0 += 1;
                    let rev = g.0;
                    g.1.insert(key.to_string(), (v.clone(), rev));
                    Ok(v)
                }
            };
        }
    }

    async fn delete(&self, key: &str, _preconditions: &Preconditions) -> Result<Value> {
        self.objects.lock().1.remove(key).map(|(v, _)| v).ok_or(Error::NotFound)
    }

    async fn watch(&self, _key: &str, _opts: &WatchOptions) -> Result<WatchStream> {
        Err(Error::Unavailable("no watch in tests".into()))
    }

    async fn current_revision(&self) -> Result<i64> {
        Ok(self.objects.lock().0)
    }
}

/// What unit tests of plugins build [`Attributes`] from: the parts a
/// request borrows (user, options, warnings).
#[derive(Default)]
pub struct TestRequest {
    /// The user.
    pub user: UserInfo,
    /// The options (`CreateOptions`...), as plugins see them.
    pub options: Value,
    /// Warnings collected.
    pub warnings: Warnings,
}

impl TestRequest {
    /// A CREATE of `object`, a `kind` served as `resource`, named `name` in
    /// `namespace`, not a dry run; tests change the fields they test.
    pub fn create<'a>(&'a self, resource: Resource<'a>, kind: Kind<'a>, name: &'a str, namespace: &'a str, object: Value) -> Attributes<'a> {
        Attributes {
            operation: Operation::Create,
            name,
            namespace,
            resource,
            subresource: "",
            kind,
            request_kind: kind,
            object: Some(object),
            old_object: None,
            options: &self.options,
            user: &self.user,
            dry_run: false,
            warnings: &self.warnings,
            audit: None,
            reinvocation: false,
        }
    }
}

/// A [`TestRequest`] about one object, named after it.
#[derive(Default)]
pub struct Parts {
    request: TestRequest,
    name: String,
}

impl Parts {
    /// The parts of a write of `object`.
    pub fn of(object: &Value) -> Self {
        Parts { name: crate::meta::name(object).to_string(), ..Default::default() }
    }

    /// Attributes of `op` on `object` of the core `resource` (kind
    /// `kind`) in `namespace`.
    pub fn attrs<'a>(&'a self, op: Operation, resource: &'a str, kind: &'a str, namespace: &'a str, object: Value, dry_run: bool) -> Attributes<'a> {
        let (resource, kind) = (Resource { group: "", version: "v1", resource }, Kind { group: "", version: "v1", kind });
        Attributes { operation: op, dry_run, ..self.request.create(resource, kind, &self.name, namespace, object) }
    }
}
