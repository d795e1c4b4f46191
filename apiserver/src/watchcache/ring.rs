//! A fixed-capacity, single-writer, many-reader ring of shared entries.
//!
//! The writer never waits: [`Ring::push`] overwrites the oldest slot. Each
//! reader keeps its own position (a sequence number) and reads slots with
//! one atomic pointer load each ([`arc_swap`]), taking no lock. A reader
//! whose position has been overwritten learns it ([`Read::Lagged`]) and must
//! give up its place: this is how the watch cache bounds a slow watcher
//! without slowing anyone else.
//!
//! Waiting for new entries uses [`tokio::sync::Notify`]; only readers with
//! nothing to read wait, and the writer only wakes them.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use tokio::sync::Notify;

/// One stored entry and its sequence number.
#[derive(Debug)]
pub struct Entry<T> {
    /// Position of the entry in the ring's history (0, 1, 2, ...).
    pub seq: u64,
    /// The entry.
    pub value: T,
}

/// The result of reading one position.
#[derive(Debug)]
pub enum Read<T> {
    /// The entry at the position.
    Ready(Arc<Entry<T>>),
    /// Nothing has been written at the position yet.
    Empty,
    /// The position has been overwritten: the reader is too slow.
    Lagged,
}

/// The ring (see the module docs).
pub struct Ring<T> {
    slots: Box<[ArcSwapOption<Entry<T>>]>,
    /// Sequence number of the next push.
    head: AtomicU64,
    closed: AtomicBool,
    notify: Notify,
}

impl<T> Ring<T> {
    /// An empty ring of `capacity` slots (at least 1).
    pub fn new(capacity: usize) -> Self {
        let capacity = capacity.max(1);
        Ring { slots: (0..capacity).map(|_| ArcSwapOption::const_empty()).collect(), head: AtomicU64::new(0), closed: AtomicBool::new(false), notify: Notify::new() }
    }

    /// The number of slots.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// The sequence number the next push gets.
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// The oldest sequence number still held.
    pub fn oldest(&self) -> u64 {
        self.head().saturating_sub(self.slots.len() as u64)
    }

    /// Appends `value`, overwriting the oldest entry when full, and wakes
    /// waiting readers. Only one task may push (the cache's feeder).
    pub fn push(&self, value: T) -> u64 {
        let seq = self.head.load(Ordering::Relaxed);
        let slot = &self.slots[(seq % self.slots.len() as u64) as usize];
        slot.store(Some(Arc::new(Entry { seq, value })));
        self.head.store(seq + 1, Ordering::Release);
        self.notify.notify_waiters();
        seq
    }

    /// Reads position `seq` without waiting.
    pub fn read(&self, seq: u64) -> Read<T> {
        if seq >= self.head() {
            return Read::Empty;
        }
        let slot = &self.slots[(seq % self.slots.len() as u64) as usize];
        match slot.load_full() {
            Some(e) if e.seq == seq => Read::Ready(e),
            // A newer entry took the slot (or, impossibly, none is there).
            _ => Read::Lagged,
        }
    }

    /// Waits until position `seq` is written or the ring is closed.
    pub async fn wait(&self, seq: u64) {
        loop {
            let notified = self.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if seq < self.head() || self.is_closed() {
                return;
            }
            notified.await;
        }
    }

    /// Closes the ring: readers finish (the cache is being rebuilt).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.notify.notify_waiters();
    }

    /// Whether [`Ring::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readers_see_entries_in_order_and_learn_when_overwritten() {
        let r = Ring::new(4);
        assert!(matches!(r.read(0), Read::Empty));
        for i in 0..6u32 {
            assert_eq!(r.push(i), u64::from(i));
        }
        assert_eq!(r.oldest(), 2);
        assert!(matches!(r.read(1), Read::Lagged));
        let Read::Ready(e) = r.read(2) else { panic!("entry 2 is held") };
        assert_eq!((e.seq, e.value), (2, 2));
        assert!(matches!(r.read(6), Read::Empty));
    }
}
