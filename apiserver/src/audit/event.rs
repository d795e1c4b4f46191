//! The `audit.k8s.io/v1` `Event` as kube-apiserver writes it
//! (`apis/audit/v1/types.go`): fields in kube's order, empty ones left
//! out as Go's `omitempty` leaves them, times as `metav1.MicroTime`
//! (`2006-01-02T15:04:05.000000Z`). One event is one line of the log.

use std::collections::BTreeMap;
use std::time::SystemTime;

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;

use crate::authn::UserInfo;
use crate::errors::go_quote;

/// How much of a request is recorded (kube `audit.Level`), in increasing
/// order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Level {
    /// Nothing.
    None,
    /// Who, what, when and the answer's code; no bodies.
    Metadata,
    /// Metadata and the request object.
    Request,
    /// Metadata, the request object and the response object.
    RequestResponse,
}

/// When an event is written (kube `audit.Stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Stage {
    /// As soon as the request is received, before it is handled.
    RequestReceived,
    /// Once the response headers are sent, for long-running requests
    /// (watch) only.
    ResponseStarted,
    /// When the response is complete.
    ResponseComplete,
    /// When the handler panicked.
    Panic,
}

impl Stage {
    /// The name in policies and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }
}

/// `authentication.k8s.io/v1` `UserInfo` with every field `omitempty`
/// (a request that failed authentication has `{}`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EventUser {
    /// User name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub username: String,
    /// UID.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// Groups.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    /// Extra attributes.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra: BTreeMap<String, Vec<String>>,
}

impl From<&UserInfo> for EventUser {
    fn from(u: &UserInfo) -> Self {
        EventUser { username: u.name.clone(), uid: u.uid.clone(), groups: u.groups.clone(), extra: u.extra.clone() }
    }
}

/// What a request was about (kube `audit.ObjectReference`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    /// Resource (plural).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource: String,
    /// Namespace.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    /// Object name.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The UID of the request object, if it had one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub uid: String,
    /// API group (empty for core).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_group: String,
    /// API version.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub api_version: String,
    /// The resourceVersion of the request object, if it had one.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub resource_version: String,
    /// Subresource.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub subresource: String,
}

/// The answer's `metav1.Status` as kube records it: `metadata` always
/// (`{}`), the code always, and status, message, reason and details when
/// the response was a Status.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ResponseStatus {
    /// Always empty.
    pub metadata: serde_json::Map<String, Value>,
    /// `Success` or `Failure`, from a Status response.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub status: String,
    /// Message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Details of a Status response.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// HTTP status code.
    pub code: u16,
}

impl ResponseStatus {
    /// A status with only the code.
    pub fn code(code: u16) -> Self {
        ResponseStatus { code, ..Default::default() }
    }
}

/// One audit record (kube `audit.k8s.io/v1` `Event`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    /// `Event`.
    pub kind: &'static str,
    /// `audit.k8s.io/v1`.
    pub api_version: &'static str,
    /// The level of the policy rule that matched.
    pub level: Level,
    /// The request's audit ID (its `Audit-Id` header).
    #[serde(rename = "auditID")]
    pub audit_id: String,
    /// The stage this record was written at.
    pub stage: Stage,
    /// Path and query of the request.
    #[serde(rename = "requestURI")]
    pub request_uri: String,
    /// The request-info verb (`get`, `list`, `watch`, `create`, `update`,
    /// `patch`, `delete`, `deletecollection`; a non-resource request's
    /// lowercase method).
    pub verb: String,
    /// The authenticated user (`{}` when authentication failed).
    pub user: EventUser,
    /// The user impersonated, if the request impersonated one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub impersonated_user: Option<EventUser>,
    /// `X-Forwarded-For`, `X-Real-Ip` and the peer address, as kube's
    /// `utilnet.SourceIPs`.
    #[serde(rename = "sourceIPs", skip_serializing_if = "Vec::is_empty")]
    pub source_ips: Vec<String>,
    /// `User-Agent`, cut at 1024 bytes.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub user_agent: String,
    /// The object of a resource request.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub object_ref: Option<ObjectReference>,
    /// The answer (not at `RequestReceived`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_status: Option<ResponseStatus>,
    /// The decoded request body (levels `Request` and `RequestResponse`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request_object: Option<Value>,
    /// The response body (level `RequestResponse`, not for watches).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_object: Option<Value>,
    /// When the request arrived.
    #[serde(serialize_with = "micro_time")]
    pub request_received_timestamp: SystemTime,
    /// When this stage was reached.
    #[serde(serialize_with = "micro_time")]
    pub stage_timestamp: SystemTime,
    /// Annotations (the authorization decision and reason).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

