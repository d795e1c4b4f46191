//! Serving one resource in several versions from one stored version.
//!
//! Each resource has a [`Converter`] (kube's `runtime.ObjectConvertor` for
//! built-ins, the CRD converter for custom resources): async and fallible,
//! so that a conversion webhook can be one. There are two today:
//! - [`Hub`]: the built-ins' conversion through the internal ("hub")
//!   version, `to.convert_from_hub(from.convert_to_hub(obj))`, with the
//!   strategies' functions;
//! - [`NoConversion`]: CRDs with `strategy: None`; only `apiVersion` changes.
//!
//! Objects are stored once, in the storage version. A served version that is
//! not the storage version reads and writes through [`Converting`], a
//! [`Storage`] decorator that converts every object leaving the store to the
//! served version and every object going in to the storage version. The
//! store and handlers never see the storage version, so every verb, watch
//! included, works the same for every version.
//!
//! Example: autoscaling/v1 and v2 HorizontalPodAutoscalers are stored as
//! v2 under `/registry/autoscaling/horizontalpodautoscalers/`; a v1 GET
//! converts the v2 object's CPU utilization metric to
//! `targetCPUUtilizationPercentage`.
//!
//! Label and field selectors are evaluated on the served form. A converter
//! that converts in process ([`Converter::convert_local`]) lets them run
//! inside the store or watch cache, as before; for one that cannot (a
//! webhook), objects are converted first and filtered after, so a page of
//! a limited list may hold fewer items than the limit (which kube allows).

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;
use tokio::sync::mpsc;

use super::Resource;
use crate::errors::Status;
use crate::storage::{Error, ListOptions, ListResult, Preconditions, Predicate, Result, Storage, TryUpdate, Update, WatchOptions, WatchStream};

/// Converts objects between the versions of one resource.
#[async_trait]
pub trait Converter: Send + Sync {
    /// Whether [`Converter::convert_local`] converts (no I/O needed).
    fn in_process(&self) -> bool {
        true
    }

    /// Converts in process, without I/O, if this converter can; `None` when
    /// it must call out (a webhook).
    fn convert_local(&self, obj: Value, from: &Resource, to: &Resource) -> Option<std::result::Result<Value, Status>>;

    /// Converts `obj` from version `from` to version `to`.
    ///
    /// # Errors
    /// The Status for the client when the object cannot be converted.
    async fn convert(&self, obj: Value, from: &Resource, to: &Resource) -> std::result::Result<Value, Status> {
        self.convert_local(obj, from, to).unwrap_or_else(|| Err(Status::internal(format!("no conversion from {} to {}", from.api_version(), to.api_version()))))
    }
}

/// Conversion through the hub version with the strategies' functions.
pub struct Hub;

impl Converter for Hub {
    fn convert_local(&self, obj: Value, from: &Resource, to: &Resource) -> Option<std::result::Result<Value, Status>> {
        Some(Ok(to.strategy.convert_from_hub(from.strategy.convert_to_hub(obj))))
    }
}

/// No conversion: only `apiVersion` is rewritten (CRD `strategy: None`).
pub struct NoConversion;

impl Converter for NoConversion {
    fn convert_local(&self, mut obj: Value, _from: &Resource, to: &Resource) -> Option<std::result::Result<Value, Status>> {
        if let Some(o) = obj.as_object_mut() {
            o.insert("apiVersion".into(), Value::String(to.api_version()));
        }
        Some(Ok(obj))
    }
}

/// A [`Storage`] that converts between a served and a stored version, with
/// the served version's converter.
pub struct Converting {
    inner: Arc<dyn Storage>,
    served: Arc<Resource>,
    stored: Arc<Resource>,
}

fn aborted(s: Status) -> Error {
    Error::Aborted(Box::new(s))
}

impl Converting {
    /// Wraps `inner`, which holds `stored` objects, to serve `served` ones.
    pub fn new(inner: Arc<dyn Storage>, served: Arc<Resource>, stored: Arc<Resource>) -> Self {
        Converting { inner, served, stored }
    }

    async fn out(&self, obj: Value) -> Result<Value> {
        self.served.converter.convert(obj, &self.stored, &self.served).await.map_err(aborted)
    }

    async fn to_store(&self, obj: Value) -> Result<Value> {
        self.served.converter.convert(obj, &self.served, &self.stored).await.map_err(aborted)
    }

