//! `--etcd-servers-overrides`: some resources on their own etcd servers
//! (kube-apiserver's storage factory gives each such resource its own etcd3
//! store).
//!
//! [`RoutedStorage`] sends every call to the store of the resource its key
//! belongs to: the longest routed prefix (`/registry/events/`,
//! `/registry/apps/deployments/`) that the key starts with, else the default
//! store. Each store has its own revisions, so resourceVersions of an
//! overridden resource come from its etcd, as in kube.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use super::{ListOptions, ListResult, Preconditions, Result, Storage, TryUpdate, WatchOptions, WatchStream};

/// Stores chosen by key prefix.
pub struct RoutedStorage {
    default: Arc<dyn Storage>,
    /// (logical key prefix of a resource, its store), longest prefix first.
    routes: Vec<(String, Arc<dyn Storage>)>,
}

impl RoutedStorage {
    /// `routes` are (resource prefix as [`super::keys::prefix`] builds it,
    /// store); every other key goes to `default`.
    pub fn new(default: Arc<dyn Storage>, mut routes: Vec<(String, Arc<dyn Storage>)>) -> Self {
        routes.sort_by_key(|(p, _)| std::cmp::Reverse(p.len()));
        RoutedStorage { default, routes }
    }

    /// The store of `key` (a key or a prefix of one resource).
    pub fn route(&self, key: &str) -> &Arc<dyn Storage> {
        self.routes.iter().find(|(p, _)| key.starts_with(p.as_str())).map_or(&self.default, |(_, s)| s)
    }
}

#[async_trait]
impl Storage for RoutedStorage {
    async fn get(&self, key: &str) -> Result<Value> {
        self.route(key).get(key).await
    }

    async fn get_not_older_than(&self, key: &str, min_revision: i64) -> Result<Value> {
        self.route(key).get_not_older_than(key, min_revision).await
    }

    async fn list(&self, prefix: &str, opts: &ListOptions) -> Result<ListResult> {
        self.route(prefix).list(prefix, opts).await
    }

    async fn create(&self, key: &str, obj: Value) -> Result<Value> {
        self.route(key).create(key, obj).await
    }

    async fn guaranteed_update(&self, key: &str, preconditions: &Preconditions, try_update: &mut dyn TryUpdate) -> Result<Value> {
        self.route(key).guaranteed_update(key, preconditions, try_update).await
    }

    async fn delete(&self, key: &str, preconditions: &Preconditions) -> Result<Value> {
        self.route(key).delete(key, preconditions).await
    }

    async fn watch(&self, key: &str, opts: &WatchOptions) -> Result<WatchStream> {
        self.route(key).watch(key, opts).await
    }

    /// The default store's revision (what `/readyz` checks); a routed
    /// resource's revision comes from [`Storage::backend_for`] its prefix.
    async fn current_revision(&self) -> Result<i64> {
        self.default.current_revision().await
    }

    fn backend_for(&self, prefix: &str) -> Option<Arc<dyn Storage>> {
        Some(self.route(prefix).clone())
    }
}
