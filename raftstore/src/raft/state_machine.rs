//! The Raft state machine: applies committed commands to the MVCC store,
//! publishes their events, and builds and installs snapshots.
//!
//! A snapshot is a RocksDB checkpoint (hard links to immutable SST files,
//! taken between two applies so it matches the applied log id). It is
//! streamed file by file; it is never one in-memory blob.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures::{Stream, StreamExt};
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::{EntryPayload, OptionalSend};
use parking_lot::Mutex;
use rocksdb::{IteratorMode, WriteBatch, DB};

use super::{decode, encode, LogId, Snapshot, SnapshotMeta, StoredMembership, TypeConfig};
use crate::auth::{AuthInfo, AuthStore};
use crate::command::{Command, CommandResponse};
use crate::error::Error;
use crate::mvcc::{SharedStore, WatchHub};
use crate::storage::keys::{self, MetaKey};
use crate::storage::Db;

/// A snapshot's data: a directory holding a RocksDB checkpoint.
///
/// A directory this member built or installed is shared: every clone (the
/// current snapshot, each stream sending it to a follower) holds it, and
/// once a newer snapshot has replaced it, the directory is removed when the
/// last clone is dropped, so a stream still reading it never loses files.
/// A directory received from a leader ([`SnapshotDir::unmanaged`]) is left
/// alone.
#[derive(Debug, Clone)]
pub struct SnapshotDir {
    path: PathBuf,
    /// Never read: held for its `Drop`.
    _hold: Option<Arc<DirHold>>,
}

impl SnapshotDir {
    /// A snapshot directory nobody shares (a snapshot being received).
    pub fn unmanaged(path: PathBuf) -> Self {
        SnapshotDir { path, _hold: None }
    }

    /// The checkpoint directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl PartialEq for SnapshotDir {
    fn eq(&self, other: &Self) -> bool {
        self.path == other.path
    }
}

impl Eq for SnapshotDir {}

/// Shared ownership of a snapshot directory; see [`SnapshotDir`].
#[derive(Debug)]
struct DirHold {
    path: PathBuf,
    /// Set once a newer snapshot replaced this one.
    obsolete: std::sync::atomic::AtomicBool,
}

