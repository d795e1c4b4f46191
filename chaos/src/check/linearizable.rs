//! Linearizability of the KV history, with revisions fixing the order.
//!
//! # Model
//! The store is a map `key -> (value, mod_revision, create_revision,
//! version, lease)` plus one revision counter. etcd gives every modifying
//! request its own revision and returns it in `header.revision`, and a read
//! returns the revision it was served at (etcd api_guarantees). So a valid
//! history has one linearization whose order is known up front:
//!
//! - a write that changed the store sits at point `(r, 0)`, where `r` is its
//!   revision;
//! - a read (Get, a failed compare, a delete that found nothing, a lease
//!   revoke that deleted nothing) sits at `(h, 1)`, after the write of
//!   revision `h` and before the write of `h + 1`.
//!
//! Instead of searching permutations (Wing & Gong / porcupine), the checker
//! verifies that this order is a linearization:
//!
//! 1. **Effects.** The state at every revision comes from replaying the
//!    reference event stream ([`super::Timeline`]). Each acknowledged write
//!    must be in that stream at its revision with its value (otherwise it
//!    was lost: checker `lost-write`); each read must return exactly the
//!    state at its revision; a successful compare must hold at `r - 1`, a
//!    failed one must not hold at `h`.
//! 2. **Unknown outcomes.** A timed-out or Unavailable write may or may not
//!    have happened. Values are unique per write, so if its value is in the
//!    stream it happened at that revision, otherwise it had no effect.
//!    Deletes and lease revokes with unknown outcome explain delete events
//!    that no acknowledged delete or revoke claims (leases are granted with
//!    a TTL far longer than a run, so none expires). Any event that no
//!    operation explains is a violation, and so is a definitely failed write
//!    whose value shows up.
//! 3. **Real time.** If operation A completed before B was invoked, then
//!    `point(A) <= point(B)` (a stale read is a read whose point is below a
//!    write that completed before the read started). Operations with
//!    unknown outcome never completed, so they constrain only as B. One
//!    sweep over invocation times checks this in O(n log n).
//!
//! The same pass checks that `header.revision` never goes back for a client
//! (checker `monotonic`); a client's operations are sequential.

use std::collections::{HashMap, HashSet};

use super::{show, Timeline, Violation};
use crate::history::{EventKind, History, Operation, Outcome, Request, Response};

/// Reports at most this many real-time violations (they tend to cascade).
const MAX_REALTIME_REPORTS: usize = 10;

/// Where an operation sits in the linearization: `(revision, 0)` for a
/// write, `(revision, 1)` for a read.
type Point = (i64, u8);

