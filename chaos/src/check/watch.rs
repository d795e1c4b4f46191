//! Watch guarantees (etcd api_guarantees, "Watch APIs"), per watcher across
//! all its sessions (a watcher resumes at its last delivered revision + 1
//! after any error):
//!
//! - **ordered**: event revisions never go back; events of one revision come
//!   only within one response;
//! - **unique**: no `(revision, key)` is delivered twice;
//! - **atomic**: a revision is never split across responses;
//! - **reliable / resumable**: the delivered events are exactly the reference
//!   events of the watched range from the first start revision up to the
//!   last delivered revision or bookmark, with no gap after a resume, and
//!   the watcher reaches the final revision once the cluster healed;
//! - **prev_kv**: each event's prev_kv is the key's state at `revision - 1`;
//! - **bookmarks**: a progress notification at revision `B` comes only after
//!   every event with revision `<= B` was delivered.

use std::collections::{HashMap, HashSet};

use super::{show, Timeline, Violation};
use crate::history::{Event, History, Watcher};

const MAX_REPORTS_PER_WATCHER: usize = 10;

/// Checks every watcher against the timeline.
pub fn check(h: &History, t: &Timeline) -> Vec<Violation> {
    h.watchers.iter().flat_map(|w| check_watcher(h, t, w)).collect()
}

fn same_event(a: &Event, b: &Event) -> bool {
    a.kind == b.kind && a.kv == b.kv
}

fn check_watcher(h: &History, t: &Timeline, w: &Watcher) -> Vec<Violation> {
    let mut v = Vec::new();
    let name = format!("watcher {}", w.id);
    let Some(first) = w.sessions.first() else {
        return v;
    };
    let start = first.start_revision;
    let mut seen: HashSet<(i64, String)> = HashSet::new();
    let mut delivered: Vec<&Event> = Vec::new();
    // Highest revision known delivered: by events or bookmarks.
    let mut last_event_rev: i64 = 0;
    let mut upper: i64 = start - 1;
    for (si, s) in w.sessions.iter().enumerate() {
        if si > 0 && s.start_revision > upper + 1 {
            v.push(Violation::new("watch", format!("{name} resumed at revision {} after delivering up to {upper}: revisions in between were skipped", s.start_revision)));
        }
        for (ri, resp) in s.responses.iter().enumerate() {
            if resp.is_progress() {
                let b = resp.header_revision;
                // Bookmark: nothing in (last_event_rev, b] may be pending.
                let lo = last_event_rev.max(start - 1) + 1;
                if let Some((r, es)) = t.by_revision.range(lo..).next().filter(|(r, _)| **r <= b) {
                    v.push(Violation::new(
                        "watch",
                        format!(
                            "{name} session {si}: progress notification at revision {b} arrived before the event at revision {r} ({} {}); last delivered revision {last_event_rev}",
                            kind(&es[0]),
                            es[0].kv.key
                        ),
                    ));
                }
                upper = upper.max(b);
                continue;
            }
            let mut prev_in_resp: Option<i64> = None;
            for e in &resp.events {
                let rev = e.kv.mod_revision;
                if rev < s.start_revision {
                    v.push(Violation::new("watch", format!("{name} session {si} started at {} but delivered revision {rev}", s.start_revision)));
                }
                if !seen.insert((rev, e.kv.key.clone())) {
                    v.push(Violation::new("watch", format!("{name} session {si} response {ri}: duplicate event {} {} at revision {rev}", kind(e), e.kv.key)));
                } else if prev_in_resp.is_none() && rev <= last_event_rev {
                    let what = if rev == last_event_rev { "revision split across responses (not atomic)" } else { "event out of order" };
                    v.push(Violation::new("watch", format!("{name} session {si} response {ri}: {what}: revision {rev} after {last_event_rev}")));
                } else if prev_in_resp.is_some_and(|p| rev < p) {
                    v.push(Violation::new("watch", format!("{name} session {si} response {ri}: event out of order within a response: revision {rev}")));
                }
                // prev_kv: the key's state just before.
                let want_prev = t.state_at(&e.kv.key, rev - 1);
                if e.prev_kv.as_ref() != want_prev {
                    v.push(Violation::new("watch", format!("{name}: event {} {} at revision {rev} has prev_kv {}, want {}", kind(e), e.kv.key, show(e.prev_kv.as_ref()), show(want_prev))));
                }
                prev_in_resp = Some(rev);
                last_event_rev = last_event_rev.max(rev);
                upper = upper.max(rev);
                delivered.push(e);
            }
            if v.len() >= MAX_REPORTS_PER_WATCHER {
                return v;
            }
        }
    }
    // Reliable: delivered == reference events in [start, upper].
    let expected: Vec<&Event> = t.by_revision.range(start..).take_while(|(r, _)| **r <= upper).flat_map(|(_, es)| es.iter()).collect();
    let by_id: HashMap<(i64, &str), &Event> = delivered.iter().map(|d| ((d.kv.mod_revision, d.kv.key.as_str()), *d)).collect();
    let expected_ids: HashSet<(i64, &str)> = expected.iter().map(|e| (e.kv.mod_revision, e.kv.key.as_str())).collect();
    for e in &expected {
        match by_id.get(&(e.kv.mod_revision, e.kv.key.as_str())) {
            Some(d) => {
                if !same_event(d, e) {
                    v.push(Violation::new(
                        "watch",
                        format!(
                            "{name}: event at revision {} on {} differs from the store's: got {} {}, want {} {}",
                            e.kv.mod_revision,
                            e.kv.key,
                            kind(d),
                            show(Some(&d.kv)),
                            kind(e),
                            show(Some(&e.kv))
                        ),
                    ));
                }
            }
            None => v.push(Violation::new("watch", format!("{name}: missed event {} {} at revision {} (delivered up to {upper})", kind(e), e.kv.key, e.kv.mod_revision))),
        }
        if v.len() >= MAX_REPORTS_PER_WATCHER {
            return v;
        }
    }
    for d in &delivered {
        if !expected_ids.contains(&(d.kv.mod_revision, d.kv.key.as_str())) {
            v.push(Violation::new("watch", format!("{name}: delivered event {} {} at revision {} that is not in the store's history", kind(d), d.kv.key, d.kv.mod_revision)));
        }
    }
    if h.final_revision > 0 && upper < h.final_revision {
        v.push(Violation::new("watch", format!("{name} delivered only up to revision {upper}, not the final revision {} after the cluster healed", h.final_revision)));
    }
    v.truncate(MAX_REPORTS_PER_WATCHER);
    v
}

fn kind(e: &Event) -> &'static str {
    match e.kind {
        crate::history::EventKind::Put => "put",
        crate::history::EventKind::Delete => "delete",
    }
}
