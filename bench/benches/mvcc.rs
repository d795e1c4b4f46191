//! criterion benches of the MVCC store's hot paths, on a real RocksDB in a
//! temp dir, below Raft and gRPC: put, range (single key and a 1000-key
//! prefix), and kube-apiserver's optimistic-update txn.
//!
//! Run: `cargo bench -p bench --bench mvcc`.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use proto::etcdserverpb::{compare_result, compare_target, Compare, PutRequest, RangeRequest, RequestOp, RequestOpRequest, TargetUnion, TxnRequest};
use raftstore::command::{Command, CommandResponse};
use raftstore::mvcc::MvccStore;

fn open() -> (tempfile::TempDir, MvccStore) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let db = raftstore::storage::open(dir.path()).unwrap_or_else(|e| panic!("open: {e}"));
    let store = MvccStore::open(db, 2).unwrap_or_else(|e| panic!("store: {e}"));
    (dir, store)
}

fn put(store: &MvccStore, key: Vec<u8>, value: Vec<u8>) -> CommandResponse {
    let cmd = Command::Put(PutRequest { key, value, ..Default::default() });
    store.apply(&cmd, |_| Ok(())).unwrap_or_else(|e| panic!("apply: {e}")).0
}

fn bench_put(c: &mut Criterion) {
    let (_dir, store) = open();
    let value = vec![b'v'; 256];
    let mut i = 0u64;
    let mut g = c.benchmark_group("mvcc_put");
    g.throughput(Throughput::Elements(1));
    g.bench_function("put_256B_10k_keys", |b| {
        b.iter(|| {
            i += 1;
            put(&store, format!("/registry/pods/default/p{}", i % 10_000).into_bytes(), value.clone())
        })
    });
    g.finish();
}

fn bench_range(c: &mut Criterion) {
    let (_dir, store) = open();
    for i in 0..1000 {
        put(&store, format!("/registry/pods/default/p{i:04}").into_bytes(), vec![b'v'; 1024]);
    }
    let mut g = c.benchmark_group("mvcc_range");
    g.bench_function("get_one_key", |b| {
        let req = RangeRequest { key: b"/registry/pods/default/p0500".to_vec(), ..Default::default() };
        b.iter(|| store.range(&req).unwrap_or_else(|e| panic!("{e}")))
    });
    g.throughput(Throughput::Elements(1000));
    g.bench_function("list_1000_keys_1KiB", |b| {
        let req = RangeRequest { key: b"/registry/pods/".to_vec(), range_end: b"/registry/pods0".to_vec(), ..Default::default() };
        b.iter(|| store.range(&req).unwrap_or_else(|e| panic!("{e}")))
    });
    g.bench_function("count_only_1000_keys", |b| {
        let req = RangeRequest { key: b"/registry/pods/".to_vec(), range_end: b"/registry/pods0".to_vec(), count_only: true, ..Default::default() };
        b.iter(|| store.range(&req).unwrap_or_else(|e| panic!("{e}")))
    });
    g.finish();
}

fn bench_txn(c: &mut Criterion) {
    let (_dir, store) = open();
    let key = b"/registry/configmaps/default/cm".to_vec();
    put(&store, key.clone(), b"v0".to_vec());
    let mut g = c.benchmark_group("mvcc_txn");
    g.throughput(Throughput::Elements(1));
    g.bench_function("optimistic_update", |b| {
        b.iter_batched(
            || {
                let cur = store.range(&RangeRequest { key: key.clone(), ..Default::default() }).unwrap_or_else(|e| panic!("{e}"));
                cur.kvs.first().map(|kv| kv.mod_revision).unwrap_or(0)
            },
            |rev| {
                let txn = TxnRequest {
                    compare: vec![Compare { result: compare_result::EQUAL, target: compare_target::MOD, key: key.clone(), range_end: vec![], target_union: Some(TargetUnion::ModRevision(rev)) }],
                    success: vec![RequestOp { request: Some(RequestOpRequest::RequestPut(PutRequest { key: key.clone(), value: vec![b'x'; 512], ..Default::default() })) }],
                    failure: vec![RequestOp { request: Some(RequestOpRequest::RequestRange(RangeRequest { key: key.clone(), ..Default::default() })) }],
                };
                let resp = store.apply(&Command::Txn(txn), |_| Ok(())).unwrap_or_else(|e| panic!("{e}")).0;
                assert!(matches!(resp, CommandResponse::Txn(ref t) if t.succeeded), "CAS must succeed single-threaded");
                resp
            },
            BatchSize::PerIteration,
        )
    });
    g.finish();
}

criterion_group!(benches, bench_put, bench_range, bench_txn);
criterion_main!(benches);