/// Checks the history against the timeline; see the module docs.
pub fn check(h: &History, t: &Timeline) -> Vec<Violation> {
    let mut v = Vec::new();
    // Value -> (revision, key) of the put event that carries it.
    let mut put_by_value: HashMap<&str, (i64, &str)> = HashMap::new();
    for (rev, events) in &t.by_revision {
        for e in events {
            if e.kind == EventKind::Put && put_by_value.insert(e.kv.value.as_str(), (*rev, e.kv.key.as_str())).is_some() {
                v.push(Violation::new("linearizable", format!("value {:?} was written twice (again at revision {rev}): a write took effect more than once", e.kv.value)));
            }
        }
    }
    let mut claimed_values: HashSet<&str> = HashSet::new();
    let mut claimed_deletes: HashSet<(i64, &str)> = HashSet::new();
    let mut points: Vec<(usize, Point)> = Vec::new();
    let mut unknown_deletes: Vec<usize> = Vec::new();
    // Leases whose revoke has an unknown outcome; they explain deletes of
    // their keys. (Leases are granted with a TTL far longer than a run, so
    // expiry explains none.)
    let mut revoked_unknown: HashSet<i64> = HashSet::new();
    let mut acked_revokes: Vec<(usize, i64, i64)> = Vec::new();

    for (i, op) in h.operations.iter().enumerate() {
        match (&op.request, &op.outcome) {
            (Request::Put { key, value, .. } | Request::Cas { key, value, .. }, outcome) => {
                let (is_cas, lease) = match &op.request {
                    Request::Put { lease, .. } => (false, *lease),
                    _ => (true, 0),
                };
                let found = put_by_value.get(value.as_str()).copied();
                claimed_values.insert(value.as_str());
                let applied_at = match outcome {
                    Outcome::Ok { response: Response::Put { revision } } | Outcome::Ok { response: Response::Cas { revision, succeeded: true } } => match found {
                        Some((r, k)) if r == *revision && k == key => Some(r),
                        Some((r, k)) => {
                            v.push(Violation::new("lost-write", format!("{} acknowledged at revision {revision} but the store has it at revision {r} on key {k}", describe(op))));
                            None
                        }
                        None => {
                            v.push(Violation::new("lost-write", format!("{} acknowledged at revision {revision} is not in the store's history", describe(op))));
                            None
                        }
                    },
                    Outcome::Ok { response: Response::Cas { revision, succeeded: false } } => {
                        if let Some((r, _)) = found {
                            v.push(Violation::new("linearizable", format!("{} reported a failed compare but its value was written at revision {r}", describe(op))));
                        }
                        let cur = t.state_at(key, *revision).map(|kv| kv.mod_revision).unwrap_or(0);
                        if let Request::Cas { expected_mod_revision, .. } = &op.request {
                            if cur == *expected_mod_revision {
                                v.push(Violation::new("linearizable", format!("{} failed its compare at revision {revision}, but mod_revision there was {cur}", describe(op))));
                            }
                        }
                        points.push((i, (*revision, 1)));
                        None
                    }
                    Outcome::Ok { response } => {
                        v.push(Violation::new("linearizable", format!("{} got a response of the wrong kind: {response:?}", describe(op))));
                        None
                    }
                    Outcome::Unknown { .. } => found.filter(|(_, k)| k == key).map(|(r, _)| r),
                    Outcome::Failed { error } => {
                        if let Some((r, _)) = found {
                            v.push(Violation::new("linearizable", format!("{} failed ({error}) but took effect at revision {r}", describe(op))));
                        }
                        None
                    }
                };
                if let Some(r) = applied_at {
                    points.push((i, (r, 0)));
                    if let Some(ev) = t.by_revision.get(&r).and_then(|es| es.iter().find(|e| e.kv.value == *value)) {
                        if !is_cas && ev.kv.lease != lease {
                            v.push(Violation::new("linearizable", format!("{} stored with lease {} instead of {lease}", describe(op), ev.kv.lease)));
                        }
                    }
                    if let Request::Cas { expected_mod_revision, .. } = &op.request {
                        let before = t.state_at(key, r - 1);
                        let cur = before.map(|kv| kv.mod_revision).unwrap_or(0);
                        if cur != *expected_mod_revision {
                            v.push(Violation::new("linearizable", format!("{} took effect at revision {r} although the key was {} just before", describe(op), show(before))));
                        }
                    }
                }
            }
            (Request::Get { key }, Outcome::Ok { response: Response::Get { revision, kv } }) => {
                let want = t.state_at(key, *revision);
                if want != kv.as_ref() {
                    v.push(Violation::new(
                        "linearizable",
                        format!("{} returned {} at revision {revision}, but the store had {} there (stale or wrong read)", describe(op), show(kv.as_ref()), show(want)),
                    ));
                }
                points.push((i, (*revision, 1)));
            }
            (Request::Delete { key }, Outcome::Ok { response: Response::Delete { revision, deleted } }) => {
                if *deleted > 0 {
                    let present = t.by_revision.get(revision).is_some_and(|es| es.iter().any(|e| e.kind == EventKind::Delete && e.kv.key == *key));
                    if present {
                        claimed_deletes.insert((*revision, key.as_str()));
                        points.push((i, (*revision, 0)));
                    } else {
                        v.push(Violation::new("lost-write", format!("{} acknowledged at revision {revision} is not in the store's history", describe(op))));
                    }
                } else {
                    let want = t.state_at(key, *revision);
                    if want.is_some() {
                        v.push(Violation::new("linearizable", format!("{} deleted nothing at revision {revision}, but the store had {}", describe(op), show(want))));
                    }
                    points.push((i, (*revision, 1)));
                }
            }
            (Request::Delete { .. }, Outcome::Unknown { .. }) => unknown_deletes.push(i),
            (Request::LeaseRevoke { lease }, outcome) => {
                if matches!(outcome, Outcome::Unknown { .. }) {
                    revoked_unknown.insert(*lease);
                }
                if let Outcome::Ok { response: Response::LeaseRevoke { revision } } = outcome {
                    // Whether it deleted keys is decided once every delete
                    // is claimed (below).
                    acked_revokes.push((i, *lease, *revision));
                    for k in t.keys() {
                        if let Some(kv) = t.state_at(k, *revision).filter(|kv| kv.lease == *lease) {
                            v.push(Violation::new("linearizable", format!("{} at revision {revision}, but {} is still attached to it", describe(op), show(Some(kv)))));
                        }
                    }
                    for (r, es) in t.by_revision.range(revision + 1..) {
                        for e in es.iter().filter(|e| e.kind == EventKind::Put && e.kv.lease == *lease) {
                            v.push(Violation::new("linearizable", format!("{} at revision {revision}, but {} was attached to it later at revision {r}", describe(op), e.kv.key)));
                        }
                    }
                }
            }
            _ => {}
        }
    }

    // An acknowledged revoke wrote at its revision iff the deletes there are
    // of its keys and no delete request claims them: a revoke that found no
    // keys returns the current revision, which may be another client's
    // delete of a key that happened to carry the lease.
    for (i, lease, rev) in acked_revokes {
        let es = t.by_revision.get(&rev).map(Vec::as_slice).unwrap_or(&[]);
        let deletes: Vec<&str> = es.iter().filter(|e| e.kind == EventKind::Delete).filter(|e| t.state_at(&e.kv.key, rev - 1).is_some_and(|kv| kv.lease == lease)).map(|e| e.kv.key.as_str()).collect();
        let others_claimed = es.iter().any(|e| claimed_deletes.contains(&(rev, e.kv.key.as_str())));
        let wrote = !deletes.is_empty() && !others_claimed;
        if wrote {
            for k in deletes {
                claimed_deletes.insert((rev, k));
            }
        }
        points.push((i, (rev, if wrote { 0 } else { 1 })));
    }

    let placed = Placed::new(h, &points);

    // Every event must be explained by an operation.
    for (rev, events) in &t.by_revision {
        for e in events {
            match e.kind {
                EventKind::Put => {
                    if !claimed_values.contains(e.kv.value.as_str()) {
                        v.push(Violation::new("linearizable", format!("put {}={} at revision {rev} was written by no client", e.kv.key, e.kv.value)));
                    }
                }
                EventKind::Delete => {
                    if claimed_deletes.contains(&(*rev, e.kv.key.as_str())) {
                        continue;
                    }
                    // A revoke of unknown outcome of the key's lease explains it.
                    let prev_lease = t.state_at(&e.kv.key, rev - 1).map(|kv| kv.lease).unwrap_or(0);
                    if prev_lease != 0 && revoked_unknown.contains(&prev_lease) {
                        continue;
                    }
                    // Else a delete of unknown outcome on the key, invoked
                    // after every operation placed before this revision had
                    // completed (events are visited in revision order, so any
                    // eligible request will do).
                    let cand = unknown_deletes.iter().position(|&i| h.operations[i].request.key() == Some(e.kv.key.as_str()) && placed.lower_bound(h.operations[i].call_ns) <= (*rev, 0));
                    if let Some(pos) = cand {
                        let i = unknown_deletes.remove(pos);
                        points.push((i, (*rev, 0)));
                        continue;
                    }
                    v.push(Violation::new("linearizable", format!("delete of {} at revision {rev} was requested by no client", e.kv.key)));
                }
            }
        }
    }

    v.extend(real_time(h, &points));
    v.extend(monotonic(h));
    v
}

