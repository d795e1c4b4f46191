//! The resources this server serves (kube-apiserver `pkg/registry` and
//! `k8s.io/apiserver/pkg/registry`).
//!
//! - [`Resource`]: a resource's group/version/kind, scope, names and its
//!   [`Strategy`] (the type's semantics);
//! - [`store::Store`]: the generic store, the one write path of every
//!   stored resource (prepare, admission, validation, managedFields,
//!   guaranteed update, finalizers);
//! - [`rest`]: the REST objects that handlers call, one per resource and
//!   per subresource ([`subresources`]);
//! - [`Registry`]: the served set, which can change at run time (CRDs):
//!   adding a resource opens its storage (and watch cache), removing it
//!   closes them; readers see one consistent [`Catalog`] through a
//!   lock-free swap, and its [`Catalog::generation`] tells discovery and
//!   OpenAPI to rebuild;
//! - [`conversion`]: one stored version, many served ones.
//!
//! The groups (`core.rs`, `apps.rs`, ...) are strategies and resource
//! definitions only; handlers look resources up here and never name one.

pub mod admission;
pub mod apiextensions;
pub mod apps;
pub mod auth;
pub mod autoscaling;
pub mod batch;
pub mod cluster;
pub mod conversion;
pub mod core;
pub mod escalation;
pub mod networking;
pub mod printers;
pub mod rbac;
pub mod resource_limits;
pub mod rest;
pub mod scale;
pub mod simple;
pub mod store;
pub mod strategy;
pub mod subresources;
pub mod token_request;
pub mod validation;

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

pub use strategy::{Column, DefaultStrategy, Strategy};

use crate::storage::StorageProvider;
use conversion::Converter;
use rest::Rest;
use store::Store;
use subresources::Subresource;

/// One served resource: what it is (owned names, so resources can come
/// from CRDs at run time) and its semantics.
pub struct Resource {
    /// API group (`""` for core).
    pub group: String,
    /// Served version.
    pub version: String,
    /// Plural resource name (`configmaps`).
    pub resource: String,
    /// Singular name (`configmap`).
    pub singular: String,
    /// Kind (`ConfigMap`).
    pub kind: String,
    /// Namespace-scoped?
    pub namespaced: bool,
    /// Verbs of the main resource, in discovery order; set by the registry
    /// from its REST object.
    pub verbs: Vec<String>,
    /// Short names (`cm`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Subresources served (`status`, `scale`); set by the registry.
    pub subresources: Vec<String>,
    /// The type's semantics.
    pub strategy: Arc<dyn Strategy>,
    /// How objects convert between this version and the stored one.
    pub converter: Arc<dyn Converter>,
}

impl Resource {
    /// A resource with no short names or categories, converted through the
    /// hub ([`conversion::Hub`]).
    pub fn new(group: &str, version: &str, resource: &str, singular: &str, kind: &str, namespaced: bool, strategy: Arc<dyn Strategy>) -> Self {
        Resource {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
            singular: singular.into(),
            kind: kind.into(),
            namespaced,
            verbs: Vec::new(),
            short_names: Vec::new(),
            categories: Vec::new(),
            subresources: Vec::new(),
            strategy,
            converter: Arc::new(conversion::Hub),
        }
    }

    /// `v1` or `apps/v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `configmaps` or `deployments.apps`.
    pub fn qualified(&self) -> String {
        crate::errors::qualified(&self.group, &self.resource)
    }

    /// The storage prefix of the resource, or of one namespace of it, ending
    /// with `/`: `/registry/configmaps/`, `/registry/apps/deployments/default/`.
    pub fn prefix(&self, namespace: Option<&str>) -> String {
        // A version stored as another group's (events.k8s.io events as core
        // events) lives under that group's prefix.
        let group = self.strategy.storage_version().map_or(self.group.as_str(), |(g, _)| g);
        crate::storage::keys::prefix(group, &self.resource, namespace.filter(|_| self.namespaced))
    }

    /// The storage key of one object.
    pub fn key(&self, namespace: &str, name: &str) -> String {
        let mut k = self.prefix(if self.namespaced { Some(namespace) } else { None });
        k.push_str(name);
        k
    }

    /// Whether this version is stored as itself (not as another version).
    pub fn is_storage_version(&self) -> bool {
        self.strategy.storage_version().is_none_or(|(g, v)| g == self.group && v == self.version)
    }
}

