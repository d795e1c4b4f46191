//! The create/update/delete conformance suite of the generic store (after
//! kube's `registry/generic/registry/store_test.go`), run through the
//! registry's REST objects over direct storage, over the watch cache, and
//! over conversion (autoscaling/v1 HorizontalPodAutoscalers stored as v2),
//! all on a real embedded raftstore member.

use std::sync::Arc;

use apiserver::admission::Chain;
use apiserver::authn::UserInfo;
use apiserver::registry::rest::{Context, DeleteOptions, FieldValidation, GetOptions, ListOptions, Rest, UpdatedObjectInfo, WriteOptions};
use apiserver::registry::{builtin, Entry, Registry};
use apiserver::storage::embedded::EmbeddedKv;
use apiserver::storage::{Direct, KvStorage, Storage, StorageProvider};
use apiserver::warning::Warnings;
use apiserver::watchcache::{CacheProvider, CachedStorage};
use async_trait::async_trait;
use serde_json::{json, Value};

/// A PUT body.
struct Put(Value);

#[async_trait]
impl UpdatedObjectInfo for Put {
    async fn updated_object(&self, _current: Option<&Value>) -> Result<Value, apiserver::errors::Status> {
        Ok(self.0.clone())
    }
}

/// Changes the current object with a function, as a patch does.
struct Edit(fn(&mut Value));

#[async_trait]
impl UpdatedObjectInfo for Edit {
    async fn updated_object(&self, current: Option<&Value>) -> Result<Value, apiserver::errors::Status> {
        let mut v = current.cloned().unwrap_or(Value::Null);
        (self.0)(&mut v);
        Ok(v)
    }
    fn may_create(&self) -> bool {
        false
    }
}

fn write(kind: &'static str, dry_run: bool) -> WriteOptions {
    WriteOptions { kind, dry_run, field_manager: Some("suite".into()), field_validation: FieldValidation::Strict, force: false }
}