/// `metav1.MicroTime`: RFC 3339 in UTC with exactly six fractional digits.
pub fn format_micro_time(t: SystemTime) -> String {
    humantime::format_rfc3339_micros(t).to_string()
}

fn micro_time<S: Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_micro_time(*t))
}

impl Event {
    /// The event as one JSON line (no trailing newline).
    pub fn to_json_line(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// kube's legacy one-line text form (`audit.EventString`):
    /// `<time> AUDIT: id="…" stage="…" ip="…" method="…" user="…"
    /// groups="…" as="…" asgroups="…" user-agent="…" namespace="…"
    /// uri="…" response="…"`.
    pub fn to_legacy_line(&self) -> String {
        let list = |v: &[String]| v.iter().map(|g| go_quote(g)).collect::<Vec<_>>().join(",");
        let (user, groups) = match self.user.username.as_str() {
            "" => ("<none>".to_string(), "<none>".to_string()),
            u if self.user.groups.is_empty() => (u.to_string(), "<none>".to_string()),
            u => (u.to_string(), list(&self.user.groups)),
        };
        let (as_user, as_groups) = match &self.impersonated_user {
            Some(i) => (i.username.clone(), if i.groups.is_empty() { "<lookup>".to_string() } else { list(&i.groups) }),
            None => ("<self>".to_string(), "<lookup>".to_string()),
        };
        let namespace = self.object_ref.as_ref().map(|o| o.namespace.as_str()).filter(|n| !n.is_empty()).unwrap_or("<none>");
        let response = self.response_status.as_ref().map(|s| s.code.to_string()).unwrap_or_else(|| "<deferred>".into());
        let ip = self.source_ips.first().map(String::as_str).unwrap_or("<unknown>");
        format!(
            "{} AUDIT: id={} stage={} ip={} method={} user={} groups={} as={} asgroups={} user-agent={} namespace={} uri={} response=\"{}\"",
            humantime::format_rfc3339_nanos(self.request_received_timestamp),
            go_quote(&self.audit_id),
            go_quote(self.stage.as_str()),
            go_quote(ip),
            go_quote(&self.verb),
            go_quote(&user),
            go_quote(&groups),
            go_quote(&as_user),
            go_quote(&as_groups),
            go_quote(&self.user_agent),
            go_quote(namespace),
            go_quote(&self.request_uri),
            response
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event() -> Event {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_micros(1_700_000_000_123_456);
        Event {
            kind: "Event",
            api_version: "audit.k8s.io/v1",
            level: Level::Metadata,
            audit_id: "a1".into(),
            stage: Stage::ResponseComplete,
            request_uri: "/api/v1/namespaces/default/pods?limit=1".into(),
            verb: "list".into(),
            user: EventUser { username: "bob".into(), groups: vec!["system:authenticated".into()], ..Default::default() },
            impersonated_user: None,
            source_ips: vec!["127.0.0.1".into()],
            user_agent: "kubectl".into(),
            object_ref: Some(ObjectReference { resource: "pods".into(), namespace: "default".into(), api_version: "v1".into(), ..Default::default() }),
            response_status: Some(ResponseStatus::code(200)),
            request_object: None,
            response_object: None,
            request_received_timestamp: t,
            stage_timestamp: t,
            annotations: BTreeMap::from([("authorization.k8s.io/decision".to_string(), "allow".to_string())]),
        }
    }

    #[test]
    fn serializes_as_kube() {
        let line = event().to_json_line();
        assert_eq!(
            line,
            r#"{"kind":"Event","apiVersion":"audit.k8s.io/v1","level":"Metadata","auditID":"a1","stage":"ResponseComplete","requestURI":"/api/v1/namespaces/default/pods?limit=1","verb":"list","user":{"username":"bob","groups":["system:authenticated"]},"sourceIPs":["127.0.0.1"],"userAgent":"kubectl","objectRef":{"resource":"pods","namespace":"default","apiVersion":"v1"},"responseStatus":{"metadata":{},"code":200},"requestReceivedTimestamp":"2023-11-14T22:13:20.123456Z","stageTimestamp":"2023-11-14T22:13:20.123456Z","annotations":{"authorization.k8s.io/decision":"allow"}}"#
        );
        let legacy = event().to_legacy_line();
        assert!(
            legacy.ends_with(r#"AUDIT: id="a1" stage="ResponseComplete" ip="127.0.0.1" method="list" user="bob" groups="\"system:authenticated\"" as="<self>" asgroups="<lookup>" user-agent="kubectl" namespace="default" uri="/api/v1/namespaces/default/pods?limit=1" response="200""#),
            "{legacy}"
        );
    }
}
