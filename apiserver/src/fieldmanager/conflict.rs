//! Apply's failures and their Status objects, worded as kube-apiserver
//! words them (`managedfields/internal/conflict.go`, `NewApplyConflict`).
//!
//! One conflict:
//!
//! ```text
//! 409 Conflict: Apply failed with 1 conflict: conflict with "mgr" using apps/v1: .spec.replicas
//! ```
//!
//! Several, grouped by manager in sorted order, paths in field-set order:
//!
//! ```text
//! Apply failed with 2 conflicts: conflicts with "a" using apps/v1:
//! - .spec.replicas
//! - .spec.template.spec.containers[name="nginx"].image
//! ```
//!
//! Each conflict is also a cause: type `FieldManagerConflict`, message
//! `conflict with "mgr" using apps/v1`, field the path.

use crate::errors::{reason, Cause, Details, Status};

/// One field another manager owns and the apply would change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager as kube prints it: `"mgr" using apps/v1` for an Update
    /// entry, `"mgr" with subresource "status" using v1` for one on a
    /// subresource, just `"mgr"` for an Apply entry.
    pub manager: String,
    /// The field, as structured-merge-diff prints paths
    /// (`.spec.template.spec.containers[name="nginx"].image`).
    pub path: String,
}

/// Why an apply failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ApplyError {
    /// Fields owned by other managers would change and `force` was not
    /// set: 409.
    Conflicts(Vec<Conflict>),
    /// The request is malformed (wrong kind, managedFields in the body):
    /// 400 with this message.
    BadRequest(String),
    /// The configuration does not fit the schema (a string where an
    /// integer is declared, an undeclared field, a keyed list item without
    /// its keys). kube 1.33 answers these with a plain error, so a 500
    /// with no reason and the message `failed to create typed patch object
    /// (<ns>/<name>; <gvk>): <path>: <why>`.
    TypedPatch(String),
    /// The live object's managedFields do not decode: a plain error, so a
    /// 500 with this message (`failed to decode managed fields: …`).
    Undecodable(String),
}

impl std::fmt::Display for ApplyError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ApplyError::Conflicts(c) => f.write_str(&conflict_message(c)),
            ApplyError::BadRequest(m) | ApplyError::TypedPatch(m) | ApplyError::Undecodable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ApplyError {}

impl ApplyError {
    /// The Status a client gets. Conflicts are kube's `NewApplyConflict`:
    /// 409, reason `Conflict`, details with only the causes (kube names no
    /// object there, so `group`, `resource` and `name` are unused for
    /// them and for the other variants, which carry no details either).
    pub fn into_status(self, group: &str, resource: &str, name: &str) -> Status {
        let _ = (group, resource, name);
        match self {
            ApplyError::Conflicts(conflicts) => {
                let message = conflict_message(&conflicts);
                let causes = conflicts.into_iter().map(|c| Cause { reason: "FieldManagerConflict".into(), message: format!("conflict with {}", c.manager), field: c.path }).collect();
                Status::failure(409, reason::CONFLICT, message, Some(Details { causes, ..Default::default() }))
            }
            ApplyError::BadRequest(m) => Status::bad_request(m),
            ApplyError::TypedPatch(m) | ApplyError::Undecodable(m) => Status::failure(500, "", m, None),
        }
    }
}

/// kube's `getConflictMessage`. The conflicts come grouped by manager
/// already, in the order to print.
pub(crate) fn conflict_message(conflicts: &[Conflict]) -> String {
    if let [c] = conflicts {
        return format!("Apply failed with 1 conflict: conflict with {}: {}", c.manager, c.path);
    }
    let mut lines: Vec<String> = Vec::new();
    let mut current: Option<&str> = None;
    for c in conflicts {
        if current != Some(c.manager.as_str()) {
            lines.push(format!("conflicts with {}:", c.manager));
            current = Some(&c.manager);
        }
        lines.push(format!("- {}", c.path));
    }
    format!("Apply failed with {} conflicts: {}", conflicts.len(), lines.join("\n"))
}

/// A manager as kube's `printManager` writes it from the entry's
/// identifier (which carries no time).
pub(crate) fn print_manager(manager: &str, operation: &str, api_version: &str, subresource: &str) -> String {
    let mut s = format!("{manager:?}");
    if !subresource.is_empty() {
        s = format!("{s} with subresource {subresource:?}");
    }
    if operation == "Update" {
        s = format!("{s} using {api_version}");
    }
    s
}
