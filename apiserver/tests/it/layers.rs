//! The layers of DESIGN.md hold: no module of the apiserver imports a
//! module of a layer above its own. Read from the source: every
//! `crate::<module>[::<sub>]` path a file names is looked up in the table
//! below, and a path to a higher layer fails the test with the file and the
//! path.

use std::path::{Path, PathBuf};

/// Layers from the top (0) down; a module path belongs to the first entry
/// that prefixes it.
const LAYERS: &[(&str, usize)] = &[
    ("main", 0),
    ("server", 0),
    ("options", 0),
    ("pki", 0),
    ("serving", 0),
    ("endpoints", 1),
    // Served documents: built from the registry.
    ("discovery", 2),
    ("openapi::v2", 2),
    ("openapi::v3", 2),
    ("openapi::Service", 2),
    ("openapi::Document", 2),
    ("openapi", 2),
    // Audit: records what the filters and handlers saw.
    ("audit", 2),
    // Loops over the registry's stores.
    ("controllers", 3),
    ("registry", 4),
    ("admission", 5),
    ("authz", 5),
    ("authn", 6),
    // The schema layer; these files move to schema/ (issue 15).
    ("schema", 7),
    // CEL (policies, match conditions, CRD rules): under the schema layer.
    ("cel", 8),
    ("openapi::definitions", 7),
    ("openapi::fields", 7),
    ("fieldmanager", 7),
    ("strategicpatch", 7),
    ("storage", 8),
    ("watchcache", 8),
    // Health checks over the store and its caches.
    ("health", 8),
    ("errors", 9),
    ("meta", 9),
    ("selectors", 9),
    ("warning", 9),
    ("protobuf", 9),
    ("quantity", 9),
    // The HTTPS client of webhooks (authentication, authorization, audit).
    ("webhook", 9),
];

/// The layer of a module path such as `registry::store::Store`.
fn layer_of(path: &str) -> Option<usize> {
    let mut best: Option<(&str, usize)> = None;
    for (prefix, layer) in LAYERS {
        let hit = path == *prefix || path.starts_with(&format!("{prefix}::"));
        if hit && best.is_none_or(|(b, _)| prefix.len() > b.len()) {
            best = Some((prefix, *layer));
        }
    }
    best.map(|(_, l)| l)
}

/// The module path of a source file (`src/registry/store.rs` →
/// `registry::store`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let parts: Vec<String> = rel.components().map(|c| c.as_os_str().to_string_lossy().to_string()).filter(|p| p != "mod").collect();
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        if e.is_dir() {
            rust_files(&e, out);
        } else if e.extension().is_some_and(|x| x == "rs") {
            out.push(e);
        }
    }
}

/// The `crate::a::b` paths a source names (a `use crate::x::{a, b}` counts
/// as `crate::x::a` and `crate::x::b`).
fn crate_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("crate::") {
        rest = &rest[i + "crate::".len()..];
        let path: String = rest.chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        let path = path.trim_end_matches(':').to_string();
        let after = &rest[path.len()..];
        let group = match after.strip_prefix("::{") {
            Some(g) => Some(g),
            None if path.is_empty() => after.strip_prefix('{'),
            None => None,
        };
        if let Some(group) = group {
            let inner: String = group.chars().take_while(|c| *c != '}').collect();
            for item in inner.split(',') {
                let item = item.trim().split(' ').next().unwrap_or("").trim_end_matches(':');
                if !item.is_empty() {
                    out.push(if path.is_empty() { item.to_string() } else { format!("{path}::{item}") });
                }
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    out
}

#[test]
fn nothing_imports_upward() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut upward = Vec::new();
    for f in &files {
        let module = module_of(&src, f);
        if module == "lib" {
            continue;
        }
        let Some(own) = layer_of(&module) else { panic!("{module} is in no layer: add it to LAYERS") };
        let text = std::fs::read_to_string(f).unwrap();
        for p in crate_paths(&text) {
            if let Some(l) = layer_of(&p) {
                if l < own {
                    upward.push(format!("{module} (layer {own}) -> crate::{p} (layer {l})"));
                }
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(upward.is_empty(), "imports that run up the layers:\n{}", upward.join("\n"));
}

#[test]
fn the_check_sees_an_upward_import() {
    // A planted violation: a store that names a handler.
    let text = "use crate::endpoints::handlers::delete;\nuse crate::{meta, storage::keys};";
    let paths = crate_paths(text);
    assert!(paths.contains(&"endpoints::handlers::delete".to_string()), "{paths:?}");
    assert!(paths.contains(&"storage::keys".to_string()), "{paths:?}");
    let own = layer_of("registry::store").unwrap();
    assert!(paths.iter().filter_map(|p| layer_of(p)).any(|l| l < own));
    assert_eq!(layer_of("openapi::fields::FieldValidation"), Some(7));
    assert_eq!(layer_of("openapi::v3"), Some(2));
}
