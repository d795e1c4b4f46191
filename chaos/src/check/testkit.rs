//! A sequential in-memory store that records a valid history, so the
//! checker self-tests can plant one violation at a time.

use std::collections::BTreeMap;

use crate::history::*;

pub(crate) struct Sim {
    pub h: History,
    store: BTreeMap<String, Kv>,
    pub rev: i64,
    now: u64,
    events: Vec<Event>,
    /// Each revision's events go to the watcher in one response.
    responses: Vec<WatchResponse>,
}

impl Sim {
    pub fn new() -> Self {
        Sim { h: History { target: "sim".into(), fault: "none".into(), prefix: "k".into(), ..Default::default() }, store: BTreeMap::new(), rev: 1, now: 0, events: Vec::new(), responses: Vec::new() }
    }

    fn record(&mut self, client: usize, request: Request, response: Response) -> usize {
        let op = Operation { client, member: client % 3, call_ns: self.now, return_ns: self.now + 10, request, outcome: Outcome::Ok { response } };
        self.now += 20;
        self.h.operations.push(op);
        self.h.operations.len() - 1
    }

    fn emit(&mut self, evs: Vec<Event>) {
        self.responses.push(WatchResponse { time_ns: self.now, header_revision: self.rev, events: evs.clone() });
        self.events.extend(evs);
    }

    pub fn put(&mut self, client: usize, key: &str, value: &str) -> usize {
        self.rev += 1;
        let prev = self.store.get(key).cloned();
        let kv = Kv {
            key: key.into(),
            value: value.into(),
            mod_revision: self.rev,
            create_revision: prev.as_ref().map(|p| p.create_revision).unwrap_or(self.rev),
            version: prev.as_ref().map(|p| p.version + 1).unwrap_or(1),
            lease: 0,
        };
        self.store.insert(key.into(), kv.clone());
        self.emit(vec![Event { kind: EventKind::Put, kv, prev_kv: prev }]);
        let rev = self.rev;
        self.record(client, Request::Put { key: key.into(), value: value.into(), lease: 0 }, Response::Put { revision: rev })
    }

    pub fn get(&mut self, client: usize, key: &str) -> usize {
        let kv = self.store.get(key).cloned();
        let rev = self.rev;
        self.record(client, Request::Get { key: key.into() }, Response::Get { revision: rev, kv })
    }

    pub fn delete(&mut self, client: usize, key: &str) -> usize {
        let prev = self.store.remove(key);
        let deleted = i64::from(prev.is_some());
        if prev.is_some() {
            self.rev += 1;
            let kv = Kv { key: key.into(), value: String::new(), mod_revision: self.rev, create_revision: 0, version: 0, lease: 0 };
            self.emit(vec![Event { kind: EventKind::Delete, kv, prev_kv: prev }]);
        }
        let rev = self.rev;
        self.record(client, Request::Delete { key: key.into() }, Response::Delete { revision: rev, deleted })
    }

    pub fn cas(&mut self, client: usize, key: &str, expected: i64, value: &str) -> usize {
        let cur = self.store.get(key).map(|kv| kv.mod_revision).unwrap_or(0);
        if cur != expected {
            let rev = self.rev;
            return self.record(client, Request::Cas { key: key.into(), expected_mod_revision: expected, value: value.into() }, Response::Cas { revision: rev, succeeded: false });
        }
        let i = self.put(client, key, value);
        self.h.operations[i].request = Request::Cas { key: key.into(), expected_mod_revision: expected, value: value.into() };
        self.h.operations[i].outcome = Outcome::Ok { response: Response::Cas { revision: self.rev, succeeded: true } };
        i
    }

    /// Put with a lease.
    pub fn put_lease(&mut self, client: usize, key: &str, value: &str, lease: i64) -> usize {
        let i = self.put(client, key, value);
        if let Some(kv) = self.store.get_mut(key) {
            kv.lease = lease;
        }
        if let Some(e) = self.responses.last_mut().and_then(|r| r.events.last_mut()) {
            e.kv.lease = lease;
        }
        if let Some(e) = self.events.last_mut() {
            e.kv.lease = lease;
        }
        self.h.operations[i].request = Request::Put { key: key.into(), value: value.into(), lease };
        i
    }

    pub fn lease_grant(&mut self, client: usize, lease: i64) -> usize {
        let rev = self.rev;
        self.record(client, Request::LeaseGrant { ttl: 600 }, Response::LeaseGrant { revision: rev, lease })
    }

    /// Revoke: deletes the lease's keys in one revision.
    pub fn revoke(&mut self, client: usize, lease: i64) -> usize {
        let keys: Vec<String> = self.store.values().filter(|kv| kv.lease == lease).map(|kv| kv.key.clone()).collect();
        if !keys.is_empty() {
            self.rev += 1;
            let mut evs = Vec::new();
            for k in keys {
                let prev = self.store.remove(&k);
                let kv = Kv { key: k, value: String::new(), mod_revision: self.rev, create_revision: 0, version: 0, lease: 0 };
                evs.push(Event { kind: EventKind::Delete, kv, prev_kv: prev });
            }
            self.emit(evs);
        }
        let rev = self.rev;
        self.record(client, Request::LeaseRevoke { lease }, Response::LeaseRevoke { revision: rev })
    }

    /// A write whose outcome the client never learned.
    pub fn put_unknown(&mut self, client: usize, key: &str, value: &str, applied: bool) -> usize {
        let i = if applied { self.put(client, key, value) } else { self.record(client, Request::Put { key: key.into(), value: value.into(), lease: 0 }, Response::Put { revision: 0 }) };
        self.h.operations[i].outcome = Outcome::Unknown { error: "deadline exceeded".into() };
        i
    }

    /// A valid workload mixing every operation kind.
    pub fn valid() -> Self {
        let mut s = Sim::new();
        s.put(0, "a", "v1");
        s.put(1, "b", "v2");
        s.get(2, "a");
        let m = s.store["a"].mod_revision;
        s.cas(0, "a", m, "v3");
        s.cas(1, "a", m, "v4");
        s.delete(2, "b");
        s.delete(2, "b");
        s.put_unknown(0, "c", "v5", true);
        s.put_unknown(1, "c", "v6", false);
        s.get(1, "c");
        s.put(2, "a", "v7");
        s.get(0, "a");
        s.lease_grant(1, 77);
        s.put_lease(1, "d", "v8", 77);
        s.put_lease(1, "e", "v9", 77);
        s.get(2, "e");
        s.revoke(1, 77);
        s.get(0, "d");
        s
    }

    /// Finishes the history: three agreeing members and one watcher that saw
    /// every response plus a final bookmark.
    pub fn finish(mut self) -> History {
        let kvs: Vec<Kv> = self.store.values().cloned().collect();
        self.h.final_revision = self.rev;
        self.h.members = (0..3).map(|m| MemberFinal { member: m, kvs: kvs.clone(), hash_kv: 42, events: self.events.clone() }).collect();
        let mut responses = self.responses.clone();
        responses.push(WatchResponse { time_ns: self.now, header_revision: self.rev, events: vec![] });
        self.h.watchers = vec![Watcher { id: 0, sessions: vec![WatchSession { member: 0, start_revision: 1, responses, error: None }] }];
        self.h
    }
}
