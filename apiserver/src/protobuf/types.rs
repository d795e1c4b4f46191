//! The few Kubernetes protobuf messages this server decodes, as prost
//! types. Field numbers are those of Kubernetes' `generated.proto` files
//! (`k8s.io/apimachinery/pkg/runtime`, `.../apis/meta/v1`, `k8s.io/api/...`).
//!
//! Each type also derives `Serialize` into the JSON field names, so a
//! decoded message becomes the JSON object a JSON client would have sent.
//! Go's gogo-protobuf writes every non-pointer field, even when empty, so
//! empty strings, zeros, empty lists and maps are left out of the JSON
//! (Go's `omitempty`); Go pointer fields are `Option`s and kept when set,
//! so `replicas: 0` survives. Fields not listed here are skipped by prost.

#![allow(missing_docs)] // each field is the wire field of the same name

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Serialize, Serializer};

/// `skip_serializing_if` for Go's `omitempty` on non-pointer fields.
fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

/// `runtime.Unknown`: the envelope after the `k8s\0` magic.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Unknown {
    #[prost(message, optional, tag = "1")]
    pub type_meta: Option<TypeMeta>,
    #[prost(bytes = "vec", tag = "2")]
    pub raw: Vec<u8>,
    #[prost(string, tag = "3")]
    pub content_encoding: String,
    #[prost(string, tag = "4")]
    pub content_type: String,
}

/// `runtime.TypeMeta`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TypeMeta {
    #[prost(string, tag = "1")]
    pub api_version: String,
    #[prost(string, tag = "2")]
    pub kind: String,
}

/// `metav1.Time`: seconds and nanos since the epoch; an empty message is
/// Go's zero time, which JSON writes as null (left out here).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Time {
    #[prost(int64, tag = "1")]
    pub seconds: i64,
    #[prost(int32, tag = "2")]
    pub nanos: i32,
}

impl Serialize for Time {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let secs = u64::try_from(self.seconds).unwrap_or(0);
        let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
        s.serialize_str(&humantime::format_rfc3339_seconds(t).to_string())
    }
}

fn time_unset(t: &Option<Time>) -> bool {
    t.as_ref().is_none_or(|t| t.seconds == 0 && t.nanos == 0)
}

/// `intstr.IntOrString`: type 0 is an int, 1 a string.
#[derive(Clone, PartialEq, prost::Message)]
pub struct IntOrString {
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    #[prost(int32, tag = "2")]
    pub int_val: i32,
    #[prost(string, tag = "3")]
    pub str_val: String,
}

impl Serialize for IntOrString {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.r#type == 1 {
            s.serialize_str(&self.str_val)
        } else {
            s.serialize_i32(self.int_val)
        }
    }
}

/// `resource.Quantity`, serialised as its string.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Quantity {
    #[prost(string, tag = "1")]
    pub string: String,
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.string)
    }
}

fn base64_map<S: Serializer>(m: &BTreeMap<String, Vec<u8>>, s: S) -> Result<S::Ok, S::Error> {
    let e = base64::engine::general_purpose::STANDARD;
    s.collect_map(m.iter().map(|(k, v)| (k, e.encode(v))))
}

/// `metav1.OwnerReference`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OwnerReference {
    #[prost(string, tag = "5")]
    pub api_version: String,
    #[prost(string, tag = "1")]
    pub kind: String,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    pub uid: String,
    #[prost(bool, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub controller: Option<bool>,
    #[prost(bool, optional, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub block_owner_deletion: Option<bool>,
}

/// `metav1.ObjectMeta` (what a client may set; server-set fields are
/// decoded so they can be checked like a JSON client's).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub generate_name: String,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub uid: String,
    #[prost(string, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub resource_version: String,
    #[prost(int64, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub generation: i64,
    #[prost(message, optional, tag = "8")]
    #[serde(skip_serializing_if = "time_unset")]
    pub creation_timestamp: Option<Time>,
    #[prost(btree_map = "string, string", tag = "11")]
    #[serde(skip_serializing_if = "is_default")]
    pub labels: BTreeMap<String, String>,
    #[prost(btree_map = "string, string", tag = "12")]
    #[serde(skip_serializing_if = "is_default")]
    pub annotations: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "13")]
    #[serde(skip_serializing_if = "is_default")]
    pub owner_references: Vec<OwnerReference>,
    #[prost(string, repeated, tag = "14")]
    #[serde(skip_serializing_if = "is_default")]
    pub finalizers: Vec<String>,
}

/// `metav1.LabelSelectorRequirement`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct LabelSelectorRequirement {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(string, tag = "2")]
    pub operator: String,
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub values: Vec<String>,
}

