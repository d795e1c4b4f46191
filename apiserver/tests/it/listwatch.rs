//! The list/watch conformance suite (after kube's `storage/testing`
//! `store_tests.go` / `watcher_tests.go`: RV × match combinations,
//! pagination across compaction, bookmarks, initial events, selector
//! transitions), run against direct storage and against the watch cache,
//! both on a real embedded raftstore member.

use std::sync::Arc;
use std::time::Duration;

use apiserver::errors::Status;
use apiserver::storage::embedded::EmbeddedKv;
use apiserver::storage::{inconsistent_continue, Error, EventType, KvStorage, ListOptions, Preconditions, RevisionMatch, Storage, Update, WatchEvent, WatchOptions, WatchStream, INITIAL_EVENTS_END};
use apiserver::watchcache::CachedStorage;
use serde_json::{json, Value};

const P: &str = "/registry/configmaps/";
const NS: &str = "/registry/configmaps/lw/";

fn cm(name: &str, app: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "lw", "labels": {"app": app}}, "data": {"v": "1"}})
}

fn rv(o: &Value) -> i64 {
    o["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap()
}

fn names(items: &[Value]) -> Vec<String> {
    items.iter().map(|o| o["metadata"]["name"].as_str().unwrap().to_string()).collect()
}

async fn next(w: &mut WatchStream) -> Result<WatchEvent, Error> {
    tokio::time::timeout(Duration::from_secs(10), w.recv()).await.expect("watch event in time").expect("stream open")
}

/// The next non-bookmark event.
async fn next_change(w: &mut WatchStream) -> WatchEvent {
    loop {
        let e = next(w).await.unwrap();
        if e.kind != EventType::Bookmark {
            return e;
        }
    }
}

async fn set_app(s: &dyn Storage, name: &str, app: &str) -> Value {
    let mut f = |cur: Option<Value>| -> Result<Update, Status> {
        let mut o = cur.unwrap();
        o["metadata"]["labels"]["app"] = json!(app);
        Ok(Update::Put(o))
    };
    s.guaranteed_update(&format!("{NS}{name}"), &Preconditions::default(), &mut f).await.unwrap()
}

fn list_opts(revision: i64, revision_match: RevisionMatch) -> ListOptions {
    ListOptions { revision, revision_match, ..Default::default() }
}

fn is_too_large(e: &Error) -> bool {
    matches!(e, Error::TooLargeResourceVersion { .. })
}

/// The suite. `client` compacts the store.
async fn suite(s: Arc<dyn Storage>, mut client: etcd_client::Client) {
    let a = s.create(&format!("{NS}a"), cm("a", "web")).await.unwrap();
    let b = s.create(&format!("{NS}b"), cm("b", "db")).await.unwrap();
    let before_c = rv(&b);
    let c = s.create(&format!("{NS}c"), cm("c", "web")).await.unwrap();
    s.create("/registry/configmaps/other/x", json!({"metadata": {"name": "x", "namespace": "other"}})).await.unwrap();

    // resourceVersion unset: consistent, sees the write just made.
    let l = s.list(NS, &ListOptions::default()).await.unwrap();
    assert_eq!(names(&l.items), ["a", "b", "c"]);
    assert!(l.revision >= rv(&c));
    // A write then a consistent read, many times: never stale.
    for i in 0..5 {
        let o = s.create(&format!("{NS}r{i}"), cm(&format!("r{i}"), "tmp")).await.unwrap();
        let l = s.list(NS, &ListOptions::default()).await.unwrap();
        assert!(l.revision >= rv(&o) && names(&l.items).contains(&format!("r{i}")), "consistent list saw the write");
        s.delete(&format!("{NS}r{i}"), &Preconditions::default()).await.unwrap();
    }

    // "0": any revision; N NotOlderThan: at least N.
    let any = s.list(NS, &list_opts(0, RevisionMatch::NotOlderThan)).await.unwrap();
    assert!(any.revision > 0);
    let not_older = s.list(NS, &list_opts(rv(&c), RevisionMatch::NotOlderThan)).await.unwrap();
    assert!(not_older.revision >= rv(&c));
    assert!(names(&not_older.items).starts_with(&["a".to_string(), "b".to_string(), "c".to_string()]));
    // Not older than the last delete: the deletes are in.
    let now = s.current_revision().await.unwrap();
    let not_older = s.list(NS, &list_opts(now, RevisionMatch::NotOlderThan)).await.unwrap();
    assert!(not_older.revision >= now);
    assert_eq!(names(&not_older.items), ["a", "b", "c"]);
    // Exact N: the state at N.
    let exact = s.list(NS, &list_opts(before_c, RevisionMatch::Exact)).await.unwrap();
    assert_eq!(names(&exact.items), ["a", "b"]);
    assert_eq!(exact.revision, before_c);
    // Newer than the store: Too large resource version.
    let future = rv(&c) + 1000;
    assert!(is_too_large(&s.list(NS, &list_opts(future, RevisionMatch::NotOlderThan)).await.unwrap_err()));
    assert!(is_too_large(&s.get_not_older_than(&format!("{NS}a"), future).await.unwrap_err()));
    // GET at a resourceVersion.
    assert_eq!(s.get_not_older_than(&format!("{NS}a"), rv(&a)).await.unwrap()["metadata"]["name"], "a");
    assert!(matches!(s.get_not_older_than(&format!("{NS}zz"), 0).await, Err(Error::NotFound)));

    // Pagination pinned at the first page's revision.
    let page1 = s.list(NS, &ListOptions { limit: 2, ..Default::default() }).await.unwrap();
    assert_eq!(names(&page1.items), ["a", "b"]);
    let token = page1.continue_token.clone().expect("more pages");
    s.create(&format!("{NS}d"), cm("d", "web")).await.unwrap();
    let page2 = s.list(NS, &ListOptions { limit: 2, continue_token: Some(token.clone()), ..Default::default() }).await.unwrap();
    assert_eq!(names(&page2.items), ["c"], "d came after the first page");
    assert_eq!(page2.revision, page1.revision);
    assert!(page2.continue_token.is_none());
    // Exact with a limit is served at that revision too.
    let exact_page = s.list(NS, &ListOptions { revision: before_c, revision_match: RevisionMatch::Exact, limit: 1, ..Default::default() }).await.unwrap();
    assert_eq!((names(&exact_page.items), exact_page.revision), (vec!["a".to_string()], before_c));
    // Selector with limit: counts matching items only.
    let web = s.list(NS, &ListOptions { predicate: Some(Arc::new(|o: &Value| o["metadata"]["labels"]["app"] == "web")), ..Default::default() }).await.unwrap();
    assert_eq!(names(&web.items), ["a", "c", "d"]);

    // Watch from a revision inside the window: every later change, in
    // order, once.
    let from = s.current_revision().await.unwrap();
    let mut w = s.watch(NS, &WatchOptions { revision: from, recursive: true, ..Default::default() }).await.unwrap();
    // Selector transitions: app=web only.
    let web_only: apiserver::storage::Predicate = Arc::new(|o: &Value| o["metadata"]["labels"]["app"] == "web");
    let mut ws = s.watch(NS, &WatchOptions { revision: from, recursive: true, predicate: Some(web_only.clone()), ..Default::default() }).await.unwrap();
    let a_out = set_app(s.as_ref(), "a", "db").await; // a stops matching
    set_app(s.as_ref(), "b", "web").await; // b starts matching
    set_app(s.as_ref(), "c", "web").await; // c still matches
    set_app(s.as_ref(), "a", "other").await; // a stays out
    s.delete(&format!("{NS}b"), &Preconditions::default()).await.unwrap();
    let all: Vec<(EventType, String)> = {
        let mut v = Vec::new();
        for _ in 0..5 {
            let e = next_change(&mut w).await;
            v.push((e.kind, e.object["metadata"]["name"].as_str().unwrap().to_string()));
        }
        v
    };
    let m = |k, n: &str| (k, n.to_string());
    assert_eq!(all, [m(EventType::Modified, "a"), m(EventType::Modified, "b"), m(EventType::Modified, "c"), m(EventType::Modified, "a"), m(EventType::Deleted, "b")]);
    let mut filtered = Vec::new();
    for i in 0..4 {
        let e = next_change(&mut ws).await;
        if i == 0 {
            // Leaving the selector: the state the watcher last saw matching,
            // at the change's resourceVersion (as kube's cacheWatcher).
            assert_eq!(e.object["metadata"]["labels"]["app"], "web", "{:?}", e.object);
            assert_eq!(rv(&e.object), rv(&a_out));
        }
        filtered.push((e.kind, e.object["metadata"]["name"].as_str().unwrap().to_string()));
    }
    assert_eq!(filtered, [m(EventType::Deleted, "a"), m(EventType::Added, "b"), m(EventType::Modified, "c"), m(EventType::Deleted, "b")]);
    // Nothing more for either watcher (no duplicates).
    assert!(tokio::time::timeout(Duration::from_millis(600), next_change(&mut w)).await.is_err());
    drop((w, ws));

    // Initial events (sendInitialEvents=true): the state, then the
    // initial-events-end bookmark, then changes.
    let mut wi = s
        .watch(
            NS,
            &WatchOptions {
                recursive: true,
                initial_events: Some(true),
                initial_events_end: true,
                bookmarks: true,
                revision_match: RevisionMatch::Exact,
                predicate: Some(web_only),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    let mut initial = Vec::new();
    let end = loop {
        let e = next(&mut wi).await.unwrap();
        match e.kind {
            EventType::Added => initial.push(e.object["metadata"]["name"].as_str().unwrap().to_string()),
            EventType::Bookmark => break e,
            other => panic!("unexpected {other:?} before the end bookmark"),
        }
    };
    assert_eq!(initial, ["c", "d"]);
    assert_eq!(end.object["metadata"]["annotations"][INITIAL_EVENTS_END], "true");
    let end_rv = rv(&end.object);
    assert!(end_rv >= rv(&c));
    let e = s.create(&format!("{NS}e"), cm("e", "web")).await.unwrap();
    let got = next_change(&mut wi).await;
    assert_eq!((got.kind, rv(&got.object)), (EventType::Added, rv(&e)));
    // Periodic bookmarks: one arrives while nothing changes, at least as
    // new as the last event.
    let bm = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let ev = next(&mut wi).await.unwrap();
            if ev.kind == EventType::Bookmark {
                return ev;
            }
        }
    })
    .await
    .expect("a bookmark while idle");
    assert!(rv(&bm.object) >= rv(&e));
    drop(wi);

    // Legacy RV "0" watch: the state as ADDED first.
    let mut w0 = s.watch(NS, &WatchOptions { recursive: true, revision_match: RevisionMatch::NotOlderThan, ..Default::default() }).await.unwrap();
    let first = next(&mut w0).await.unwrap();
    assert_eq!((first.kind, first.object["metadata"]["name"].as_str().unwrap()), (EventType::Added, "a"));
    drop(w0);

    // Compaction: a continue token from before it expires, and kube's
    // inconsistent token lists the rest at the latest revision.
    let page1 = s.list(NS, &ListOptions { limit: 1, ..Default::default() }).await.unwrap();
    let token = page1.continue_token.clone().expect("more pages");
    s.create(&format!("{NS}f"), cm("f", "web")).await.unwrap();
    let now = s.current_revision().await.unwrap();
    client.compact(now, None).await.unwrap();
    let err = s.list(NS, &ListOptions { limit: 1, continue_token: Some(token.clone()), ..Default::default() }).await.unwrap_err();
    assert!(matches!(err, Error::Compacted { .. }), "{err:?}");
    let rest = inconsistent_continue(&token, NS).unwrap();
    let l = s.list(NS, &ListOptions { continue_token: Some(rest), ..Default::default() }).await.unwrap();
    assert_eq!(names(&l.items), ["c", "d", "e", "f"]);
    assert!(l.revision >= now);
    // A watch from before the window: one 410-style error, then the end.
    let mut old = s.watch(NS, &WatchOptions { revision: 1, recursive: true, ..Default::default() }).await.unwrap();
    assert!(matches!(next(&mut old).await, Err(Error::Compacted { .. })));
}

