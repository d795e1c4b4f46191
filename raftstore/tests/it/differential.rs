//! Differential test: one seeded, deterministic script of operations runs
//! through the `etcd-client` crate against a fresh real etcd and a fresh
//! raftstore. Every deterministic field of every response is compared, and
//! the first divergence fails the test with the operation index, the
//! operation and both normalised results.
//!
//! Normalisation keeps only what both servers define and what etcd
//! guarantees:
//! - headers: only `revision` (cluster/member IDs and terms differ);
//! - lease IDs: each server picks its own, so they are mapped to the order of
//!   grants (`L0`, `L1`, ...);
//! - ranges sorted by a target other than the key: etcd does not define the
//!   order of ties, so runs of equal target values are compared as sets;
//! - lease TTLs: remaining time only to the second it was granted with;
//! - watches: events are compared as one flattened stream per watch (how
//!   events are grouped into responses is not part of the contract), and each
//!   server is separately checked never to split a revision across responses.
//!
//! The script is generated as it runs from a seeded PRNG and from the state
//! the servers reported (current and compacted revision, live leases and
//! watches), which is the same on both until the first divergence.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etcd_client::proto::{PbKeyValue, PbRangeResponse, PbTxnOpResponse, PbTxnResponse, PbWatchResponse};
use etcd_client::{Client, CompactionOptions, Compare, CompareOp, DeleteOptions, GetOptions, LeaseGrantOptions, LeaseTimeToLiveOptions, PutOptions, SortOrder, SortTarget, Txn, TxnOp, WatchOptions};
use tokio::task::JoinHandle;

use crate::common::{block_on, kinds, status_of, Kind, Server};

const SEED: u64 = 0x5eed_e7cd_2024;
const OPS: usize = 320;
/// A watch is done when it has been quiet this long.
const WATCH_QUIET: Duration = Duration::from_millis(500);
const CALL_TIMEOUT: Duration = Duration::from_secs(15);

// ---------------------------------------------------------------------------
// Deterministic randomness.

/// splitmix64: tiny, seedable, and the same on every platform and version.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n` (`n > 0`).
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        if hi <= lo {
            lo
        } else {
            lo + self.below((hi - lo + 1) as u64) as i64
        }
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len() as u64) as usize]
    }
}

// ---------------------------------------------------------------------------
// The script.

const KEYS: &[&str] = &["a", "b", "c", "d", "e", "f", "p/0", "p/1", "p/2", "p/3", "p/4", "p/5", "q/0", "q/1", "q/2", "r"];
const VALUES: &[&str] = &["", "v", "x", "yy", "zzz", "0", "9"];

/// A lease as the script names it: the n-th grant, or an ID no server knows.
#[derive(Clone, Copy, Debug, PartialEq)]
enum LeaseRef {
    Slot(usize),
    Unknown(i64),
}

/// How far a key range reaches.
#[derive(Clone, Debug, PartialEq)]
enum End {
    Single,
    Prefix,
    To(String),
    FromKey,
    All,
}

#[derive(Clone, Debug)]
struct RangeSpec {
    key: String,
    end: End,
    revision: i64,
    limit: i64,
    count_only: bool,
    keys_only: bool,
    sort: Option<(SortTarget, SortOrder)>,
    min_mod: i64,
    max_mod: i64,
    min_create: i64,
    max_create: i64,
}

#[derive(Clone, Debug)]
enum CmpTarget {
    Version(i64),
    Create(i64),
    Mod(i64),
    Value(String),
    Lease(Option<LeaseRef>),
}

#[derive(Clone, Debug)]
struct CmpSpec {
    key: String,
    prefix: bool,
    target: CmpTarget,
    result: CompareOp,
}

#[derive(Clone, Debug)]
struct PutSpec {
    key: String,
    value: String,
    prev_kv: bool,
    lease: Option<LeaseRef>,
    ignore_value: bool,
    ignore_lease: bool,
}

#[derive(Clone, Debug)]
struct DeleteSpec {
    key: String,
    end: End,
    prev_kv: bool,
}

#[derive(Clone, Debug)]
enum TxnOpSpec {
    Put(PutSpec),
    Delete(DeleteSpec),
    Range(RangeSpec),
    Txn(TxnSpec),
}

#[derive(Clone, Debug)]
struct TxnSpec {
    compares: Vec<CmpSpec>,
    success: Vec<TxnOpSpec>,
    failure: Vec<TxnOpSpec>,
}

#[derive(Clone, Debug)]
struct WatchSpec {
    id: usize,
    key: String,
    end: End,
    start_revision: i64,
    prev_kv: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Put(PutSpec),
    Delete(DeleteSpec),
    Range(RangeSpec),
    Txn(TxnSpec),
    Compact { revision: i64, physical: bool },
    LeaseGrant { ttl: i64, id: i64 },
    LeaseRevoke(LeaseRef),
    LeaseTimeToLive(LeaseRef),
    WatchOpen(WatchSpec),
    WatchClose(usize),
}

/// What the script knows of the servers' shared state.
#[derive(Default)]
struct Model {
    revision: i64,
    compacted: i64,
    leases: Vec<bool>,
    /// Open watches: id → the first revision they may still need, or
    /// `i64::MAX` if the server already cancelled them.
    watches: BTreeMap<usize, (i64, usize)>,
    next_watch: usize,
}

struct Gen {
    rng: Rng,
}

impl Gen {
    fn key(&mut self) -> String {
        (*self.rng.pick(KEYS)).to_owned()
    }

    fn value(&mut self) -> String {
        (*self.rng.pick(VALUES)).to_owned()
    }

    fn lease(&mut self, m: &Model) -> Option<LeaseRef> {
        if m.leases.is_empty() || !self.rng.chance(25) {
            return None;
        }
        Some(LeaseRef::Slot(self.rng.below(m.leases.len() as u64) as usize))
    }

    fn end(&mut self) -> (String, End) {
        match self.rng.below(10) {
            0..=3 => (self.key(), End::Single),
            4..=5 => ((*self.rng.pick(&["p/", "q/", "p/1", "x/"])).to_owned(), End::Prefix),
            6..=7 => {
                let (mut a, mut b) = (self.key(), self.key());
                if a > b {
                    std::mem::swap(&mut a, &mut b);
                }
                if a == b {
                    b.push('~');
                }
                (a, End::To(b))
            }
            8 => (self.key(), End::FromKey),
            _ => (String::new(), End::All),
        }
    }

