//! OpenAPI documents, built from the schemas in [`crate::schema`].
//!
//! - [`v3`]: `/openapi/v3` and `/openapi/v3/<api|apis>/<g>/<v>`;
//! - [`v2`]: `/openapi/v2`, as JSON or gnostic protobuf;
//! - [`fields`]: the `fieldValidation` directive and duplicate fields.
//!
//! Documents are built on first request after each change of the
//! registry ([`Catalog::generation`]) and kept until the next one.

pub mod fields;
pub mod v2;
pub mod v3;

use std::collections::BTreeMap;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use sha2::{Digest, Sha512};

use crate::registry::Catalog;
use crate::schema::SchemaStore;

/// Built documents.
#[derive(Debug)]
struct Built {
    /// The registry and schema generations it was built from.
    generation: (u64, u64),
    /// `/openapi/v3`.
    root: Bytes,
    /// `api/v1`, `apis/apps/v1` → (hash, document).
    group_versions: BTreeMap<String, (String, Bytes)>,
    /// `/openapi/v2` as JSON.
    v2_json: Bytes,
    /// `/openapi/v2` as protobuf.
    v2_protobuf: Bytes,
}

/// The OpenAPI documents of a registry, built from the schemas of
/// `schemas`, and rebuilt when the registry changes.
#[derive(Debug, Default)]
pub struct Service {
    schemas: SchemaStore,
    built: ArcSwapOption<Built>,
    /// One build at a time: a second request waits for the first's.
    building: parking_lot::Mutex<()>,
}

/// A served document: its bytes, content type and ETag.
#[derive(Debug, Clone)]
pub struct Document {
    /// The body.
    pub body: Bytes,
    /// Its media type.
    pub content_type: &'static str,
    /// Its hash (quoted as an ETag).
    pub etag: String,
}

fn hash(b: &[u8]) -> String {
    // kube-openapi: uppercase hex of the SHA-512 of the document.
    Sha512::digest(b).iter().map(|x| format!("{x:02X}")).collect()
}

impl Service {
    /// Documents built from the schemas of `schemas` (the server's shared
    /// store).
    pub fn new(schemas: SchemaStore) -> Self {
        Service { schemas, built: ArcSwapOption::empty(), building: parking_lot::Mutex::new(()) }
    }

    fn built(&self, registry: &Catalog) -> Arc<Built> {
        let generation = (registry.generation(), self.schemas.load().generation());
        let current = |b: &Option<Arc<Built>>| b.as_ref().filter(|b| b.generation == generation).cloned();
        if let Some(b) = current(&self.built.load_full()) {
            return b;
        }
        let _one = self.building.lock();
        if let Some(b) = current(&self.built.load_full()) {
            return b;
        }
        let b = Arc::new({
            let schemas = self.schemas.load();
            let source = schemas.source();
            let defs: &crate::schema::SchemaSource = &source;
            let mut gvs = BTreeMap::new();
            let mut all = Vec::new();
            for (g, v) in registry.group_versions() {
                let resources = registry.of_group_version(g, v);
                let doc = v3::group_version_document(defs, &resources);
                let body = serde_json::to_vec(&doc).unwrap_or_default();
                let path = if g.is_empty() { format!("api/{v}") } else { format!("apis/{g}/{v}") };
                gvs.insert(path, (hash(&body), Bytes::from(body)));
                all.push((g.to_string(), v.to_string(), resources));
            }
            let entries: Vec<(String, String)> = gvs.iter().map(|(p, (h, _))| (p.clone(), h.clone())).collect();
            let root = serde_json::to_vec(&v3::root_document(&entries)).unwrap_or_default();
            let v2doc = v2::document(defs, &all);
            let v2_protobuf = v2::encode(&v2doc);
            let v2_json = serde_json::to_vec(&v2doc).unwrap_or_default();
            Built { generation, root: Bytes::from(root), group_versions: gvs, v2_json: Bytes::from(v2_json), v2_protobuf: Bytes::from(v2_protobuf) }
        });
        self.built.store(Some(b.clone()));
        b
    }

    /// `/openapi/v3`: the group-version list with hashed URLs.
    pub fn v3_root(&self, registry: &Catalog) -> Document {
        let b = self.built(registry);
        Document { body: b.root.clone(), content_type: "application/json", etag: hash(&b.root) }
    }

    /// `/openapi/v3/<path>` (`api/v1`, `apis/apps/v1`), if served.
    pub fn v3_group_version(&self, registry: &Catalog, path: &str) -> Option<Document> {
        let b = self.built(registry);
        let (h, body) = b.group_versions.get(path)?;
        Some(Document { body: body.clone(), content_type: "application/json", etag: h.clone() })
    }

    /// `/openapi/v2`, as protobuf when `protobuf`, else JSON.
    pub fn v2(&self, registry: &Catalog, protobuf: bool) -> Document {
        let b = self.built(registry);
        if protobuf {
            Document { body: b.v2_protobuf.clone(), content_type: v2::PROTOBUF_CONTENT_TYPE, etag: hash(&b.v2_protobuf) }
        } else {
            Document { body: b.v2_json.clone(), content_type: "application/json", etag: hash(&b.v2_json) }
        }
    }
}