/// Wraps a stored resource's REST object with checks of its own before
/// the generic store (kube's `policybased` RBAC storage, which refuses
/// privilege escalation). It gets the store and returns what is served for
/// the main resource; subresources are not wrapped.
pub type Decorator = Arc<dyn Fn(Arc<dyn Rest>) -> Arc<dyn Rest> + Send + Sync>;

/// How a resource is served.
pub enum Serving {
    /// Stored, through the generic store, with these subresources.
    Stored(Vec<Arc<dyn Subresource>>),
    /// Stored, with these subresources, the main resource served through
    /// the decorator's wrapper.
    Decorated(Vec<Arc<dyn Subresource>>, Decorator),
    /// Never stored: this REST object answers (access reviews).
    Rest(Arc<dyn Rest>),
}

/// A resource to add to the registry.
pub struct ResourceDef {
    /// What it is.
    pub resource: Resource,
    /// How it is served.
    pub serving: Serving,
}

impl ResourceDef {
    /// A stored resource.
    pub fn stored(resource: Resource, subresources: Vec<Arc<dyn Subresource>>) -> Self {
        ResourceDef { resource, serving: Serving::Stored(subresources) }
    }

    /// A resource served by its own REST object.
    pub fn rest(resource: Resource, rest: Arc<dyn Rest>) -> Self {
        ResourceDef { resource, serving: Serving::Rest(rest) }
    }

    /// Served through `decorator` (a stored resource; others are left as
    /// they are).
    pub fn decorated(mut self, decorator: Decorator) -> Self {
        if let Serving::Stored(subs) = self.serving {
            self.serving = Serving::Decorated(subs, decorator);
        }
        self
    }

    /// With short names.
    pub fn short_names(mut self, names: &[&str]) -> Self {
        self.resource.short_names = names.iter().map(|s| s.to_string()).collect();
        self
    }

    /// With categories.
    pub fn categories(mut self, cats: &[&str]) -> Self {
        self.resource.categories = cats.iter().map(|s| s.to_string()).collect();
        self
    }

    /// `(group, version, resource)`.
    pub fn gvr(&self) -> (&str, &str, &str) {
        (&self.resource.group, &self.resource.version, &self.resource.resource)
    }
}

/// A served resource with its REST objects.
pub struct Entry {
    /// The resource.
    pub resource: Arc<Resource>,
    rest: Arc<dyn Rest>,
    subresources: Vec<(String, Arc<dyn Rest>)>,
    store: Option<Arc<Store>>,
    /// The storage prefix opened for it, closed when it is removed.
    opened: Option<String>,
}

impl Entry {
    /// The REST object of the main resource (`""`) or of a subresource.
    pub fn rest(&self, subresource: &str) -> Option<&Arc<dyn Rest>> {
        if subresource.is_empty() {
            return Some(&self.rest);
        }
        self.subresources.iter().find(|(n, _)| n == subresource).map(|(_, r)| r)
    }

    /// The subresources and their REST objects, in registration order.
    pub fn subresources(&self) -> impl Iterator<Item = (&str, &Arc<dyn Rest>)> {
        self.subresources.iter().map(|(n, r)| (n.as_str(), r))
    }

    /// The generic store, for stored resources.
    pub fn store(&self) -> Option<&Arc<Store>> {
        self.store.as_ref()
    }
}

/// The served set at one moment: cheap to take ([`Registry::catalog`]),
/// never changed once taken.
#[derive(Default)]
pub struct Catalog {
    generation: u64,
    entries: Vec<Arc<Entry>>,
    /// group → version → resource → index in `entries`.
    index: HashMap<String, HashMap<String, HashMap<String, usize>>>,
    /// (group, version): groups in registration order, versions by
    /// [`version_order`].
    group_versions: Vec<(String, String)>,
}

impl Catalog {
    fn build(generation: u64, entries: Vec<Arc<Entry>>) -> Self {
        let mut index: HashMap<String, HashMap<String, HashMap<String, usize>>> = HashMap::new();
        let mut group_versions: Vec<(String, String)> = Vec::new();
        for (i, e) in entries.iter().enumerate() {
            let r = &e.resource;
            index.entry(r.group.clone()).or_default().entry(r.version.clone()).or_default().insert(r.resource.clone(), i);
            if !group_versions.iter().any(|(g, v)| *g == r.group && *v == r.version) {
                group_versions.push((r.group.clone(), r.version.clone()));
            }
        }
        // Groups stay in registration order; within one, versions go by
        // priority (a CRD's v1 before its v1beta1 storage version).
        let mut groups: Vec<&str> = Vec::new();
        for (g, _) in &group_versions {
            if !groups.contains(&g.as_str()) {
                groups.push(g);
            }
        }
        let rank = |gv: &(String, String)| groups.iter().position(|g| *g == gv.0);
        let mut sorted = group_versions.clone();
        sorted.sort_by(|a, b| rank(a).cmp(&rank(b)).then_with(|| version_order(&a.1, &b.1)));
        Catalog { generation, entries, index, group_versions: sorted }
    }

