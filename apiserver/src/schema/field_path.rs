//! The `fieldPath` of an `x-kubernetes-validations` rule (kube's
//! `cel.ValidFieldPath`): a JSON path relative to the rule's node made of
//! `.name` steps and `['key']` steps (a quoted name, `\'` and the C escapes
//! allowed inside), each of which must name a declared property, or a key
//! where the schema is a map (`additionalProperties`).
//!
//! `.spec['a.b'].x` under a node with property `spec` whose `a.b` is a
//! property becomes the field path `spec.a.b.x`; a map step becomes a key:
//! `.labels['app']` is `labels[app]`.

use serde_json::Value;

use super::compiled::SchemaRef;

/// What a path walks: a schema node with properties or map values.
pub(crate) trait PathSchema: Sized + Copy {
    /// Whether `properties` is given.
    fn has_props(&self) -> bool;
    /// The property `name`.
    fn prop(&self, name: &str) -> Option<Self>;
    /// Whether `additionalProperties` is given (a schema or a boolean).
    fn has_additional(&self) -> bool;
    /// `additionalProperties` when it is a schema.
    fn additional_schema(&self) -> Option<Self>;
}

impl<'a> PathSchema for SchemaRef<'a> {
    fn has_props(&self) -> bool {
        self.has_properties()
    }
    fn prop(&self, name: &str) -> Option<Self> {
        self.property(name)
    }
    fn has_additional(&self) -> bool {
        self.has_additional_properties()
    }
    fn additional_schema(&self) -> Option<Self> {
        self.additional_properties()
    }
}

impl PathSchema for &Value {
    fn has_props(&self) -> bool {
        self.get("properties").is_some_and(Value::is_object)
    }
    fn prop(&self, name: &str) -> Option<Self> {
        self.get("properties")?.get(name)
    }
    fn has_additional(&self) -> bool {
        self.get("additionalProperties").is_some_and(|a| a.is_object() || a.is_boolean())
    }
    fn additional_schema(&self) -> Option<Self> {
        self.get("additionalProperties").filter(|a| a.is_object())
    }
}

/// Splits a path into `.`, `[`, `]`, quoted strings (quotes kept) and
/// names, as kube's scanner does.
fn tokens(path: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let b = path.as_bytes();
    let mut i = 0;
    while i < b.len() {
        let start = i;
        if b[i] == b'\'' {
            i += 1;
            while i < b.len() && !(b[i] == b'\'' && b[i - 1] != b'\\') {
                i += 1;
            }
            // The closing quote, or the rest when there is none.
            i = (i + 1).min(b.len());
        } else if matches!(b[i], b'.' | b'[' | b']') {
            i += 1;
        } else {
            while i < b.len() && !matches!(b[i], b'.' | b'[' | b']') {
                i += 1;
            }
        }
        // Token bounds are ASCII delimiters or the ends.
        out.push(path.get(start..i).unwrap_or(""));
    }
    out
}

/// The inside of a single-quoted string with its escapes resolved.
fn unescape(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let Some(d) = chars.next() else {
            out.push('\\');
            break;
        };
        out.push(match d {
            'a' => '\u{7}',
            'b' => '\u{8}',
            'f' => '\u{c}',
            'n' => '\n',
            'r' => '\r',
            't' => '\t',
            'v' => '\u{b}',
            '\'' => '\'',
            '\\' => '\\',
            other => return Err(format!("invalid string literal: invalid escape char \\{other}")),
        });
    }
    Ok(out)
}

/// Checks `path` against `schema` and returns it as a field path relative
/// to the rule's node (`spec.a.b`, `labels[app]`).
///
/// # Errors
/// kube's reason, in its words (`does not refer to a valid field`,
/// `expected [ or . but got: x`, `unexpected end of JSON path`, ...).
pub(crate) fn normalize<S: PathSchema>(path: &str, schema: S) -> Result<String, String> {
    let mut out = String::new();
    let mut cur = Some(schema);
    let toks = tokens(path);
    let mut it = toks.into_iter();
    while let Some(tok) = it.next() {
        let (name, from_brackets) = match tok {
            "[" => {
                let Some(q) = it.next() else { return Err("unexpected end of JSON path".into()) };
                if q.len() < 2 || !q.starts_with('\'') || !q.ends_with('\'') {
                    return Err(format!("expected single quoted string but got {q}"));
                }
                (unescape(&q[1..q.len() - 1])?, true)
            }
            "." => {
                let Some(n) = it.next() else { return Err("unexpected end of JSON path".into()) };
                (n.to_string(), false)
            }
            other => return Err(format!("expected [ or . but got: {other}")),
        };
        let Some(s) = cur else { return Err("does not refer to a valid field".into()) };
        if s.has_props() {
            cur = Some(s.prop(&name).ok_or("does not refer to a valid field")?);
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&name);
        } else if s.has_additional() {
            cur = s.additional_schema();
            out.push_str(&format!("[{name}]"));
        } else {
            return Err("does not refer to a valid field".into());
        }
        if from_brackets {
            match it.next() {
                None => return Err("unexpected end of JSON path".into()),
                Some("]") => {}
                Some(t) => return Err(format!("expected ] but got {t}")),
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn paths_normalize_or_fail_as_kube_says() {
        let s = json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {"a.b": {"type": "string"}, "x": {"type": "integer"}}},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "list": {"type": "array", "items": {"type": "string"}}
        }});
        let cases: &[(&str, Result<&str, &str>)] = &[
            (".spec.x", Ok("spec.x")),
            (".spec['a.b']", Ok("spec.a.b")),
            (".labels['app']", Ok("labels[app]")),
            (".labels.app", Ok("labels[app]")),
            (".spec.y", Err("does not refer to a valid field")),
            (".list[0]", Err("expected single quoted string but got 0")),
            ("spec", Err("expected [ or . but got: spec")),
            (".spec.", Err("unexpected end of JSON path")),
            (".spec['x'", Err("unexpected end of JSON path")),
            (".spec['x'.", Err("expected ] but got .")),
            (r".spec['\q']", Err(r"invalid string literal: invalid escape char \q")),
            (".list.x", Err("does not refer to a valid field")),
        ];
        for (path, want) in cases {
            let got = normalize(path, &s);
            assert_eq!(got.as_deref().map_err(String::as_str), *want, "{path}");
        }
    }
}
