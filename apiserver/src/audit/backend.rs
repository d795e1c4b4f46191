//! Where audit events go (kube `audit.Backend`, `plugin/pkg/audit/buffered`).
//!
//! A [`Backend`] takes each event from the request that made it. The one
//! built here, [`Buffered`], puts events on a bounded channel read by a
//! [`Writer`] on its own thread, in batches of what is queued (at most
//! `max_batch`). What a full channel does is the mode
//! (`--audit-log-mode`, kube's names):
//!
//! | mode | a request hands over an event by | when the channel is full |
//! |---|---|---|
//! | `blocking` (default) | queueing it | the request waits for room |
//! | `blocking-strict` | waiting until it is written | the request waits; a failed write of `RequestReceived` fails the request with 500 |
//! | `batch` | queueing it if there is room | the event is dropped, with an error in the log |
//!
//! So a slow disk holds requests back (blocking) or loses events (batch),
//! never grows memory without bound. kube's blocking mode writes in the
//! request's goroutine; here the write happens on the writer thread and
//! the request only waits for room in the queue.
//!
//! A webhook backend (`--audit-webhook-config-file`) is one more
//! [`Writer`]: it gets the same batches, posts each as an `EventList`
//! (blocking its own thread, e.g. with `Handle::block_on`), and a
//! [`Union`] hands every event to both.

use std::sync::Arc;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};

use super::event::Event;

/// What goes wrong in a writer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Writing a file or stream.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// Anything else a writer reports (a webhook's answer).
    #[error("{0}")]
    Other(String),
}

/// Takes the events of requests (kube `audit.Sink`).
pub trait Backend: Send + Sync {
    /// Hands `event` over as the mode says; `false` only when a
    /// `blocking-strict` backend could not store it.
    fn process(&self, event: Event) -> BoxFuture<'_, bool>;
    /// Hands `event` over without waiting (from a response body that is
    /// dropped): queued if there is room; else, in the blocking modes, on
    /// a task that waits for room, and in batch mode dropped.
    fn process_now(&self, event: Event);
    /// Resolves once every event handed over before is written.
    fn flush(&self) -> BoxFuture<'_, ()>;
}

/// Consumes batches of events on a backend's own thread (kube's delegate
/// backend: the log file, a webhook). It may block.
pub trait Writer: Send + 'static {
    /// Writes `events`, oldest first.
    ///
    /// # Errors
    /// The events could not be written; they are reported in the log and
    /// lost.
    fn write(&mut self, events: &[Event]) -> Result<(), Error>;
}

/// `--audit-log-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Requests wait for room in the queue.
    Blocking,
    /// Requests wait until their events are written.
    BlockingStrict,
    /// Events are dropped when the queue is full.
    Batch,
}

/// kube's mode names, in its order.
pub const MODES: &[&str] = &["batch", "blocking", "blocking-strict"];

impl Mode {
    /// Parses a mode name.
    pub fn parse(s: &str) -> Option<Mode> {
        match s {
            "blocking" => Some(Mode::Blocking),
            "blocking-strict" => Some(Mode::BlockingStrict),
            "batch" => Some(Mode::Batch),
            _ => None,
        }
    }
}

enum Item {
    Event(Box<Event>, Option<oneshot::Sender<bool>>),
    Flush(oneshot::Sender<()>),
}

/// A bounded queue in front of a [`Writer`] thread.
pub struct Buffered {
    name: &'static str,
    mode: Mode,
    tx: mpsc::Sender<Item>,
}

impl Buffered {
    /// Starts `writer` on a thread named `audit-<name>`, behind a queue of
    /// `buffer` events, writing at most `max_batch` events at a time.
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn start(name: &'static str, mode: Mode, buffer: usize, max_batch: usize, writer: Box<dyn Writer>) -> std::io::Result<Arc<Self>> {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        let max_batch = max_batch.max(1);
        std::thread::Builder::new().name(format!("audit-{name}")).spawn(move || run(name, rx, writer, max_batch))?;
        Ok(Arc::new(Buffered { name, mode, tx }))
    }
}