    /// Increases with every change of the served set.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The entry of a resource.
    pub fn entry(&self, group: &str, version: &str, resource: &str) -> Option<&Arc<Entry>> {
        let i = *self.index.get(group)?.get(version)?.get(resource)?;
        self.entries.get(i)
    }

    /// Looks a resource up by group, version and plural name.
    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<Arc<Resource>> {
        self.entry(group, version, resource).map(|e| e.resource.clone())
    }

    /// All resources of one group-version, in registration order.
    pub fn of_group_version(&self, group: &str, version: &str) -> Vec<Arc<Resource>> {
        self.entries.iter().filter(|e| e.resource.group == group && e.resource.version == version).map(|e| e.resource.clone()).collect()
    }

    /// (group, version) pairs: groups in registration order, core first,
    /// and within a group the preferred version first ([`version_order`]).
    pub fn group_versions(&self) -> &[(String, String)] {
        &self.group_versions
    }

    /// Every entry, in registration order.
    pub fn entries(&self) -> &[Arc<Entry>] {
        &self.entries
    }
}

/// Kube's version priority (`CompareKubeAwareVersionStrings`), as an
/// ordering where the preferred version comes first: GA versions (`v2`,
/// then `v1`), then betas, then alphas, each by major then minor number,
/// highest first (`v2beta1`, `v1beta2`, `v1beta1`); versions of another
/// form come last, alphabetically.
pub fn version_order(a: &str, b: &str) -> std::cmp::Ordering {
    /// (class: 0 GA, 1 beta, 2 alpha, 3 other; major; minor).
    fn key(v: &str) -> (u8, u64, u64) {
        let Some(rest) = v.strip_prefix('v') else { return (3, 0, 0) };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let Ok(major) = rest[..digits].parse::<u64>() else { return (3, 0, 0) };
        let tail = &rest[digits..];
        let (class, minor) = if tail.is_empty() {
            return (0, major, 0);
        } else if let Some(m) = tail.strip_prefix("beta") {
            (1, m)
        } else if let Some(m) = tail.strip_prefix("alpha") {
            (2, m)
        } else {
            return (3, 0, 0);
        };
        match minor.parse::<u64>() {
            Ok(n) if minor.bytes().all(|c| c.is_ascii_digit()) => (class, major, n),
            _ => (3, 0, 0),
        }
    }
    let (ka, kb) = (key(a), key(b));
    if ka.0 == 3 && kb.0 == 3 {
        return a.cmp(b);
    }
    ka.0.cmp(&kb.0).then(kb.1.cmp(&ka.1)).then(kb.2.cmp(&ka.2))
}

/// Why the registry refused a change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The group/version/resource is served already.
    #[error("{0} is already served")]
    AlreadyServed(String),
    /// A version stored as another version that is not served.
    #[error("{resource}: its storage version {storage} is not served")]
    NoStorageVersion {
        /// The resource.
        resource: String,
        /// The missing storage version.
        storage: String,
    },
}

/// Every served resource. Reads are lock-free; changes (CRDs established
/// or deleted) are serialised and swap in a new [`Catalog`].
pub struct Registry {
    catalog: Arc<ArcSwap<Catalog>>,
    provider: Arc<dyn StorageProvider>,
    admission: Arc<crate::admission::Chain>,
    schemas: crate::schema::SchemaStore,
    changes: Mutex<()>,
}

impl Registry {
    /// An empty registry whose resources get their storage from `provider`,
    /// pass `admission` on every write and find their kinds' schemas in
    /// `schemas`.
    pub fn new(provider: Arc<dyn StorageProvider>, admission: Arc<crate::admission::Chain>, schemas: crate::schema::SchemaStore) -> Self {
        Registry { catalog: Arc::new(ArcSwap::from_pointee(Catalog::default())), provider, admission, schemas, changes: Mutex::new(()) }
    }

