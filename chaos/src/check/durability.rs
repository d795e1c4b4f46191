//! Durability and agreement after healing: every member ends with the same
//! event stream of the workload prefix, the same range at the final
//! revision (equal to replaying the stream), and the same
//! `Maintenance.HashKV` at that revision. Acknowledged writes missing from
//! the stream are reported by [`super::linearizable`] as `lost-write`.

use super::{Timeline, Violation};
use crate::history::History;

/// Checks the members' final views against the reference.
pub fn check(h: &History, t: &Timeline) -> Vec<Violation> {
    let mut v = Vec::new();
    if h.final_revision == 0 || h.members.is_empty() {
        v.push(Violation::new("durability", "the run did not reach its final check (no final revision or member views)"));
        return v;
    }
    let want = t.range_at(h.final_revision);
    let truth = h.truth();
    for m in &h.members {
        if m.events != truth {
            let at = m.events.iter().zip(truth).position(|(a, b)| a != b).unwrap_or(m.events.len().min(truth.len()));
            v.push(Violation::new(
                "durability",
                format!("member {} has a different event history from member {} (first difference at event {at}; {} vs {} events)", m.member, h.members[0].member, m.events.len(), truth.len()),
            ));
        }
        if m.kvs != want {
            v.push(Violation::new(
                "durability",
                format!("member {}: range at revision {} has {} keys, replaying the history gives {} (or values differ)", m.member, h.final_revision, m.kvs.len(), want.len()),
            ));
        }
        if m.hash_kv != h.members[0].hash_kv {
            v.push(Violation::new("durability", format!("member {}: HashKV at revision {} is {}, member {} has {}", m.member, h.final_revision, m.hash_kv, h.members[0].member, h.members[0].hash_kv)));
        }
    }
    v
}
