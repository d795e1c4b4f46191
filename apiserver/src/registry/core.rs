//! The core (`""`) group, version v1.

use serde_json::{json, Value};

use super::printers::{age, int, or_none, since};
use super::strategy::{Column, NameRule, Strategy, AGE_COLUMN, NAME_COLUMN};
use std::sync::Arc;

use super::subresources::{finalize, status, Subresource};
use super::{DefaultStrategy, Resource, ResourceDef};
use crate::errors::Cause;
use crate::meta;

fn name_cell(obj: &Value) -> Value {
    Value::String(meta::name(obj).to_string())
}

fn count(v: &Value) -> usize {
    match v {
        Value::Object(m) => m.len(),
        Value::Array(a) => a.len(),
        _ => 0,
    }
}

/// Validates `containers` of a pod spec at `path` (`spec`,
/// `spec.template.spec`): at least one, each with a name and an image.
pub fn validate_pod_spec(spec: &Value, path: &str) -> Vec<Cause> {
    let mut causes = Vec::new();
    match spec["containers"].as_array() {
        Some(cs) if !cs.is_empty() => {
            for (i, c) in cs.iter().enumerate() {
                let p = format!("{path}.containers[{i}]");
                let name = c["name"].as_str().unwrap_or("");
                if name.is_empty() {
                    causes.push(Cause::required(&format!("{p}.name"), ""));
                } else {
                    for e in super::validation::name_errors(name, NameRule::Label) {
                        causes.push(Cause::invalid(&format!("{p}.name"), &c["name"], &e));
                    }
                }
                if c["image"].as_str().is_none_or(str::is_empty) {
                    causes.push(Cause::required(&format!("{p}.image"), ""));
                }
            }
        }
        _ => causes.push(Cause::required(&format!("{path}.containers"), "")),
    }
    causes
}

/// Pod spec defaults (`SetDefaults_PodSpec`, `SetDefaults_Container`), and
/// the deprecated `serviceAccount` kube's v1 conversion keeps equal to
/// `serviceAccountName` (which it also fills from the old field).
pub fn default_pod_spec(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else { return };
    sync_deprecated_service_account(s);
    s.entry("restartPolicy").or_insert_with(|| json!("Always"));
    s.entry("terminationGracePeriodSeconds").or_insert_with(|| json!(30));
    s.entry("dnsPolicy").or_insert_with(|| json!("ClusterFirst"));
    s.entry("securityContext").or_insert_with(|| json!({}));
    s.entry("schedulerName").or_insert_with(|| json!("default-scheduler"));
    if let Some(cs) = s.get_mut("containers").and_then(Value::as_array_mut) {
        for c in cs.iter_mut() {
            let image = c["image"].as_str().unwrap_or("").to_string();
            let Some(c) = c.as_object_mut() else { continue };
            let latest = !image.contains(':') || image.ends_with(":latest");
            c.entry("imagePullPolicy").or_insert_with(|| json!(if latest { "Always" } else { "IfNotPresent" }));
            c.entry("terminationMessagePath").or_insert_with(|| json!("/dev/termination-log"));
            c.entry("terminationMessagePolicy").or_insert_with(|| json!("File"));
            c.entry("resources").or_insert_with(|| json!({}));
            if let Some(ports) = c.get_mut("ports").and_then(Value::as_array_mut) {
                for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                    p.entry("protocol").or_insert_with(|| json!("TCP"));
                }
            }
        }
    }
}

struct Namespaces;
impl Strategy for Namespaces {
    fn name_rule(&self) -> NameRule {
        NameRule::Label
    }
    fn has_status(&self) -> bool {
        true
    }
    fn default(&self, obj: &mut Value) {
        // kube's namespace defaulting labels every namespace with its name.
        let name = meta::name(obj).to_string();
        if let Some(m) = meta::meta_mut(obj) {
            if let Some(labels) = m.entry("labels").or_insert_with(|| json!({})).as_object_mut() {
                labels.insert("kubernetes.io/metadata.name".into(), json!(name));
            }
        }
    }
    fn prepare_for_create(&self, obj: &mut Value) {
        obj["status"] = json!({"phase": "Active"});
        if obj["spec"]["finalizers"].is_null() {
            obj["spec"] = json!({"finalizers": ["kubernetes"]});
        }
    }
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.phase"]
    }
    fn collection_delete(&self) -> bool {
        false
    }
    fn held_by_finalizers(&self, obj: &Value) -> bool {
        // kube's namespace store: `spec.finalizers` (the namespace
        // controller's `kubernetes`) hold it as well.
        meta::has_finalizers(obj) || obj["spec"]["finalizers"].as_array().is_some_and(|a| !a.is_empty())
    }
    fn prepare_for_delete(&self, obj: &mut Value) {
        obj["status"]["phase"] = Value::String("Terminating".into());
    }
    fn columns(&self) -> Vec<Column> {
        vec![NAME_COLUMN, Column::new("Status", "string", "The status of the namespace"), AGE_COLUMN]
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        vec![name_cell(o), json!(o["status"]["phase"].as_str().unwrap_or("")), json!(age(o))]
    }
}

