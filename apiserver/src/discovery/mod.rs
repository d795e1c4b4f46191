//! Discovery documents (kube-apiserver `endpoints/discovery` and
//! `endpoints/discovery/aggregated`): which groups, versions and resources
//! are served, built from the registry's [`Catalog`].
//!
//! - legacy: `/api` (`APIVersions`), `/apis` (`APIGroupList`),
//!   `/apis/<g>` (`APIGroup`), `/api/v1` and `/apis/<g>/<v>`
//!   (`APIResourceList`);
//! - aggregated (KEP-3352): `/api` and `/apis` as
//!   `apidiscovery.k8s.io/v2` (or `v2beta1`) `APIGroupDiscoveryList`, with
//!   an ETag (the SHA-512 of the document, as kube's) that changes whenever
//!   the served set does.
//!
//! Documents are built once per registry generation and served as bytes;
//! a resource added or removed at run time shows on the next request.
//! Subresources are described by their REST objects: their verbs and
//! response kind (a Scale for `scale`).

use std::collections::HashMap;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use serde_json::{json, Value};
use sha2::{Digest, Sha512};

use crate::registry::rest::{self, Rest};
use crate::registry::{Catalog, Entry};

/// A served document and its ETag (unquoted).
#[derive(Debug, Clone)]
pub struct Document {
    /// The JSON body.
    pub body: Bytes,
    /// Uppercase hex SHA-512 of the body.
    pub etag: String,
}

impl Document {
    fn of(v: &Value) -> Self {
        let body = Bytes::from(serde_json::to_vec(v).unwrap_or_default());
        let etag = Sha512::digest(&body).iter().map(|x| format!("{x:02X}")).collect();
        Document { body, etag }
    }
}

/// The documents of one registry generation.
struct Documents {
    generation: u64,
    api: Bytes,
    apis: Bytes,
    groups: HashMap<String, Bytes>,
    resource_lists: HashMap<String, Bytes>,
    /// (core, named groups) × (v2, v2beta1).
    aggregated: [Document; 4],
}

/// The discovery documents of a registry, rebuilt when it changes.
pub struct Service {
    advertise_address: String,
    built: ArcSwapOption<Documents>,
}

/// `<group>/<version>`, or `<version>` for the core group.
fn group_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

fn api_group(catalog: &Catalog, group: &str) -> Option<Value> {
    let versions: Vec<Value> = catalog.group_versions().iter().filter(|(g, _)| g == group).map(|(g, v)| json!({"groupVersion": group_version(g, v), "version": v})).collect();
    let preferred = versions.first()?.clone();
    Some(json!({"name": group, "versions": versions, "preferredVersion": preferred}))
}

/// The legacy `APIResource`s of one resource: itself, then its
/// subresources.
fn resource_entries(e: &Entry) -> Vec<Value> {
    let r = &e.resource;
    let mut main = json!({
        "name": r.resource,
        "singularName": r.singular,
        "namespaced": r.namespaced,
        "kind": r.kind,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        main["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        main["categories"] = json!(r.categories);
    }
    let mut out = vec![main];
    for (sub, rest) in e.subresources() {
        let kind = rest.kind();
        let mut v = json!({
            "name": format!("{}/{sub}", r.resource),
            "singularName": "",
            "namespaced": r.namespaced,
            "kind": kind.kind,
            "verbs": rest::verbs(rest.as_ref()),
        });
        if kind.group != r.group || kind.version != r.version {
            v["group"] = json!(kind.group);
            v["version"] = json!(kind.version);
        }
        out.push(v);
    }
    out
}

/// One resource in aggregated discovery (`APIResourceDiscovery`).
fn discovery_resource(e: &Entry) -> Value {
    let r = &e.resource;
    let mut v = json!({
        "resource": r.resource,
        "responseKind": {"group": r.group, "version": r.version, "kind": r.kind},
        "scope": if r.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": r.singular,
        "verbs": r.verbs,
    });
    if !r.short_names.is_empty() {
        v["shortNames"] = json!(r.short_names);
    }
    if !r.categories.is_empty() {
        v["categories"] = json!(r.categories);
    }
    let subs: Vec<Value> = e
        .subresources()
        .map(|(sub, rest): (&str, &Arc<dyn Rest>)| {
            let k = rest.kind();
            json!({"subresource": sub, "responseKind": {"group": k.group, "version": k.version, "kind": k.kind}, "verbs": rest::verbs(rest.as_ref())})
        })
        .collect();
    if !subs.is_empty() {
        v["subresources"] = json!(subs);
    }
    v
}

/// The `APIGroupDiscoveryList` of the core group (`legacy`) or of every
/// named group, preferred version first within each group.
fn aggregated(catalog: &Catalog, legacy: bool, version: &str) -> Value {
    let mut groups: Vec<&str> = Vec::new();
    for (g, _) in catalog.group_versions() {
        if g.is_empty() == legacy && !groups.contains(&g.as_str()) {
            groups.push(g);
        }
    }
    let items: Vec<Value> = groups
        .iter()
        .map(|g| {
            let versions: Vec<Value> = catalog
                .group_versions()
                .iter()
                .filter(|(gg, _)| gg == g)
                .map(|(_, v)| {
                    let resources: Vec<Value> = catalog.entries().iter().filter(|e| e.resource.group == *g && e.resource.version == *v).map(|e| discovery_resource(e)).collect();
                    json!({"version": v, "resources": resources, "freshness": "Current"})
                })
                .collect();
            let mut meta = json!({"creationTimestamp": null});
            if !g.is_empty() {
                meta["name"] = json!(g);
            }
            json!({"metadata": meta, "versions": versions})
        })
        .collect();
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"), "metadata": {}, "items": items})
}

fn resource_list(catalog: &Catalog, group: &str, version: &str) -> Option<Value> {
    let entries: Vec<&Arc<Entry>> = catalog.entries().iter().filter(|e| e.resource.group == group && e.resource.version == version).collect();
    if entries.is_empty() {
        return None;
    }
    let resources: Vec<Value> = entries.iter().flat_map(|e| resource_entries(e)).collect();
    Some(json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version(group, version), "resources": resources}))
}

