//! Label and field selectors (apimachinery `pkg/labels`, `pkg/fields`).
//!
//! Labels: `k`, `!k`, `k=v`, `k==v`, `k!=v`, `k in (a,b)`, `k notin (a,b)`,
//! `k>n`, `k<n`, comma-separated (all must hold). Fields: `f=v`, `f==v`,
//! `f!=v`, with `\,` `\=` `\\` escapes.

use std::collections::BTreeMap;

use serde_json::Value;

/// One label requirement.
#[derive(Debug, Clone, PartialEq)]
pub enum LabelRequirement {
    /// `k` / `!k`.
    Exists(String, bool),
    /// `k=v` (true) / `k!=v` (false).
    Equals(String, String, bool),
    /// `k in (...)` (true) / `k notin (...)` (false).
    In(String, Vec<String>, bool),
    /// `k>n` (true) / `k<n` (false).
    Compare(String, i64, bool),
}

/// A parsed label selector; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(pub Vec<LabelRequirement>);

fn split_top_level(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn valid_key(k: &str) -> bool {
    !k.is_empty() && k.len() <= 316 && k.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

/// A label value as Kubernetes validates it: empty, or at most 63
/// characters of alphanumerics, `-`, `_`, `.`, starting and ending with an
/// alphanumeric.
fn valid_value(v: &str) -> bool {
    if v.is_empty() {
        return true;
    }
    let b = v.as_bytes();
    v.len() <= 63 && b[0].is_ascii_alphanumeric() && b[b.len() - 1].is_ascii_alphanumeric() && v.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
}

fn invalid_value(key: &str, i: usize, v: &str) -> String {
    format!(
        "unable to parse requirement: values[{i}][{key}]: Invalid value: {v:?}: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
    )
}

impl LabelSelector {
    /// Parses a `labelSelector` query value.
    ///
    /// # Errors
    /// A message for a 400 BadRequest.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(LabelSelector(reqs));
        }
        for part in split_top_level(s) {
            let p = part.trim();
            if p.is_empty() {
                return Err(format!("unable to parse requirement: found '', expected: identifier in {s:?}"));
            }
            let bad = || format!("unable to parse requirement: {p:?}");
            let req = if let Some(k) = p.strip_prefix('!') {
                let k = k.trim();
                if !valid_key(k) {
                    return Err(bad());
                }
                LabelRequirement::Exists(k.to_string(), false)
            } else if let Some((k, v)) = p.split_once("!=") {
                LabelRequirement::Equals(k.trim().to_string(), v.trim().to_string(), false)
            } else if let Some((k, v)) = p.split_once("==") {
                LabelRequirement::Equals(k.trim().to_string(), v.trim().to_string(), true)
            } else if let Some((k, v)) = p.split_once('=') {
                LabelRequirement::Equals(k.trim().to_string(), v.trim().to_string(), true)
            } else if let Some((k, v)) = p.split_once('>') {
                LabelRequirement::Compare(k.trim().to_string(), v.trim().parse().map_err(|_| bad())?, true)
            } else if let Some((k, v)) = p.split_once('<') {
                LabelRequirement::Compare(k.trim().to_string(), v.trim().parse().map_err(|_| bad())?, false)
            } else if let Some(open) = p.find('(') {
                let head: Vec<&str> = p[..open].split_whitespace().collect();
                let Some(body) = p[open + 1..].strip_suffix(')') else { return Err(bad()) };
                let values: Vec<String> = body.split(',').map(|v| v.trim().to_string()).filter(|v| !v.is_empty()).collect();
                match head.as_slice() {
                    [k, "in"] => LabelRequirement::In(k.to_string(), values, true),
                    [k, "notin"] => LabelRequirement::In(k.to_string(), values, false),
                    _ => return Err(bad()),
                }
            } else {
                if !valid_key(p) {
                    return Err(bad());
                }
                LabelRequirement::Exists(p.to_string(), true)
            };
            let key = match &req {
                LabelRequirement::Exists(k, _) | LabelRequirement::Equals(k, _, _) | LabelRequirement::In(k, _, _) | LabelRequirement::Compare(k, _, _) => k,
            };
            if !valid_key(key) {
                return Err(bad());
            }
            let values: Vec<&String> = match &req {
                LabelRequirement::Equals(_, v, _) => vec![v],
                LabelRequirement::In(_, vs, _) => vs.iter().collect(),
                _ => Vec::new(),
            };
            if let Some((i, v)) = values.iter().enumerate().find(|(_, v)| !valid_value(v)) {
                return Err(invalid_value(key, i, v));
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    /// Builds a selector from a `metav1.LabelSelector` object
    /// (`matchLabels`, `matchExpressions`).
    pub fn from_object(sel: &Value) -> Self {
        let mut reqs = Vec::new();
        if let Some(m) = sel["matchLabels"].as_object() {
            for (k, v) in m {
                reqs.push(LabelRequirement::Equals(k.clone(), v.as_str().unwrap_or("").to_string(), true));
            }
        }
        if let Some(exprs) = sel["matchExpressions"].as_array() {
            for e in exprs {
                let k = e["key"].as_str().unwrap_or("").to_string();
                let vals: Vec<String> = e["values"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default();
                match e["operator"].as_str() {
                    Some("In") => reqs.push(LabelRequirement::In(k, vals, true)),
                    Some("NotIn") => reqs.push(LabelRequirement::In(k, vals, false)),
                    Some("Exists") => reqs.push(LabelRequirement::Exists(k, true)),
                    Some("DoesNotExist") => reqs.push(LabelRequirement::Exists(k, false)),
                    _ => {}
                }
            }
        }
        LabelSelector(reqs)
    }

    /// Whether labels match.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            LabelRequirement::Exists(k, want) => labels.contains_key(k) == *want,
            LabelRequirement::Equals(k, v, eq) => (labels.get(k) == Some(v)) == *eq,
            LabelRequirement::In(k, vs, inn) => {
                if *inn {
                    labels.get(k).is_some_and(|v| vs.contains(v))
                } else {
                    labels.get(k).is_none_or(|v| !vs.contains(v))
                }
            }
            LabelRequirement::Compare(k, n, gt) => labels.get(k).and_then(|v| v.parse::<i64>().ok()).is_some_and(|v| if *gt { v > *n } else { v < *n }),
        })
    }

    /// Whether an object's `metadata.labels` match.
    pub fn matches_object(&self, obj: &Value) -> bool {
        self.0.is_empty() || self.matches(&labels_of(obj))
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `metadata.labels` as a map.
pub fn labels_of(obj: &Value) -> BTreeMap<String, String> {
    obj["metadata"]["labels"].as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect()).unwrap_or_default()
}

/// One field requirement: (field, value, equal?).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldRequirement {
    /// The field path, e.g. `metadata.name`.
    pub field: String,
    /// The value compared with.
    pub value: String,
    /// `=`/`==` (true) or `!=` (false).
    pub equals: bool,
}

/// A parsed field selector.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(pub Vec<FieldRequirement>);

fn split_unescaped(s: &str, sep: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            cur.push('\\');
            cur.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else if c == sep {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in s.chars() {
        if esc {
            out.push(c);
            esc = false;
        } else if c == '\\' {
            esc = true;
        } else {
            out.push(c);
        }
    }
    out
}

impl FieldSelector {
    /// Parses a `fieldSelector` query value.
    ///
    /// # Errors
    /// A message for a 400 BadRequest.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut reqs = Vec::new();
        if s.trim().is_empty() {
            return Ok(FieldSelector(reqs));
        }
        for part in split_unescaped(s, ',') {
            let (f, v, eq) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==") {
                (f, v, true)
            } else if let Some((f, v)) = part.split_once('=') {
                (f, v, true)
            } else {
                return Err(format!("invalid selector: '{s}'; can't understand '{part}'"));
            };
            reqs.push(FieldRequirement { field: unescape(f.trim()), value: unescape(v), equals: eq });
        }
        Ok(FieldSelector(reqs))
    }

    /// The value `field` must equal, if the selector pins it
    /// (`RequiresExactMatch`).
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.0.iter().find(|r| r.equals && r.field == field).map(|r| r.value.as_str())
    }

    /// Whether the fields (resolved by `get`) match.
    pub fn matches(&self, get: impl Fn(&str) -> String) -> bool {
        self.0.iter().all(|r| (get(&r.field) == r.value) == r.equals)
    }

    /// Whether the selector is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