struct ConfigMaps;
impl Strategy for ConfigMaps {
    fn columns(&self) -> Vec<Column> {
        vec![NAME_COLUMN, Column::new("Data", "string", "Data contains the configuration data."), AGE_COLUMN]
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        vec![name_cell(o), json!(count(&o["data"]) + count(&o["binaryData"])), json!(age(o))]
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        if let Some(d) = o["data"].as_object() {
            for (k, v) in d {
                if !v.is_string() {
                    causes.push(Cause::invalid(&format!("data[{k}]"), v, "must be a string"));
                }
            }
        }
        for (bag, other) in [("data", "binaryData"), ("binaryData", "data")] {
            for k in o[bag].as_object().into_iter().flat_map(|m| m.keys()) {
                causes.extend(config_key_causes(bag, k));
                if o[other].get(k).is_some() {
                    causes.push(Cause::invalid(&format!("{bag}[{k}]"), &json!(k), &format!("duplicate of key present in {other}")));
                }
            }
        }
        let size = payload_size(&o["data"], false) + payload_size(&o["binaryData"], true);
        if size > MAX_PAYLOAD_BYTES {
            // kube reports the whole object (an empty field path, `[]`).
            causes.push(Cause::too_long("[]", MAX_PAYLOAD_BYTES));
        }
        causes
    }
}

/// The causes for a ConfigMap or Secret key that kube's `IsConfigMapKey`
/// refuses: at most 253 characters of `[-._a-zA-Z0-9]`, not `.`, `..` or
/// starting with `..`; reported at `<bag>[<key>]`.
fn config_key_causes(bag: &str, key: &str) -> Vec<Cause> {
    let mut errs = Vec::new();
    if key.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    if key.is_empty() || !key.bytes().all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_')) {
        errs.push(
            "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_string(),
        );
    }
    if key == "." {
        errs.push("must not be '.'".to_string());
    } else if key == ".." {
        errs.push("must not be '..'".to_string());
    } else if key.starts_with("..") {
        errs.push("must not start with '..'".to_string());
    }
    errs.iter().map(|e| Cause::invalid(&format!("{bag}[{key}]"), &json!(key), e)).collect()
}

/// The most a ConfigMap's or Secret's keys and values may add up to, in
/// bytes (kube `core.MaxSecretSize`, 1 MiB). It is checked apart from the
/// request-size and store limits, and gives 422 Invalid.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;

/// The bytes of a `data`/`binaryData` map as kube counts them: each key
/// plus its value, base64-decoded when `base64` (undecodable values count
/// as written; they fail elsewhere).
fn payload_size(map: &Value, base64: bool) -> usize {
    use base64::Engine as _;
    let size = |(k, v): (&String, &Value)| {
        let s = v.as_str().unwrap_or("");
        let n = if base64 { base64::engine::general_purpose::STANDARD.decode(s).map_or(s.len(), |b| b.len()) } else { s.len() };
        k.len() + n
    };
    map.as_object().into_iter().flatten().map(size).sum()
}

struct Secrets;
impl Strategy for Secrets {
    fn default(&self, o: &mut Value) {
        if o["type"].as_str().is_none_or(str::is_empty) {
            o["type"] = json!("Opaque");
        }
        // kube's v1 conversion folds the write-only `stringData` into `data`
        // (base64), its keys winning, and never stores it.
        if let Some(Value::Object(strings)) = o.as_object_mut().and_then(|m| m.remove("stringData")) {
            use base64::Engine as _;
            if !o["data"].is_object() {
                o["data"] = json!({});
            }
            for (k, v) in strings {
                let text = v.as_str().unwrap_or("");
                o["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(text));
            }
        }
    }
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["type"]
    }
    fn columns(&self) -> Vec<Column> {
        vec![NAME_COLUMN, Column::new("Type", "string", "The type of the secret"), Column::new("Data", "string", "The number of entries in the secret"), AGE_COLUMN]
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        vec![name_cell(o), json!(o["type"].as_str().unwrap_or("")), json!(count(&o["data"])), json!(age(o))]
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        // `stringData` is already folded into `data` (see `default`).
        let mut causes: Vec<Cause> = o["data"].as_object().into_iter().flat_map(|m| m.keys()).flat_map(|k| config_key_causes("data", k)).collect();
        if payload_size(&o["data"], true) > MAX_PAYLOAD_BYTES {
            causes.push(Cause::too_long("data", MAX_PAYLOAD_BYTES));
        }
        causes
    }
}