fn bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

impl Service {
    /// Discovery for a server reachable at `advertise_address`
    /// (`host:port`, shown in `/api`).
    pub fn new(advertise_address: String) -> Self {
        Service { advertise_address, built: ArcSwapOption::empty() }
    }

    fn build(&self, catalog: &Catalog) -> Documents {
        let api = json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": self.advertise_address}],
        });
        let mut names: Vec<&str> = Vec::new();
        for (g, _) in catalog.group_versions() {
            if !g.is_empty() && !names.contains(&g.as_str()) {
                names.push(g);
            }
        }
        let gs: Vec<Value> = names.iter().filter_map(|g| api_group(catalog, g)).collect();
        let apis = json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": gs});
        let mut groups = HashMap::new();
        for g in &names {
            if let Some(mut v) = api_group(catalog, g) {
                v["kind"] = json!("APIGroup");
                v["apiVersion"] = json!("v1");
                groups.insert(g.to_string(), bytes(&v));
            }
        }
        let mut resource_lists = HashMap::new();
        for (g, v) in catalog.group_versions() {
            if let Some(doc) = resource_list(catalog, g, v) {
                resource_lists.insert(group_version(g, v), bytes(&doc));
            }
        }
        let aggregated = [
            Document::of(&aggregated(catalog, true, "v2")),
            Document::of(&aggregated(catalog, false, "v2")),
            Document::of(&aggregated(catalog, true, "v2beta1")),
            Document::of(&aggregated(catalog, false, "v2beta1")),
        ];
        Documents { generation: catalog.generation(), api: bytes(&api), apis: bytes(&apis), groups, resource_lists, aggregated }
    }

    fn documents(&self, catalog: &Catalog) -> Arc<Documents> {
        if let Some(d) = self.built.load_full().filter(|d| d.generation == catalog.generation()) {
            return d;
        }
        // Concurrent first requests after a change may both build; the
        // result is the same and the last one stays.
        let d = Arc::new(self.build(catalog));
        self.built.store(Some(d.clone()));
        d
    }

    /// `/api`: `APIVersions`.
    pub fn api(&self, catalog: &Catalog) -> Bytes {
        self.documents(catalog).api.clone()
    }

    /// `/apis`: `APIGroupList`.
    pub fn apis(&self, catalog: &Catalog) -> Bytes {
        self.documents(catalog).apis.clone()
    }

    /// `/apis/<group>`: `APIGroup`, if served.
    pub fn group(&self, catalog: &Catalog, group: &str) -> Option<Bytes> {
        self.documents(catalog).groups.get(group).cloned()
    }

    /// `/api/<version>` (`group` empty) or `/apis/<group>/<version>`:
    /// `APIResourceList`, if served.
    pub fn resource_list(&self, catalog: &Catalog, group: &str, version: &str) -> Option<Bytes> {
        self.documents(catalog).resource_lists.get(&group_version(group, version)).cloned()
    }

    /// Aggregated discovery of the core group (`legacy`) or the named
    /// groups, as `apidiscovery.k8s.io/<version>` (`v2`, `v2beta1`).
    pub fn aggregated(&self, catalog: &Catalog, legacy: bool, version: &str) -> Document {
        let i = usize::from(!legacy) + if version == "v2" { 0 } else { 2 };
        self.documents(catalog).aggregated[i].clone()
    }
}
