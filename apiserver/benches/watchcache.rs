//! Criterion benches of the watch cache ring: publishing one event, and one
//! event's fan-out to 1, 100 and 1000 readers (each reader loads the shared
//! entry; the event's bytes are never copied).
//!
//! `cargo bench --profile dev -p apiserver --bench watchcache`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};

use apiserver::watchcache::ring::{Read, Ring};

/// A pod-sized encoded event.
fn event() -> Bytes {
    Bytes::from(vec![b'x'; 2048])
}

fn publish(c: &mut Criterion) {
    let ring = Ring::new(8192);
    let ev = event();
    let mut g = c.benchmark_group("ring");
    g.throughput(Throughput::Elements(1));
    g.bench_function("publish", |b| b.iter(|| ring.push(ev.clone())));
    g.finish();
}

fn fan_out(c: &mut Criterion) {
    let mut g = c.benchmark_group("ring_fan_out");
    for readers in [1usize, 100, 1000] {
        let ring = Ring::new(8192);
        let ev = event();
        let mut positions = vec![0u64; readers];
        g.throughput(Throughput::Elements(readers as u64));
        g.bench_with_input(BenchmarkId::from_parameter(readers), &readers, |b, _| {
            b.iter(|| {
                ring.push(ev.clone());
                let mut bytes = 0usize;
                for p in positions.iter_mut() {
                    match ring.read(*p) {
                        Read::Ready(e) => {
                            bytes += e.value.len();
                            *p += 1;
                        }
                        other => panic!("reader lost its place: {other:?}"),
                    }
                }
                bytes
            })
        });
    }
    g.finish();
}

criterion_group!(benches, publish, fan_out);
criterion_main!(benches);