struct ServiceAccounts;
impl Strategy for ServiceAccounts {
    fn columns(&self) -> Vec<Column> {
        vec![NAME_COLUMN, Column::new("Secrets", "string", "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use."), AGE_COLUMN]
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        vec![name_cell(o), json!(count(&o["secrets"])), json!(age(o))]
    }
}

/// A pod spec's `serviceAccountName` from the deprecated `serviceAccount`
/// when only that is set, and `serviceAccount` mirroring the name, as
/// kube's v1 conversion writes them.
pub fn sync_deprecated_service_account(s: &mut serde_json::Map<String, Value>) {
    let named = |v: Option<&Value>| v.and_then(Value::as_str).filter(|n| !n.is_empty()).map(str::to_string);
    let name = named(s.get("serviceAccountName")).or_else(|| named(s.get("serviceAccount")));
    match name {
        Some(n) => {
            s.insert("serviceAccountName".into(), json!(n));
            s.insert("serviceAccount".into(), json!(n));
        }
        None => {
            s.remove("serviceAccount");
        }
    }
}

struct Pods;
impl Strategy for Pods {
    fn has_status(&self) -> bool {
        true
    }
    fn default(&self, o: &mut Value) {
        default_pod_spec(&mut o["spec"]);
        // `SetDefaults_Pod`: on pods only, not on templates.
        if let Some(s) = o["spec"].as_object_mut() {
            s.entry("enableServiceLinks").or_insert_with(|| json!(true));
        }
    }
    fn prepare_for_create(&self, o: &mut Value) {
        o["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"});
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        validate_pod_spec(&o["spec"], "spec")
    }
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"]
    }
    fn columns(&self) -> Vec<Column> {
        vec![
            NAME_COLUMN,
            Column::new("Ready", "string", "The aggregate readiness state of this pod for accepting traffic."),
            Column::new("Status", "string", "The aggregate status of the containers in this pod."),
            Column::new("Restarts", "string", "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted."),
            AGE_COLUMN,
            Column::wide("IP", "string", "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated."),
            Column::wide("Node", "string", "NodeName is a request to schedule this pod onto a specific node."),
            Column::wide("Nominated Node", "string", "nominatedNodeName is set only when this pod preempts other pods on the node."),
            Column::wide("Readiness Gates", "string", "If specified, all readiness gates will be evaluated for pod readiness."),
        ]
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        let total = count(&o["spec"]["containers"]);
        let statuses = o["status"]["containerStatuses"].as_array().cloned().unwrap_or_default();
        let ready = statuses.iter().filter(|s| s["ready"].as_bool() == Some(true)).count();
        let restarts: i64 = statuses.iter().map(|s| s["restartCount"].as_i64().unwrap_or(0)).sum();
        let mut reason = o["status"]["reason"].as_str().or(o["status"]["phase"].as_str()).unwrap_or("").to_string();
        if meta::is_deleting(o) {
            reason = "Terminating".into();
        }
        let gates = count(&o["spec"]["readinessGates"]);
        vec![
            name_cell(o),
            json!(format!("{ready}/{total}")),
            json!(reason),
            json!(restarts.to_string()),
            json!(age(o)),
            json!(or_none(o["status"]["podIP"].as_str().unwrap_or("").to_string())),
            json!(or_none(o["spec"]["nodeName"].as_str().unwrap_or("").to_string())),
            json!(or_none(o["status"]["nominatedNodeName"].as_str().unwrap_or("").to_string())),
            json!(if gates == 0 { "<none>".to_string() } else { format!("0/{gates}") }),
        ]
    }
}