/// `metav1.LabelSelector`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LabelSelector {
    #[prost(btree_map = "string, string", tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub match_labels: BTreeMap<String, String>,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

/// core/v1 `Namespace`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct Namespace {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<NamespaceSpec>,
}

/// core/v1 `NamespaceSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct NamespaceSpec {
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub finalizers: Vec<String>,
}

/// core/v1 `ConfigMap`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMap {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, string", tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub data: BTreeMap<String, String>,
    #[prost(btree_map = "string, bytes", tag = "3")]
    #[serde(skip_serializing_if = "is_default", serialize_with = "base64_map")]
    pub binary_data: BTreeMap<String, Vec<u8>>,
    #[prost(bool, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub immutable: Option<bool>,
}

/// core/v1 `Secret`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Secret {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(btree_map = "string, bytes", tag = "2")]
    #[serde(skip_serializing_if = "is_default", serialize_with = "base64_map")]
    pub data: BTreeMap<String, Vec<u8>>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#type: String,
    #[prost(btree_map = "string, string", tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub string_data: BTreeMap<String, String>,
    #[prost(bool, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub immutable: Option<bool>,
}

/// core/v1 `ServiceAccount` (metadata only; secrets are legacy).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct ServiceAccount {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
}

/// core/v1 `ServicePort`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub protocol: String,
    #[prost(int32, tag = "3")]
    pub port: i32,
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "int_or_string_unset")]
    pub target_port: Option<IntOrString>,
    #[prost(int32, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub node_port: i32,
}

fn int_or_string_unset(v: &Option<IntOrString>) -> bool {
    v.as_ref().is_none_or(|v| v.r#type == 0 && v.int_val == 0)
}

/// core/v1 `ServiceSpec` (the fields `kubectl create service` sets).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServiceSpec {
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub ports: Vec<ServicePort>,
    #[prost(btree_map = "string, string", tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub selector: BTreeMap<String, String>,
    #[prost(string, tag = "3")]
    #[serde(rename = "clusterIP", skip_serializing_if = "is_default")]
    pub cluster_ip: String,
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#type: String,
    #[prost(string, repeated, tag = "5")]
    #[serde(rename = "externalIPs", skip_serializing_if = "is_default")]
    pub external_ips: Vec<String>,
    #[prost(string, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub session_affinity: String,
    #[prost(string, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub external_name: String,
    #[prost(string, repeated, tag = "18")]
    #[serde(rename = "clusterIPs", skip_serializing_if = "is_default")]
    pub cluster_ips: Vec<String>,
}

/// core/v1 `Service`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct Service {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<ServiceSpec>,
}

/// core/v1 `ContainerPort`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ContainerPort {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    #[prost(int32, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub host_port: i32,
    #[prost(int32, tag = "3")]
    pub container_port: i32,
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub protocol: String,
    #[prost(string, tag = "5")]
    #[serde(rename = "hostIP", skip_serializing_if = "is_default")]
    pub host_ip: String,
}

/// core/v1 `EnvVar` (literal values only).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct EnvVar {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub value: String,
}

/// core/v1 `ResourceRequirements`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct ResourceRequirements {
    #[prost(btree_map = "string, message", tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub limits: BTreeMap<String, Quantity>,
    #[prost(btree_map = "string, message", tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub requests: BTreeMap<String, Quantity>,
}

/// core/v1 `VolumeMount`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VolumeMount {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(bool, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub read_only: bool,
    #[prost(string, tag = "3")]
    pub mount_path: String,
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub sub_path: String,
}

/// core/v1 `Container` (the fields generators and simple clients set).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Container {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub image: String,
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub command: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub args: Vec<String>,
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub working_dir: String,
    #[prost(message, repeated, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub ports: Vec<ContainerPort>,
    #[prost(message, repeated, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub env: Vec<EnvVar>,
    #[prost(message, optional, tag = "8")]
    pub resources: Option<ResourceRequirements>,
    #[prost(message, repeated, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub volume_mounts: Vec<VolumeMount>,
    #[prost(string, tag = "13")]
    #[serde(skip_serializing_if = "is_default")]
    pub termination_message_path: String,
    #[prost(string, tag = "14")]
    #[serde(skip_serializing_if = "is_default")]
    pub image_pull_policy: String,
    #[prost(bool, tag = "16")]
    #[serde(skip_serializing_if = "is_default")]
    pub stdin: bool,
    #[prost(bool, tag = "17")]
    #[serde(skip_serializing_if = "is_default")]
    pub stdin_once: bool,
    #[prost(bool, tag = "18")]
    #[serde(skip_serializing_if = "is_default")]
    pub tty: bool,
    #[prost(string, tag = "20")]
    #[serde(skip_serializing_if = "is_default")]
    pub termination_message_policy: String,
}