/// kube's `HandlePluginError` wording, with the events in the legacy form.
fn report(name: &str, error: &dyn std::fmt::Display, events: &[Event]) {
    let lines: Vec<String> = events.iter().map(Event::to_legacy_line).collect();
    tracing::error!("Error in audit plugin '{name}' affecting {} audit events: {error}\nImpacted events:\n{}", events.len(), lines.join("\n"));
}

fn run(name: &'static str, mut rx: mpsc::Receiver<Item>, mut writer: Box<dyn Writer>, max_batch: usize) {
    while let Some(first) = rx.blocking_recv() {
        let (mut batch, mut acks, mut flushes) = (Vec::new(), Vec::new(), Vec::new());
        let mut next = Some(first);
        while let Some(item) = next.take() {
            match item {
                Item::Event(e, ack) => {
                    batch.push(*e);
                    acks.extend(ack);
                }
                Item::Flush(done) => flushes.push(done),
            }
            if batch.len() < max_batch {
                next = rx.try_recv().ok();
            }
        }
        if !batch.is_empty() {
            let ok = match writer.write(&batch) {
                Ok(()) => true,
                Err(e) => {
                    report(name, &e, &batch);
                    false
                }
            };
            for a in acks {
                let _ = a.send(ok);
            }
        }
        for f in flushes {
            let _ = f.send(());
        }
    }
}

impl Backend for Buffered {
    fn process(&self, event: Event) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            match self.mode {
                Mode::Blocking => {
                    if let Err(e) = self.tx.send(Item::Event(Box::new(event), None)).await {
                        if let Item::Event(ev, _) = e.0 {
                            report(self.name, &"audit backend shut down", &[*ev]);
                        }
                    }
                    true
                }
                Mode::BlockingStrict => {
                    let (ack, written) = oneshot::channel();
                    if self.tx.send(Item::Event(Box::new(event), Some(ack))).await.is_err() {
                        return false;
                    }
                    written.await.unwrap_or(false)
                }
                Mode::Batch => {
                    self.process_now(event);
                    true
                }
            }
        })
    }

    fn process_now(&self, event: Event) {
        match self.tx.try_send(Item::Event(Box::new(event), None)) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(item)) if self.mode != Mode::Batch => {
                // Off the request's path: wait for room on a task.
                let tx = self.tx.clone();
                match tokio::runtime::Handle::try_current() {
                    Ok(h) => {
                        h.spawn(async move {
                            let _ = tx.send(item).await;
                        });
                    }
                    Err(_) => {
                        if let Item::Event(ev, _) = item {
                            report(self.name, &"audit buffer queue blocked", &[*ev]);
                        }
                    }
                }
            }
            Err(mpsc::error::TrySendError::Full(item)) => {
                if let Item::Event(ev, _) = item {
                    report(self.name, &"audit buffer queue blocked", &[*ev]);
                }
            }
            Err(mpsc::error::TrySendError::Closed(item)) => {
                if let Item::Event(ev, _) = item {
                    report(self.name, &"audit backend shut down", &[*ev]);
                }
            }
        }
    }

    fn flush(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let (done, flushed) = oneshot::channel();
            if self.tx.send(Item::Flush(done)).await.is_ok() {
                let _ = flushed.await;
            }
        })
    }
}

/// Several backends, each getting every event (kube `union.New`).
pub struct Union(pub Vec<Arc<dyn Backend>>);

impl Backend for Union {
    fn process(&self, event: Event) -> BoxFuture<'_, bool> {
        Box::pin(async move {
            let mut ok = true;
            for b in &self.0 {
                ok &= b.process(event.clone()).await;
            }
            ok
        })
    }

    fn process_now(&self, event: Event) {
        for b in &self.0 {
            b.process_now(event.clone());
        }
    }

    fn flush(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            for b in &self.0 {
                b.flush().await;
            }
        })
    }
}
