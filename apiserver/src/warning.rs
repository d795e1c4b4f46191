//! Warnings for the client (kube `pkg/warning`): any layer of a request
//! may add one; the HTTP layer sends them as `Warning: 299 - "<text>"`
//! headers (RFC 7234), each text once.

use std::sync::Arc;

/// The warnings of one request. Clones share the list.
#[derive(Debug, Clone, Default)]
pub struct Warnings(Arc<parking_lot::Mutex<Vec<String>>>);

impl Warnings {
    /// Adds a warning, once.
    pub fn add(&self, text: String) {
        let mut w = self.0.lock();
        if !w.contains(&text) {
            w.push(text);
        }
    }

    /// The warnings, in the order they were added.
    pub fn texts(&self) -> Vec<String> {
        self.0.lock().clone()
    }
}
