//! A webhook's JSON Patch, decoded and applied as kube-apiserver does it
//! with evanphx/json-patch (v4): decoding only asks for a JSON list of
//! objects (an unknown `op` is fine there); applying runs the operations in
//! order and fails at the first one that does not apply, worded as that
//! library words it (`Unexpected kind: frob`, `add operation does not
//! apply: doc is missing path: "/a/b": missing value`, `testing value /x
//! failed: test failed`).
//!
//! Applying uses the `json-patch` crate one operation at a time; only the
//! wording of its errors is kube's.

use json_patch::{PatchErrorKind, PatchOperation};
use serde_json::{Map, Value};

/// A decoded patch: its operations as the webhook sent them.
#[derive(Debug, Clone, PartialEq)]
pub struct Patch(pub Vec<Map<String, Value>>);

/// Decodes `bytes` as evanphx's `DecodePatch` does.
///
/// # Errors
/// The JSON decoder's message when `bytes` is not a JSON list of objects
/// (kube: `received undecodable patch in webhook response: …`).
pub fn decode(bytes: &[u8]) -> Result<Patch, String> {
    serde_json::from_slice::<Vec<Map<String, Value>>>(bytes).map(Patch).map_err(|e| e.to_string())
}

/// evanphx's `errors.Wrapf(ErrMissing, …)` suffix.
const MISSING: &str = "missing value";

/// A JSON pointer field of an operation as evanphx reads it (`op.Path()`).
fn pointer<'a>(op: &'a Map<String, Value>, field: &str) -> Option<&'a str> {
    op.get(field).and_then(Value::as_str)
}

/// Applies `patch` to `doc`.
///
/// # Errors
/// The first failing operation, in evanphx's words; kube answers it with a
/// 500 whatever the webhook's failure policy.
pub fn apply(doc: &Value, patch: &Patch) -> Result<Value, String> {
    let mut out = doc.clone();
    for op in &patch.0 {
        let kind = op.get("op").and_then(Value::as_str).unwrap_or("unknown");
        if !matches!(kind, "add" | "remove" | "replace" | "move" | "copy" | "test") {
            return Err(format!("Unexpected kind: {kind}"));
        }
        let Some(path) = pointer(op, "path") else {
            return Err(format!("{kind} operation failed to decode path: {MISSING}"));
        };
        let from = pointer(op, "from");
        if matches!(kind, "move" | "copy") && from.is_none() {
            return Err(format!("{kind} operation failed to decode from: {MISSING}"));
        }
        let parsed: PatchOperation = match serde_json::from_value(Value::Object(op.clone())) {
            Ok(p) => p,
            // An op the crate cannot read although evanphx can (a `value`
            // missing from add, a malformed pointer): the nearest words.
            Err(_) => return Err(format!("{kind} operation does not apply: doc is missing path: {path:?}: {MISSING}")),
        };
        if let Err(e) = json_patch::patch(&mut out, std::slice::from_ref(&parsed)) {
            return Err(match (kind, e.kind) {
                ("test", PatchErrorKind::TestFailed) => format!("testing value {path} failed: test failed"),
                ("test", _) => format!("test operation does not apply: is missing path: {path}: {MISSING}"),
                ("add" | "remove", _) => format!("{kind} operation does not apply: doc is missing path: {path:?}: {MISSING}"),
                ("replace", _) => format!("replace operation does not apply: doc is missing key: {path}: {MISSING}"),
                (_, PatchErrorKind::InvalidFromPointer) => format!("{kind} operation does not apply: doc is missing from path: {}: {MISSING}", from.unwrap_or_default()),
                _ => format!("{kind} operation does not apply: doc is missing destination path: {path}: {MISSING}"),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(doc: Value, patch: Value) -> Result<Value, String> {
        apply(&doc, &decode(patch.to_string().as_bytes())?)
    }

    #[test]
    fn patches_decode_loosely_and_fail_in_evanphx_words() {
        assert_eq!(run(json!({"a": 1}), json!([{"op": "add", "path": "/b", "value": 2}])), Ok(json!({"a": 1, "b": 2})));
        assert_eq!(run(json!({}), json!([{"op": "frob", "path": "/x"}])), Err("Unexpected kind: frob".into()));
        assert_eq!(run(json!({}), json!([{"path": "/x"}])), Err("Unexpected kind: unknown".into()));
        assert_eq!(run(json!({}), json!([{"op": "add", "path": "/a/b", "value": 1}])), Err(r#"add operation does not apply: doc is missing path: "/a/b": missing value"#.into()));
        assert_eq!(run(json!({"x": 1}), json!([{"op": "test", "path": "/x", "value": 2}])), Err("testing value /x failed: test failed".into()));
        assert_eq!(run(json!({}), json!([{"op": "replace", "path": "/x", "value": 2}])), Err("replace operation does not apply: doc is missing key: /x: missing value".into()));
        // The first failing operation wins, in order.
        assert_eq!(run(json!({}), json!([{"op": "add", "path": "/a", "value": 1}, {"op": "frob"}, {"op": "add", "path": "/b/c", "value": 1}])), Err("Unexpected kind: frob".into()));
        for undecodable in [json!({"op": "add"}), json!("x"), json!([1])] {
            assert!(decode(undecodable.to_string().as_bytes()).is_err(), "{undecodable}");
        }
        assert!(decode(b"not json").is_err());
    }
}