    /// A revision for a read: mostly current, sometimes old, future or compacted.
    fn read_revision(&mut self, m: &Model) -> i64 {
        match self.rng.below(20) {
            0..=10 => 0,
            11..=16 => self.rng.range(m.compacted.max(1), m.revision),
            17 => m.revision + self.rng.range(1, 3),
            _ if m.compacted > 1 => self.rng.range(1, m.compacted - 1),
            _ => m.revision,
        }
    }

    fn range(&mut self, m: &Model) -> RangeSpec {
        let (key, end) = self.end();
        let many = end != End::Single;
        let targets = [SortTarget::Key, SortTarget::Version, SortTarget::Create, SortTarget::Mod, SortTarget::Value];
        let orders = [SortOrder::None, SortOrder::Ascend, SortOrder::Descend];
        let rev_filter = |g: &mut Gen| {
            if g.rng.chance(15) {
                g.rng.range(1, m.revision.max(1))
            } else {
                0
            }
        };
        RangeSpec {
            key,
            end,
            revision: self.read_revision(m),
            limit: if many && self.rng.chance(35) { self.rng.range(1, 4) } else { 0 },
            count_only: self.rng.chance(10),
            keys_only: self.rng.chance(15),
            sort: (many && self.rng.chance(40)).then(|| (*self.rng.pick(&targets), *self.rng.pick(&orders))),
            min_mod: rev_filter(self),
            max_mod: rev_filter(self),
            min_create: rev_filter(self),
            max_create: rev_filter(self),
        }
    }

    fn put(&mut self, m: &Model, key: String) -> PutSpec {
        let mut p = PutSpec { key, value: self.value(), prev_kv: self.rng.chance(50), lease: self.lease(m), ignore_value: false, ignore_lease: false };
        if self.rng.chance(5) {
            p.ignore_value = true;
            if self.rng.chance(75) {
                p.value.clear();
            }
        }
        if self.rng.chance(5) {
            p.ignore_lease = true;
            if self.rng.chance(75) {
                p.lease = None;
            }
        }
        p
    }

    fn delete(&mut self) -> DeleteSpec {
        let (key, end) = self.end();
        DeleteSpec { key, end, prev_kv: self.rng.chance(50) }
    }

    fn compare(&mut self, m: &Model) -> CmpSpec {
        let target = match self.rng.below(5) {
            0 => CmpTarget::Version(self.rng.range(0, 3)),
            1 => CmpTarget::Create(self.rng.range(0, m.revision)),
            2 => CmpTarget::Mod(self.rng.range(0, m.revision)),
            3 => CmpTarget::Value(self.value()),
            _ => CmpTarget::Lease(self.lease(m)),
        };
        let results = [CompareOp::Equal, CompareOp::Greater, CompareOp::Less, CompareOp::NotEqual];
        let prefix = self.rng.chance(10);
        CmpSpec { key: if prefix { "p/".to_owned() } else { self.key() }, prefix, target, result: *self.rng.pick(&results) }
    }

    /// Keys for writes come from `pool` without replacement, so most txns are
    /// valid; a few reuse one, which etcd rejects as a duplicate.
    fn txn_ops(&mut self, m: &Model, pool: &mut Vec<String>, depth: usize) -> Vec<TxnOpSpec> {
        let n = self.rng.below(4);
        let mut ops = Vec::new();
        for _ in 0..n {
            let write_key = |g: &mut Gen, pool: &mut Vec<String>| {
                if pool.is_empty() || g.rng.chance(3) {
                    g.key()
                } else {
                    let i = g.rng.below(pool.len() as u64) as usize;
                    pool.swap_remove(i)
                }
            };
            let op = match self.rng.below(10) {
                0..=3 => {
                    let key = write_key(self, pool);
                    let mut p = self.put(m, key);
                    p.ignore_value = false;
                    p.ignore_lease = false;
                    TxnOpSpec::Put(p)
                }
                4..=5 => TxnOpSpec::Delete(DeleteSpec { key: write_key(self, pool), end: End::Single, prev_kv: self.rng.chance(50) }),
                6..=8 => {
                    let mut r = self.range(m);
                    // Txn ranges at a compacted/future revision fail the whole txn;
                    // keep those rare.
                    if !self.rng.chance(10) {
                        r.revision = 0;
                    }
                    TxnOpSpec::Range(r)
                }
                _ if depth == 0 => TxnOpSpec::Txn(self.txn(m, pool, depth + 1)),
                _ => TxnOpSpec::Range(self.range(m)),
            };
            ops.push(op);
        }
        ops
    }

    fn txn(&mut self, m: &Model, pool: &mut Vec<String>, depth: usize) -> TxnSpec {
        let compares = (0..self.rng.below(4)).map(|_| self.compare(m)).collect();
        // Each branch may reuse the keys of the other.
        let mut other = pool.clone();
        let success = self.txn_ops(m, pool, depth);
        let failure = self.txn_ops(m, &mut other, depth);
        TxnSpec { compares, success, failure }
    }

    fn watch(&mut self, m: &mut Model) -> WatchSpec {
        let (key, end) = match self.rng.below(4) {
            0 => (self.key(), End::Single),
            1 | 2 => ("p/".to_owned(), End::Prefix),
            _ => (String::new(), End::All),
        };
        let start_revision = match self.rng.below(10) {
            0..=1 => 0,
            2..=8 => self.rng.range(m.compacted.max(1), m.revision),
            _ if m.compacted > 1 => self.rng.range(1, m.compacted - 1),
            _ => m.revision,
        };
        let id = m.next_watch;
        m.next_watch += 1;
        WatchSpec { id, key, end, start_revision, prev_kv: self.rng.chance(60) }
    }

    /// Compaction must not overtake a watch still catching up, or whether
    /// etcd cancels it would depend on timing.
    fn compact(&mut self, m: &Model) -> Op {
        let floor = m.watches.values().map(|(r, _)| *r).min().unwrap_or(i64::MAX);
        let hi = m.revision.min(floor);
        let revision = if hi > m.compacted && self.rng.chance(80) {
            self.rng.range(m.compacted + 1, hi)
        } else if self.rng.chance(50) && m.compacted > 0 {
            self.rng.range(1, m.compacted)
        } else {
            m.revision + self.rng.range(1, 5)
        };
        Op::Compact { revision, physical: self.rng.chance(30) }
    }