fn rv(o: &Value) -> i64 {
    o["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

/// One kind's objects for the suite: a new object named `name`, and a
/// change of it that the kind keeps.
struct Kind {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    new: fn(&str) -> Value,
    change: fn(&mut Value),
    changed: fn(&Value) -> bool,
}

const CONFIGMAPS: Kind = Kind {
    group: "",
    version: "v1",
    resource: "configmaps",
    new: |n| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": n}, "data": {"a": "1"}}),
    change: |o| o["data"]["a"] = json!("2"),
    changed: |o| o["data"]["a"] == "2",
};

const HPA_V1: Kind = Kind {
    group: "autoscaling",
    version: "v1",
    resource: "horizontalpodautoscalers",
    new: |n| {
        json!({"apiVersion": "autoscaling/v1", "kind": "HorizontalPodAutoscaler", "metadata": {"name": n},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"}, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50}})
    },
    change: |o| o["spec"]["targetCPUUtilizationPercentage"] = json!(70),
    changed: |o| o["spec"]["targetCPUUtilizationPercentage"] == 70,
};

async fn suite(registry: &Registry, raw: &dyn Storage, k: &Kind, ns: &str) {
    let entry: Arc<Entry> = registry.entry(k.group, k.version, k.resource).expect("served");
    let rest: &dyn Rest = entry.rest("").unwrap().as_ref();
    let user = UserInfo { name: "suite".into(), groups: vec!["system:authenticated".into()], ..Default::default() };
    let warnings = Warnings::default();
    let ctx = Context { namespace: ns, user: &user, user_agent: Some("suite/1"), warnings: &warnings, audit: None };
    let (creater, getter, updater, deleter, lister) = (rest.creater().unwrap(), rest.getter().unwrap(), rest.updater().unwrap(), rest.deleter().unwrap(), rest.lister().unwrap());
    let what = format!("{}/{}", k.resource, k.version);

    // create: system metadata, the served version, managedFields
    let a = creater.create(&ctx, (k.new)("a"), &write("CreateOptions", false)).await.unwrap();
    assert!(rv(&a) > 0, "{what}");
    assert_eq!(a["apiVersion"], (k.new)("a")["apiVersion"], "{what}: served version out");
    assert_eq!(a["metadata"]["namespace"], ns);
    assert_eq!(a["metadata"]["uid"].as_str().map(str::len), Some(36));
    assert_eq!(a["metadata"]["managedFields"][0]["manager"], "suite");
    let again = creater.create(&ctx, (k.new)("a"), &write("CreateOptions", false)).await.unwrap_err();
    assert_eq!((again.code, again.reason.as_str()), (409, "AlreadyExists"), "{what}");
    // the stored form is the storage version's
    let stored = raw.get(&entry.resource.key(ns, "a")).await.unwrap();
    let want_stored = if k.group == "autoscaling" { "autoscaling/v2" } else { "v1" };
    assert_eq!(stored["apiVersion"], want_stored, "{what}");

    // get: the latest state, and from the cache at any revision
    let got = getter.get(&ctx, "a", &GetOptions::default()).await.unwrap();
    assert_eq!(rv(&got), rv(&a));
    let any = getter.get(&ctx, "a", &GetOptions { min_revision: Some(rv(&a)) }).await.unwrap();
    assert_eq!(rv(&any), rv(&a));

    // dry runs write nothing
    let dry = creater.create(&ctx, (k.new)("dry"), &write("CreateOptions", true)).await.unwrap();
    assert_eq!(dry["metadata"]["name"], "dry");
    assert!(getter.get(&ctx, "dry", &GetOptions::default()).await.unwrap_err().is_not_found());

    // update: a change is kept; a stale resourceVersion is 409 Conflict
    let mut changed = got.clone();
    (k.change)(&mut changed);
    let (b, created) = updater.update(&ctx, "a", &Put(changed.clone()), &write("UpdateOptions", false)).await.unwrap();
    assert!(!created && rv(&b) > rv(&a) && (k.changed)(&b), "{what}: {b}");
    let stale = updater.update(&ctx, "a", &Put(changed), &write("UpdateOptions", false)).await.unwrap_err();
    assert!(stale.is_conflict(), "{what}: {stale:?}");
    assert!(stale.message.contains("the object has been modified"));
    let (same, _) = updater.update(&ctx, "a", &Edit(|_| {}), &write("PatchOptions", false)).await.unwrap();
    assert_eq!(rv(&same), rv(&b), "{what}: an empty change writes nothing");
    let missing = updater.update(&ctx, "zz", &Edit(|_| {}), &write("PatchOptions", false)).await.unwrap_err();
    assert!(missing.is_not_found());

    // list sees what was written (a consistent read, served by the cache
    // once it caught up)
    let listed = lister.list(&ctx, &ListOptions::default()).await.unwrap();
    assert_eq!(listed.items.iter().map(|o| o["metadata"]["name"].as_str().unwrap()).collect::<Vec<_>>(), ["a"], "{what}");
    assert!((k.changed)(&listed.items[0]), "{what}: listed in the served version");

    // graceful deletion: a finalizer holds the object until it goes
    let (_, _) = updater.update(&ctx, "a", &Edit(|o| o["metadata"]["finalizers"] = json!(["example.com/hold"])), &write("PatchOptions", false)).await.unwrap();
    let (held, removed) = deleter.delete(&ctx, "a", &DeleteOptions::default()).await.unwrap();
    assert!(!removed && held["metadata"]["deletionTimestamp"].is_string(), "{what}: {held}");
    let (again, removed) = deleter.delete(&ctx, "a", &DeleteOptions::default()).await.unwrap();
    assert!(!removed && again["metadata"]["deletionTimestamp"] == held["metadata"]["deletionTimestamp"]);
    let (_, _) = updater.update(&ctx, "a", &Edit(|o| o["metadata"]["finalizers"] = Value::Null), &write("PatchOptions", false)).await.unwrap();
    assert!(getter.get(&ctx, "a", &GetOptions::default()).await.unwrap_err().is_not_found(), "{what}: released by its last finalizer");

    // delete: dry run keeps it, a uid precondition must hold, then it goes
    let c = creater.create(&ctx, (k.new)("c"), &write("CreateOptions", false)).await.unwrap();
    let (_, removed) = deleter.delete(&ctx, "c", &DeleteOptions { dry_run: true, ..Default::default() }).await.unwrap();
    assert!(removed);
    assert!(getter.get(&ctx, "c", &GetOptions::default()).await.is_ok());
    let mut wrong = DeleteOptions::default();
    wrong.preconditions.uid = Some("nope".into());
    assert!(deleter.delete(&ctx, "c", &wrong).await.unwrap_err().is_conflict());
    let (gone, removed) = deleter.delete(&ctx, "c", &DeleteOptions::default()).await.unwrap();
    assert!(removed && gone["metadata"]["uid"] == c["metadata"]["uid"]);
    assert!(deleter.delete(&ctx, "c", &DeleteOptions::default()).await.unwrap_err().is_not_found());
}

async fn run(provider: Arc<dyn StorageProvider>, raw: Arc<dyn Storage>, ns: &str) {
    let registry = Registry::new(provider, Arc::new(Chain::default()), apiserver::schema::SchemaStore::builtin());
    registry.add_all(builtin(Arc::new(apiserver::authz::always::AlwaysAllow), None)).unwrap();
    for k in [&CONFIGMAPS, &HPA_V1] {
        suite(&registry, raw.as_ref(), k, ns).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_conformance_direct_and_watch_cache() {
    let (h, _dir) = crate::common::embedded_member().await;
    let raw: Arc<dyn Storage> = Arc::new(KvStorage::new(Arc::new(EmbeddedKv::new(h.ctx.clone()))));
    run(Arc::new(Direct(raw.clone())), raw.clone(), "direct").await;
    let cache = Arc::new(CachedStorage::new(raw.clone(), Vec::new(), 1024));
    run(Arc::new(CacheProvider(cache.clone())), raw.clone(), "cached").await;
    assert!(cache.is_cached("/registry/configmaps/"));
    assert!(cache.is_cached("/registry/autoscaling/horizontalpodautoscalers/"));
}
