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
}