#[cfg(test)]
mod value_tests {
    use super::*;

    #[test]
    fn invalid_label_values_are_rejected() {
        for bad in ["a=(b", "a===b", "a in (x,(y)", "a!=b c", "a=-x"] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad} should be rejected");
        }
        for good in ["a=b", "a==b", "a!=b", "a in (x,y)", "a=", "app.kubernetes.io/name=web", "!a", "a"] {
            assert!(LabelSelector::parse(good).is_ok(), "{good} should parse");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_selectors() {
        let l: BTreeMap<String, String> = [("app".to_string(), "web".to_string()), ("tier".to_string(), "1".to_string())].into();
        let cases = [
            ("", true),
            ("app=web", true),
            ("app==web", true),
            ("app!=web", false),
            ("app", true),
            ("!app", false),
            ("!x", true),
            ("app in (web, db)", true),
            ("app notin (web)", false),
            ("app in (a,b),tier=1", false),
            ("tier>0", true),
            ("tier<1", false),
            ("x!=y", true),
        ];
        for (s, want) in cases {
            let sel = LabelSelector::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            assert_eq!(sel.matches(&l), want, "{s}");
        }
        assert!(LabelSelector::parse("a b").is_err());
        assert!(LabelSelector::parse("app in web").is_err());
    }

    #[test]
    fn field_selectors() {
        let f = FieldSelector::parse(r"metadata.name=a\,b,metadata.namespace!=x").unwrap_or_default();
        assert_eq!(f.exact("metadata.name"), Some("a,b"));
        assert!(f.matches(|k| if k == "metadata.name" { "a,b".into() } else { "y".into() }));
        assert!(FieldSelector::parse("nope").is_err());
    }
}
