//! Per-key revision history (etcd `mvcc/key_index.go`).
//!
//! A key's life is a list of *generations*. A generation starts with the put
//! that creates the key and ends with the tombstone that deletes it; the last
//! generation is the open one (empty when the key is currently deleted).
//!
//! Worked example: put(a)@1, put(a)@2, delete(a)@3, put(a)@5, put(a)@6 gives
//!
//! ```text
//! generations: [ {created 1, ver 3, revs [1, 2, 3(tombstone)]},
//!                {created 5, ver 2, revs [5, 6]} ]
//! ```
//!
//! `get(2)` finds the first generation and answers mod 2, create 1, version 2;
//! `get(4)` finds nothing (the key was deleted at 3); `get(6)` answers mod 6,
//! create 5, version 2.
//!
//! Compaction at revision `c` keeps, per key, the newest revision `<= c` (if it
//! is not a tombstone) and everything after it. Compacting the example at 4
//! drops the whole first generation (it ended with a tombstone at 3 <= 4);
//! compacting at 5 then keeps `{created 5, revs [5, 6]}` unchanged.

use std::collections::BTreeSet;

use super::revision::Revision;

/// One life of a key: from its creating put to its tombstone (if any).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Generation {
    /// Revision of the put that created the key in this generation.
    pub created: Revision,
    /// Number of changes (puts, and the tombstone if present) in this
    /// generation, including ones since compacted away.
    pub ver: i64,
    /// Revisions of the changes still retained, ascending. In a closed
    /// generation the last one is the tombstone.
    pub revs: Vec<Revision>,
}

impl Generation {
    fn is_empty(&self) -> bool {
        self.revs.is_empty()
    }
}

/// The revision history of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyIndex {
    /// The newest change (put or tombstone).
    pub modified: Revision,
    /// Generations, oldest first; the last one is open.
    pub generations: Vec<Generation>,
}

/// What a key looked like at some revision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyAt {
    /// The revision of the put that wrote the visible value.
    pub modified: Revision,
    /// The revision of the put that created the key (its generation).
    pub created: Revision,
    /// Version: 1 for the creating put, +1 per later put.
    pub version: i64,
}

impl KeyIndex {
    /// Records a put at `rev`.
    pub fn put(&mut self, rev: Revision) {
        if self.generations.is_empty() {
            self.generations.push(Generation::default());
        }
        let Some(g) = self.generations.last_mut() else { return };
        if g.is_empty() {
            g.created = rev;
        }
        g.revs.push(rev);
        g.ver += 1;
        self.modified = rev;
    }

    /// Records a deletion at `rev`: the tombstone closes the open generation.
    /// A key that is not live is left unchanged and `false` is returned.
    pub fn tombstone(&mut self, rev: Revision) -> bool {
        match self.generations.last() {
            Some(g) if !g.is_empty() => {}
            _ => return false,
        }
        self.put(rev);
        self.generations.push(Generation::default());
        true
    }

    /// Whether the key exists at the newest revision.
    pub fn is_live(&self) -> bool {
        self.generations.last().is_some_and(|g| !g.is_empty())
    }

    /// The key's state at revision `at` (main revision), or `None` if it did
    /// not exist then (or that part of its history was compacted).
    pub fn get(&self, at: i64) -> Option<KeyAt> {
        let g = self.find_generation(at)?;
        let idx = g.revs.iter().rposition(|r| r.main <= at)?;
        let version = g.ver - (g.revs.len() - 1 - idx) as i64;
        Some(KeyAt { modified: g.revs[idx], created: g.created, version })
    }

    /// The generation that holds revision `at`: the key existed at `at` in it.
    fn find_generation(&self, at: i64) -> Option<&Generation> {
        let last = self.generations.len().checked_sub(1)?;
        for (i, g) in self.generations.iter().enumerate().rev() {
            if g.is_empty() {
                continue;
            }
            if i != last {
                // Closed generation: the tombstone is its last revision.
                let tomb = g.revs.last()?;
                if tomb.main <= at {
                    return None;
                }
            }
            if g.revs[0].main <= at {
                return Some(g);
            }
        }
        None
    }