    /// Ops every script must contain, interleaved at fixed positions.
    fn special(&mut self, m: &mut Model, n: usize) -> Op {
        let puts = |n: usize| -> Vec<TxnOpSpec> {
            (0..n).map(|i| TxnOpSpec::Put(PutSpec { key: format!("t/{i:03}"), value: "v".into(), prev_kv: false, lease: None, ignore_value: false, ignore_lease: false })).collect()
        };
        let plain_put = |key: &str, value: &str| PutSpec { key: key.into(), value: value.into(), prev_kv: true, lease: None, ignore_value: false, ignore_lease: false };
        match n % 14 {
            0 => Op::Txn(TxnSpec { compares: vec![], success: puts(129), failure: vec![] }),
            1 => Op::Txn(TxnSpec { compares: vec![], success: vec![TxnOpSpec::Put(plain_put("a", "1")), TxnOpSpec::Put(plain_put("a", "2"))], failure: vec![] }),
            2 => Op::Txn(TxnSpec {
                compares: vec![],
                success: vec![TxnOpSpec::Put(plain_put("p/9", "1")), TxnOpSpec::Delete(DeleteSpec { key: "p/".into(), end: End::Prefix, prev_kv: false })],
                failure: vec![],
            }),
            3 => Op::Txn(TxnSpec {
                compares: vec![CmpSpec { key: "zz".into(), prefix: false, target: CmpTarget::Version(0), result: CompareOp::Equal }],
                success: vec![TxnOpSpec::Put(plain_put("b", "1")), TxnOpSpec::Txn(TxnSpec { compares: vec![], success: vec![TxnOpSpec::Put(plain_put("b", "2"))], failure: vec![] })],
                failure: vec![],
            }),
            4 => {
                let mut r = self.range(m);
                r.revision = m.revision + 1;
                Op::Range(r)
            }
            5 => {
                let mut r = self.range(m);
                r.revision = if m.compacted > 1 { m.compacted - 1 } else { 1 };
                Op::Range(r)
            }
            6 => Op::Put(PutSpec { ignore_value: true, value: String::new(), ..plain_put("never-written", "") }),
            7 => Op::Put(PutSpec { ignore_value: true, ..plain_put("c", "has-a-value") }),
            8 => Op::Put(PutSpec { lease: Some(LeaseRef::Unknown(0x7e57)), ..plain_put("d", "v") }),
            9 => Op::Compact { revision: m.revision + 10, physical: false },
            10 => Op::Compact { revision: m.compacted.max(1), physical: false },
            11 => {
                let mut w = self.watch(m);
                w.start_revision = if m.compacted > 1 { m.compacted - 1 } else { 1 };
                Op::WatchOpen(w)
            }
            12 => Op::Txn(TxnSpec {
                compares: vec![CmpSpec { key: "a".into(), prefix: false, target: CmpTarget::Version(0), result: CompareOp::Greater }],
                success: vec![TxnOpSpec::Range(RangeSpec { revision: m.revision + 5, ..self.range(m) })],
                failure: vec![],
            }),
            _ => Op::LeaseTimeToLive(LeaseRef::Unknown(0x7e57)),
        }
    }

    fn next(&mut self, m: &mut Model, i: usize) -> Op {
        // Close a watch that has been open a while.
        if let Some((&id, _)) = m.watches.iter().find(|(_, (_, opened))| i.saturating_sub(*opened) > 12) {
            if self.rng.chance(15) {
                return Op::WatchClose(id);
            }
        }
        if i % 10 == 5 {
            return self.special(m, i / 10);
        }
        match self.rng.below(100) {
            0..=29 => {
                let key = self.key();
                Op::Put(self.put(m, key))
            }
            30..=37 => Op::Delete(self.delete()),
            38..=55 => Op::Range(self.range(m)),
            56..=73 => {
                let mut pool: Vec<String> = KEYS.iter().map(|k| (*k).to_owned()).collect();
                Op::Txn(self.txn(m, &mut pool, 0))
            }
            74..=77 => self.compact(m),
            78..=82 => Op::LeaseGrant { ttl: self.rng.range(300, 900), id: if self.rng.chance(30) { 0x1000 + self.rng.range(0, 3) } else { 0 } },
            83..=85 if !m.leases.is_empty() => Op::LeaseRevoke(LeaseRef::Slot(self.rng.below(m.leases.len() as u64) as usize)),
            86..=88 if !m.leases.is_empty() => Op::LeaseTimeToLive(LeaseRef::Slot(self.rng.below(m.leases.len() as u64) as usize)),
            89..=93 if m.watches.len() < 3 => Op::WatchOpen(self.watch(m)),
            _ => Op::Range(self.range(m)),
        }
    }
}

// ---------------------------------------------------------------------------
// Normalised outcomes.

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Kv {
    key: String,
    value: String,
    create_revision: i64,
    mod_revision: i64,
    version: i64,
    lease: String,
}

#[derive(Clone, Debug, PartialEq)]
enum Rows {
    /// In server order.
    Ordered(Vec<Kv>),
    /// Sorted by a non-key target: each run of equal target values as a set
    /// (sorted by key); a run the limit cut is kept only as its length.
    Runs(Vec<(String, Vec<Kv>)>, Option<(String, usize)>),
}

#[derive(Clone, Debug, PartialEq)]
struct RangeOut {
    revision: i64,
    rows: Rows,
    count: i64,
    more: bool,
}

#[derive(Clone, Debug, PartialEq)]
enum Resp {
    Put { revision: i64, prev_kv: Option<Kv> },
    Range(RangeOut),
    Delete { revision: i64, deleted: i64, prev_kvs: Vec<Kv> },
    Txn(TxnOut),
    Missing,
}

#[derive(Clone, Debug, PartialEq)]
struct TxnOut {
    revision: i64,
    succeeded: bool,
    responses: Vec<Resp>,
}

#[derive(Clone, Debug, PartialEq)]
enum WatchItem {
    Created { watch_id: i64, revision: i64 },
    Event { kind: i32, kv: Option<Kv>, prev_kv: Option<Kv> },
    Canceled { compact_revision: i64, reason: String },
    Other { compact_revision: i64, fragment: bool },
}

#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Error { code: String, message: String },
    Ok(Resp),
    Compacted { revision: i64 },
    LeaseGranted { slot: usize, ttl: i64, id_honoured: bool, error: String },
    LeaseRevoked { revision: i64 },
    LeaseTtl { id: String, remaining: String, granted_ttl: i64, keys: BTreeSet<String> },
    WatchOpened { created: bool },
    WatchClosed { items: Vec<WatchItem>, split_revisions: Vec<i64> },
}

impl Outcome {
    /// The store revision this outcome reports, if any.
    fn revision(&self) -> Option<i64> {
        match self {
            Outcome::Ok(Resp::Put { revision, .. })
            | Outcome::Ok(Resp::Delete { revision, .. })
            | Outcome::Ok(Resp::Range(RangeOut { revision, .. }))
            | Outcome::Ok(Resp::Txn(TxnOut { revision, .. }))
            | Outcome::Compacted { revision }
            | Outcome::LeaseRevoked { revision } => Some(*revision),
            _ => None,
        }
    }

