//! Auditing: a record of every request, as kube-apiserver writes it
//! (`staging/src/k8s.io/apiserver/pkg/audit`, `apis/audit/v1`).
//!
//! - [`policy`]: the `audit.k8s.io/v1` `Policy` of `--audit-policy-file`
//!   and its evaluation: the first rule that matches a request gives its
//!   level (`None`, `Metadata`, `Request`, `RequestResponse`), the stages
//!   to leave out and whether `managedFields` are dropped; no rule, no
//!   record.
//! - [`event`]: the `audit.k8s.io/v1` `Event`, one per stage of a request
//!   (`RequestReceived`, `ResponseStarted` for long-running requests,
//!   `ResponseComplete`, `Panic`).
//! - [`context`]: what a request collects while it runs (the request
//!   object, the impersonated user, the authorization decision), shared
//!   by the HTTP filters and handlers through the request's extensions.
//! - [`backend`]: where events go. A [`backend::Backend`] takes events
//!   from requests without holding them up for long: [`backend::Buffered`]
//!   queues them on a bounded channel for a writer on its own thread
//!   ([`backend::Writer`]), in kube's `blocking`, `blocking-strict` or
//!   `batch` mode.
//! - [`log`]: the log writer of `--audit-log-path` (JSON lines or kube's
//!   legacy text, rotated as kube's lumberjack rotates).
//! - [`options`]: the `--audit-*` flags.
//!
//! The HTTP side is `endpoints/filters/audit.rs` (the filter),
//! `audit_init.rs` (the `Audit-Id`) and `authn_audit.rs` (failed
//! authentication); this module imports none of it. Without
//! `--audit-policy-file` or without a backend there is no [`Auditor`] and
//! no filter in the chain.

pub mod backend;
pub mod context;
pub mod event;
pub mod log;
pub mod options;
pub mod policy;
pub mod webhook;

use std::sync::Arc;

pub use context::AuditContext;
pub use event::{Event, Level, Stage};

/// The header that carries a request's audit ID, in requests (a client
/// may choose it) and responses (kube `auditinternal.HeaderAuditID`).
pub const HEADER_AUDIT_ID: &str = "audit-id";

/// The annotation of the authorization decision (`allow` or `forbid`).
pub const DECISION_ANNOTATION: &str = "authorization.k8s.io/decision";
/// The annotation of the authorizer's reason.
pub const REASON_ANNOTATION: &str = "authorization.k8s.io/reason";

/// A request's audit ID (a UUID unless the client sent `Audit-Id`) and
/// when it was received; set by the audit-init filter on every request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestStamp {
    /// The audit ID.
    pub audit_id: String,
    /// When the request arrived.
    pub received: std::time::SystemTime,
}

/// Policy and backend together: auditing is on.
pub struct Auditor {
    /// Which requests are recorded, and how much of them.
    pub policy: Arc<policy::Evaluator>,
    /// Where the records go.
    pub backend: Arc<dyn backend::Backend>,
}

impl Auditor {
    /// Waits (up to `timeout`) until the events handed over so far are
    /// written.
    pub async fn shutdown(&self, timeout: std::time::Duration) {
        if tokio::time::timeout(timeout, self.backend.flush()).await.is_err() {
            tracing::warn!("audit: events still queued after {timeout:?} at shutdown");
        }
    }
}
