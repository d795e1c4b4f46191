//! The Raft log and vote on RocksDB (`raft_log`, `raft_state`).
//!
//! Votes, truncations and purges are written with `sync = true`. Appends are
//! written at once and fsynced by a group-commit thread: openraft is told an
//! entry is durable only after that fsync returns (etcd does the same with
//! its WAL). Entries are postcard-encoded openraft entries keyed by big-endian
//! index.

use std::fmt::Debug;
use std::io;
use std::ops::{Bound, RangeBounds};

use openraft::storage::{IOFlushed, LogState, RaftLogReader, RaftLogStorage};
use openraft::OptionalSend;
use rocksdb::{Direction, IteratorMode, WriteBatch};

use super::{decode, encode, Entry, LogId, TypeConfig, Vote};
use crate::storage::keys::{self, MetaKey};
use crate::storage::Db;

/// The log store. Cheap to clone; clones share the database and the
/// flusher.
#[derive(Clone)]
pub struct LogStore {
    db: Db,
    flusher: std::sync::mpsc::Sender<IOFlushed<TypeConfig>>,
    /// Held while a WAL sync is in progress (by the flusher thread or
    /// inline in `append`).
    syncing: std::sync::Arc<parking_lot::Mutex<()>>,
    /// Whether `append` may sync on the caller's thread when no sync is in
    /// flight. See [`LogStore::inline_sync_switch`].
    inline_sync: std::sync::Arc<std::sync::atomic::AtomicBool>,
    /// The most recently appended entries, so that replication to each
    /// follower reads them from memory instead of a RocksDB iterator and a
    /// decode per follower.
    recent: std::sync::Arc<parking_lot::Mutex<RecentEntries>>,
}

/// Most entries kept in [`RecentEntries`].
const RECENT_MAX_ENTRIES: usize = 4096;
/// Most encoded bytes kept in [`RecentEntries`].
const RECENT_MAX_BYTES: usize = 8 << 20;

/// A window of consecutive log entries ending at the last appended one,
/// bounded by [`RECENT_MAX_ENTRIES`] and [`RECENT_MAX_BYTES`]. Appends
/// extend it; truncation and purge cut it like the log itself.
#[derive(Default)]
struct RecentEntries {
    /// Entries with their encoded size in bytes, by ascending index without
    /// gaps.
    entries: std::collections::VecDeque<(Entry, usize)>,
    bytes: usize,
}

impl RecentEntries {
    fn push(&mut self, e: Entry, size: usize) {
        let follows = self.entries.back().is_none_or(|(b, _)| b.log_id.index() + 1 == e.log_id.index());
        if !follows {
            self.clear();
        }
        self.bytes += size;
        self.entries.push_back((e, size));
        while self.entries.len() > RECENT_MAX_ENTRIES || (self.bytes > RECENT_MAX_BYTES && self.entries.len() > 1) {
            if let Some((_, n)) = self.entries.pop_front() {
                self.bytes -= n;
            }
        }
    }

    fn clear(&mut self) {
        self.entries.clear();
        self.bytes = 0;
    }

    /// Drops entries with an index above `last` (`None`: all).
    fn truncate_after(&mut self, last: Option<u64>) {
        while self.entries.back().is_some_and(|(b, _)| last.is_none_or(|l| b.log_id.index() > l)) {
            if let Some((_, n)) = self.entries.pop_back() {
                self.bytes -= n;
            }
        }
    }

    /// Drops entries with an index up to `upto`.
    fn purge(&mut self, upto: u64) {
        while self.entries.front().is_some_and(|(f, _)| f.log_id.index() <= upto) {
            if let Some((_, n)) = self.entries.pop_front() {
                self.bytes -= n;
            }
        }
    }