/// The common part of kube's `ValidateService`: a supported type, ports
/// (required unless headless or ExternalName; 1-65535; a known protocol;
/// named when there are several), an ExternalName's name.
fn validate_service_spec(spec: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    let ty = spec["type"].as_str().unwrap_or("ClusterIP");
    let types = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !types.contains(&ty) {
        let list: Vec<String> = types.iter().map(|t| format!("{t:?}")).collect();
        causes.push(Cause { reason: "FieldValueNotSupported".into(), message: format!("Unsupported value: {ty:?}: supported values: {}", list.join(", ")), field: "spec.type".into() });
    }
    if ty == "ExternalName" && spec["externalName"].as_str().is_none_or(str::is_empty) {
        causes.push(Cause::required("spec.externalName", ""));
    }
    let ports = spec["ports"].as_array().map(Vec::as_slice).unwrap_or_default();
    let headless = spec["clusterIP"] == "None";
    if ports.is_empty() && !headless && ty != "ExternalName" {
        causes.push(Cause::required("spec.ports", ""));
    }
    for (i, p) in ports.iter().enumerate() {
        let path = format!("spec.ports[{i}]");
        let name = p["name"].as_str().unwrap_or("");
        if ports.len() > 1 && name.is_empty() {
            causes.push(Cause::required(&format!("{path}.name"), ""));
        }
        let port = p["port"].as_i64().unwrap_or(0);
        if !(1..=65535).contains(&port) {
            causes.push(Cause::invalid(&format!("{path}.port"), &json!(port), "must be between 1 and 65535, inclusive"));
        }
        let proto = p["protocol"].as_str().unwrap_or("TCP");
        if !["SCTP", "TCP", "UDP"].contains(&proto) {
            causes.push(Cause {
                reason: "FieldValueNotSupported".into(),
                message: format!("Unsupported value: {proto:?}: supported values: \"SCTP\", \"TCP\", \"UDP\""),
                field: format!("{path}.protocol"),
            });
        }
    }
    causes
}

struct Services;
impl Strategy for Services {
    fn name_rule(&self) -> NameRule {
        NameRule::Dns1035
    }
    fn has_status(&self) -> bool {
        true
    }
    fn allow_create_on_update(&self) -> bool {
        true
    }
    fn default(&self, o: &mut Value) {
        let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else { return };
        spec.entry("type").or_insert_with(|| json!("ClusterIP"));
        spec.entry("sessionAffinity").or_insert_with(|| json!("None"));
        if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
            for p in ports.iter_mut().filter_map(Value::as_object_mut) {
                p.entry("protocol").or_insert_with(|| json!("TCP"));
                if let Some(port) = p.get("port").cloned() {
                    p.entry("targetPort").or_insert(port);
                }
            }
        }
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        validate_service_spec(&o["spec"])
    }
    fn columns(&self) -> Vec<Column> {
        vec![
            NAME_COLUMN,
            Column::new("Type", "string", "type determines how the Service is exposed."),
            Column::new("Cluster-IP", "string", "clusterIP is the IP address of the service and is usually assigned randomly."),
            Column::new("External-IP", "string", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service."),
            Column::new("Port(s)", "string", "The list of ports that are exposed by this service."),
            AGE_COLUMN,
            Column::wide("Selector", "string", "Route service traffic to pods with label keys and values matching this selector."),
        ]
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        let spec = &o["spec"];
        let ports: Vec<String> = spec["ports"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|p| {
                        let np = p["nodePort"].as_i64().map(|n| format!(":{n}")).unwrap_or_default();
                        format!("{}{np}/{}", p["port"].as_i64().unwrap_or(0), p["protocol"].as_str().unwrap_or("TCP"))
                    })
                    .collect()
            })
            .unwrap_or_default();
        let ext: Vec<String> = spec["externalIPs"].as_array().map(|a| a.iter().filter_map(|v| v.as_str().map(String::from)).collect()).unwrap_or_default();
        let sel: Vec<String> = spec["selector"].as_object().map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or(""))).collect()).unwrap_or_default();
        vec![
            name_cell(o),
            json!(spec["type"].as_str().unwrap_or("ClusterIP")),
            json!(or_none(spec["clusterIP"].as_str().unwrap_or("").to_string())),
            json!(or_none(ext.join(","))),
            json!(or_none(ports.join(","))),
            json!(age(o)),
            json!(or_none(sel.join(","))),
        ]
    }
}

