//! What a request collects for its audit record while it runs (kube
//! `audit.AuditContext`): the event in progress, shared through the
//! request's extensions as an `Arc<AuditContext>`. Filters and handlers
//! add to it; the audit filter writes it out at each stage.
//!
//! Only requests whose level is above `None` carry one, so the calls
//! below cost nothing when auditing is off or the policy leaves a request
//! out.

use std::sync::Arc;
use std::time::SystemTime;

use parking_lot::Mutex;
use serde_json::Value;

use super::event::{Event, EventUser, Level, ResponseStatus, Stage};
use super::policy::{remove_managed_fields, RequestConfig};
use crate::authn::UserInfo;

/// A request's audit record in progress.
pub struct AuditContext {
    config: RequestConfig,
    event: Mutex<Event>,
}

impl crate::admission::AuditAnnotations for AuditContext {
    fn add_annotation(&self, key: &str, value: &str) {
        AuditContext::add_annotation(self, key, value);
    }

    fn records_request_bodies(&self) -> bool {
        self.level() >= Level::Request
    }
}

impl std::fmt::Debug for AuditContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditContext").field("level", &self.config.level).finish_non_exhaustive()
    }
}

impl AuditContext {
    /// A context for `event` (its level is `config.level`).
    pub fn new(config: RequestConfig, event: Event) -> Arc<Self> {
        Arc::new(AuditContext { config, event: Mutex::new(event) })
    }

    /// The context of a request, if it is audited.
    pub fn of(extensions: &http::Extensions) -> Option<&Arc<AuditContext>> {
        extensions.get::<Arc<AuditContext>>()
    }

    /// What the policy said about the request.
    pub fn config(&self) -> &RequestConfig {
        &self.config
    }

    /// The level.
    pub fn level(&self) -> Level {
        self.config.level
    }

    /// Adds an annotation; a key set already keeps its first value, as
    /// kube's `AddAuditAnnotation` does.
    pub fn add_annotation(&self, key: &str, value: &str) {
        let mut ev = self.event.lock();
        match ev.annotations.get(key) {
            Some(v) if v != value => tracing::warn!("audit: annotation {key:?} is {v:?} already; {value:?} not set"),
            Some(_) => {}
            None => {
                ev.annotations.insert(key.to_string(), value.to_string());
            }
        }
    }

    /// Records the user the request impersonates (kube
    /// `LogImpersonatedUser`).
    pub fn log_impersonated_user(&self, user: &UserInfo) {
        self.event.lock().impersonated_user = Some(EventUser::from(user));
    }

    /// Records the decoded request object (kube `LogRequestObject`): its
    /// name, namespace, uid and resourceVersion complete the object
    /// reference at any level; the object itself is kept from level
    /// `Request` on, without `managedFields` if the policy says so.
    pub fn log_request_object(&self, obj: &Value) {
        let mut ev = self.event.lock();
        if let Some(r) = ev.object_ref.as_mut() {
            let meta = &obj["metadata"];
            let field = |f: &str| meta[f].as_str().unwrap_or("").to_string();
            if r.namespace.is_empty() {
                r.namespace = field("namespace");
            }
            if r.name.is_empty() {
                r.name = field("name");
            }
            if r.uid.is_empty() {
                r.uid = field("uid");
            }
            if r.resource_version.is_empty() {
                r.resource_version = field("resourceVersion");
            }
        }
        if self.config.level >= Level::Request {
            let mut copy = obj.clone();
            if self.config.omit_managed_fields {
                remove_managed_fields(&mut copy);
            }
            ev.request_object = Some(copy);
        }
    }

    /// Records a patch as the request object, as it was sent (kube
    /// `LogRequestPatch`), from level `Request` on.
    pub fn log_request_patch(&self, patch: &Value) {
        if self.config.level >= Level::Request {
            self.event.lock().request_object = Some(patch.clone());
        }
    }

    /// Records the response: its code, the Status fields when the body is
    /// a `Status`, and at level `RequestResponse` the object (kube
    /// `LogResponseObject`).
    pub fn log_response(&self, code: u16, body: Option<Value>) {
        let mut ev = self.event.lock();
        let mut status = ResponseStatus::code(code);
        if let Some(b) = body.as_ref().filter(|b| b["kind"] == "Status") {
            let s = |f: &str| b[f].as_str().unwrap_or("").to_string();
            status.status = s("status");
            status.message = s("message");
            status.reason = s("reason");
            status.details = b.get("details").cloned();
        }
        ev.response_status = Some(status);
        if self.config.level >= Level::RequestResponse {
            if let Some(mut b) = body {
                if self.config.omit_managed_fields {
                    remove_managed_fields(&mut b);
                }
                ev.response_object = Some(b);
            }
        }
    }

    /// Records the response code only, unless a status is there already.
    pub fn log_response_code(&self, code: u16) {
        let mut ev = self.event.lock();
        match ev.response_status.as_mut() {
            Some(s) => s.code = code,
            None => ev.response_status = Some(ResponseStatus::code(code)),
        }
    }

    /// Sets the whole response status (a panic, a failed authentication).
    pub fn set_response_status(&self, status: ResponseStatus) {
        self.event.lock().response_status = Some(status);
    }

    /// The event at `stage`, stamped now, or `None` when the policy omits
    /// the stage. `last` moves the bodies out instead of copying them.
    pub fn event_at(&self, stage: Stage, last: bool) -> Option<Event> {
        if !self.config.records(stage) {
            return None;
        }
        let mut ev = self.event.lock();
        ev.stage = stage;
        ev.stage_timestamp = SystemTime::now();
        if stage == Stage::ResponseComplete && ev.response_status.is_none() {
            // kube: a response that sent nothing reads as a success closed early.
            ev.response_status = Some(ResponseStatus { status: "Success".into(), message: "Connection closed early".into(), ..ResponseStatus::code(200) });
        }
        if last {
            let request_object = ev.request_object.take();
            let response_object = ev.response_object.take();
            let mut out = ev.clone();
            out.request_object = request_object;
            out.response_object = response_object;
            return Some(out);
        }
        Some(ev.clone())
    }
}