    /// Compacts history at main revision `at` and records, in `keep`, the
    /// revision of this key that must stay on disk (the newest put `<= at`).
    /// Returns `true` if the key index is now empty and can be dropped.
    pub fn compact(&mut self, at: i64, keep: &mut BTreeSet<Revision>) -> bool {
        let last = self.generations.len().saturating_sub(1);
        // Find the first generation that still matters after compaction.
        let mut gi = 0;
        while gi < self.generations.len() {
            let g = &self.generations[gi];
            if gi != last {
                if let Some(tomb) = g.revs.last() {
                    if tomb.main <= at {
                        gi += 1;
                        continue;
                    }
                }
            }
            break;
        }
        self.generations.drain(..gi);
        if let Some(g) = self.generations.first_mut() {
            if let Some(idx) = g.revs.iter().rposition(|r| r.main <= at) {
                keep.insert(g.revs[idx]);
                g.revs.drain(..idx);
            }
        }
        self.generations.len() == 1 && self.generations[0].is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(main: i64) -> Revision {
        Revision::new(main, 0)
    }

    fn example() -> KeyIndex {
        let mut ki = KeyIndex::default();
        ki.put(r(1));
        ki.put(r(2));
        assert!(ki.tombstone(r(3)));
        ki.put(r(5));
        ki.put(r(6));
        ki
    }

    #[test]
    fn get_walks_generations() {
        let ki = example();
        assert_eq!(ki.get(0), None);
        assert_eq!(ki.get(1), Some(KeyAt { modified: r(1), created: r(1), version: 1 }));
        assert_eq!(ki.get(2), Some(KeyAt { modified: r(2), created: r(1), version: 2 }));
        assert_eq!(ki.get(3), None);
        assert_eq!(ki.get(4), None);
        assert_eq!(ki.get(5), Some(KeyAt { modified: r(5), created: r(5), version: 1 }));
        assert_eq!(ki.get(100), Some(KeyAt { modified: r(6), created: r(5), version: 2 }));
        assert!(ki.is_live());
    }

    #[test]
    fn tombstone_on_deleted_key_is_a_noop() {
        let mut ki = KeyIndex::default();
        assert!(!ki.tombstone(r(1)));
        ki.put(r(2));
        assert!(ki.tombstone(r(3)));
        assert!(!ki.tombstone(r(4)));
        assert!(!ki.is_live());
    }

    #[test]
    fn compaction_keeps_newest_put_at_or_below() {
        let mut ki = example();
        let mut keep = BTreeSet::new();
        assert!(!ki.compact(2, &mut keep));
        assert_eq!(keep, BTreeSet::from([r(2)]));
        assert_eq!(ki.get(2).map(|k| k.version), Some(2));
        assert_eq!(ki.get(1), None);

        let mut keep = BTreeSet::new();
        assert!(!ki.compact(4, &mut keep));
        assert!(keep.is_empty(), "tombstoned generation leaves nothing to keep");
        assert_eq!(ki.generations.len(), 1);
        assert_eq!(ki.get(6).map(|k| k.version), Some(2));

        let mut keep = BTreeSet::new();
        assert!(!ki.compact(6, &mut keep));
        assert_eq!(keep, BTreeSet::from([r(6)]));
        assert_eq!(ki.get(6).map(|k| k.version), Some(2), "version survives compaction");
    }

    #[test]
    fn compacting_a_deleted_key_drops_it() {
        let mut ki = KeyIndex::default();
        ki.put(r(1));
        ki.tombstone(r(2));
        let mut keep = BTreeSet::new();
        assert!(ki.compact(2, &mut keep));
        assert!(keep.is_empty());
    }
}