    fn label(&self) -> String {
        match self {
            Outcome::Error { message, .. } => format!("error: {message}"),
            Outcome::Ok(Resp::Txn(t)) => format!("txn succeeded={}", t.succeeded),
            Outcome::Ok(r) => format!("ok {}", format!("{r:?}").split([' ', '(', '{']).next().unwrap_or("")),
            other => format!("{other:?}").split([' ', '(', '{']).next().unwrap_or("").to_owned(),
        }
    }
}

// ---------------------------------------------------------------------------
// One server under test.

struct LiveWatch {
    log: Arc<Mutex<(Vec<PbWatchResponse>, Instant)>>,
    reader: JoinHandle<()>,
    _sender: etcd_client::WatchRequestSender,
}

struct Target {
    kind: Kind,
    client: Client,
    /// Lease ID of each granted slot.
    leases: Vec<i64>,
    watches: HashMap<usize, LiveWatch>,
}

fn bytes(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

impl Target {
    fn lease_id(&self, r: LeaseRef) -> i64 {
        match r {
            LeaseRef::Slot(i) => self.leases[i],
            LeaseRef::Unknown(id) => id,
        }
    }

    fn kv(&self, kv: &PbKeyValue) -> Kv {
        normalize_kv(&self.leases, kv)
    }

    fn range_out(&self, r: &PbRangeResponse, spec: &RangeSpec) -> RangeOut {
        let kvs: Vec<Kv> = r.kvs.iter().map(|kv| self.kv(kv)).collect();
        let rows = match spec.sort {
            Some((target, _)) if target != SortTarget::Key => tie_runs(kvs, target, r.more),
            _ => Rows::Ordered(kvs),
        };
        RangeOut { revision: r.header.as_ref().map_or(-1, |h| h.revision), rows, count: r.count, more: r.more }
    }

    fn txn_out(&self, t: &PbTxnResponse, spec: &TxnSpec) -> TxnOut {
        let branch = if t.succeeded { &spec.success } else { &spec.failure };
        let responses = t
            .responses
            .iter()
            .enumerate()
            .map(|(i, r)| match (&r.response, branch.get(i)) {
                (Some(PbTxnOpResponse::ResponsePut(p)), _) => Resp::Put { revision: p.header.as_ref().map_or(-1, |h| h.revision), prev_kv: p.prev_kv.as_ref().map(|kv| self.kv(kv)) },
                (Some(PbTxnOpResponse::ResponseRange(rr)), Some(TxnOpSpec::Range(s))) => Resp::Range(self.range_out(rr, s)),
                (Some(PbTxnOpResponse::ResponseRange(rr)), _) => {
                    Resp::Range(RangeOut { revision: -2, rows: Rows::Ordered(rr.kvs.iter().map(|kv| self.kv(kv)).collect()), count: rr.count, more: rr.more })
                }
                (Some(PbTxnOpResponse::ResponseDeleteRange(d)), _) => {
                    Resp::Delete { revision: d.header.as_ref().map_or(-1, |h| h.revision), deleted: d.deleted, prev_kvs: d.prev_kvs.iter().map(|kv| self.kv(kv)).collect() }
                }
                (Some(PbTxnOpResponse::ResponseTxn(inner)), Some(TxnOpSpec::Txn(s))) => Resp::Txn(self.txn_out(inner, s)),
                (Some(PbTxnOpResponse::ResponseTxn(inner)), _) => Resp::Txn(TxnOut { revision: -2, succeeded: inner.succeeded, responses: vec![] }),
                (None, _) => Resp::Missing,
            })
            .collect();
        TxnOut { revision: t.header.as_ref().map_or(-1, |h| h.revision), succeeded: t.succeeded, responses }
    }

    fn put_opts(&self, p: &PutSpec) -> PutOptions {
        let mut o = PutOptions::new();
        if p.prev_kv {
            o = o.with_prev_key();
        }
        if let Some(l) = p.lease {
            o = o.with_lease(self.lease_id(l));
        }
        if p.ignore_value {
            o = o.with_ignore_value();
        }
        if p.ignore_lease {
            o = o.with_ignore_lease();
        }
        o
    }

    fn delete_opts(d: &DeleteSpec) -> DeleteOptions {
        let mut o = DeleteOptions::new();
        o = match &d.end {
            End::Single => o,
            End::Prefix => o.with_prefix(),
            End::To(end) => o.with_range(end.as_bytes()),
            End::FromKey => o.with_from_key(),
            End::All => o.with_all_keys(),
        };
        if d.prev_kv {
            o = o.with_prev_key();
        }
        o
    }

    fn get_opts(r: &RangeSpec) -> GetOptions {
        let mut o = GetOptions::new();
        o = match &r.end {
            End::Single => o,
            End::Prefix => o.with_prefix(),
            End::To(end) => o.with_range(end.as_bytes()),
            End::FromKey => o.with_from_key(),
            End::All => o.with_all_keys(),
        };
        o = o
            .with_revision(r.revision)
            .with_limit(r.limit)
            .with_min_mod_revision(r.min_mod)
            .with_max_mod_revision(r.max_mod)
            .with_min_create_revision(r.min_create)
            .with_max_create_revision(r.max_create);
        if r.count_only {
            o = o.with_count_only();
        }
        if r.keys_only {
            o = o.with_keys_only();
        }
        if let Some((t, ord)) = r.sort {
            o = o.with_sort(t, ord);
        }
        o
    }

    fn compare(&self, c: &CmpSpec) -> Compare {
        let k = c.key.clone();
        let cmp = match &c.target {
            CmpTarget::Version(v) => Compare::version(k, c.result, *v),
            CmpTarget::Create(v) => Compare::create_revision(k, c.result, *v),
            CmpTarget::Mod(v) => Compare::mod_revision(k, c.result, *v),
            CmpTarget::Value(v) => Compare::value(k, c.result, v.as_bytes()),
            CmpTarget::Lease(l) => Compare::lease(k, c.result, l.map_or(0, |l| self.lease_id(l))),
        };
        if c.prefix {
            cmp.with_prefix()
        } else {
            cmp
        }
    }

    fn txn(&self, t: &TxnSpec) -> Txn {
        let ops = |ops: &[TxnOpSpec]| -> Vec<TxnOp> {
            ops.iter()
                .map(|op| match op {
                    TxnOpSpec::Put(p) => TxnOp::put(p.key.as_bytes(), p.value.as_bytes(), Some(self.put_opts(p))),
                    TxnOpSpec::Delete(d) => TxnOp::delete(d.key.as_bytes(), Some(Self::delete_opts(d))),
                    TxnOpSpec::Range(r) => TxnOp::get(r.key.as_bytes(), Some(Self::get_opts(r))),
                    TxnOpSpec::Txn(t) => TxnOp::txn(self.txn(t)),
                })
                .collect()
        };
        Txn::new().when(t.compares.iter().map(|c| self.compare(c)).collect::<Vec<_>>()).and_then(ops(&t.success)).or_else(ops(&t.failure))
    }

    async fn exec(&mut self, op: &Op) -> Outcome {
        match tokio::time::timeout(CALL_TIMEOUT, self.exec_inner(op)).await {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => {
                let (code, message) = status_of(&e);
                Outcome::Error { code: format!("{code:?}"), message }
            }
            Err(_) => Outcome::Error { code: "TIMEOUT".into(), message: format!("no answer within {CALL_TIMEOUT:?}") },
        }
    }

    async fn exec_inner(&mut self, op: &Op) -> Result<Outcome, etcd_client::Error> {
        Ok(match op {
            Op::Put(p) => {
                let opts = self.put_opts(p);
                let r = self.client.put(p.key.as_bytes(), p.value.as_bytes(), Some(opts)).await?;
                Outcome::Ok(Resp::Put { revision: r.0.header.as_ref().map_or(-1, |h| h.revision), prev_kv: r.0.prev_kv.as_ref().map(|kv| self.kv(kv)) })
            }
            Op::Delete(d) => {
                let r = self.client.delete(d.key.as_bytes(), Some(Self::delete_opts(d))).await?;
                Outcome::Ok(Resp::Delete { revision: r.0.header.as_ref().map_or(-1, |h| h.revision), deleted: r.0.deleted, prev_kvs: r.0.prev_kvs.iter().map(|kv| self.kv(kv)).collect() })
            }
            Op::Range(spec) => {
                let r = self.client.get(spec.key.as_bytes(), Some(Self::get_opts(spec))).await?;
                Outcome::Ok(Resp::Range(self.range_out(&r.0, spec)))
            }
            Op::Txn(spec) => {
                let txn = self.txn(spec);
                let r = self.client.txn(txn).await?;
                Outcome::Ok(Resp::Txn(self.txn_out(&r.0, spec)))
            }
            Op::Compact { revision, physical } => {
                let opts = physical.then(|| CompactionOptions::new().with_physical());
                let r = self.client.compact(*revision, opts).await?;
                Outcome::Compacted { revision: r.0.header.as_ref().map_or(-1, |h| h.revision) }
            }
            Op::LeaseGrant { ttl, id } => {
                let r = self.client.lease_grant(*ttl, Some(LeaseGrantOptions::new().with_id(*id))).await?;
                let slot = self.leases.len();
                self.leases.push(r.0.id);
                Outcome::LeaseGranted { slot, ttl: r.0.ttl, id_honoured: *id == 0 || r.0.id == *id, error: r.0.error.clone() }
            }
            Op::LeaseRevoke(l) => {
                let id = self.lease_id(*l);
                let r = self.client.lease_revoke(id).await?;
                Outcome::LeaseRevoked { revision: r.0.header.as_ref().map_or(-1, |h| h.revision) }
            }
            Op::LeaseTimeToLive(l) => {
                let id = self.lease_id(*l);
                let r = self.client.lease_time_to_live(id, Some(LeaseTimeToLiveOptions::new().with_keys())).await?;
                let r = &r.0;
                let granted = r.granted_ttl;
                let remaining = if r.ttl == -1 {
                    "-1 (expired or unknown)".to_owned()
                } else if r.ttl > 0 && r.ttl <= granted && r.ttl >= granted - 60 {
                    "a little under granted".to_owned()
                } else {
                    format!("{} of {granted}", r.ttl)
                };
                Outcome::LeaseTtl { id: if r.id == id { "the one asked".into() } else { format!("{:#x}", r.id) }, remaining, granted_ttl: granted, keys: r.keys.iter().map(|k| bytes(k)).collect() }
            }
            Op::WatchOpen(w) => {
                let mut o = WatchOptions::new().with_start_revision(w.start_revision);
                o = match &w.end {
                    End::Single => o,
                    End::Prefix => o.with_prefix(),
                    End::To(end) => o.with_range(end.as_bytes()),
                    End::FromKey => o.with_from_key(),
                    End::All => o.with_all_keys(),
                };
                if w.prev_kv {
                    o = o.with_prev_key();
                }
                let stream = self.client.watch(w.key.as_bytes(), Some(o)).await?;
                let (sender, mut responses) = stream.split();
                let log = Arc::new(Mutex::new((Vec::new(), Instant::now())));
                let sink = log.clone();
                let reader = tokio::spawn(async move {
                    while let Ok(Some(r)) = responses.message().await {
                        let mut l = sink.lock().unwrap();
                        l.0.push(r.0);
                        l.1 = Instant::now();
                    }
                });
                // The first response says whether the watch was created.
                let deadline = Instant::now() + CALL_TIMEOUT;
                let created = loop {
                    if let Some(first) = log.lock().unwrap().0.first() {
                        break first.created;
                    }
                    if Instant::now() > deadline || reader.is_finished() {
                        break false;
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                };
                self.watches.insert(w.id, LiveWatch { log, reader, _sender: sender });
                Outcome::WatchOpened { created }
            }
            Op::WatchClose(id) => {
                let w = self.watches.remove(id).expect("close of an open watch");
                let deadline = Instant::now() + Duration::from_secs(10);
                loop {
                    let last = w.log.lock().unwrap().1;
                    if last.elapsed() >= WATCH_QUIET || Instant::now() > deadline {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                w.reader.abort();
                let responses = std::mem::take(&mut w.log.lock().unwrap().0);
                self.watch_closed(&responses)
            }
        })
    }

    fn watch_closed(&self, responses: &[PbWatchResponse]) -> Outcome {
        let mut items = Vec::new();
        let mut split_revisions = Vec::new();
        let mut last_rev = 0;
        for r in responses {
            if r.created {
                items.push(WatchItem::Created { watch_id: r.watch_id, revision: r.header.as_ref().map_or(-1, |h| h.revision) });
            }
            if let Some(first) = r.events.first().and_then(|e| e.kv.as_ref()) {
                if first.mod_revision == last_rev {
                    split_revisions.push(last_rev);
                }
            }
            for e in &r.events {
                items.push(WatchItem::Event { kind: e.r#type, kv: e.kv.as_ref().map(|kv| self.kv(kv)), prev_kv: e.prev_kv.as_ref().map(|kv| self.kv(kv)) });
                last_rev = e.kv.as_ref().map_or(last_rev, |kv| kv.mod_revision);
            }
            if r.canceled {
                items.push(WatchItem::Canceled { compact_revision: r.compact_revision, reason: r.cancel_reason.clone() });
            } else if !r.created && r.events.is_empty() {
                items.push(WatchItem::Other { compact_revision: r.compact_revision, fragment: r.fragment });
            }
        }
        Outcome::WatchClosed { items, split_revisions }
    }
}

/// See [`Rows::Runs`].
fn tie_runs(kvs: Vec<Kv>, target: SortTarget, more: bool) -> Rows {
    let value = |kv: &Kv| match target {
        SortTarget::Version => kv.version.to_string(),
        SortTarget::Create => kv.create_revision.to_string(),
        SortTarget::Mod => kv.mod_revision.to_string(),
        SortTarget::Value => kv.value.clone(),
        SortTarget::Key => kv.key.clone(),
    };
    let mut runs: Vec<(String, Vec<Kv>)> = Vec::new();
    for kv in kvs {
        let v = value(&kv);
        match runs.last_mut() {
            Some((last, run)) if *last == v => run.push(kv),
            _ => runs.push((v, vec![kv])),
        }
    }
    for (_, run) in &mut runs {
        run.sort();
    }
    let cut = if more { runs.pop().map(|(v, run)| (v, run.len())) } else { None };
    Rows::Runs(runs, cut)
}

// ---------------------------------------------------------------------------
// The run.

fn update_model(m: &mut Model, op: &Op, out: &Outcome) {
    if let Some(rev) = out.revision() {
        m.revision = m.revision.max(rev);
    }
    match (op, out) {
        (Op::Compact { revision, .. }, Outcome::Compacted { .. }) => m.compacted = *revision,
        (Op::LeaseGrant { .. }, Outcome::LeaseGranted { .. }) => m.leases.push(true),
        (Op::LeaseRevoke(LeaseRef::Slot(i)), Outcome::LeaseRevoked { .. }) => m.leases[*i] = false,
        (Op::WatchOpen(w), Outcome::WatchOpened { .. }) => {
            let needs = if w.start_revision == 0 {
                m.revision + 1
            } else if w.start_revision < m.compacted {
                i64::MAX // cancelled by the server
            } else {
                w.start_revision
            };
            m.watches.insert(w.id, (needs, usize::MAX));
        }
        (Op::WatchClose(id), _) => {
            m.watches.remove(id);
        }
        _ => {}
    }
}

async fn run(reference: &mut Target, peer: &mut Target) {
    let mut rng = Gen { rng: Rng(SEED) };
    let mut model = Model { revision: 1, ..Model::default() };
    let mut history: Vec<String> = Vec::new();
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut watch_events = 0;
    let mut i = 0;
    while i < OPS || !model.watches.is_empty() {
        let op = if i < OPS { rng.next(&mut model, i) } else { Op::WatchClose(*model.watches.keys().next().expect("an open watch")) };
        let (a, b) = tokio::join!(reference.exec(&op), peer.exec(&op));
        if a != b {
            panic!("divergence at operation #{i}: {op:?}\n\n{}:\n{a:#?}\n\n{}:\n{b:#?}\n\nlast operations:\n{}", reference.kind, peer.kind, history[history.len().saturating_sub(8)..].join("\n"));
        }
        if let Outcome::WatchClosed { items, split_revisions } = &a {
            assert!(split_revisions.is_empty(), "operation #{i}: both servers split revisions {split_revisions:?} across watch responses");
            watch_events += items.iter().filter(|i| matches!(i, WatchItem::Event { .. })).count();
        }
        update_model(&mut model, &op, &a);
        if let Op::WatchOpen(w) = &op {
            if let Some(e) = model.watches.get_mut(&w.id) {
                e.1 = i;
            }
        }
        *seen.entry(a.label()).or_default() += 1;
        history.push(format!("#{i}: {op:?}\n    -> {}", a.label()));
        i += 1;
    }

    eprintln!("differential: {i} operations, {watch_events} watch events, outcomes:");
    for (label, n) in &seen {
        eprintln!("  {n:4} {label}");
    }
    // The script must have exercised what it claims to.
    let must_see = [
        "error: etcdserver: too many operations in txn request",
        "error: etcdserver: duplicate key given in txn request",
        "error: etcdserver: mvcc: required revision is a future revision",
        "error: etcdserver: mvcc: required revision has been compacted",
        "error: etcdserver: requested lease not found",
        "error: etcdserver: key not found",
        "error: etcdserver: value is provided",
        "txn succeeded=true",
        "txn succeeded=false",
        "Compacted",
        "LeaseGranted",
        "LeaseRevoked",
        "LeaseTtl",
        "WatchClosed",
    ];
    let missing: Vec<&str> = must_see.iter().copied().filter(|m| !seen.keys().any(|k| k == m)).collect();
    assert!(missing.is_empty(), "the script never produced: {missing:?}");
    assert!(watch_events >= 50, "only {watch_events} watch events compared");
    assert!(model.revision > 100, "only reached revision {}", model.revision);
}

#[test]
fn etcd_and_raftstore_agree_on_a_seeded_script() {
    // With IT_TARGETS=etcd this compares two real etcds: a self-test of the
    // script's determinism.
    let peer_kind = if kinds().contains(&Kind::Raftstore) { Kind::Raftstore } else { Kind::Etcd };
    let reference = Server::start(Kind::Etcd);
    let peer = Server::start(peer_kind);
    block_on(async {
        let mut a = Target { kind: Kind::Etcd, client: reference.client().await, leases: vec![], watches: HashMap::new() };
        let mut b = Target { kind: peer_kind, client: peer.client().await, leases: vec![], watches: HashMap::new() };
        run(&mut a, &mut b).await;
    });
}

#[test]
fn normalisation_maps_leases_and_tolerates_only_tie_order() {
    let kv = |key: &str, version: i64, lease: i64| PbKeyValue { key: key.into(), value: b"v".to_vec(), create_revision: 2, mod_revision: 3, version, lease };
    // Lease IDs differ per server but name the same grant.
    let (a, b) = (normalize_kv(&[0x111, 0x222], &kv("k", 1, 0x222)), normalize_kv(&[0x999, 0x888], &kv("k", 1, 0x888)));
    assert_eq!(a, b);
    let c = normalize_kv(&[0x999, 0x888], &kv("k", 1, 0x999));
    assert_ne!(a, c, "a different grant must not compare equal");

    let names =
        |keys: &[(&str, i64)]| -> Vec<Kv> { keys.iter().map(|(k, v)| Kv { key: (*k).into(), value: "v".into(), create_revision: 2, mod_revision: 3, version: *v, lease: "-".into() }).collect() };
    let runs = |keys: &[(&str, i64)], more| tie_runs(names(keys), SortTarget::Version, more);
    // Ties in another order: equal.
    assert_eq!(runs(&[("a", 2), ("b", 2), ("c", 1)], false), runs(&[("b", 2), ("a", 2), ("c", 1)], false));
    // Different membership of a run: not equal.
    assert_ne!(runs(&[("a", 2), ("b", 2), ("c", 1)], false), runs(&[("a", 2), ("c", 2), ("b", 1)], false));
    // Order of target values matters.
    assert_ne!(runs(&[("c", 1), ("a", 2)], false), runs(&[("a", 2), ("c", 1)], false));
    // A run cut by the limit compares by length only.
    assert_eq!(runs(&[("c", 3), ("a", 2)], true), runs(&[("c", 3), ("b", 2)], true));
    assert_ne!(runs(&[("c", 3), ("a", 2)], true), runs(&[("d", 3), ("a", 2)], true));
}

/// Normalises `kv` from a server that granted `leases` in that order.
fn normalize_kv(leases: &[i64], kv: &PbKeyValue) -> Kv {
    let name = if kv.lease == 0 {
        "-".to_owned()
    } else {
        match leases.iter().position(|&l| l == kv.lease) {
            Some(i) => format!("L{i}"),
            None => format!("unknown lease {:#x}", kv.lease),
        }
    };
    Kv { key: bytes(&kv.key), value: bytes(&kv.value), create_revision: kv.create_revision, mod_revision: kv.mod_revision, version: kv.version, lease: name }
}

/// HashKV's compact_revision: -1 before any compaction, then the
/// compacted revision. Compared with etcd.
#[test]
fn hash_kv_compact_revision_matches_etcd() {
    let mut seen = Vec::new();
    for kind in [Kind::Etcd, Kind::Raftstore] {
        let server = Server::start(kind);
        let got = block_on(async {
            let mut c = server.client().await;
            for i in 0..3 {
                c.put(format!("k{i}"), "v", None).await.expect("put");
            }
            let before = c.hash_kv(0).await.expect("hash_kv");
            c.compact(3, None).await.expect("compact");
            let after = c.hash_kv(0).await.expect("hash_kv after compaction");
            (before.compact_version(), after.compact_version())
        });
        seen.push(got);
    }
    assert_eq!(seen[0], (-1, 3), "etcd's own answer changed: {seen:?}");
    assert_eq!(seen[1], seen[0], "raftstore vs etcd");
}

// ---------------------------------------------------------------------------
// Auth: one fixed script of users, roles, permissions and requests made as
// different users, run through etcd-client against a fresh etcd and a fresh
// raftstore. Each step's outcome (OK with what it returned, or the gRPC
// code and message) must be the same on both.

/// The outcome of one step: `ok` plus what it returned, or code and message.
fn outcome<T>(step: &str, r: Result<T, etcd_client::Error>, show: impl Fn(&T) -> String) -> String {
    match r {
        Ok(v) => format!("{step}: ok {}", show(&v)),
        Err(e) => {
            let (code, msg) = status_of(&e);
            format!("{step}: {code:?} {msg}")
        }
    }
}

async fn as_user(ep: &str, user: &str, password: &str) -> Result<Client, etcd_client::Error> {
    let opts = etcd_client::ConnectOptions::new().with_user(user, password).with_connect_timeout(Duration::from_secs(5)).with_timeout(CALL_TIMEOUT);
    Client::connect([ep], Some(opts)).await
}

async fn auth_script(ep: &str) -> Vec<String> {
    use etcd_client::{Permission, UserAddOptions};
    fn none<T>(_: &T) -> String {
        String::new()
    }
    let mut out = Vec::new();
    let mut anon = crate::common::connect(ep).await;
    let mut a = anon.auth_client();
    out.push(outcome("enable without root", a.auth_enable().await, none));
    out.push(outcome("user add root", a.user_add("root", "rootpw", None).await, none));
    out.push(outcome("enable without root role", a.auth_enable().await, none));
    out.push(outcome("user add empty", a.user_add("", "x", None).await, none));
    out.push(outcome("grant root role", a.user_grant_role("root", "root").await, none));
    out.push(outcome("grant root role again", a.user_grant_role("root", "root").await, none));
    out.push(outcome("user add carol", a.user_add("carol", "cpw", None).await, none));
    out.push(outcome("user add dave without password", a.user_add("dave", "", Some(UserAddOptions::new().with_no_pwd())).await, none));
    out.push(outcome("role add rw", a.role_add("rw").await, none));
    out.push(outcome("grant prefix", a.role_grant_permission("rw", Permission::read_write("/k/").with_prefix()).await, none));
    out.push(outcome("grant key", a.role_grant_permission("rw", Permission::read("a")).await, none));
    out.push(outcome("grant to missing role", a.role_grant_permission("nope", Permission::read("a")).await, none));
    out.push(outcome("grant role to carol", a.user_grant_role("carol", "rw").await, none));
    out.push(outcome("grant role to nobody", a.user_grant_role("nobody", "rw").await, none));
    out.push(outcome("user get carol before enable", a.user_get("carol").await, |r| format!("{:?}", r.roles())));
    out.push(outcome("enable", a.auth_enable().await, none));

    out.push(outcome("anonymous get", anon.get("/k/1", None).await, none));
    out.push(outcome("anonymous put", anon.put("/k/1", "v", None).await, none));
    out.push(outcome("anonymous delete", anon.delete("/k/1", None).await, none));
    out.push(outcome("anonymous txn", anon.txn(Txn::new().and_then([TxnOp::put("/k/1", "v", None)])).await, none));
    out.push(outcome("anonymous user list", anon.auth_client().user_list().await, none));
    out.push(outcome("anonymous member list", anon.member_list().await.map(|r| r.members().len()), |n| n.to_string()));
    out.push(outcome("dave signs in", as_user(ep, "dave", "x").await.map(drop), none));
    out.push(outcome("wrong password", as_user(ep, "carol", "nope").await.map(drop), none));

    let mut carol = match as_user(ep, "carol", "cpw").await {
        Ok(c) => c,
        Err(e) => {
            out.push(outcome::<()>("carol signs in", Err(e), none));
            return out;
        }
    };
    let rev = |r: &etcd_client::PutResponse| r.header().map(|h| h.revision()).unwrap_or(0).to_string();
    out.push(outcome("carol put /k/1", carol.put("/k/1", "1", None).await, rev));
    out.push(outcome("carol put /k/2", carol.put("/k/2", "2", Some(PutOptions::new().with_prev_key())).await, rev));
    out.push(outcome("carol get /k/1", carol.get("/k/1", None).await, |r| format!("{}", r.count())));
    out.push(outcome("carol get /k/ prefix", carol.get("/k/", Some(GetOptions::new().with_prefix())).await, |r| format!("{}", r.count())));
    out.push(outcome("carol get everything", carol.get("", Some(GetOptions::new().with_all_keys())).await, none));
    out.push(outcome("carol put b", carol.put("b", "1", None).await, none));
    out.push(outcome("carol get a", carol.get("a", None).await, |r| format!("{}", r.count())));
    out.push(outcome("carol put a", carol.put("a", "1", None).await, none));
    out.push(outcome("carol get [a, /k0)", carol.get("a", Some(GetOptions::new().with_range("/k0"))).await, none));
    out.push(outcome("carol txn comparing b", carol.txn(Txn::new().when([Compare::value("b", CompareOp::Equal, "1")]).and_then([TxnOp::put("/k/1", "t", None)])).await, none));
    out.push(outcome("carol txn reading b", carol.txn(Txn::new().when([Compare::value("/k/1", CompareOp::Equal, "1")]).and_then([TxnOp::get("b", None)])).await, none));
    out.push(outcome(
        "carol txn in /k/",
        carol.txn(Txn::new().when([Compare::value("/k/1", CompareOp::Equal, "1")]).and_then([TxnOp::put("/k/3", "3", None)]).or_else([TxnOp::delete("/k/2", None)])).await,
        |r| r.succeeded().to_string(),
    ));
    out.push(outcome("carol delete /k/2 with prev", carol.delete("/k/2", Some(DeleteOptions::new().with_prev_key())).await, |r| format!("{}", r.deleted())));
    out.push(outcome("carol delete from /k/ on", carol.delete("/k/", Some(DeleteOptions::new().with_from_key())).await, none));
    out.push(outcome("carol compact", carol.compact(2, None).await.map(drop), none));
    out.push(outcome("carol user list", carol.auth_client().user_list().await, none));
    out.push(outcome("carol user get carol", carol.auth_client().user_get("carol").await, |r| format!("{:?}", r.roles())));
    out.push(outcome("carol user get root", carol.auth_client().user_get("root").await, none));
    out.push(outcome("carol role get rw", carol.auth_client().role_get("rw").await, |r| format!("{}", r.permissions().len())));
    out.push(outcome("carol role add", carol.auth_client().role_add("x").await, none));
    out.push(outcome("carol disable", carol.auth_client().auth_disable().await, none));

    let mut root = match as_user(ep, "root", "rootpw").await {
        Ok(c) => c,
        Err(e) => {
            out.push(outcome::<()>("root signs in", Err(e), none));
            return out;
        }
    };
    // A lease with a key carol may not write: carol may neither use nor
    // revoke it.
    let lease = root.lease_grant(60, None).await.map(|r| r.id()).unwrap_or(0);
    out.push(outcome("root put b on the lease", root.put("b", "1", Some(PutOptions::new().with_lease(lease))).await, none));
    out.push(outcome("carol put on root's lease", carol.put("/k/9", "1", Some(PutOptions::new().with_lease(lease))).await, none));
    out.push(outcome("carol revokes root's lease", carol.lease_revoke(lease).await.map(drop), none));
    let mut ra = root.auth_client();
    out.push(outcome("role get rw", ra.role_get("rw").await, |r| format!("{:?}", r.permissions().iter().map(|p| (bytes(p.key()), bytes(p.range_end()), p.get_type())).collect::<Vec<_>>())));
    out.push(outcome("role get root", ra.role_get("root").await, |r| format!("{}", r.permissions().len())));
    out.push(outcome("user list", ra.user_list().await, |r| format!("{:?}", r.users())));
    out.push(outcome("role list", ra.role_list().await, |r| format!("{:?}", r.roles())));
    out.push(outcome("delete root", ra.user_delete("root").await, none));
    out.push(outcome("delete root role", ra.role_delete("root").await, none));
    out.push(outcome("revoke root's root", ra.user_revoke_role("root", "root").await, none));
    out.push(outcome("revoke missing permission", ra.role_revoke_permission("rw", "zz", None).await, none));
    out.push(outcome("revoke ungranted role", ra.user_revoke_role("carol", "root").await, none));
    out.push(outcome("add existing role", ra.role_add("rw").await, none));
    out.push(outcome("revoke the key permission", ra.role_revoke_permission("rw", "a", None).await, none));
    out.push(outcome("carol get a after revoke", carol.get("a", None).await, none));
    out.push(outcome("revoke carol's role", ra.user_revoke_role("carol", "rw").await, none));
    out.push(outcome("carol get /k/1 without role", carol.get("/k/1", None).await, none));
    out.push(outcome("role delete rw", ra.role_delete("rw").await, none));
    out.push(outcome("role get rw deleted", ra.role_get("rw").await, none));
    out.push(outcome("change carol's password", ra.user_change_password("carol", "new").await, none));
    out.push(outcome("carol with the old password", as_user(ep, "carol", "cpw").await.map(drop), none));
    out.push(outcome("carol with the new password", as_user(ep, "carol", "new").await.map(drop), none));
    out.push(outcome("delete carol", ra.user_delete("carol").await, none));
    out.push(outcome("user get carol deleted", ra.user_get("carol").await, none));
    out.push(outcome("disable", ra.auth_disable().await, none));
    out.push(outcome("anonymous get after disable", anon.get("/k/1", None).await, |r| format!("{}", r.count())));
    out
}

#[test]
fn etcd_and_raftstore_agree_on_auth() {
    let runs: Vec<(Kind, Vec<String>)> = [Kind::Etcd, Kind::Raftstore]
        .into_iter()
        .map(|kind| {
            let s = Server::start(kind);
            let out = block_on(auth_script(s.endpoint()));
            (kind, out)
        })
        .collect();
    let (etcd, ours) = (&runs[0].1, &runs[1].1);
    for (i, (e, r)) in etcd.iter().zip(ours.iter()).enumerate() {
        assert_eq!(r, e, "auth step {i} differs (left raftstore, right etcd); etcd's script so far:\n{}", etcd[..=i].join("\n"));
    }
    assert_eq!(ours.len(), etcd.len(), "etcd:\n{}\nraftstore:\n{}", etcd.join("\n"), ours.join("\n"));
    // The script reached the end on both, and etcd refused what it should.
    assert!(etcd.iter().any(|l| l == "carol put b: PermissionDenied etcdserver: permission denied"), "{}", etcd.join("\n"));
    assert!(etcd.iter().any(|l| l.starts_with("disable: ok")), "{}", etcd.join("\n"));
}
