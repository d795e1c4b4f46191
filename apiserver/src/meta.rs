//! ObjectMeta helpers on JSON objects.

use serde_json::{Map, Value};

/// `metadata` of an object, created if missing (non-objects are left alone).
pub fn meta_mut(obj: &mut Value) -> Option<&mut Map<String, Value>> {
    let o = obj.as_object_mut()?;
    let m = o.entry("metadata").or_insert_with(|| Value::Object(Map::new()));
    if !m.is_object() {
        *m = Value::Object(Map::new());
    }
    m.as_object_mut()
}

/// A string field of `metadata` (empty if missing).
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj["metadata"][field].as_str().unwrap_or("")
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

/// `metadata.namespace`.
pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

/// `metadata.resourceVersion`.
pub fn resource_version(obj: &Value) -> &str {
    meta_str(obj, "resourceVersion")
}

/// `metadata.finalizers` is non-empty.
pub fn has_finalizers(obj: &Value) -> bool {
    obj["metadata"]["finalizers"].as_array().is_some_and(|a| !a.is_empty())
}

/// `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj["metadata"]["deletionTimestamp"].is_string()
}

/// The nesting depth of `v`: how many arrays and objects enclose its
/// deepest value, counted as serde_json's recursion limit counts them (a
/// scalar is 0, `{"a":1}` is 1). Iterative, so any depth is safe to measure.
pub fn nesting_depth(v: &Value) -> usize {
    let mut deepest = 0;
    let mut stack: Vec<(&Value, usize)> = vec![(v, 0)];
    while let Some((v, d)) = stack.pop() {
        match v {
            Value::Array(a) => {
                deepest = deepest.max(d + 1);
                stack.extend(a.iter().map(|x| (x, d + 1)));
            }
            Value::Object(o) => {
                deepest = deepest.max(d + 1);
                stack.extend(o.values().map(|x| (x, d + 1)));
            }
            _ => {}
        }
    }
    deepest
}

/// The current time as kube's `metav1.Time` (RFC 3339, seconds, UTC).
pub fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// A random (version 4) UUID.
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let mut b = b;
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    let h: String = b.iter().map(|x| format!("{x:02x}")).collect();
    format!("{}-{}-{}-{}-{}", &h[0..8], &h[8..12], &h[12..16], &h[16..20], &h[20..32])
}

/// kube's `SimpleNameGenerator`: the prefix plus 5 random characters from
/// an alphabet without vowels or confusable digits.
pub fn generate_name(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let max_prefix = 63 - 5;
    let p = if prefix.len() > max_prefix { &prefix[..max_prefix] } else { prefix };
    let suffix: String = (0..5).map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char).collect();
    format!("{p}{suffix}")
}

/// Parses a `metav1.Time`.
pub fn parse_time(s: &str) -> Option<std::time::SystemTime> {
    humantime::parse_rfc3339_weak(s).ok()
}

#[cfg(test)]
mod tests {
    #[test]
    fn uid_and_names() {
        let u = super::new_uid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        let n = super::generate_name("web-");
        assert!(n.starts_with("web-") && n.len() == 9);
        assert!(super::parse_time(&super::now()).is_some());
    }
}

#[cfg(test)]
mod depth_tests {
    use serde_json::json;

    use super::nesting_depth;

    #[test]
    fn depth_counts_containers() {
        assert_eq!(nesting_depth(&json!(1)), 0);
        assert_eq!(nesting_depth(&json!({"a": 1})), 1);
        assert_eq!(nesting_depth(&json!({"a": [1, {"b": {}}], "c": "x"})), 4);
    }
}