    /// Copies of the entries in `[start, end)` if the window holds all of
    /// them.
    fn get(&self, start: u64, end: u64) -> Option<Vec<Entry>> {
        let first = self.entries.front()?.0.log_id.index();
        let last = self.entries.back()?.0.log_id.index();
        if start < first || end > last + 1 || start >= end {
            return None;
        }
        let from = (start - first) as usize;
        Some(self.entries.range(from..from + (end - start) as usize).map(|(e, _)| e.clone()).collect())
    }
}

/// Group commit: appends are written to RocksDB at once (so they are
/// readable, as openraft requires) without waiting for the disk; this thread
/// then syncs the write-ahead log once for every append queued meanwhile and
/// reports them all durable. One fsync covers many appends under load.
fn spawn_flusher(db: Db, syncing: std::sync::Arc<parking_lot::Mutex<()>>) -> std::sync::mpsc::Sender<IOFlushed<TypeConfig>> {
    let (tx, rx) = std::sync::mpsc::channel::<IOFlushed<TypeConfig>>();
    let spawned = std::thread::Builder::new().name("raft-log-fsync".into()).spawn(move || {
        while let Ok(first) = rx.recv() {
            let mut waiting = vec![first];
            while let Ok(more) = rx.try_recv() {
                waiting.push(more);
            }
            let guard = syncing.lock();
            let res = crate::storage::sync_wal(&db).map_err(io_err);
            drop(guard);
            for cb in waiting {
                cb.io_completed(match &res {
                    Ok(()) => Ok(()),
                    Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                });
            }
        }
    });
    if let Err(e) = spawned {
        tracing::error!("cannot start the log flusher thread: {e}");
    }
    tx
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl LogStore {
    /// A log store on `db`.
    pub fn new(db: Db) -> Self {
        let syncing = std::sync::Arc::new(parking_lot::Mutex::new(()));
        let flusher = spawn_flusher(db.clone(), syncing.clone());
        let inline_sync = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        LogStore { db, flusher, syncing, inline_sync, recent: Default::default() }
    }

    /// The switch that lets `append` fsync inline, on the Raft core's
    /// thread, instead of handing the sync to the flusher thread (on by
    /// default). Inline saves two thread hand-offs per write when this
    /// member alone makes a quorum. With other voters it must be off: on a
    /// leader, openraft sends entries to followers only after `append`
    /// returns, so an inline sync would put the leader's fsync and the
    /// followers' fsyncs in series instead of in parallel (etcd's leader
    /// also sends before it syncs); on a follower fed by a pipelined
    /// replication stream, an inline sync would stall the Raft thread once
    /// per AppendEntries, while the flusher covers every append that arrived
    /// during one sync with a single fsync.
    pub fn inline_sync_switch(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        self.inline_sync.clone()
    }

    fn cf_log(&self) -> io::Result<&rocksdb::ColumnFamily> {
        self.db.cf_handle(keys::CF_RAFT_LOG).ok_or_else(|| io_err("missing raft_log column family"))
    }

    fn cf_state(&self) -> io::Result<&rocksdb::ColumnFamily> {
        self.db.cf_handle(keys::CF_RAFT_STATE).ok_or_else(|| io_err("missing raft_state column family"))
    }

    fn get_state<T: for<'de> serde::Deserialize<'de>>(&self, key: &[u8]) -> io::Result<Option<T>> {
        match self.db.get_cf(self.cf_state()?, key).map_err(io_err)? {
            Some(b) => Ok(Some(decode(&b)?)),
            None => Ok(None),
        }
    }

    fn put_state_sync<T: serde::Serialize>(&self, key: &[u8], v: &T) -> io::Result<()> {
        let mut batch = WriteBatch::default();
        batch.put_cf(self.cf_state()?, key, encode(v)?);
        crate::storage::write_durable(&self.db, batch).map_err(io_err)
    }

    fn last_entry_log_id(&self) -> io::Result<Option<LogId>> {
        let mut it = self.db.iterator_cf(self.cf_log()?, IteratorMode::End);
        match it.next() {
            Some(item) => {
                let (_, v) = item.map_err(io_err)?;
                let e: Entry = decode(&v)?;
                Ok(Some(e.log_id))
            }
            None => Ok(None),
        }
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + OptionalSend>(&mut self, range: RB) -> Result<Vec<Entry>, io::Error> {
        let start = match range.start_bound() {
            Bound::Included(x) => *x,
            Bound::Excluded(x) => x.saturating_add(1),
            Bound::Unbounded => 0,
        };
        let end = match range.end_bound() {
            Bound::Included(x) => x.saturating_add(1),
            Bound::Excluded(x) => *x,
            Bound::Unbounded => u64::MAX,
        };
        if let Some(hit) = self.recent.lock().get(start, end) {
            return Ok(hit);
        }
        let cf = self.cf_log()?;
        let mut out = Vec::new();
        let from = keys::log_key(start);
        for item in self.db.iterator_cf(cf, IteratorMode::From(&from, Direction::Forward)) {
            let (k, v) = item.map_err(io_err)?;
            let idx = keys::decode_u64(&k).map_err(io_err)?;
            if !range.contains(&idx) {
                break;
            }
            out.push(decode(&v)?);
        }
        Ok(out)
    }

    async fn read_vote(&mut self) -> Result<Option<Vote>, io::Error> {
        self.get_state(keys::Vote::KEY)
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = Self;

    async fn get_log_state(&mut self) -> Result<LogState<TypeConfig>, io::Error> {
        let last_purged: Option<LogId> = self.get_state(keys::LastPurged::KEY)?;
        let last = self.last_entry_log_id()?.or(last_purged);
        Ok(LogState { last_purged_log_id: last_purged, last_log_id: last })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote) -> Result<(), io::Error> {
        self.put_state_sync(keys::Vote::KEY, vote)
    }

    async fn save_committed(&mut self, committed: Option<LogId>) -> Result<(), io::Error> {
        // Not synced: losing it only means re-deriving it from a quorum.
        let cf = self.cf_state()?;
        self.db.put_cf(cf, keys::Committed::KEY, encode(&committed)?).map_err(io_err)
    }

    async fn read_committed(&mut self) -> Result<Option<LogId>, io::Error> {
        Ok(self.get_state::<Option<LogId>>(keys::Committed::KEY)?.flatten())
    }

    async fn append<I>(&mut self, entries: I, callback: IOFlushed<TypeConfig>) -> Result<(), io::Error>
    where
        I: IntoIterator<Item = Entry> + OptionalSend,
        I::IntoIter: OptionalSend,
    {
        let cf = self.cf_log()?;
        let mut batch = WriteBatch::default();
        let mut appended = Vec::new();
        for e in entries {
            let bytes = encode(&e)?;
            batch.put_cf(cf, keys::log_key(e.log_id.index()), &bytes);
            appended.push((e, bytes.len()));
        }
        // Readable now; durable once the WAL is synced.
        self.db.write(batch).map_err(io_err)?;
        {
            let mut recent = self.recent.lock();
            for (e, n) in appended {
                recent.push(e, n);
            }
        }
        // Nobody syncing: sync here and now, which saves the hand-off to the
        // flusher thread and back when there is one writer. Under load a
        // sync is usually in progress, and the flusher batches the rest.
        let inline = self.inline_sync.load(std::sync::atomic::Ordering::Relaxed);
        if let Some(guard) = inline.then(|| self.syncing.try_lock()).flatten() {
            let res = crate::storage::sync_wal(&self.db).map_err(io_err);
            drop(guard);
            return match res {
                Ok(()) => {
                    callback.io_completed(Ok(()));
                    Ok(())
                }
                Err(e) => {
                    callback.io_completed(Err(io::Error::new(e.kind(), e.to_string())));
                    Err(e)
                }
            };
        }
        if let Err(std::sync::mpsc::SendError(cb)) = self.flusher.send(callback) {
            let e = io_err("log flusher stopped");
            cb.io_completed(Err(io::Error::new(e.kind(), e.to_string())));
            return Err(e);
        }
        Ok(())
    }

    async fn truncate_after(&mut self, last_log_id: Option<LogId>) -> Result<(), io::Error> {
        let from = last_log_id.map(|l| l.index() + 1).unwrap_or(0);
        self.recent.lock().truncate_after(last_log_id.map(|l| l.index()));
        let cf = self.cf_log()?;
        let mut batch = WriteBatch::default();
        batch.delete_range_cf(cf, keys::log_key(from), keys::log_key(u64::MAX));
        crate::storage::write_durable(&self.db, batch).map_err(io_err)
    }

    async fn purge(&mut self, log_id: LogId) -> Result<(), io::Error> {
        self.recent.lock().purge(log_id.index());
        let cf = self.cf_log()?;
        let state = self.cf_state()?;
        let mut batch = WriteBatch::default();
        batch.put_cf(state, keys::LastPurged::KEY, encode(&log_id)?);
        batch.delete_range_cf(cf, keys::log_key(0), keys::log_key(log_id.index() + 1));
        crate::storage::write_durable(&self.db, batch).map_err(io_err)
    }
}

#[cfg(test)]
mod tests {
    use openraft::entry::RaftEntry as _;
    use openraft::vote::RaftLeaderIdExt as _;

    use super::*;

    fn entry(index: u64) -> Entry {
        let leader = openraft::type_config::alias::LeaderIdOf::<TypeConfig>::new_committed(1, 1);
        Entry::new_blank(openraft::LogId::new(leader, index))
    }

    fn indexes(v: Option<Vec<Entry>>) -> Option<Vec<u64>> {
        v.map(|es| es.iter().map(|e| e.log_id.index()).collect())
    }

    /// The window answers only ranges it holds completely, and follows
    /// truncation and purge like the log.
    #[test]
    fn recent_entries_window() {
        let mut r = RecentEntries::default();
        for i in 5..10 {
            r.push(entry(i), 10);
        }
        assert_eq!(indexes(r.get(5, 10)), Some(vec![5, 6, 7, 8, 9]));
        assert_eq!(indexes(r.get(7, 9)), Some(vec![7, 8]));
        assert_eq!(r.get(4, 8), None, "starts before the window");
        assert_eq!(r.get(8, 11), None, "ends past the last entry");
        assert_eq!(r.get(8, 8), None, "empty range");

        r.truncate_after(Some(7));
        assert_eq!(r.get(5, 9), None);
        assert_eq!(indexes(r.get(5, 8)), Some(vec![5, 6, 7]));
        r.push(entry(8), 10);
        assert_eq!(indexes(r.get(7, 9)), Some(vec![7, 8]));

        r.purge(6);
        assert_eq!(r.get(6, 8), None);
        assert_eq!(indexes(r.get(7, 9)), Some(vec![7, 8]));
        assert_eq!(r.bytes, 20);

        // A gap (e.g. after a snapshot install) restarts the window.
        r.push(entry(20), 10);
        assert_eq!(r.get(7, 9), None);
        assert_eq!(indexes(r.get(20, 21)), Some(vec![20]));

        r.truncate_after(None);
        assert_eq!(r.get(20, 21), None);
        assert_eq!(r.bytes, 0);
    }

    /// The window keeps at most its byte budget (but always the last entry).
    #[test]
    fn recent_entries_byte_cap() {
        let mut r = RecentEntries::default();
        r.push(entry(1), RECENT_MAX_BYTES / 2);
        r.push(entry(2), RECENT_MAX_BYTES / 2);
        assert_eq!(indexes(r.get(1, 3)), Some(vec![1, 2]));
        r.push(entry(3), 1);
        assert_eq!(r.get(1, 4), None);
        assert_eq!(indexes(r.get(2, 4)), Some(vec![2, 3]));
        r.push(entry(4), RECENT_MAX_BYTES * 2);
        assert_eq!(indexes(r.get(4, 5)), Some(vec![4]));
        assert_eq!(r.entries.len(), 1);
    }
}
