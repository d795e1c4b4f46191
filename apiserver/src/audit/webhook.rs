//! The audit webhook backend (kube `plugin/pkg/audit/webhook`,
//! `--audit-webhook-config-file`): batches of events POSTed as an
//! `audit.k8s.io/v1` `EventList` to the server a kubeconfig file names,
//! over the shared webhook client ([`crate::webhook::Client`]).
//!
//! It is a [`Writer`] behind the same bounded queue as the log backend, on
//! its own thread with its own single-threaded Tokio runtime. A batch the
//! server does not take (no answer, or not 2xx) is sent again after
//! `--audit-webhook-initial-backoff`, doubling, up to 3 tries, as kube's
//! webhook backend retries; then it is reported in the log and dropped. A
//! 2xx answer is enough: its body is not read as anything.

use std::path::Path;
use std::time::Duration;

use super::backend::{Error, Writer};
use super::event::Event;
use crate::webhook::{self, Client};

/// How long one POST may take.
const TIMEOUT: Duration = Duration::from_secs(30);
/// Tries per batch.
const TRIES: u32 = 3;

/// The webhook writer.
pub struct WebhookWriter {
    runtime: tokio::runtime::Runtime,
    client: Client,
    initial_backoff: Duration,
}

impl WebhookWriter {
    /// A writer posting to the server of the kubeconfig at `path`.
    ///
    /// # Errors
    /// The kubeconfig cannot be read or names unusable TLS material.
    pub fn new(path: &Path, initial_backoff: Duration) -> Result<Self, String> {
        let client = Client::from_kubeconfig(path, TIMEOUT).map_err(|e| format!("invalid audit webhook config file {:?}: {e}", path.display().to_string()))?;
        // Used only on the writer's own thread (building one is allowed
        // anywhere; it is never dropped inside another runtime).
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        Ok(WebhookWriter { runtime, client, initial_backoff })
    }
}

/// The `EventList` of `events`.
pub fn event_list(events: &[Event]) -> serde_json::Value {
    let items: Vec<serde_json::Value> = events.iter().map(|e| serde_json::to_value(e).unwrap_or_default()).collect();
    serde_json::json!({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "metadata": {}, "items": items})
}

impl Writer for WebhookWriter {
    fn write(&mut self, events: &[Event]) -> Result<(), Error> {
        let body = event_list(events);
        let mut backoff = self.initial_backoff;
        let mut last = String::new();
        for attempt in 1..=TRIES {
            match self.runtime.block_on(self.client.post_json(&body)) {
                // A 2xx answer that is not JSON still took the events.
                Ok(_) | Err(webhook::Error::Decode(_)) => return Ok(()),
                Err(e) => last = e.to_string(),
            }
            if attempt < TRIES {
                std::thread::sleep(backoff);
                backoff *= 2;
            }
        }
        Err(Error::Other(last))
    }
}
