//! The store's compaction thread: it deletes the revisions a compaction
//! dropped from the key index from the `kv` column family, in paced
//! batches, off the apply path (step 2 in [`super::compaction`]).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Condvar, Mutex};
use rocksdb::{Direction, IteratorMode, ReadOptions, WriteBatch, DB};
use tokio::sync::watch;

use super::revision::Revision;
use crate::error::{Error, Result};
use crate::storage::keys::{self, MetaKey};
use crate::storage::{cf, Db};

/// How the compaction thread deletes history from disk (etcd's
/// `--experimental-compaction-batch-limit` and
/// `--experimental-compaction-sleep-interval`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompactionPacing {
    /// Most `kv` keys scanned, and so deleted, per write batch.
    pub batch_limit: usize,
    /// Pause between two batches.
    pub sleep: Duration,
}

impl Default for CompactionPacing {
    /// etcd's defaults: 1000 keys per batch, 10 ms between batches.
    fn default() -> Self {
        CompactionPacing { batch_limit: 1000, sleep: Duration::from_millis(10) }
    }
}

/// One deletion for the compaction thread: every `kv` entry at or below
/// main revision `at` whose revision is not in `keep`.
#[derive(Debug)]
pub(super) struct Job {
    pub(super) at: i64,
    pub(super) keep: BTreeSet<Revision>,
}

#[derive(Debug, Default)]
struct Queue {
    /// The newest job not yet started.
    next: Option<Job>,
    stop: bool,
}

struct Shared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// The compact revision whose deletions are all written.
    finished: watch::Sender<i64>,
}

/// The store's compaction thread; dropping it stops the thread and waits
/// for it (at most the batch being written).
pub(super) struct Compactor {
    shared: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Compactor {
    /// Starts the thread over `db`; `finished` is what
    /// [`keys::FinishedCompactRevision`] holds.
    ///
    /// # Errors
    /// [`Error::Internal`] if the thread cannot be started.
    pub(super) fn start(db: Db, pacing: CompactionPacing, finished: i64) -> Result<Self> {
        let shared = Arc::new(Shared { queue: Mutex::new(Queue::default()), wake: Condvar::new(), finished: watch::Sender::new(finished) });
        let worker = shared.clone();
        let thread = std::thread::Builder::new().name("mvcc-compact".into()).spawn(move || run(&db, &worker, pacing)).map_err(Error::internal)?;
        Ok(Compactor { shared, thread: Some(thread) })
    }

    /// Queues `job`. It replaces a job not yet started, and one in progress
    /// stops after its current batch.
    pub(super) fn schedule(&self, job: Job) {
        self.shared.queue.lock().next = Some(job);
        self.shared.wake.notify_one();
    }

    /// After the store was rebuilt from disk (a snapshot install): the
    /// finished revision is what the new data says, and `job` (if any)
    /// resumes its deletion.
    pub(super) fn restart(&self, finished: i64, job: Option<Job>) {
        self.shared.finished.send_replace(finished);
        if let Some(job) = job {
            self.schedule(job);
        }
    }

    /// Follows the finished compact revision.
    pub(super) fn finished(&self) -> watch::Receiver<i64> {
        self.shared.finished.subscribe()
    }
}

impl Drop for Compactor {
    fn drop(&mut self) {
        self.shared.queue.lock().stop = true;
        self.shared.wake.notify_one();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Why [`delete_compacted`] returned.
enum Ended {
    /// Every revision of the job is gone and the finished revision written.
    Done,
    /// A newer job or a stop arrived.
    Interrupted,
}

fn run(db: &DB, shared: &Shared, pacing: CompactionPacing) {
    loop {
        let job = {
            let mut q = shared.queue.lock();
            loop {
                if q.stop {
                    return;
                }
                if let Some(job) = q.next.take() {
                    break job;
                }
                shared.wake.wait(&mut q);
            }
        };
        match delete_compacted(db, shared, &job, pacing) {
            Ok(Ended::Done) => {
                shared.finished.send_modify(|f| *f = (*f).max(job.at));
                tracing::info!(revision = job.at, "finished compaction");
            }
            Ok(Ended::Interrupted) => {}
            Err(e) => {
                // Reads do not depend on it; try again later unless a newer
                // job came meanwhile.
                tracing::warn!(revision = job.at, "compaction failed, retrying in 1 s: {e}");
                let mut q = shared.queue.lock();
                if !q.stop && q.next.is_none() {
                    shared.wake.wait_for(&mut q, Duration::from_secs(1));
                    if q.next.is_none() {
                        q.next = Some(job);
                    }
                }
            }
        }
    }
}

/// Deletes the revisions of `job` in batches, pausing between batches, and
/// writes the finished revision with the last one.
fn delete_compacted(db: &DB, shared: &Shared, job: &Job, pacing: CompactionPacing) -> Result<Ended> {
    let kv = cf(db, keys::CF_KV)?;
    let meta = cf(db, keys::CF_META)?;
    let limit = pacing.batch_limit.max(1);
    let end = keys::kv_seek(job.at + 1);
    let mut from: Vec<u8> = Vec::new();
    loop {
        let mut batch = WriteBatch::default();
        let mut scanned = 0;
        let mut ro = ReadOptions::default();
        ro.set_iterate_upper_bound(end.to_vec());
        // A fresh iterator per batch: one kept open across the pauses would
        // pin memtables and files that RocksDB could otherwise drop.
        for item in db.iterator_cf_opt(kv, ro, IteratorMode::From(&from, Direction::Forward)) {
            let (k, _) = item?;
            let (rev, _) = keys::decode_kv_key(&k)?;
            if !job.keep.contains(&rev) {
                batch.delete_cf(kv, &k);
            }
            scanned += 1;
            if scanned == limit {
                // The smallest key after this one (keys have a fixed length).
                from = k.to_vec();
                from.push(0);
                break;
            }
        }
        let done = scanned < limit;
        if done {
            batch.put_cf(meta, keys::FinishedCompactRevision::KEY, keys::i64_bytes(job.at));
        }
        db.write(batch)?;
        if done {
            return Ok(Ended::Done);
        }
        let mut q = shared.queue.lock();
        if !q.stop && q.next.is_none() {
            shared.wake.wait_for(&mut q, pacing.sleep);
        }
        if q.stop || q.next.is_some() {
            return Ok(Ended::Interrupted);
        }
    }
}
