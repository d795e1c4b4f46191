//! Resources added and removed at run time (what a CRD controller does),
//! seen through the whole handler chain in process: discovery (legacy and
//! aggregated, with a new ETag), OpenAPI, serving through the watch cache,
//! and a watch that ends when its resource goes.

use std::sync::Arc;
use std::time::Duration;

use apiserver::authn::{Authenticator, Credentials, UserInfo};
use apiserver::endpoints::{responses, Handler};
use apiserver::registry::{subresources, DefaultStrategy, Resource, ResourceDef};
use apiserver::server::{build_api, ApiConfig};
use apiserver::storage::embedded::EmbeddedKv;
use apiserver::storage::{KvStorage, Storage};
use async_trait::async_trait;
use http_body_util::BodyExt;
use serde_json::{json, Value};

/// Everyone is an authenticated admin (the chain runs without TLS here).
struct Anyone;

#[async_trait]
impl Authenticator for Anyone {
    async fn authenticate(&self, _req: &Credentials<'_>) -> apiserver::authn::Result<Option<UserInfo>> {
        Ok(Some(UserInfo { name: "admin".into(), groups: vec!["system:masters".into(), "system:authenticated".into()], ..Default::default() }))
    }
}

const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

async fn call(chain: &Arc<dyn Handler>, method: &str, path: &str, accept: Option<&str>, body: Option<Value>) -> (u16, http::HeaderMap, Vec<u8>) {
    let mut b = http::Request::builder().method(method).uri(path);
    if let Some(a) = accept {
        b = b.header("accept", a);
    }
    if body.is_some() {
        b = b.header("content-type", "application/json");
    }
    let bytes = body.map(|v| serde_json::to_vec(&v).unwrap()).unwrap_or_default();
    let resp = chain.call(b.body(responses::full(bytes)).unwrap()).await;
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.unwrap().to_bytes().to_vec();
    (parts.status.as_u16(), parts.headers, body)
}

async fn json_of(chain: &Arc<dyn Handler>, path: &str) -> (u16, Value) {
    let (code, _, body) = call(chain, "GET", path, None, None).await;
    (code, serde_json::from_slice(&body).unwrap_or(Value::Null))
}

async fn etag(chain: &Arc<dyn Handler>) -> (String, Value) {
    let (code, headers, body) = call(chain, "GET", "/apis", Some(AGGREGATED), None).await;
    assert_eq!(code, 200);
    let tag = headers.get("etag").and_then(|v| v.to_str().ok()).unwrap_or("").to_string();
    (tag, serde_json::from_slice(&body).unwrap())
}

