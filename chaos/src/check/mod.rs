//! Checkers over a recorded [`History`].
//!
//! All checkers share one reference: the event stream of the workload prefix
//! from revision 1 to the final revision, read from a member after the
//! cluster healed ([`History::truth`]). Replaying it gives the store's state
//! at every revision ([`Timeline`]). The checkers then test the history
//! against that timeline, and the timeline against the acknowledged writes:
//!
//! - [`linearizable`]: KV linearizability, with revisions fixing the order of
//!   writes (see that module for the model), and per-client monotonic
//!   `header.revision`.
//! - [`watch`]: ordered, unique, reliable, atomic, resumable watches with
//!   correct prev_kv and bookmarks never ahead of delivered events.
//! - [`durability`]: no acknowledged write lost; every member ends with the
//!   same events, the same final range and the same HashKV.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::history::{Event, EventKind, History, Kv};

pub mod durability;
pub mod linearizable;
pub mod watch;

/// One violated guarantee.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Violation {
    /// Checker name: `linearizable`, `monotonic`, `watch`, `durability`.
    pub checker: String,
    /// What was seen, with the operation or event that shows it.
    pub message: String,
}

impl Violation {
    pub(crate) fn new(checker: &str, message: impl Into<String>) -> Self {
        Self { checker: checker.to_string(), message: message.into() }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}] {}", self.checker, self.message)
    }
}

/// Runs every checker; an empty result means the history is valid.
pub fn check_all(h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    let timeline = match Timeline::from_events(h.truth()) {
        Ok(t) => t,
        Err(e) => {
            v.push(e);
            return v;
        }
    };
    v.extend(durability::check(h, &timeline));
    v.extend(linearizable::check(h, &timeline));
    v.extend(watch::check(h, &timeline));
    v
}

/// Per-key state over revisions, built by replaying an event stream.
///
/// Example: events `put a=1 @2`, `put a=2 @5`, `delete a @7` give key `a` the
/// entries `[(2, Some(a=1)), (5, Some(a=2)), (7, None)]`; the state at
/// revision 6 is `a=2`, at 1 and at 8 it is absent.
#[derive(Debug, Default, Clone)]
pub struct Timeline {
    keys: BTreeMap<String, Vec<(i64, Option<Kv>)>>,
    /// Events grouped by revision, in stream order.
    pub by_revision: BTreeMap<i64, Vec<Event>>,
}

impl Timeline {
    /// Replays `events` (which must be in revision order).
    ///
    /// # Errors
    /// A `durability` violation if revisions go back in the stream.
    pub fn from_events(events: &[Event]) -> Result<Self, Violation> {
        let mut t = Timeline::default();
        let mut last = 0;
        for e in events {
            let rev = e.kv.mod_revision;
            if rev < last {
                return Err(Violation::new("durability", format!("reference event stream goes back: revision {rev} after {last}")));
            }
            last = rev;
            let state = match e.kind {
                EventKind::Put => Some(e.kv.clone()),
                EventKind::Delete => None,
            };
            t.keys.entry(e.kv.key.clone()).or_default().push((rev, state));
            t.by_revision.entry(rev).or_default().push(e.clone());
        }
        Ok(t)
    }

    /// The pair of `key` after every event with revision `<= rev`.
    pub fn state_at(&self, key: &str, rev: i64) -> Option<&Kv> {
        let entries = self.keys.get(key)?;
        let idx = entries.partition_point(|(r, _)| *r <= rev);
        if idx == 0 {
            return None;
        }
        entries[idx - 1].1.as_ref()
    }

    /// All live pairs at `rev`, sorted by key.
    pub fn range_at(&self, rev: i64) -> Vec<Kv> {
        self.keys.keys().filter_map(|k| self.state_at(k, rev).cloned()).collect()
    }

    /// The keys ever written.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.keys.keys()
    }
}

/// Short text for a pair in messages.
pub(crate) fn show(kv: Option<&Kv>) -> String {
    match kv {
        Some(kv) => format!("{}={} (mod_revision {})", kv.key, kv.value, kv.mod_revision),
        None => "absent".to_string(),
    }
}

#[cfg(test)]
pub(crate) mod testkit;

#[cfg(test)]
mod tests;