impl Drop for DirHold {
    fn drop(&mut self) {
        if self.obsolete.load(std::sync::atomic::Ordering::Acquire) {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// The snapshot directories under one root that are still held (by the
/// current snapshot or a stream), so that pruning spares them.
#[derive(Debug, Default)]
struct SnapshotDirs {
    held: Mutex<Vec<std::sync::Weak<DirHold>>>,
}

impl SnapshotDirs {
    /// Shares `path` as a snapshot directory.
    fn hold(&self, path: PathBuf) -> SnapshotDir {
        let hold = Arc::new(DirHold { path: path.clone(), obsolete: std::sync::atomic::AtomicBool::new(false) });
        let mut held = self.held.lock();
        held.retain(|w| w.strong_count() > 0);
        held.push(Arc::downgrade(&hold));
        SnapshotDir { path, _hold: Some(hold) }
    }

    /// Removes every snapshot under `root` but `keep`. A directory still
    /// held is only marked obsolete: it goes when its last holder (a stream
    /// to a follower) is done. `recv-*` directories are snapshots the peer
    /// transport is still receiving (network.rs); deleting one mid-stream
    /// left a checkpoint whose MANIFEST named removed files, and installing
    /// it stopped RaftCore for good (found by the chaos harness). They go
    /// only once untouched for an hour: leftovers of a crash.
    fn prune(&self, root: &Path, keep: &Path) {
        let held: Vec<Arc<DirHold>> = self.held.lock().iter().filter_map(|w| w.upgrade()).collect();
        if let Ok(rd) = std::fs::read_dir(root) {
            for entry in rd.flatten() {
                let p = entry.path();
                if let Some(h) = held.iter().find(|h| h.path == p) {
                    // `keep` may have been marked by an earlier prune (a
                    // snapshot installed while this one was being built).
                    h.obsolete.store(p != keep, std::sync::atomic::Ordering::Release);
                    continue;
                }
                if p == keep {
                    continue;
                }
                // Still being received, or still being checkpointed (its
                // metadata file is written last).
                let receiving = (entry.file_name().to_string_lossy().starts_with("recv-") || !p.join(META_FILE).exists())
                    && entry.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_none_or(|age| age < std::time::Duration::from_secs(3600));
                if !receiving {
                    let _ = std::fs::remove_dir_all(&p);
                }
            }
        }
        // Dropping the last reference of an obsolete directory removes it.
        drop(held);
    }
}

fn io_err(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

/// The state machine.
pub struct StateMachine {
    store: SharedStore,
    hub: Arc<WatchHub>,
    db: Db,
    snapshot_root: PathBuf,
    applied: Option<LogId>,
    membership: StoredMembership,
    current: Arc<Mutex<Option<(SnapshotMeta, SnapshotDir)>>>,
    dirs: Arc<SnapshotDirs>,
    /// Users, roles and permissions; without it auth commands are refused.
    auth: Option<Arc<AuthStore>>,
}

/// What the auth step of applying an entry left to do.
enum AuthStep {
    /// Answered: an auth change was applied, or the caller was refused.
    Done(CommandResponse),
    /// Apply this command to the MVCC store.
    Apply(Command),
}

/// Builds a snapshot from a checkpoint taken when the builder was made.
pub struct SnapshotBuilder {
    /// The database and the directory to checkpoint it into.
    source: Option<(Arc<DB>, PathBuf)>,
    current: Arc<Mutex<Option<(SnapshotMeta, SnapshotDir)>>>,
    dirs: Arc<SnapshotDirs>,
    root: PathBuf,
}

impl StateMachine {
    /// Loads the applied log id and membership from the `meta` column family.
    ///
    /// # Errors
    /// I/O error on unreadable or corrupt metadata.
    pub fn open(store: SharedStore, hub: Arc<WatchHub>, snapshot_root: PathBuf) -> io::Result<Self> {
        let db = store.db().clone();
        let (applied, membership) = applied_state(&db)?;
        std::fs::create_dir_all(&snapshot_root)?;
        // Pick up the newest complete snapshot left by a previous run.
        let dirs = Arc::new(SnapshotDirs::default());
        let current = find_snapshot(&snapshot_root)?.map(|(meta, path)| (meta, dirs.hold(path)));
        Ok(StateMachine { store, hub, db, snapshot_root, applied, membership, current: Arc::new(Mutex::new(current)), dirs, auth: None })
    }

    /// Applies auth commands to `auth` and checks the writes of
    /// authenticated clients against it (see [`crate::auth`]).
    pub fn with_auth(mut self, auth: Arc<AuthStore>) -> Self {
        self.auth = Some(auth);
        self
    }

    /// The auth part of applying a command: an auth change is applied
    /// here; a client's write is checked against the auth state and
    /// unwrapped, or refused (etcd's `authApplierV3`). A refusal still
    /// records the applied log id.
    fn auth_step(&self, cmd: Command, log_id: &LogId) -> io::Result<AuthStep> {
        let (info, cmd) = match cmd {
            Command::Authed(h, inner) => (Some(AuthInfo { username: h.username, revision: h.auth_revision }), *inner),
            Command::Auth(a) => (None, Command::Auth(a)),
            other => return Ok(AuthStep::Apply(other)),
        };
        let Some(auth) = &self.auth else {
            return Ok(match cmd {
                Command::Auth(_) => {
                    let mut batch = WriteBatch::default();
                    self.apply_meta(&mut batch, log_id, None)?;
                    self.db.write(batch).map_err(io_err)?;
                    AuthStep::Done(CommandResponse::Error(Error::Unimplemented("auth")))
                }
                other => AuthStep::Apply(other),
            });
        };
        if let Some(info) = &info {
            let store = &self.store;
            let lease_keys = |id: i64| store.lease(id).map(|l| l.keys.into_iter().collect()).unwrap_or_default();
            if let Err(e) = auth.check_command(info, &cmd, &lease_keys) {
                let mut batch = WriteBatch::default();
                self.apply_meta(&mut batch, log_id, None)?;
                self.db.write(batch).map_err(io_err)?;
                return Ok(AuthStep::Done(CommandResponse::Error(e)));
            }
        }
        match cmd {
            Command::Auth(a) => {
                let resp = auth.apply(&a, log_id.index(), |batch| self.apply_meta(batch, log_id, None).map_err(Error::internal)).map_err(io_err)?;
                Ok(AuthStep::Done(resp))
            }
            other => Ok(AuthStep::Apply(other)),
        }
    }

    fn apply_meta(&self, batch: &mut WriteBatch, applied: &LogId, membership: Option<&StoredMembership>) -> io::Result<()> {
        let meta = self.db.cf_handle(keys::CF_META).ok_or_else(|| io_err("missing meta column family"))?;
        batch.put_cf(meta, keys::AppliedLogId::KEY, encode(&Some(*applied))?);
        if let Some(m) = membership {
            batch.put_cf(meta, keys::LastMembership::KEY, encode(m)?);
        }
        Ok(())
    }
}

const META_FILE: &str = "raftstore-snapshot-meta";

/// Finds the newest complete snapshot directory under `root`.
fn find_snapshot(root: &Path) -> io::Result<Option<(SnapshotMeta, PathBuf)>> {
    let mut best: Option<(SnapshotMeta, PathBuf)> = None;
    for entry in std::fs::read_dir(root)? {
        let path = entry?.path();
        let meta_path = path.join(META_FILE);
        let Ok(bytes) = std::fs::read(&meta_path) else { continue };
        let Ok(meta) = serde_json::from_slice::<SnapshotMeta>(&bytes) else { continue };
        if best.as_ref().is_none_or(|(b, _)| b.last_log_id < meta.last_log_id) {
            best = Some((meta, path));
        }
    }
    Ok(best)
}

/// The applied log id and membership recorded in `db`'s `meta` column
/// family (written in the same batch as each applied entry).
///
/// # Errors
/// I/O error on unreadable or corrupt metadata.
fn applied_state(db: &DB) -> io::Result<(Option<LogId>, StoredMembership)> {
    let meta = db.cf_handle(keys::CF_META).ok_or_else(|| io_err("missing meta column family"))?;
    let applied: Option<LogId> = match db.get_cf(meta, keys::AppliedLogId::KEY).map_err(io_err)? {
        Some(b) => decode(&b)?,
        None => None,
    };
    let membership: StoredMembership = match db.get_cf(meta, keys::LastMembership::KEY).map_err(io_err)? {
        Some(b) => decode(&b)?,
        None => StoredMembership::default(),
    };
    Ok((applied, membership))
}

/// Checkpoints `db` into `dir` and writes the snapshot metadata, taken from
/// the checkpoint itself: entries applied while the checkpoint was being
/// made are in it, and its metadata says so.
///
/// # Errors
/// I/O error if the checkpoint cannot be made or read back.
fn checkpoint_with_meta(db: &DB, dir: &Path) -> io::Result<SnapshotMeta> {
    checkpoint(db, dir)?;
    let cp = DB::open_cf_for_read_only(&rocksdb::Options::default(), dir, keys::ALL_CFS, false).map_err(io_err)?;
    let (last_log_id, last_membership) = applied_state(&cp)?;
    drop(cp);
    let meta = SnapshotMeta { last_log_id, last_membership };
    write_snapshot_meta(dir, &meta)?;
    Ok(meta)
}

/// Writes the snapshot metadata file into a checkpoint directory.
///
/// # Errors
/// I/O errors from writing the file.
pub fn write_snapshot_meta(dir: &Path, meta: &SnapshotMeta) -> io::Result<()> {
    let bytes = serde_json::to_vec(meta).map_err(io_err)?;
    std::fs::write(dir.join(META_FILE), bytes)
}

/// Reads the metadata file of a checkpoint directory.
///
/// # Errors
/// I/O error if missing or malformed.
pub fn read_snapshot_meta(dir: &Path) -> io::Result<SnapshotMeta> {
    let bytes = std::fs::read(dir.join(META_FILE))?;
    serde_json::from_slice(&bytes).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}

/// Creates a RocksDB checkpoint of `db` at `dir` (which must not exist).
///
/// # Errors
/// I/O error if RocksDB cannot create it.
pub fn checkpoint(db: &DB, dir: &Path) -> io::Result<()> {
    let cp = rocksdb::checkpoint::Checkpoint::new(db).map_err(io_err)?;
    cp.create_checkpoint(dir).map_err(io_err)
}

/// Replaces the state-machine column families of `db` with those of the
/// checkpoint at `dir`.
///
/// # Errors
/// I/O error if the checkpoint cannot be opened or the copy fails.
pub fn load_checkpoint(db: &DB, dir: &Path) -> io::Result<()> {
    let opts = rocksdb::Options::default();
    let src = DB::open_cf_for_read_only(&opts, dir, keys::ALL_CFS, false).map_err(io_err)?;
    for name in keys::STATE_MACHINE_CFS {
        let dst_cf = db.cf_handle(name).ok_or_else(|| io_err("missing column family"))?;
        // Clear the destination.
        let mut batch = WriteBatch::default();
        for item in db.iterator_cf(dst_cf, IteratorMode::Start) {
            let (k, _) = item.map_err(io_err)?;
            batch.delete_cf(dst_cf, k);
            if batch.len() >= 10_000 {
                db.write(std::mem::take(&mut batch)).map_err(io_err)?;
            }
        }
        db.write(batch).map_err(io_err)?;
        let src_cf = src.cf_handle(name).ok_or_else(|| io_err("snapshot lacks a column family"))?;
        let mut batch = WriteBatch::default();
        for item in src.iterator_cf(src_cf, IteratorMode::Start) {
            let (k, v) = item.map_err(io_err)?;
            batch.put_cf(dst_cf, k, v);
            if batch.len() >= 10_000 {
                db.write(std::mem::take(&mut batch)).map_err(io_err)?;
            }
        }
        db.write(batch).map_err(io_err)?;
    }
    crate::storage::sync_wal(db).map_err(io_err)?;
    Ok(())
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    type SnapshotData = SnapshotDir;

    /// Makes the checkpoint on a blocking-pool thread: openraft runs this in
    /// a task on the Raft thread, and a checkpoint flushes the memtables and
    /// waits for it, which stalled every write for tens of milliseconds.
    async fn build_snapshot(&mut self) -> Result<Snapshot, io::Error> {
        let (db, dir) = self.source.take().ok_or_else(|| io_err("snapshot builder used twice"))?;
        let target = dir.clone();
        let built = tokio::task::spawn_blocking(move || checkpoint_with_meta(&db, &target)).await.map_err(io_err)?;
        let meta = match built {
            Ok(meta) => meta,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                tracing::error!("snapshot checkpoint failed: {e}");
                return Err(e);
            }
        };
        let snap = Snapshot { meta, snapshot: self.dirs.hold(dir) };
        *self.current.lock() = Some((snap.meta.clone(), snap.snapshot.clone()));
        self.dirs.prune(&self.root, snap.snapshot.path());
        Ok(snap)
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotData = SnapshotDir;
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> Result<(Option<LogId>, StoredMembership), io::Error> {
        Ok((self.applied, self.membership.clone()))
    }

    async fn apply<Strm>(&mut self, mut entries: Strm) -> Result<(), io::Error>
    where
        Strm: Stream<Item = Result<EntryResponder<TypeConfig>, io::Error>> + Unpin + OptionalSend,
    {
        while let Some(item) = entries.next().await {
            let (entry, responder) = item?;
            let log_id = entry.log_id;
            let resp = match entry.payload {
                EntryPayload::Normal(cmd) => {
                    let cmd = match self.auth_step(cmd, &log_id)? {
                        AuthStep::Apply(cmd) => cmd,
                        AuthStep::Done(resp) => {
                            self.applied = Some(log_id);
                            if let Some(r) = responder {
                                r.send(resp);
                            }
                            continue;
                        }
                    };
                    let mut meta_err = None;
                    let timer = crate::metrics::metrics().backend_commit.start_timer();
                    let res = self.store.apply(&cmd, |batch| {
                        if let Err(e) = self.apply_meta(batch, &log_id, None) {
                            meta_err = Some(e.to_string());
                        }
                        Ok(())
                    });
                    timer.observe_duration();
                    if let Some(e) = meta_err {
                        return Err(io_err(e));
                    }
                    match res {
                        Ok((resp, events)) => {
                            if let Some(ev) = events {
                                let m = crate::metrics::metrics();
                                let puts = ev.events.iter().filter(|e| e.r#type == proto::mvccpb::event_type::PUT).count() as u64;
                                m.put_total.inc_by(puts);
                                m.delete_total.inc_by(ev.events.len() as u64 - puts);
                                self.hub.publish(ev);
                            }
                            resp
                        }
                        Err(e) => return Err(io_err(e)),
                    }
                }
                EntryPayload::Blank => {
                    let mut batch = WriteBatch::default();
                    self.apply_meta(&mut batch, &log_id, None)?;
                    self.db.write(batch).map_err(io_err)?;
                    CommandResponse::Empty
                }
                EntryPayload::Membership(m) => {
                    let stored = StoredMembership::new(Some(log_id), m);
                    let mut batch = WriteBatch::default();
                    self.apply_meta(&mut batch, &log_id, Some(&stored))?;
                    self.db.write(batch).map_err(io_err)?;
                    self.membership = stored;
                    CommandResponse::Empty
                }
            };
            self.applied = Some(log_id);
            if let Some(r) = responder {
                r.send(resp);
            }
        }
        Ok(())
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        let dir = self.snapshot_root.join(unique_name("snap", self.applied.as_ref().map(|l| l.index()).unwrap_or(0)));
        SnapshotBuilder { source: Some((self.db.clone(), dir)), current: self.current.clone(), dirs: self.dirs.clone(), root: self.snapshot_root.clone() }
    }

    async fn install_snapshot(&mut self, meta: &SnapshotMeta, snapshot: SnapshotDir) -> Result<(), io::Error> {
        load_checkpoint(&self.db, snapshot.path())?;
        // The checkpoint's own meta column family carries the applied id of
        // its source; overwrite it with the snapshot's.
        let mut batch = WriteBatch::default();
        let meta_cf = self.db.cf_handle(keys::CF_META).ok_or_else(|| io_err("missing meta column family"))?;
        batch.put_cf(meta_cf, keys::AppliedLogId::KEY, encode(&meta.last_log_id)?);
        batch.put_cf(meta_cf, keys::LastMembership::KEY, encode(&meta.last_membership)?);
        self.db.write(batch).map_err(io_err)?;
        self.store.reload().map_err(|e: Error| io_err(e))?;
        if let Some(auth) = &self.auth {
            auth.reload().map_err(io_err)?;
        }
        self.hub.advance(self.store.current_revision());
        self.applied = meta.last_log_id;
        self.membership = meta.last_membership.clone();
        // Keep the received checkpoint as our current snapshot.
        let keep = self.snapshot_root.join(unique_name("installed", meta.last_log_id.as_ref().map(|l| l.index()).unwrap_or(0)));
        if snapshot.path() != keep {
            std::fs::rename(snapshot.path(), &keep).or_else(|_| copy_dir(snapshot.path(), &keep))?;
        }
        write_snapshot_meta(&keep, meta)?;
        *self.current.lock() = Some((meta.clone(), self.dirs.hold(keep.clone())));
        self.dirs.prune(&self.snapshot_root, &keep);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot>, io::Error> {
        Ok(self.current.lock().clone().map(|(meta, snapshot)| Snapshot { meta, snapshot }))
    }
}

/// A snapshot directory name no other directory under the root has had:
/// an older snapshot of the same index may still be streaming from its own
/// directory, so a new one never reuses (or first deletes) that name.
fn unique_name(kind: &str, index: u64) -> String {
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // The start time separates restarts (the sequence starts again at 0,
    // and a container may give every start the same process ID).
    static START: std::sync::OnceLock<u128> = std::sync::OnceLock::new();
    let start = START.get_or_init(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0));
    format!("{kind}-{index}-{start}-{seq}")
}

fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        std::fs::copy(entry.path(), to.join(entry.file_name()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn checkpoint_like(root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("000014.sst"), b"sst").unwrap();
        std::fs::write(dir.join(META_FILE), b"{}").unwrap();
        dir
    }

    /// A leader replaces its snapshot while streaming the old one to a
    /// follower: the old directory stays until the stream drops it, then
    /// goes; leftovers nobody holds go at once; a fresh `recv-*` stays.
    #[test]
    fn a_replaced_snapshot_lives_until_its_last_stream_ends() {
        let root = tempfile::tempdir().unwrap();
        let dirs = SnapshotDirs::default();
        let old_path = checkpoint_like(root.path(), "snap-10-1-1");
        let leftover = checkpoint_like(root.path(), "snap-3-0-0");
        let receiving = checkpoint_like(root.path(), "recv-1");
        // A checkpoint still being made has no metadata file yet.
        let building = root.path().join("snap-30-1-2");
        std::fs::create_dir_all(&building).unwrap();
        let mut current = Some(dirs.hold(old_path.clone()));
        // openraft's get_current_snapshot hands a clone to the stream.
        let stream = current.clone().unwrap();

        let new_path = checkpoint_like(root.path(), "snap-20-1-2");
        current = Some(dirs.hold(new_path.clone()));
        dirs.prune(root.path(), &new_path);
        assert!(old_path.join("000014.sst").is_file(), "the streamed snapshot is still readable");
        assert!(!leftover.exists(), "an unheld leftover is removed");
        assert!(receiving.exists(), "a snapshot being received is kept");
        assert!(building.exists(), "a snapshot being built is kept");
        assert!(new_path.exists());

        drop(stream);
        assert!(!old_path.exists(), "removed once the stream is done");
        assert!(new_path.exists(), "the current snapshot stays");
        assert_eq!(current.as_ref().map(|d| d.path().to_path_buf()), Some(new_path.clone()));

        // Not obsolete yet: dropping every holder does not remove it.
        drop(current);
        assert!(new_path.exists());
    }

    #[test]
    fn snapshot_dir_names_are_never_reused() {
        assert_ne!(unique_name("snap", 5), unique_name("snap", 5));
    }
}