fn groups(apis: &Value) -> Vec<String> {
    apis["groups"].as_array().unwrap().iter().map(|g| g["name"].as_str().unwrap().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resources_come_and_go_at_run_time() {
    let (h, _dir) = crate::common::embedded_member().await;
    let storage: Arc<dyn Storage> = Arc::new(KvStorage::new(Arc::new(EmbeddedKv::new(h.ctx.clone()))));
    let api = build_api(
        storage,
        ApiConfig {
            schemas: apiserver::schema::SchemaStore::builtin(),
            watch_cache: true,
            watch_cache_size: 1024,
            enable_admission_plugins: Vec::new(),
            disable_admission_plugins: Vec::new(),
            admission_config: Default::default(),
            authenticator: Arc::new(Anyone),
            authorizer: Arc::new(apiserver::authz::always::AlwaysAllow),
            rbac: None,
            advertise_address: "127.0.0.1:6443".into(),
            audit: None,
            service_accounts: None,
        },
    )
    .unwrap();
    // The member has a leader already: nothing to wait for.
    api.state.health.mark_started();
    // The admission feed, as the server starts it: the webhook and policy
    // plugins refuse writes until their copies have listed.
    let (_stop, stopped) = tokio::sync::watch::channel(false);
    apiserver::controllers::admission::start(&api.registry, &api.admission_sources, stopped);
    let chain = &api.chain;
    let cache = api.cache.clone().unwrap();
    let (code, _, _) = call(chain, "POST", "/api/v1/namespaces", None, Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "demo"}}))).await;
    assert_eq!(code, 201);

    // Before: not served anywhere.
    let prefix = "/registry/example.com/widgets/";
    let (_, apis) = json_of(chain, "/apis").await;
    assert!(!groups(&apis).contains(&"example.com".to_string()));
    assert_eq!(json_of(chain, "/apis/example.com/v1").await.0, 404);
    assert_eq!(json_of(chain, "/apis/example.com/v1/namespaces/demo/widgets").await.0, 404);
    let (tag_before, _) = etag(chain).await;
    assert!(!tag_before.is_empty());
    let (code, _, _) = call(chain, "GET", "/apis", Some(AGGREGATED), None).await;
    assert_eq!(code, 200);
    let not_modified = {
        let req = http::Request::builder().uri("/apis").header("accept", AGGREGATED).header("if-none-match", &tag_before).body(responses::full(Vec::new())).unwrap();
        chain.call(req).await.status().as_u16()
    };
    assert_eq!(not_modified, 304, "an unchanged document is not sent again");
    assert!(!cache.is_cached(prefix));

    // Added: discovery, OpenAPI, the watch cache and serving.
    let def = ResourceDef::stored(Resource::new("example.com", "v1", "widgets", "widget", "Widget", true, Arc::new(DefaultStrategy)), vec![subresources::status()]).short_names(&["wd"]);
    api.registry.add(def).unwrap();
    assert!(cache.is_cached(prefix), "its watch cache started");
    let (_, apis) = json_of(chain, "/apis").await;
    assert!(groups(&apis).contains(&"example.com".to_string()), "{apis}");
    let (code, list) = json_of(chain, "/apis/example.com/v1").await;
    assert_eq!(code, 200);
    let names: Vec<&str> = list["resources"].as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["widgets", "widgets/status"]);
    assert_eq!(list["resources"][0]["shortNames"], json!(["wd"]));
    let (tag_added, aggregated) = etag(chain).await;
    assert_ne!(tag_added, tag_before, "a new ETag");
    assert!(aggregated["items"].as_array().unwrap().iter().any(|g| g["metadata"]["name"] == "example.com"));
    let (_, root) = json_of(chain, "/openapi/v3").await;
    assert!(root["paths"].get("apis/example.com/v1").is_some(), "{root}");

    let w = json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "spec": {"size": 3}});
    let (code, _, body) = call(chain, "POST", "/apis/example.com/v1/namespaces/demo/widgets", None, Some(w)).await;
    assert_eq!(code, 201, "{}", String::from_utf8_lossy(&body));
    let (code, list) = json_of(chain, "/apis/example.com/v1/namespaces/demo/widgets").await;
    assert_eq!(code, 200);
    assert_eq!(list["kind"], "WidgetList");
    assert_eq!(list["items"][0]["spec"]["size"], 3);
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap().to_string();
    // A watch from the list, served by the cache, then a change.
    let req = http::Request::builder().uri(format!("/apis/example.com/v1/namespaces/demo/widgets?watch=true&resourceVersion={rv}")).body(responses::full(Vec::new())).unwrap();
    let resp = chain.call(req).await;
    assert_eq!(resp.status(), 200);
    let mut stream = resp.into_body();
    let (code, _, _) = call(
        chain,
        "PUT",
        "/apis/example.com/v1/namespaces/demo/widgets/w1/status",
        None,
        Some(json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"}, "status": {"ready": true}})),
    )
    .await;
    assert_eq!(code, 200);
    let frame = tokio::time::timeout(Duration::from_secs(10), stream.frame()).await.unwrap().unwrap().unwrap();
    let line = String::from_utf8_lossy(frame.data_ref().unwrap()).to_string();
    let mut text = line;
    while !text.ends_with('\n') {
        let more = tokio::time::timeout(Duration::from_secs(10), stream.frame()).await.unwrap().unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(more.data_ref().unwrap()));
    }
    let ev: Value = serde_json::from_str(text.trim()).unwrap();
    assert_eq!((ev["type"].as_str(), &ev["object"]["status"]["ready"]), (Some("MODIFIED"), &json!(true)), "{ev}");
    assert_eq!(api.registry.entry("example.com", "v1", "widgets").unwrap().rest("status").unwrap().kind().kind, "Widget");

    // Removed: gone from discovery and OpenAPI, 404, its cache stopped and
    // its watchers' streams ended.
    assert!(api.registry.remove("example.com", "v1", "widgets"));
    assert!(!cache.is_cached(prefix), "its watch cache stopped");
    assert_eq!(json_of(chain, "/apis/example.com/v1/namespaces/demo/widgets").await.0, 404);
    assert_eq!(json_of(chain, "/apis/example.com/v1").await.0, 404);
    let (_, apis) = json_of(chain, "/apis").await;
    assert!(!groups(&apis).contains(&"example.com".to_string()));
    let (tag_removed, _) = etag(chain).await;
    assert!(tag_removed != tag_added && tag_removed == tag_before, "the document is the one before again");
    let (_, root) = json_of(chain, "/openapi/v3").await;
    assert!(root["paths"].get("apis/example.com/v1").is_none());
    let end = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match stream.frame().await {
                None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            }
        }
    })
    .await;
    assert!(end.is_ok(), "the watch ended with its resource");
}