async fn client(h: &raftstore::node::NodeHandle) -> etcd_client::Client {
    etcd_client::Client::connect([format!("http://{}", h.client_addr)], None).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listwatch_conformance_direct_storage() {
    let (h, _dir) = crate::common::embedded_member().await;
    let s: Arc<dyn Storage> = Arc::new(KvStorage::new(Arc::new(EmbeddedKv::new(h.ctx.clone()))));
    suite(s, client(&h).await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listwatch_conformance_watch_cache() {
    let (h, _dir) = crate::common::embedded_member().await;
    let inner: Arc<dyn Storage> = Arc::new(KvStorage::new(Arc::new(EmbeddedKv::new(h.ctx.clone()))));
    let cached = CachedStorage::new(inner, [P.to_string()], 1024).with_bookmark_interval(Duration::from_millis(300));
    suite(Arc::new(cached), client(&h).await).await;
}

/// Cache only: a watch from before the ring's window gets a 410-style
/// error; a watcher that stops reading is closed and counted, and neither
/// slows the writer nor other watchers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_cache_window_and_slow_watchers() {
    let (h, _dir) = crate::common::embedded_member().await;
    let inner: Arc<dyn Storage> = Arc::new(KvStorage::new(Arc::new(EmbeddedKv::new(h.ctx.clone()))));
    let s = Arc::new(CachedStorage::new(inner, [P.to_string()], 100));
    let first = s.create(&format!("{NS}w"), cm("w", "web")).await.unwrap();
    s.list(NS, &ListOptions::default()).await.unwrap();
    let start = s.current_revision().await.unwrap();
    let slow = s.watch(NS, &WatchOptions { revision: start, recursive: true, ..Default::default() }).await.unwrap();
    let mut fast = s.watch(NS, &WatchOptions { revision: start, recursive: true, ..Default::default() }).await.unwrap();
    let before = apiserver::watchcache::metrics::metrics().terminated_watchers.with_label_values(&[P]).get();
    let mut last = 0;
    let reader = tokio::spawn(async move {
        let mut n = 0;
        while let Some(Ok(e)) = fast.recv().await {
            assert_eq!(e.kind, EventType::Modified);
            n += 1;
            if n == 300 {
                return n;
            }
        }
        n
    });
    for i in 0..300 {
        let mut f = |cur: Option<Value>| -> Result<Update, Status> {
            let mut o = cur.unwrap();
            o["data"]["v"] = json!(i.to_string());
            Ok(Update::Put(o))
        };
        last = rv(&s.guaranteed_update(&format!("{NS}w"), &Preconditions::default(), &mut f).await.unwrap());
    }
    assert_eq!(tokio::time::timeout(Duration::from_secs(20), reader).await.unwrap().unwrap(), 300, "the reading watcher got every event");
    // The slow watcher's stream ends (after what it had buffered).
    let mut slow = slow;
    let mut drained = 0;
    while let Ok(Some(_)) = tokio::time::timeout(Duration::from_secs(10), slow.recv()).await {
        drained += 1;
    }
    assert!(drained < 300, "the slow watcher was closed, not fed everything ({drained})");
    let after = apiserver::watchcache::metrics::metrics().terminated_watchers.with_label_values(&[P]).get();
    assert!(after > before, "the close is counted");
    // The window moved: a watch from the first write is too old now.
    let mut old = s.watch(NS, &WatchOptions { revision: rv(&first), recursive: true, ..Default::default() }).await.unwrap();
    assert!(matches!(next(&mut old).await, Err(Error::Compacted { .. })));
    // ... while one from inside the window works.
    let mut recent = s.watch(NS, &WatchOptions { revision: last - 1, recursive: true, ..Default::default() }).await.unwrap();
    assert_eq!(rv(&next(&mut recent).await.unwrap().object), last);
    // The window's edge, as kube's watchCache: the ring holds the last 100
    // changes (last-99 ..= last), so a watch from last-100 misses nothing
    // and is served; one from last-101 is too old, and the error names
    // last-100.
    let mut edge = s.watch(NS, &WatchOptions { revision: last - 100, recursive: true, ..Default::default() }).await.unwrap();
    assert_eq!(rv(&next(&mut edge).await.unwrap().object), last - 99);
    let mut past = s.watch(NS, &WatchOptions { revision: last - 101, recursive: true, ..Default::default() }).await.unwrap();
    match next(&mut past).await {
        Err(Error::Compacted { compact_revision }) => assert_eq!(compact_revision, last - 100),
        other => panic!("want too old, got {other:?}"),
    }
}

/// Cache only: a watcher whose client stops reading altogether (a stalled
/// connection) is closed and counted while it is stalled, once the ring has
/// overwritten what it has yet to read; its stream then ends after what was
/// buffered, in order and without a gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_cache_closes_a_stalled_watcher() {
    // Its own resource prefix: the terminated-watchers count is per prefix
    // and other tests close slow watchers of theirs concurrently.
    const SP: &str = "/registry/stalled/";
    let (h, _dir) = crate::common::embedded_member().await;
    let inner: Arc<dyn Storage> = Arc::new(KvStorage::new(Arc::new(EmbeddedKv::new(h.ctx.clone()))));
    let s = Arc::new(CachedStorage::new(inner, [SP.to_string()], 100));
    let key = format!("{SP}lw/w");
    s.create(&key, cm("w", "web")).await.unwrap();
    let start = s.current_revision().await.unwrap();
    let mut stalled = s.watch(SP, &WatchOptions { revision: start, recursive: true, ..Default::default() }).await.unwrap();
    let terminated = || apiserver::watchcache::metrics::metrics().terminated_watchers.with_label_values(&[SP]).get();
    assert_eq!(terminated(), 0);
    for i in 0..400 {
        let mut f = |cur: Option<Value>| -> Result<Update, Status> {
            let mut o = cur.unwrap();
            o["data"]["v"] = json!(i.to_string());
            Ok(Update::Put(o))
        };
        s.guaranteed_update(&key, &Preconditions::default(), &mut f).await.unwrap();
    }
    // Without reading a single event: the close is counted.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while terminated() == 0 {
        assert!(tokio::time::Instant::now() < deadline, "a stalled watcher 300 events behind a 100-event ring is closed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(terminated(), 1);
    // Its stream: what was buffered, consecutive from the start, then the end.
    let mut expect = start + 1;
    while let Some(ev) = tokio::time::timeout(Duration::from_secs(10), stalled.recv()).await.expect("the stream ends") {
        assert_eq!(rv(&ev.unwrap().object), expect, "in order, no gap");
        expect += 1;
    }
    assert!(expect - start - 1 < 400, "closed, not fed everything");
}

/// The same contract over HTTP, with kubectl's raw client: kube's
/// validation errors, 504 for a future resourceVersion, the 410 ERROR event
/// of a watch from before the window, the initial-events-end bookmark and
/// the watch cache metrics.
#[test]
fn list_watch_parameters_over_http() {
    let mut s = crate::common::Server::start();
    s.kubectl_stdin(33, &["create", "--validate=false", "-f", "-"], Some("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: h1\n")).ok();
    // The watch caches of a fresh store start at its first revision, so
    // resourceVersion 1 is in their window; after a restart they start at
    // the current revision and 1 is too old (checked below).
    s.restart();
    let raw = |path: &str| s.kubectl(33, &["get", "--raw", path]);

    let bad = raw("/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact");
    assert_eq!(bad.code, 1);
    assert!(bad.stderr.contains("resourceVersionMatch is forbidden unless resourceVersion is provided"), "{bad:?}");
    let bad = raw("/api/v1/namespaces/default/configmaps?resourceVersion=0&resourceVersionMatch=Exact");
    assert!(bad.stderr.contains(r#"resourceVersionMatch "exact" is forbidden for resourceVersion "0""#), "{bad:?}");
    let bad = raw("/api/v1/namespaces/default/configmaps?resourceVersion=1&resourceVersionMatch=Sometime");
    assert!(bad.stderr.contains(r#"Unsupported value: "Sometime""#), "{bad:?}");

    let list: Value = serde_json::from_str(raw("/api/v1/namespaces/default/configmaps").ok()).unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    // Besides the root CA ConfigMap every namespace gets.
    assert_eq!(names(list["items"].as_array().unwrap()), ["h1", "kube-root-ca.crt"]);
    let current: i64 = list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
    let any: Value = serde_json::from_str(raw("/api/v1/namespaces/default/configmaps?resourceVersion=0").ok()).unwrap();
    assert_eq!(names(any["items"].as_array().unwrap()), ["h1", "kube-root-ca.crt"]);

    let future = raw(&format!("/api/v1/namespaces/default/configmaps?resourceVersion={}&resourceVersionMatch=NotOlderThan", current + 1000));
    assert_eq!(future.code, 1);
    assert!(future.stderr.contains("Too large resource version"), "{future:?}");

    let old = raw("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion=1&timeoutSeconds=2");
    let first: Value = serde_json::from_str(old.ok().lines().next().unwrap()).unwrap();
    assert_eq!(first["type"], "ERROR");
    assert_eq!(first["object"]["code"], 410);
    assert!(first["object"]["message"].as_str().unwrap().starts_with("too old resource version: 1 ("), "{first}");
    // Every frame starts with its type, as kube writes them (ERROR and
    // BOOKMARK included).
    assert!(old.ok().starts_with(r#"{"type":"ERROR","object":{"#), "{old:?}");

    // A negative timeoutSeconds is a timer that has already fired: a watch
    // with nothing to send ends at once.
    let started = std::time::Instant::now();
    let expired = raw(&format!("/api/v1/namespaces/default/configmaps?watch=1&resourceVersion={current}&timeoutSeconds=-5"));
    assert_eq!(expired.ok().trim(), "", "{expired:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "took {:?}", started.elapsed());

    let stream = raw("/api/v1/namespaces/default/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2");
    let events: Vec<Value> = stream.ok().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // h1 and the namespace's root CA ConfigMap, then the bookmark.
    assert_eq!((&events[0]["type"], &events[1]["type"]), (&json!("ADDED"), &json!("ADDED")));
    assert_eq!((&events[0]["object"]["metadata"]["name"], &events[1]["object"]["metadata"]["name"]), (&json!("h1"), &json!("kube-root-ca.crt")));
    assert_eq!(events[2]["type"], "BOOKMARK");
    assert!(stream.ok().lines().nth(2).unwrap().starts_with(r#"{"type":"BOOKMARK","object":{"#), "{stream:?}");
    assert_eq!(events[2]["object"]["kind"], "ConfigMap");
    assert_eq!(events[2]["object"]["metadata"]["annotations"][INITIAL_EVENTS_END], "true");

    let metrics = raw("/metrics");
    assert!(metrics.ok().contains("apiserver_watch_cache_events_received_total"), "{metrics:?}");
    assert!(metrics.ok().contains("apiserver_terminated_watchers_total") || metrics.ok().contains("apiserver_watch_cache_resource_version"), "{metrics:?}");
}

/// A watch from the resourceVersion of a write to a resource nobody has
/// listed yet is served (kube fills every watch cache at boot, so its window
/// covers everything since the start), not answered with 410 Expired.
#[test]
fn watch_from_a_write_before_the_first_list() {
    let s = crate::common::Server::start();
    let lr = "apiVersion: v1\nkind: LimitRange\nmetadata:\n  name: lr1\nspec:\n  limits:\n  - type: Container\n    max:\n      cpu: \"1\"\n";
    let created = s.kubectl_stdin(33, &["create", "-o", "jsonpath={.metadata.resourceVersion}", "-f", "-"], Some(lr));
    let rv = created.ok().trim().to_string();
    // Another write moves the store past the LimitRange's revision.
    s.kubectl(33, &["create", "configmap", "after-lr"]).ok();
    s.kubectl(33, &["delete", "limitrange", "lr1"]).ok();
    let w = s.kubectl(33, &["get", "--raw", &format!("/api/v1/namespaces/default/limitranges?watch=1&resourceVersion={rv}&timeoutSeconds=2")]);
    let events: Vec<Value> = w.ok().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "DELETED", "{events:?}");
    assert_eq!(events[0]["object"]["metadata"]["name"], "lr1");
}

/// The apiserver compacts its embedded store as kube-apiserver compacts
/// etcd (`--etcd-compaction-interval`): history older than the interval goes,
/// and an exact read at a compacted resourceVersion gets 410 Expired.
#[test]
fn embedded_store_is_compacted_on_an_interval() {
    let s = crate::common::Server::start_with(&["--etcd-compaction-interval".into(), "1s".into()]);
    let old = s.kubectl(33, &["create", "configmap", "c1", "-o", "jsonpath={.metadata.resourceVersion}"]).ok().trim().to_string();
    let path = format!("/api/v1/namespaces/default/configmaps?resourceVersion={old}&resourceVersionMatch=Exact");
    assert_eq!(s.kubectl(33, &["get", "--raw", &path]).code, 0, "readable before the interval");
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut n = 0;
    loop {
        // Writes move the store on; the compactor samples its revision.
        n += 1;
        s.kubectl(33, &["create", "configmap", &format!("w{n}")]).ok();
        std::thread::sleep(Duration::from_millis(500));
        let r = s.kubectl(33, &["get", "--raw", &path]);
        if r.code != 0 {
            assert!(r.stderr.contains("Expired") || r.stderr.contains("too old resource version"), "{r:?}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "compacted within 20 s at a 1 s interval");
    }
}

/// The suite through the watch cache on real etcd (`--etcd-servers`): the
/// cache's consistent reads rely on etcd's progress notifications.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listwatch_conformance_watch_cache_on_etcd() {
    let etcd = crate::common::RealEtcd::start().await;
    let inner: Arc<dyn Storage> = Arc::new(KvStorage::new(Arc::new(etcd.kv.clone())));
    let cached = CachedStorage::new(inner, [P.to_string()], 1024).with_bookmark_interval(Duration::from_millis(300));
    let client = etcd_client::Client::connect([etcd.url.clone()], None).await.unwrap();
    suite(Arc::new(cached), client).await;
}