/// core/v1 `LocalObjectReference`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct LocalObjectReference {
    #[prost(string, tag = "1")]
    pub name: String,
}

/// core/v1 `PodSpec` (the fields generators and simple clients set).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodSpec {
    #[prost(message, repeated, tag = "2")]
    pub containers: Vec<Container>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub restart_policy: String,
    #[prost(int64, optional, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub termination_grace_period_seconds: Option<i64>,
    #[prost(int64, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub active_deadline_seconds: Option<i64>,
    #[prost(string, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub dns_policy: String,
    #[prost(btree_map = "string, string", tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub node_selector: BTreeMap<String, String>,
    #[prost(string, tag = "8")]
    #[serde(skip_serializing_if = "is_default")]
    pub service_account_name: String,
    #[prost(string, tag = "10")]
    #[serde(skip_serializing_if = "is_default")]
    pub node_name: String,
    #[prost(bool, tag = "11")]
    #[serde(skip_serializing_if = "is_default")]
    pub host_network: bool,
    #[prost(message, repeated, tag = "15")]
    #[serde(skip_serializing_if = "is_default")]
    pub image_pull_secrets: Vec<LocalObjectReference>,
    #[prost(string, tag = "16")]
    #[serde(skip_serializing_if = "is_default")]
    pub hostname: String,
    #[prost(string, tag = "19")]
    #[serde(skip_serializing_if = "is_default")]
    pub scheduler_name: String,
    #[prost(message, repeated, tag = "20")]
    #[serde(skip_serializing_if = "is_default")]
    pub init_containers: Vec<Container>,
    #[prost(string, tag = "24")]
    #[serde(skip_serializing_if = "is_default")]
    pub priority_class_name: String,
}

/// core/v1 `PodTemplateSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct PodTemplateSpec {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<PodSpec>,
}

/// apps/v1 `RollingUpdateDeployment`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RollingUpdateDeployment {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_surge: Option<IntOrString>,
}

/// apps/v1 `DeploymentStrategy`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentStrategy {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub r#type: String,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rolling_update: Option<RollingUpdateDeployment>,
}

/// apps/v1 `DeploymentSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentSpec {
    #[prost(int32, optional, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub replicas: Option<i32>,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[prost(message, optional, tag = "3")]
    pub template: Option<PodTemplateSpec>,
    #[prost(message, optional, tag = "4")]
    pub strategy: Option<DeploymentStrategy>,
    #[prost(int32, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub min_ready_seconds: i32,
    #[prost(int32, optional, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub revision_history_limit: Option<i32>,
    #[prost(bool, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub paused: bool,
    #[prost(int32, optional, tag = "9")]
    #[serde(skip_serializing_if = "is_default")]
    pub progress_deadline_seconds: Option<i32>,
}

/// apps/v1 `Deployment` (status is server-owned and not decoded).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct Deployment {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<DeploymentSpec>,
}

/// authorization/v1 `ResourceAttributes` (the 1.31+ field and label
/// selector messages, 8 and 9, are not decoded).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct ResourceAttributes {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub verb: String,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub group: String,
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub version: String,
    #[prost(string, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub resource: String,
    #[prost(string, tag = "6")]
    #[serde(skip_serializing_if = "is_default")]
    pub subresource: String,
    #[prost(string, tag = "7")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
}

/// authorization/v1 `NonResourceAttributes`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct NonResourceAttributes {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub path: String,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub verb: String,
}

/// authorization/v1 `SelfSubjectAccessReviewSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SelfSubjectAccessReviewSpec {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource_attributes: Option<ResourceAttributes>,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub non_resource_attributes: Option<NonResourceAttributes>,
}

/// authorization/v1 `SelfSubjectAccessReview`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct SelfSubjectAccessReview {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<SelfSubjectAccessReviewSpec>,
}

/// authorization/v1 `SelfSubjectRulesReviewSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct SelfSubjectRulesReviewSpec {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
}

/// authorization/v1 `SelfSubjectRulesReview`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct SelfSubjectRulesReview {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<SelfSubjectRulesReviewSpec>,
}

/// authentication/v1 (and v1beta1, v1alpha1) `SelfSubjectReview`: the
/// request carries only metadata.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct SelfSubjectReview {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
}

/// rbac/v1 `PolicyRule`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyRule {
    #[prost(string, repeated, tag = "1")]
    pub verbs: Vec<String>,
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub api_groups: Vec<String>,
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub resources: Vec<String>,
    #[prost(string, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub resource_names: Vec<String>,
    #[prost(string, repeated, tag = "5")]
    #[serde(rename = "nonResourceURLs", skip_serializing_if = "is_default")]
    pub non_resource_urls: Vec<String>,
}