pub(crate) struct Events;
impl Strategy for Events {
    fn selectable_fields(&self) -> &'static [&'static str] {
        &[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]
    }
    fn field_value(&self, o: &Value, field: &str) -> String {
        if field == "source" {
            return o["source"]["component"].as_str().unwrap_or("").to_string();
        }
        super::validation::field_string(o, field)
    }
    fn columns(&self) -> Vec<Column> {
        vec![
            Column::new("Last Seen", "string", "Time when this Event was last observed"),
            Column::new("Type", "string", "Type of this event (Normal, Warning), new types could be added in the future"),
            Column::new("Reason", "string", "This should be a short, machine understandable string that gives the reason for the transition into the object's current status."),
            Column::new("Object", "string", "The object that this event is about."),
            Column::wide("Subobject", "string", "The subobject that this event is about."),
            Column::wide("Source", "string", "The component reporting this event."),
            Column::new("Message", "string", "A human-readable description of the status of this operation."),
            Column::wide("First Seen", "string", "The time at which the event was first recorded."),
            Column::wide("Count", "string", "The number of times this event has occurred."),
            Column { name: "Name", type_: "string", format: "name", description: "Name must be unique within a namespace.", priority: 1 },
        ]
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        let last = if o["lastTimestamp"].is_string() { since(&o["lastTimestamp"]) } else { since(&o["eventTime"]) };
        let first = if o["firstTimestamp"].is_string() { since(&o["firstTimestamp"]) } else { since(&o["eventTime"]) };
        let io = &o["involvedObject"];
        let object = format!("{}/{}", io["kind"].as_str().unwrap_or("").to_lowercase(), io["name"].as_str().unwrap_or(""));
        let source = o["source"]["component"].as_str().or(o["reportingComponent"].as_str()).unwrap_or("").to_string();
        vec![
            json!(last),
            json!(o["type"].as_str().unwrap_or("")),
            json!(o["reason"].as_str().unwrap_or("")),
            json!(object),
            json!(io["fieldPath"].as_str().unwrap_or("")),
            json!(source),
            json!(o["message"].as_str().unwrap_or("").trim()),
            json!(first),
            int(&o["count"]),
            name_cell(o),
        ]
    }
}

struct WithStatus;
impl Strategy for WithStatus {
    fn has_status(&self) -> bool {
        true
    }
}

#[allow(clippy::too_many_arguments)] // a table row of the registry
fn core(resource: &str, singular: &str, kind: &str, namespaced: bool, short: &[&str], cats: &[&str], subs: Vec<Arc<dyn Subresource>>, strategy: Box<dyn Strategy>) -> ResourceDef {
    ResourceDef::stored(Resource::new("", "v1", resource, singular, kind, namespaced, Arc::from(strategy)), subs).short_names(short).categories(cats)
}

/// core/v1 resources.
pub fn resources() -> Vec<ResourceDef> {
    let none = Vec::new;
    vec![
        core("namespaces", "namespace", "Namespace", false, &["ns"], &[], vec![status(), finalize()], Box::new(Namespaces)),
        core("configmaps", "configmap", "ConfigMap", true, &["cm"], &[], none(), Box::new(ConfigMaps)),
        core("secrets", "secret", "Secret", true, &[], &[], none(), Box::new(Secrets)),
        core("pods", "pod", "Pod", true, &["po"], &["all"], vec![status(), super::subresources::ephemeral_containers()], Box::new(Pods)),
        core("services", "service", "Service", true, &["svc"], &["all"], vec![status()], Box::new(Services)),
        core("serviceaccounts", "serviceaccount", "ServiceAccount", true, &["sa"], &[], none(), Box::new(ServiceAccounts)),
        core("events", "event", "Event", true, &["ev"], &[], none(), Box::new(Events)),
        core("endpoints", "endpoints", "Endpoints", true, &["ep"], &[], none(), Box::new(DefaultStrategy)),
        core("nodes", "node", "Node", false, &["no"], &[], vec![status()], Box::new(WithStatus)),
        core("persistentvolumes", "persistentvolume", "PersistentVolume", false, &["pv"], &[], vec![status()], Box::new(WithStatus)),
        core("persistentvolumeclaims", "persistentvolumeclaim", "PersistentVolumeClaim", true, &["pvc"], &[], vec![status()], Box::new(WithStatus)),
        core("limitranges", "limitrange", "LimitRange", true, &["limits"], &[], none(), Box::new(super::resource_limits::LimitRanges)),
        core("resourcequotas", "resourcequota", "ResourceQuota", true, &["quota"], &[], vec![status()], Box::new(super::resource_limits::ResourceQuotas)),
        core("replicationcontrollers", "replicationcontroller", "ReplicationController", true, &["rc"], &["all"], vec![status()], Box::new(WithStatus)),
        core("podtemplates", "podtemplate", "PodTemplate", true, &[], &[], none(), Box::new(DefaultStrategy)),
    ]
}
