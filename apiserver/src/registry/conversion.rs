//! Serving one resource in several versions from one stored version
//! (kube's conversion through the internal "hub" version).
//!
//! Objects are stored once, in the storage version. A request for another
//! served version reads through [`Converting`], a [`Storage`] decorator
//! that converts every object leaving the store to the served version
//! (`served.convert_from_hub(stored.convert_to_hub(obj))`) and every object going in to the
//! storage version (`stored.convert_from_hub(served.convert_to_hub(obj))`). Handlers never
//! see the storage version, so every verb, watch included, works the same
//! for every version.
//!
//! Example: autoscaling/v1 and v2 HorizontalPodAutoscalers are stored as
//! v2 under `/registry/autoscaling/horizontalpodautoscalers/`; a v1 GET
//! converts the v2 object's CPU utilization metric to
//! `targetCPUUtilizationPercentage`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

use super::Resource;
use crate::storage::{ListOptions, ListResult, Preconditions, Result, Storage, TryUpdate, Update, WatchOptions, WatchStream};

/// A [`Storage`] that converts between a served and a stored version.
pub struct Converting {
    inner: Arc<dyn Storage>,
    served: Arc<Resource>,
    stored: Arc<Resource>,
}

impl Converting {
    /// Wraps `inner`, which holds `stored` objects, to serve `served` ones.
    pub fn new(inner: Arc<dyn Storage>, served: Arc<Resource>, stored: Arc<Resource>) -> Self {
        Converting { inner, served, stored }
    }

    fn out(&self, obj: Value) -> Value {
        convert(&self.stored, &self.served, obj)
    }

    fn to_store(&self, obj: Value) -> Value {
        convert(&self.served, &self.stored, obj)
    }
}

/// Converts `obj` from version `from` to version `to` through the hub.
pub fn convert(from: &Resource, to: &Resource, obj: Value) -> Value {
    to.strategy.convert_from_hub(from.strategy.convert_to_hub(obj))
}

/// An update step on served objects, run on stored ones: the current
/// object is converted out before the step and its result back in.
struct ConvertingUpdate<'a> {
    storage: &'a Converting,
    inner: &'a mut dyn TryUpdate,
}

#[async_trait]
impl TryUpdate for ConvertingUpdate<'_> {
    async fn try_update(&mut self, current: Option<Value>) -> std::result::Result<Update, crate::errors::Status> {
        let current = current.map(|o| self.storage.out(o));
        Ok(match self.inner.try_update(current).await? {
            Update::Put(o) => Update::Put(self.storage.to_store(o)),
            other => other,
        })
    }
}

#[async_trait]
impl Storage for Converting {
    async fn get(&self, key: &str) -> Result<Value> {
        self.inner.get(key).await.map(|o| self.out(o))
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        // Selectors are evaluated on the served form.
        let mut opts = opts.clone();
        opts.allow_encoded = false;
        if let Some(p) = opts.predicate.take() {
            let (stored, served) = (self.stored.clone(), self.served.clone());
            opts.predicate = Some(Arc::new(move |o: &Value| p(&convert(&stored, &served, o.clone()))));
        }
        let mut r = self.inner.list(prefix, &opts).await?;
        r.items = r.items.into_iter().map(|o| self.out(o)).collect();
        Ok(r)
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Value> {
        let obj = self.to_store(obj);
        self.inner.create(key, obj).await.map(|o| self.out(o))
    }

    async fn guaranteed_update(&self, key: &str, preconditions: &Preconditions, try_update: &mut dyn TryUpdate) -> Result<Value> {
        let mut step = ConvertingUpdate { storage: self, inner: try_update };
        self.inner.guaranteed_update(key, preconditions, &mut step).await.map(|o| self.out(o))
    }

    async fn delete(&self, key: &str, preconditions: &Preconditions) -> Result<Value> {
        self.inner.delete(key, preconditions).await.map(|o| self.out(o))
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream> {
        // Selectors are evaluated on the served form.
        let mut opts = opts.clone();
        if let Some(p) = opts.predicate.take() {
            let (stored, served) = (self.stored.clone(), self.served.clone());
            opts.predicate = Some(Arc::new(move |o: &Value| p(&convert(&stored, &served, o.clone()))));
        }
        let mut inner = self.inner.watch(key, &opts).await?;
        let (tx, rx) = mpsc::channel(64);
        let (stored, served) = (self.stored.clone(), self.served.clone());
        tokio::spawn(async move {
            while let Some(ev) = inner.recv().await {
                let ev = ev.map(|mut e| {
                    if e.kind != crate::storage::EventType::Bookmark {
                        e.object = Arc::new(convert(&stored, &served, (*e.object).clone()));
                        e.prev = e.prev.map(|p| Arc::new(convert(&stored, &served, (*p).clone())));
                        e.encoded = None;
                    }
                    e
                });
                if tx.send(ev).await.is_err() {
                    return;
                }
            }
        });
        Ok(rx)
    }

    async fn current_revision(&self) -> Result<i64> {
        self.inner.current_revision().await
    }
}