/// rbac/v1 `Role` and `ClusterRole` (aggregationRule, 3, is not decoded).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct Role {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, repeated, tag = "2")]
    pub rules: Vec<PolicyRule>,
}

/// rbac/v1 `Subject`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    #[prost(string, tag = "1")]
    pub kind: String,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub api_group: String,
    #[prost(string, tag = "3")]
    pub name: String,
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub namespace: String,
}

/// rbac/v1 `RoleRef`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleRef {
    #[prost(string, tag = "1")]
    pub api_group: String,
    #[prost(string, tag = "2")]
    pub kind: String,
    #[prost(string, tag = "3")]
    pub name: String,
}

/// rbac/v1 `RoleBinding` and `ClusterRoleBinding`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RoleBinding {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub subjects: Vec<Subject>,
    #[prost(message, optional, tag = "3")]
    pub role_ref: Option<RoleRef>,
}

/// scheduling/v1 `PriorityClass`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PriorityClass {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(int32, tag = "2")]
    pub value: i32,
    #[prost(bool, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub global_default: bool,
    #[prost(string, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub description: String,
    #[prost(string, optional, tag = "5")]
    #[serde(skip_serializing_if = "is_default")]
    pub preemption_policy: Option<String>,
}

/// batch/v1 `JobSpec` (the fields `kubectl create job` and `create
/// cronjob` set, and the common knobs).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobSpec {
    #[prost(int32, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parallelism: Option<i32>,
    #[prost(int32, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completions: Option<i32>,
    #[prost(int64, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub active_deadline_seconds: Option<i64>,
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[prost(bool, optional, tag = "5")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manual_selector: Option<bool>,
    #[prost(message, optional, tag = "6")]
    pub template: Option<PodTemplateSpec>,
    #[prost(int32, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub backoff_limit: Option<i32>,
    #[prost(int32, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttl_seconds_after_finished: Option<i32>,
    #[prost(string, optional, tag = "9")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub completion_mode: Option<String>,
    #[prost(bool, optional, tag = "10")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
}

/// batch/v1 `Job`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct Job {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<JobSpec>,
}

/// batch/v1 `JobTemplateSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct JobTemplateSpec {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<JobSpec>,
}

/// batch/v1 `CronJobSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CronJobSpec {
    #[prost(string, tag = "1")]
    pub schedule: String,
    #[prost(int64, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starting_deadline_seconds: Option<i64>,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub concurrency_policy: String,
    #[prost(bool, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub suspend: Option<bool>,
    #[prost(message, optional, tag = "5")]
    pub job_template: Option<JobTemplateSpec>,
    #[prost(int32, optional, tag = "6")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub successful_jobs_history_limit: Option<i32>,
    #[prost(int32, optional, tag = "7")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_jobs_history_limit: Option<i32>,
    #[prost(string, optional, tag = "8")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_zone: Option<String>,
}

/// batch/v1 `CronJob`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct CronJob {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<CronJobSpec>,
}

/// networking/v1 `ServiceBackendPort`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct ServiceBackendPort {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub name: String,
    #[prost(int32, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub number: i32,
}

/// networking/v1 `IngressServiceBackend`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct IngressServiceBackend {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<ServiceBackendPort>,
}

/// core/v1 `TypedLocalObjectReference`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TypedLocalObjectReference {
    #[prost(string, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    #[prost(string, tag = "2")]
    pub kind: String,
    #[prost(string, tag = "3")]
    pub name: String,
}

/// networking/v1 `IngressBackend`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct IngressBackend {
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub service: Option<IngressServiceBackend>,
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<TypedLocalObjectReference>,
}

/// networking/v1 `HTTPIngressPath`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HttpIngressPath {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub path: String,
    #[prost(message, optional, tag = "2")]
    pub backend: Option<IngressBackend>,
    #[prost(string, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path_type: Option<String>,
}

/// networking/v1 `HTTPIngressRuleValue`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct HttpIngressRuleValue {
    #[prost(message, repeated, tag = "1")]
    pub paths: Vec<HttpIngressPath>,
}

/// networking/v1 `IngressRuleValue` (inlined into the rule in JSON).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct IngressRuleValue {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpIngressRuleValue>,
}

/// networking/v1 `IngressRule`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct IngressRule {
    #[prost(string, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub host: String,
    #[prost(message, optional, tag = "2")]
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub value: Option<IngressRuleValue>,
}