/// Completed operations by completion time, with the running maximum of
/// their points: the lowest point an operation invoked at `t` may take.
struct Placed {
    done: Vec<(u64, Point)>,
}

impl Placed {
    fn new(h: &History, points: &[(usize, Point)]) -> Self {
        let mut done: Vec<(u64, Point)> = points.iter().filter(|(i, _)| !matches!(h.operations[*i].outcome, Outcome::Unknown { .. })).map(|(i, p)| (h.operations[*i].return_ns, *p)).collect();
        done.sort();
        let mut max = (0, 0);
        for d in &mut done {
            max = max.max(d.1);
            d.1 = max;
        }
        Placed { done }
    }

    fn lower_bound(&self, call_ns: u64) -> Point {
        let n = self.done.partition_point(|(ret, _)| *ret < call_ns);
        if n == 0 {
            (0, 0)
        } else {
            self.done[n - 1].1
        }
    }
}

/// Checks `point(A) <= point(B)` whenever A completed before B started.
fn real_time(h: &History, points: &[(usize, Point)]) -> Vec<Violation> {
    let mut v = Vec::new();
    let completed = |i: usize| match h.operations[i].outcome {
        Outcome::Unknown { .. } => u64::MAX,
        _ => h.operations[i].return_ns,
    };
    let mut by_return: Vec<&(usize, Point)> = points.iter().collect();
    by_return.sort_by_key(|(i, _)| completed(*i));
    let mut by_call: Vec<&(usize, Point)> = points.iter().collect();
    by_call.sort_by_key(|(i, _)| h.operations[*i].call_ns);
    let mut next = 0;
    let mut max: Option<(Point, usize)> = None;
    for (b, pb) in by_call {
        let call = h.operations[*b].call_ns;
        while next < by_return.len() && completed(by_return[next].0) < call {
            let (a, pa) = by_return[next];
            if max.is_none_or(|(m, _)| *pa > m) {
                max = Some((*pa, *a));
            }
            next += 1;
        }
        if let Some((pa, a)) = max {
            if pa > *pb {
                v.push(Violation::new(
                    "linearizable",
                    format!(
                        "{} sits at revision {} but started after {} completed at revision {} (real-time order broken, e.g. a stale read)",
                        describe(&h.operations[*b]),
                        pb.0,
                        describe(&h.operations[a]),
                        pa.0
                    ),
                ));
                if v.len() >= MAX_REALTIME_REPORTS {
                    break;
                }
            }
        }
    }
    v
}