    /// `predicate` on served objects as a predicate on stored ones, when the
    /// converter converts in process.
    fn pushed_down(&self, predicate: &Predicate) -> Option<Predicate> {
        if !self.served.converter.in_process() {
            return None;
        }
        let (stored, served, p) = (self.stored.clone(), self.served.clone(), predicate.clone());
        Some(Arc::new(move |o: &Value| match served.converter.convert_local(o.clone(), &stored, &served) {
            Some(Ok(v)) => p(&v),
            _ => false,
        }))
    }
}

/// An update step on served objects, run on stored ones: the current
/// object is converted out before the step and its result back in.
struct ConvertingUpdate<'a> {
    storage: &'a Converting,
    inner: &'a mut dyn TryUpdate,
}

#[async_trait]
impl TryUpdate for ConvertingUpdate<'_> {
    async fn try_update(&mut self, current: Option<Value>) -> std::result::Result<Update, Status> {
        let current = match current {
            Some(o) => Some(self.storage.served.converter.convert(o, &self.storage.stored, &self.storage.served).await?),
            None => None,
        };
        Ok(match self.inner.try_update(current).await? {
            Update::Put(o) => Update::Put(self.storage.served.converter.convert(o, &self.storage.served, &self.storage.stored).await?),
            other => other,
        })
    }
}

#[async_trait]
impl Storage for Converting {
    async fn get(&self, key: &str) -> Result<Value> {
        let o = self.inner.get(key).await?;
        self.out(o).await
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        // Selectors are evaluated on the served form.
        let mut opts = opts.clone();
        opts.allow_encoded = false;
        let mut after: Option<Predicate> = None;
        if let Some(p) = opts.predicate.take() {
            match self.pushed_down(&p) {
                Some(q) => opts.predicate = Some(q),
                None => after = Some(p),
            }
        }
        let mut r = self.inner.list(prefix, &opts).await?;
        let mut items = Vec::with_capacity(r.items.len());
        for o in std::mem::take(&mut r.items) {
            let o = self.out(o).await?;
            if after.as_ref().is_none_or(|p| p(&o)) {
                items.push(o);
            }
        }
        r.items = items;
        Ok(r)
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Value> {
        let obj = self.to_store(obj).await?;
        let o = self.inner.create(key, obj).await?;
        self.out(o).await
    }

    async fn guaranteed_update(&self, key: &str, preconditions: &Preconditions, try_update: &mut dyn TryUpdate) -> Result<Value> {
        let mut step = ConvertingUpdate { storage: self, inner: try_update };
        let o = self.inner.guaranteed_update(key, preconditions, &mut step).await?;
        self.out(o).await
    }

    async fn delete(&self, key: &str, preconditions: &Preconditions) -> Result<Value> {
        let o = self.inner.delete(key, preconditions).await?;
        self.out(o).await
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream> {
        // Selectors are evaluated on the served form.
        let mut opts = opts.clone();
        let mut after: Option<Predicate> = None;
        if let Some(p) = opts.predicate.take() {
            match self.pushed_down(&p) {
                Some(q) => opts.predicate = Some(q),
                None => after = Some(p),
            }
        }
        let mut inner = self.inner.watch(key, &opts).await?;
        let (tx, rx) = mpsc::channel(64);
        let (stored, served) = (self.stored.clone(), self.served.clone());
        tokio::spawn(async move {
            while let Some(ev) = inner.recv().await {
                let ev = match ev {
                    Ok(mut e) if e.kind != crate::storage::EventType::Bookmark => {
                        let converted = async {
                            let object = served.converter.convert((*e.object).clone(), &stored, &served).await?;
                            let prev = match &e.prev {
                                Some(p) => Some(Arc::new(served.converter.convert((**p).clone(), &stored, &served).await?)),
                                None => None,
                            };
                            Ok::<_, Status>((object, prev))
                        };
                        match converted.await {
                            Ok((object, prev)) => {
                                e.object = Arc::new(object);
                                e.prev = prev;
                                e.encoded = None;
                                match after.as_ref() {
                                    Some(p) => match e.filtered(Some(p)) {
                                        Some(e) => Ok(e),
                                        None => continue,
                                    },
                                    None => Ok(e),
                                }
                            }
                            Err(s) => Err(aborted(s)),
                        }
                    }
                    other => other,
                };
                let stop = ev.is_err();
                if tx.send(ev).await.is_err() || stop {
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
