//! A work queue of keys (client-go `workqueue`): each key is queued at most
//! once, and a key that comes back while a worker has it is handed out
//! again only after that worker is done with it, so no key is worked on
//! twice at the same time. Its size is bounded by the number of distinct
//! keys (namespaces, objects), never by the rate of events.

use std::collections::{HashSet, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::Notify;

#[derive(Default)]
struct State {
    queue: VecDeque<String>,
    /// Keys waiting (in `queue`, or to be queued when their worker is done).
    dirty: HashSet<String>,
    /// Keys a worker has.
    processing: HashSet<String>,
    /// Keys waiting out a delay before they are added.
    delayed: HashSet<String>,
    shut_down: bool,
}

/// The queue. Clones share it.
#[derive(Clone, Default)]
pub struct Queue {
    state: Arc<Mutex<State>>,
    ready: Arc<Notify>,
}

impl Queue {
    /// An empty queue.
    pub fn new() -> Self {
        Queue::default()
    }

    /// Queues `key` unless it is queued already.
    pub fn add(&self, key: &str) {
        let mut s = self.state.lock();
        if s.shut_down || s.dirty.contains(key) {
            return;
        }
        s.dirty.insert(key.to_string());
        if !s.processing.contains(key) {
            s.queue.push_back(key.to_string());
            drop(s);
            self.ready.notify_one();
        }
    }

    /// Queues `key` after `delay` (a retry); a key already waiting is not
    /// scheduled twice.
    pub fn add_after(&self, key: &str, delay: Duration) {
        {
            let mut s = self.state.lock();
            if s.shut_down || !s.delayed.insert(key.to_string()) {
                return;
            }
        }
        let q = self.clone();
        let key = key.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            q.state.lock().delayed.remove(&key);
            q.add(&key);
        });
    }

    /// The next key to work on, waiting for one; `None` once the queue is
    /// shut down. Call [`Queue::done`] with it when finished.
    pub async fn get(&self) -> Option<String> {
        loop {
            let notified = self.ready.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.state.lock();
                if s.shut_down {
                    return None;
                }
                if let Some(k) = s.queue.pop_front() {
                    s.dirty.remove(&k);
                    s.processing.insert(k.clone());
                    return Some(k);
                }
            }
            notified.await;
        }
    }

    /// The next key for a controller that works only while its node holds
    /// the controller's Lease: waits until `leading` is true, then for a
    /// key; a key taken just as the Lease was lost goes back (the next
    /// leader's queue has it too) and the wait starts again. `None` once
    /// `stop` is true, `leading`'s sender is gone or the queue is shut down.
    pub async fn next_while_leading(&self, leading: &mut tokio::sync::watch::Receiver<bool>, stop: &mut tokio::sync::watch::Receiver<bool>) -> Option<String> {
        loop {
            tokio::select! {
                l = leading.wait_for(|l| *l) => if l.is_err() { return None },
                _ = stop.wait_for(|s| *s) => return None,
            }
            let key = tokio::select! {
                k = self.get() => k?,
                _ = stop.wait_for(|s| *s) => return None,
            };
            if *leading.borrow() {
                return Some(key);
            }
            self.done(&key);
            self.add(&key);
        }
    }

    /// A controller's loop while its node leads: each key taken by
    /// [`Queue::next_while_leading`] goes to `sync`; a failed key is logged
    /// (as `what key: message`) and queued again after `retry`. Returns
    /// when `next_while_leading` does.
    pub async fn work_while_leading<F, Fut>(&self, mut leading: tokio::sync::watch::Receiver<bool>, mut stop: tokio::sync::watch::Receiver<bool>, what: &str, retry: Duration, mut sync: F)
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<(), crate::errors::Status>>,
    {
        while let Some(key) = self.next_while_leading(&mut leading, &mut stop).await {
            if let Err(e) = sync(key.clone()).await {
                tracing::warn!("{what} {key}: {}", e.message);
                self.add_after(&key, retry);
            }
            self.done(&key);
        }
    }

    /// Marks `key` finished; if it was added meanwhile, it is queued again.
    pub fn done(&self, key: &str) {
        let mut s = self.state.lock();
        s.processing.remove(key);
        if s.dirty.contains(key) {
            s.queue.push_back(key.to_string());
            drop(s);
            self.ready.notify_one();
        }
    }

    /// Ends the queue: waiting and later [`Queue::get`]s return `None`.
    pub fn shut_down(&self) {
        self.state.lock().shut_down = true;
        self.ready.notify_waiters();
    }

    /// Keys queued and not yet handed out.
    pub fn len(&self) -> usize {
        self.state.lock().queue.len()
    }

    /// Whether nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keys_are_deduplicated_and_never_worked_twice_at_once() {
        let q = Queue::new();
        q.add("a");
        q.add("b");
        q.add("a");
        assert_eq!(q.len(), 2);
        let a = q.get().await;
        assert_eq!(a.as_deref(), Some("a"));
        // Added again while a worker has it: not handed out until done.
        q.add("a");
        assert_eq!(q.get().await.as_deref(), Some("b"));
        assert!(q.is_empty());
        q.done("a");
        assert_eq!(q.get().await.as_deref(), Some("a"));
        q.done("a");
        q.done("b");
        q.add_after("c", Duration::from_millis(10));
        q.add_after("c", Duration::from_millis(10));
        assert_eq!(q.get().await.as_deref(), Some("c"));
        q.done("c");
        assert!(q.is_empty());
        q.shut_down();
        assert_eq!(q.get().await, None);
    }
}
