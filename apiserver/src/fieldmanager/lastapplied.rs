//! Client-side apply's `kubectl.kubernetes.io/last-applied-configuration`
//! annotation under server-side apply, for the manager `kubectl` only
//! (kube's `lastappliedmanager.go` and `lastappliedupdater.go`):
//!
//! - on conflicts, the fields the annotation declares and whose values in
//!   the live object are still the annotation's may be taken over: if every
//!   conflict is such a field the apply is forced, otherwise the others
//!   are reported;
//! - after an apply, an object that carries the annotation gets it
//!   rewritten from the apply configuration (without the annotation), so a
//!   later client-side apply computes its three-way patch from it.

use serde_json::Value;

use super::typed::Typer;
use super::FieldSet;

/// The annotation.
pub(crate) const ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// The manager the upgrade applies to.
pub(crate) const KUBECTL: &str = "kubectl";

fn annotation(obj: &Value) -> Option<&str> {
    obj.get("metadata")?.get("annotations")?.get(ANNOTATION)?.as_str().filter(|s| !s.is_empty())
}

/// The fields of `live`'s annotation whose values `live` still has
/// (`allowedConflictsFromLastApplied`); `None` when there is no usable
/// annotation (absent, not JSON, of another apiVersion, not fitting the
/// schema).
pub(crate) fn allowed_conflicts(typer: &Typer<'_>, live: &Value, api_version: &str) -> Option<FieldSet> {
    let last: Value = serde_json::from_str(annotation(live)?).ok()?;
    if last.get("apiVersion").and_then(Value::as_str) != Some(api_version) {
        return None;
    }
    let mut set = typer.field_set_of(&last).ok()?;
    let cmp = typer.compare(&last, live);
    set.difference(&cmp.modified);
    set.difference(&cmp.added);
    set.difference(&cmp.removed);
    Some(set)
}

/// Rewrites `obj`'s annotation, if it has one, from the apply `config`
/// (`buildLastApplied`): the config without the annotation, encoded as Go's
/// JSON encoder writes it (keys sorted, `<`, `>` and `&` escaped, a final
/// newline).
pub(crate) fn rewrite(obj: &mut Value, config: &Value) {
    if annotation(obj).is_none() {
        return;
    }
    let mut c = config.clone();
    if let Some(a) = c.get_mut("metadata").and_then(|m| m.get_mut("annotations")).and_then(Value::as_object_mut) {
        a.remove(ANNOTATION);
    }
    let text = go_json(&c);
    if let Some(a) = obj.get_mut("metadata").and_then(|m| m.get_mut("annotations")).and_then(Value::as_object_mut) {
        a.insert(ANNOTATION.into(), Value::String(text));
    }
}

/// `json.NewEncoder(w).Encode(v)`: compact, map keys sorted, HTML
/// characters and U+2028/U+2029 escaped, then a newline.
fn go_json(v: &Value) -> String {
    let s = v.to_string();
    let mut out = String::with_capacity(s.len() + 1);
    for ch in s.chars() {
        match ch {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out.push('\n');
    out
}