    /// The served set now.
    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }

    /// The entry of a resource.
    pub fn entry(&self, group: &str, version: &str, resource: &str) -> Option<Arc<Entry>> {
        self.catalog.load().entry(group, version, resource).cloned()
    }

    /// The schemas the stores validate with (custom kinds come and go
    /// with their CRDs).
    pub fn schemas(&self) -> &crate::schema::SchemaStore {
        &self.schemas
    }

    /// The generic store of a stored resource (what controllers write
    /// through).
    pub fn store(&self, group: &str, version: &str, resource: &str) -> Option<Arc<Store>> {
        self.entry(group, version, resource)?.store().cloned()
    }

    /// Adds one resource (a CRD's version, once the CRD is established):
    /// its storage and watch cache start, and discovery and OpenAPI show it
    /// from the next request on.
    ///
    /// # Errors
    /// [`Error::AlreadyServed`]; [`Error::NoStorageVersion`].
    pub fn add(&self, def: ResourceDef) -> Result<(), Error> {
        self.add_all(vec![def])
    }

    /// Adds resources at once, in this order (a version stored as another
    /// may come before or after it in the same call).
    ///
    /// # Errors
    /// As [`Registry::add`]; nothing is added then.
    pub fn add_all(&self, defs: Vec<ResourceDef>) -> Result<(), Error> {
        let _writer = self.changes.lock();
        let current = self.catalog.load_full();
        for (i, d) in defs.iter().enumerate() {
            let (g, v, r) = d.gvr();
            if current.entry(g, v, r).is_some() || defs[..i].iter().any(|o| o.gvr() == (g, v, r)) {
                return Err(Error::AlreadyServed(crate::errors::qualified(g, &format!("{r}/{v}"))));
            }
            if let Some((sg, sv)) = d.resource.strategy.storage_version().filter(|_| !d.resource.is_storage_version()) {
                let here = defs.iter().any(|o| o.gvr() == (sg, sv, r)) || current.entry(sg, sv, r).is_some();
                if !here {
                    return Err(Error::NoStorageVersion { resource: d.resource.qualified(), storage: format!("{sg}/{sv}") });
                }
            }
        }
        // Stored versions first, so the others can convert to them.
        let mut built: Vec<Arc<Resource>> = Vec::new();
        let mut pending = Vec::new();
        for mut d in defs {
            d.resource.verbs = match &d.serving {
                Serving::Stored(_) | Serving::Decorated(..) => Store::verbs(d.resource.strategy.as_ref()),
                Serving::Rest(rest) => rest::verbs(rest.as_ref()),
            };
            d.resource.subresources = match &d.serving {
                Serving::Stored(subs) | Serving::Decorated(subs, _) => subs.iter().map(|s| s.name().to_string()).collect(),
                Serving::Rest(_) => Vec::new(),
            };
            let resource = Arc::new(d.resource);
            built.push(resource.clone());
            pending.push((resource, d.serving));
        }
        let stored_as = |r: &Resource| -> Option<Arc<Resource>> {
            let (sg, sv) = r.strategy.storage_version().filter(|_| !r.is_storage_version())?;
            built.iter().find(|o| o.group == sg && o.version == sv && o.resource == r.resource).cloned().or_else(|| current.get(sg, sv, &r.resource))
        };
        let mut entries: Vec<Arc<Entry>> = current.entries.clone();
        for (resource, serving) in pending {
            let entry = match serving {
                Serving::Rest(rest) => Entry { resource, rest, subresources: Vec::new(), store: None, opened: None },
                Serving::Stored(subs) => {
                    let stored = stored_as(&resource);
                    self.open_stored(resource, &subs, None, stored)
                }
                Serving::Decorated(subs, decorator) => {
                    let stored = stored_as(&resource);
                    self.open_stored(resource, &subs, Some(&decorator), stored)
                }
            };
            entries.push(Arc::new(entry));
        }
        self.catalog.store(Arc::new(Catalog::build(current.generation + 1, entries)));
        Ok(())
    }

    /// The entry of a stored resource: its storage (converting to
    /// `stored_as` when another version is stored), the generic store, its
    /// subresources, and the main REST object (the store, or the
    /// decorator's wrapper of it).
    fn open_stored(&self, resource: Arc<Resource>, subs: &[Arc<dyn Subresource>], decorator: Option<&Decorator>, stored_as: Option<Arc<Resource>>) -> Entry {
        let prefix = resource.prefix(None);
        let storage = self.provider.open(&prefix);
        let storage = match stored_as {
            Some(stored) => Arc::new(conversion::Converting::new(storage, resource.clone(), stored)) as Arc<dyn crate::storage::Storage>,
            None => storage,
        };
        // The store reaches the other versions of its resource through
        // the catalog (weakly: the catalog holds the store).
        let catalog = Arc::downgrade(&self.catalog);
        let (group, plural) = (resource.group.clone(), resource.resource.clone());
        let siblings: store::Siblings = Arc::new(move |version: &str| catalog.upgrade()?.load().get(&group, version, &plural));
        let store = Arc::new(Store::new(resource.clone(), storage, self.admission.clone(), self.schemas.clone()).with_siblings(siblings));
        let subresources = subs.iter().map(|s| (s.name().to_string(), s.rest(&store))).collect();
        let rest: Arc<dyn Rest> = match decorator {
            Some(d) => d(store.clone()),
            None => store.clone(),
        };
        Entry { resource, rest, subresources, store: Some(store), opened: Some(prefix) }
    }

    /// Stops serving a resource (a CRD's version withdrawn): it leaves
    /// discovery and OpenAPI, requests for it get 404, and its watch cache
    /// stops when no other version uses the same storage. Returns whether
    /// it was served.
    pub fn remove(&self, group: &str, version: &str, resource: &str) -> bool {
        let _writer = self.changes.lock();
        let current = self.catalog.load_full();
        let Some(gone) = current.entry(group, version, resource).cloned() else { return false };
        let entries: Vec<Arc<Entry>> = current.entries.iter().filter(|e| !Arc::ptr_eq(e, &gone)).cloned().collect();
        self.catalog.store(Arc::new(Catalog::build(current.generation + 1, entries)));
        if let Some(prefix) = &gone.opened {
            self.provider.close(prefix);
        }
        true
    }

    /// The stores of every namespaced resource, one per storage prefix
    /// (versions stored together are deleted once): what emptying a
    /// namespace goes through.
    pub fn namespaced_stores(&self) -> Vec<Arc<Store>> {
        let catalog = self.catalog.load();
        let mut seen: Vec<String> = Vec::new();
        let mut out = Vec::new();
        for e in catalog.entries() {
            let (Some(store), Some(prefix)) = (e.store(), e.opened.as_ref()) else { continue };
            if e.resource.namespaced && !seen.contains(prefix) {
                seen.push(prefix.clone());
                out.push(store.clone());
            }
        }
        out
    }
}