/// Per client, `header.revision` of successful responses never decreases.
fn monotonic(h: &History) -> Vec<Violation> {
    let mut v = Vec::new();
    let mut by_client: HashMap<usize, Vec<&Operation>> = HashMap::new();
    for op in &h.operations {
        by_client.entry(op.client).or_default().push(op);
    }
    for ops in by_client.values_mut() {
        ops.sort_by_key(|o| o.call_ns);
        let mut last: Option<(i64, &Operation)> = None;
        for op in ops.iter() {
            if let Outcome::Ok { response } = &op.outcome {
                let r = response.revision();
                if let Some((l, prev)) = last {
                    if r < l {
                        v.push(Violation::new("monotonic", format!("client {}: {} saw revision {r} after {} saw {l}", op.client, describe(op), describe(prev))));
                    }
                }
                if last.is_none_or(|(l, _)| r >= l) {
                    last = Some((r, op));
                }
            }
        }
    }
    v
}

/// One-line description of an operation for reports.
pub fn describe(op: &Operation) -> String {
    let req = match &op.request {
        Request::Put { key, value, lease } if *lease != 0 => {
            format!("put {key}={value} lease {lease}")
        }
        Request::Put { key, value, .. } => format!("put {key}={value}"),
        Request::Get { key } => format!("get {key}"),
        Request::Cas { key, expected_mod_revision, value } => format!("cas {key} if mod_revision=={expected_mod_revision} then ={value}"),
        Request::Delete { key } => format!("delete {key}"),
        Request::LeaseGrant { ttl } => format!("lease grant ttl {ttl}"),
        Request::LeaseRevoke { lease } => format!("lease revoke {lease}"),
    };
    format!("client {} {req} [{}..{} ns]", op.client, op.call_ns, op.return_ns)
}
