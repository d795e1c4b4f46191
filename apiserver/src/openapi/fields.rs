//! `fieldValidation=Strict|Warn|Ignore` (KEP-2885): the directive, and
//! duplicate-field detection in a request body. Unknown fields are found
//! along the kind's schema ([`crate::schema::Schema::prune`]).
//!
//! Paths are written as kube's strict decoder writes them:
//! `spec.template.spec.containers[0].imagePullPolcy`, `metadata.foo`, `bar`.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::schema::field::child as join;

/// What the client asked to happen to unknown fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldValidation {
    /// Reject the request (400).
    Strict,
    /// Drop them and warn (the server default).
    Warn,
    /// Drop them silently.
    Ignore,
}

impl FieldValidation {
    /// Parses the `fieldValidation` query parameter; unset is `Warn`.
    ///
    /// # Errors
    /// The value, when it is not one of the three.
    pub fn parse(v: Option<&str>) -> Result<Self, String> {
        match v {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some(other) => Err(other.to_string()),
        }
    }
}

/// The keys given twice in one mapping of a YAML (or JSON) document, as
/// the strict YAML decoder kube's apply patcher runs reports them:
/// `line 3: key "a" already set in map`, the line (1-based) of the later
/// key, in document order. Keys compare by value: a plain `1` is an
/// integer and `"1"` a string. A repeated key's value is not searched
/// (the decoder skips it). A document that does not parse yields what was
/// found before the error (the caller reports the error when it decodes).
pub fn yaml_duplicate_keys(text: &str) -> Vec<String> {
    use granit_parser::{Event, Parser, ScalarStyle};
    /// One open collection: a mapping's keys so far and whether the next
    /// node is a key, or a sequence.
    enum Open {
        Map { seen: HashSet<String>, at_key: bool },
        Seq,
    }
    let mut out = Vec::new();
    let mut stack: Vec<Open> = Vec::new();
    // Skipping a repeated key's value: the nesting depth inside it.
    let mut skip: Option<usize> = None;
    // A node in key or value place has been read: the next is the other.
    fn done(stack: &mut [Open]) {
        if let Some(Open::Map { at_key, .. }) = stack.last_mut() {
            *at_key = !*at_key;
        }
    }
    for ev in Parser::new_from_str(text) {
        let Ok((ev, span)) = ev else { break };
        if let Some(depth) = skip {
            let depth = match ev {
                Event::MappingStart(..) | Event::SequenceStart(..) => depth + 1,
                Event::MappingEnd | Event::SequenceEnd => depth.saturating_sub(1),
                _ => depth,
            };
            if depth == 0 {
                skip = None;
                done(&mut stack);
            } else {
                skip = Some(depth);
            }
            continue;
        }
        match ev {
            Event::Scalar(value, style, ..) => {
                if let Some(Open::Map { seen, at_key: true }) = stack.last_mut() {
                    let typed = style == ScalarStyle::Plain && plain_is_not_string(&value);
                    if !seen.insert(format!("{}{value}", if typed { 't' } else { 's' })) {
                        let shown = if typed { value.to_string() } else { crate::errors::go_quote(&value) };
                        out.push(format!("line {}: key {shown} already set in map", span.start.line()));
                        skip = Some(0);
                    }
                }
                done(&mut stack);
            }
            Event::Alias(..) => done(&mut stack),
            Event::MappingStart(..) => stack.push(Open::Map { seen: HashSet::new(), at_key: true }),
            Event::SequenceStart(..) => stack.push(Open::Seq),
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                done(&mut stack);
            }
            _ => {}
        }
    }
    out
}

/// Whether a plain YAML scalar resolves to something other than a string
/// (an integer, float, boolean or null in YAML 1.1, as Go's YAML decoder
/// reads keys).
fn plain_is_not_string(s: &str) -> bool {
    matches!(s, "" | "~" | "null" | "Null" | "NULL" | "true" | "True" | "TRUE" | "false" | "False" | "FALSE" | "yes" | "Yes" | "YES" | "no" | "No" | "NO" | "on" | "On" | "ON" | "off" | "Off" | "OFF")
        || s.parse::<i64>().is_ok()
        || (s.parse::<f64>().is_ok() && s.chars().any(|c| c.is_ascii_digit()))
}

/// The paths of keys that occur more than once in one JSON object of
/// `body`, in document order (`metadata.name`, `data.a`). serde_json keeps
/// the last value of a duplicate, as kube's decoder does; this finds them
/// for `fieldValidation`. Malformed JSON yields what was found before the
/// error (the caller reports the error when it decodes the body).
pub fn duplicate_fields(body: &[u8]) -> Vec<String> {
    let out = RefCell::new(Vec::new());
    let mut de = serde_json::Deserializer::from_slice(body);
    let _ = Dup { path: String::new(), out: &out }.deserialize(&mut de);
    out.into_inner()
}

/// Walks a JSON document recording duplicate keys under `path`.
struct Dup<'a> {
    path: String,
    out: &'a RefCell<Vec<String>>,
}

impl<'de> DeserializeSeed<'de> for Dup<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Dup<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0usize;
        while seq.next_element_seed(Dup { path: format!("{}[{i}]", self.path), out: self.out })?.is_some() {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(k) = map.next_key::<String>()? {
            let path = join(&self.path, &k);
            if !seen.insert(k) {
                self.out.borrow_mut().push(path.clone());
            }
            map.next_value_seed(Dup { path, out: self.out })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directives_and_duplicate_fields() {
        assert_eq!(FieldValidation::parse(None), Ok(FieldValidation::Warn));
        let dups = duplicate_fields(br#"{"a":1,"m":{"x":[{"n":1,"n":2}],"y":1,"y":{"z":1}},"a":2}"#);
        assert_eq!(dups, ["m.x[0].n", "m.y", "a"]);
        assert!(duplicate_fields(b"{\"a\": 1, ").is_empty());
        assert!(FieldValidation::parse(Some("strict")).is_err());
    }

    #[test]
    fn yaml_duplicates_as_gos_strict_decoder_words_them() {
        let doc = "a: 1\nm:\n  x:\n  - n: 1\n    n: 2\n  y: 1\n  y:\n    z: 1\n    z: 2\n'a': 2\n1: x\n\"1\": y\n1: z\n";
        assert_eq!(
            yaml_duplicate_keys(doc),
            [
                "line 5: key \"n\" already set in map",
                // The repeated `y`'s value is not searched (its `z`s).
                "line 7: key \"y\" already set in map",
                "line 10: key \"a\" already set in map",
                "line 13: key 1 already set in map",
            ]
        );
        assert_eq!(yaml_duplicate_keys(r#"{"a": {"b": 1, "b": 2}, "a": 3}"#), ["line 1: key \"b\" already set in map", "line 1: key \"a\" already set in map"]);
        assert!(yaml_duplicate_keys("a: [1, 1]\nb: {c: 1}\n? [x]\n: 1\n? [x]\n: 2\n").is_empty());
        assert!(yaml_duplicate_keys("a: 1\n  b: : :").is_empty());
    }
}