/// networking/v1 `IngressTLS`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressTls {
    #[prost(string, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub hosts: Vec<String>,
    #[prost(string, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub secret_name: String,
}

/// networking/v1 `IngressSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IngressSpec {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_backend: Option<IngressBackend>,
    #[prost(message, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub tls: Vec<IngressTls>,
    #[prost(message, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub rules: Vec<IngressRule>,
    #[prost(string, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingress_class_name: Option<String>,
}

/// networking/v1 `Ingress`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct Ingress {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<IngressSpec>,
}

/// policy/v1 `PodDisruptionBudgetSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PodDisruptionBudgetSpec {
    #[prost(message, optional, tag = "1")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_available: Option<IntOrString>,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_unavailable: Option<IntOrString>,
    #[prost(string, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unhealthy_pod_eviction_policy: Option<String>,
}

/// policy/v1 `PodDisruptionBudget`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct PodDisruptionBudget {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<PodDisruptionBudgetSpec>,
}

/// core/v1 `ScopedResourceSelectorRequirement`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopedResourceSelectorRequirement {
    #[prost(string, tag = "1")]
    pub scope_name: String,
    #[prost(string, tag = "2")]
    pub operator: String,
    #[prost(string, repeated, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub values: Vec<String>,
}

/// core/v1 `ScopeSelector`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScopeSelector {
    #[prost(message, repeated, tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub match_expressions: Vec<ScopedResourceSelectorRequirement>,
}

/// core/v1 `ResourceQuotaSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceQuotaSpec {
    #[prost(btree_map = "string, message", tag = "1")]
    #[serde(skip_serializing_if = "is_default")]
    pub hard: BTreeMap<String, Quantity>,
    #[prost(string, repeated, tag = "2")]
    #[serde(skip_serializing_if = "is_default")]
    pub scopes: Vec<String>,
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope_selector: Option<ScopeSelector>,
}

/// core/v1 `ResourceQuota`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct ResourceQuota {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<ResourceQuotaSpec>,
}

/// autoscaling `CrossVersionObjectReference` (v1 and v2).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CrossVersionObjectReference {
    #[prost(string, tag = "1")]
    pub kind: String,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    #[serde(skip_serializing_if = "is_default")]
    pub api_version: String,
}

/// autoscaling/v1 `HorizontalPodAutoscalerSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerSpecV1 {
    #[prost(message, optional, tag = "1")]
    pub scale_target_ref: Option<CrossVersionObjectReference>,
    #[prost(int32, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    #[prost(int32, tag = "3")]
    pub max_replicas: i32,
    #[prost(int32, optional, tag = "4")]
    #[serde(rename = "targetCPUUtilizationPercentage", skip_serializing_if = "Option::is_none")]
    pub target_cpu_utilization_percentage: Option<i32>,
}

/// autoscaling/v1 `HorizontalPodAutoscaler`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct HorizontalPodAutoscalerV1 {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<HorizontalPodAutoscalerSpecV1>,
}

/// autoscaling/v2 `MetricTarget`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricTarget {
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(message, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Quantity>,
    #[prost(message, optional, tag = "3")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub average_value: Option<Quantity>,
    #[prost(int32, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub average_utilization: Option<i32>,
}

/// autoscaling/v2 `ResourceMetricSource`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct ResourceMetricSource {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(message, optional, tag = "2")]
    pub target: Option<MetricTarget>,
}

/// autoscaling/v2 `MetricSpec` (resource metrics, the ones `kubectl
/// autoscale` writes).
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct MetricSpec {
    #[prost(string, tag = "1")]
    pub r#type: String,
    #[prost(message, optional, tag = "4")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resource: Option<ResourceMetricSource>,
}

/// autoscaling/v2 `HorizontalPodAutoscalerSpec`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HorizontalPodAutoscalerSpecV2 {
    #[prost(message, optional, tag = "1")]
    pub scale_target_ref: Option<CrossVersionObjectReference>,
    #[prost(int32, optional, tag = "2")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_replicas: Option<i32>,
    #[prost(int32, tag = "3")]
    pub max_replicas: i32,
    #[prost(message, repeated, tag = "4")]
    #[serde(skip_serializing_if = "is_default")]
    pub metrics: Vec<MetricSpec>,
}

/// autoscaling/v2 `HorizontalPodAutoscaler`.
#[derive(Clone, PartialEq, prost::Message, Serialize)]
pub struct HorizontalPodAutoscalerV2 {
    #[prost(message, optional, tag = "1")]
    pub metadata: Option<ObjectMeta>,
    #[prost(message, optional, tag = "2")]
    pub spec: Option<HorizontalPodAutoscalerSpecV2>,
}