/// The built-in resources; the access reviews ask `authorizer`, and with
/// `rbac` (RBAC is a mode) RBAC writes are guarded against escalation.
pub fn builtin(authorizer: Arc<dyn crate::authz::Authorizer>, rbac: Option<Arc<crate::authz::rbac::Rbac>>) -> Vec<ResourceDef> {
    let mut defs = Vec::new();
    defs.extend(core::resources());
    defs.extend(apps::resources());
    defs.extend(auth::resources(authorizer.clone()));
    defs.extend(autoscaling::resources());
    defs.extend(batch::resources());
    defs.extend(cluster::resources());
    defs.extend(networking::resources());
    defs.extend(rbac::resources(&authorizer, rbac.as_ref()));
    defs.extend(admission::resources());
    defs.extend(apiextensions::resources());
    defs
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The built-in catalog, over a store that is never called.
    pub(crate) fn builtin_catalog() -> Arc<Catalog> {
        registry().catalog()
    }

    fn registry() -> Registry {
        let storage: Arc<dyn crate::storage::Storage> = Arc::new(crate::storage::KvStorage::new(Arc::new(NoKv)));
        let r = Registry::new(Arc::new(crate::storage::Direct(storage)), Arc::new(crate::admission::Chain::default()), crate::schema::SchemaStore::builtin());
        let authz: Arc<dyn crate::authz::Authorizer> = Arc::new(crate::authz::always::AlwaysAllow);
        assert!(r.add_all(builtin(authz, None)).is_ok());
        r
    }

    /// A KV that is never called: these tests only look at the catalog.
    struct NoKv;

    #[async_trait::async_trait]
    impl crate::storage::kv::Kv for NoKv {
        async fn range(&self, _key: &[u8], _end: &[u8], _revision: i64, _limit: i64) -> crate::storage::Result<crate::storage::kv::RangeResult> {
            Err(crate::storage::Error::Unavailable("no store in this test".into()))
        }
        async fn compare_and_write(&self, _key: &[u8], _mod_revision: i64, _op: crate::storage::kv::WriteOp) -> crate::storage::Result<crate::storage::kv::CasResult> {
            Err(crate::storage::Error::Unavailable("no store in this test".into()))
        }
        async fn watch(&self, _key: &[u8], _end: &[u8], _start_revision: i64) -> crate::storage::Result<tokio::sync::mpsc::Receiver<crate::storage::kv::EventBatch>> {
            Err(crate::storage::Error::Unavailable("no store in this test".into()))
        }
    }

    #[test]
    fn builtins_are_served_with_their_verbs_and_subresources() {
        let r = registry();
        let c = r.catalog();
        let verbs = |g: &str, v: &str, res: &str| c.get(g, v, res).map(|r| r.verbs.join(",")).unwrap_or_default();
        assert_eq!(verbs("", "v1", "configmaps"), "create,delete,deletecollection,get,list,patch,update,watch");
        assert_eq!(verbs("", "v1", "namespaces"), "create,delete,get,list,patch,update,watch");
        assert_eq!(verbs("authorization.k8s.io", "v1", "selfsubjectaccessreviews"), "create");
        for e in c.entries() {
            let res = &e.resource;
            // The status subresource is what resets status on main updates.
            assert_eq!(res.strategy.has_status(), res.subresources.iter().any(|s| s == "status"), "{}", res.qualified());
            for (name, rest) in e.subresources() {
                let want = match name {
                    "finalize" => "update",
                    _ => "get,patch,update",
                };
                assert_eq!(rest::verbs(rest.as_ref()).join(","), want, "{}/{name}", res.qualified());
            }
        }
        assert_eq!(c.group_versions().first(), Some(&(String::new(), "v1".to_string())));
    }

    #[tokio::test]
    async fn resources_come_and_go() {
        let r = registry();
        let before = r.catalog().generation();
        let def = || ResourceDef::stored(Resource::new("example.com", "v1", "widgets", "widget", "Widget", true, Arc::new(DefaultStrategy)), vec![subresources::status()]);
        assert!(r.add(def()).is_ok());
        assert_eq!(r.add(def()), Err(Error::AlreadyServed("widgets/v1.example.com".into())));
        let c = r.catalog();
        assert!(c.generation() > before);
        assert!(c.entry("example.com", "v1", "widgets").is_some_and(|e| e.rest("status").is_some()));
        assert!(c.group_versions().contains(&("example.com".into(), "v1".into())));
        assert!(r.remove("example.com", "v1", "widgets"));
        assert!(!r.remove("example.com", "v1", "widgets"));
        assert!(r.entry("example.com", "v1", "widgets").is_none());
        assert!(!r.catalog().group_versions().contains(&("example.com".into(), "v1".into())));
        // The old catalog a reader holds is unchanged.
        assert!(c.entry("example.com", "v1", "widgets").is_some());
    }

    /// Kube's documented example order of version priority.
    #[test]
    fn version_priority() {
        let mut v = vec!["foo10", "v1", "v11alpha2", "v10beta3", "v2", "foo1", "v12alpha1", "v3beta1", "v11beta2", "v10", "v1beta"];
        v.sort_by(|a, b| version_order(a, b));
        assert_eq!(v, ["v10", "v2", "v1", "v11beta2", "v10beta3", "v3beta1", "v12alpha1", "v11alpha2", "foo1", "foo10", "v1beta"]);
    }

    /// A group's preferred version is the one of highest priority, not the
    /// first registered (a CRD storing v1beta1 and serving v1 prefers v1).
    #[tokio::test]
    async fn preferred_version_by_priority() {
        let r = registry();
        let def = |v: &str| ResourceDef::stored(Resource::new("example.com", v, "widgets", "widget", "Widget", true, Arc::new(DefaultStrategy)), vec![]);
        assert!(r.add_all(vec![def("v1beta1"), def("v1alpha1"), def("v1")]).is_ok());
        let c = r.catalog();
        let got: Vec<&str> = c.group_versions().iter().filter(|(g, _)| g == "example.com").map(|(_, v)| v.as_str()).collect();
        assert_eq!(got, ["v1", "v1beta1", "v1alpha1"]);
    }
}
