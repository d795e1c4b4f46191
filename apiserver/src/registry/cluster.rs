//! The smaller groups: `coordination.k8s.io/v1` leases, `events.k8s.io/v1`
//! events (stored as core/v1 events, converted through the hub),
//! `policy/v1` poddisruptionbudgets, `storage.k8s.io/v1` storageclasses,
//! `scheduling.k8s.io/v1` priorityclasses, `node.k8s.io/v1`
//! runtimeclasses and `apiregistration.k8s.io/v1` apiservices.

use serde_json::{json, Map, Value};

use super::printers::{age, or_none, str_cell};
use super::simple::{def, Simple};
use super::strategy::{Column, Strategy, AGE_COLUMN, NAME_COLUMN};
use super::ResourceDef;
use crate::errors::Cause;
use crate::meta;

fn name(o: &Value) -> Value {
    json!(meta::name(o))
}

fn lease_columns() -> Vec<Column> {
    vec![NAME_COLUMN, Column::new("Holder", "string", "The holder of the lease"), AGE_COLUMN]
}

fn lease_cells(o: &Value) -> Vec<Value> {
    vec![name(o), str_cell(&o["spec"]["holderIdentity"]), json!(age(o))]
}

/// Field renames between events.k8s.io/v1 and core/v1 (the hub and
/// storage version): (events.k8s.io name, core name).
const EVENT_FIELDS: &[(&str, &str)] = &[
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: Value, api_version: &str, forward: bool) -> Value {
    let Value::Object(m) = obj else { return obj };
    let mut out = Map::new();
    for (k, v) in m {
        let renamed = EVENT_FIELDS.iter().find(|(e, c)| if forward { e == &k } else { c == &k }).map(|(e, c)| if forward { *c } else { *e });
        out.insert(renamed.map(String::from).unwrap_or(k), v);
    }
    out.insert("apiVersion".into(), json!(api_version));
    Value::Object(out)
}

/// events.k8s.io/v1 Event, stored as a core/v1 Event.
struct EventsV1;
impl Strategy for EventsV1 {
    fn storage_version(&self) -> Option<(&str, &str)> {
        Some(("", "v1"))
    }
    fn convert_to_hub(&self, obj: Value) -> Value {
        rename(obj, "v1", true)
    }
    fn convert_from_hub(&self, obj: Value) -> Value {
        rename(obj, "events.k8s.io/v1", false)
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        let mut causes = Vec::new();
        if o["eventTime"].is_null() {
            causes.push(Cause::required("eventTime", ""));
        }
        if o["reportingController"].as_str().is_none_or(str::is_empty) {
            causes.push(Cause::required("reportingController", ""));
        }
        causes
    }
    fn columns(&self) -> Vec<Column> {
        super::core::Events.columns()
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        super::core::Events.cells(&self.convert_to_hub(o.clone()))
    }
}

fn pdb_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Min Available", "string", "The minimum number of pods that must be available."),
        Column::new("Max Unavailable", "string", "The maximum number of pods that may be unavailable."),
        Column::new("Allowed Disruptions", "integer", "Calculated number of pods that may be disrupted at this time."),
        AGE_COLUMN,
    ]
}

fn int_or_string(v: &Value) -> String {
    match v {
        Value::Null => "N/A".into(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn pdb_cells(o: &Value) -> Vec<Value> {
    vec![name(o), json!(int_or_string(&o["spec"]["minAvailable"])), json!(int_or_string(&o["spec"]["maxUnavailable"])), json!(o["status"]["disruptionsAllowed"].as_i64().unwrap_or(0)), json!(age(o))]
}

fn pdb_validate(o: &Value) -> Vec<Cause> {
    let spec = &o["spec"];
    if !spec["minAvailable"].is_null() && !spec["maxUnavailable"].is_null() {
        return vec![Cause::invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set")];
    }
    Vec::new()
}

fn sc_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Provisioner", "string", "Indicates the type of the provisioner."),
        Column::new("ReclaimPolicy", "string", "Indicates the type of the reclaim policy."),
        Column::new("VolumeBindingMode", "string", "Indicates how PersistentVolumeClaims should be provisioned and bound."),
        Column::new("AllowVolumeExpansion", "string", "Indicates whether the storage class allow volume expand."),
        AGE_COLUMN,
    ]
}

fn sc_cells(o: &Value) -> Vec<Value> {
    let a = &o["metadata"]["annotations"];
    let default = a["storageclass.kubernetes.io/is-default-class"] == "true" || a["storageclass.beta.kubernetes.io/is-default-class"] == "true";
    let n = if default { format!("{} (default)", meta::name(o)) } else { meta::name(o).to_string() };
    vec![
        json!(n),
        str_cell(&o["provisioner"]),
        json!(o["reclaimPolicy"].as_str().unwrap_or("Delete")),
        json!(o["volumeBindingMode"].as_str().unwrap_or("Immediate")),
        json!(o["allowVolumeExpansion"].as_bool().unwrap_or(false).to_string()),
        json!(age(o)),
    ]
}

fn sc_defaults(o: &mut Value) {
    if let Some(m) = o.as_object_mut() {
        m.entry("reclaimPolicy").or_insert_with(|| json!("Delete"));
        m.entry("volumeBindingMode").or_insert_with(|| json!("Immediate"));
    }
}

fn sc_validate(o: &Value) -> Vec<Cause> {
    if o["provisioner"].as_str().is_none_or(str::is_empty) {
        return vec![Cause::required("provisioner", "")];
    }
    Vec::new()
}

fn pc_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Value", "integer", "The value of this priority class. This is the actual priority that pods receive when they have the name of this class in their pod spec."),
        Column::new("Global-Default", "boolean", "globalDefault specifies whether this PriorityClass should be considered as the default priority for pods that do not have any priority class."),
        AGE_COLUMN,
        Column::new("PreemptionPolicy", "string", "PreemptionPolicy is the Policy for preempting pods with lower priority."),
    ]
}

fn pc_cells(o: &Value) -> Vec<Value> {
    vec![name(o), json!(o["value"].as_i64().unwrap_or(0)), json!(o["globalDefault"].as_bool().unwrap_or(false)), json!(age(o)), json!(o["preemptionPolicy"].as_str().unwrap_or("PreemptLowerPriority"))]
}

fn pc_defaults(o: &mut Value) {
    if let Some(m) = o.as_object_mut() {
        m.entry("preemptionPolicy").or_insert_with(|| json!("PreemptLowerPriority"));
    }
}

fn pc_validate(o: &Value) -> Vec<Cause> {
    let mut causes = Vec::new();
    match o["value"].as_i64() {
        None => causes.push(Cause::required("value", "")),
        Some(v) if v > 1_000_000_000 && !meta::name(o).starts_with("system-") => causes.push(Cause::forbidden("value", "maximum allowed value of a user defined priority is 1000000000")),
        _ => {}
    }
    causes
}

fn rc_columns() -> Vec<Column> {
    vec![NAME_COLUMN, Column::new("Handler", "string", "Handler specifies the underlying runtime and configuration that the CRI implementation will use to handle pods of this class."), AGE_COLUMN]
}

fn rc_cells(o: &Value) -> Vec<Value> {
    vec![name(o), str_cell(&o["handler"]), json!(age(o))]
}

fn rc_validate(o: &Value) -> Vec<Cause> {
    let h = o["handler"].as_str().unwrap_or("");
    if h.is_empty() {
        return vec![Cause::required("handler", "")];
    }
    if !super::validation::name_errors(h, super::strategy::NameRule::Label).is_empty() {
        return vec![Cause::invalid(
            "handler",
            &o["handler"],
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        )];
    }
    Vec::new()
}

fn apiservice_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Service", "string", "The reference to the service that hosts this API endpoint."),
        Column::new("Available", "string", "Whether this service is available."),
        AGE_COLUMN,
    ]
}

fn apiservice_cells(o: &Value) -> Vec<Value> {
    let svc = &o["spec"]["service"];
    let service = if svc.is_object() { format!("{}/{}", svc["namespace"].as_str().unwrap_or(""), svc["name"].as_str().unwrap_or("")) } else { "Local".into() };
    let cond = o["status"]["conditions"].as_array().and_then(|cs| cs.iter().find(|c| c["type"] == "Available")).cloned();
    let available = match cond {
        Some(c) if c["status"] == "True" => "True".to_string(),
        Some(c) => format!("{} ({})", c["status"].as_str().unwrap_or("Unknown"), c["reason"].as_str().unwrap_or("")),
        None => "Unknown".into(),
    };
    vec![name(o), json!(service), json!(or_none(available)), json!(age(o))]
}

fn apiservice_validate(o: &Value) -> Vec<Cause> {
    let spec = &o["spec"];
    let (group, version) = (spec["group"].as_str().unwrap_or(""), spec["version"].as_str().unwrap_or(""));
    let want = format!("{version}.{group}");
    let mut causes = Vec::new();
    if version.is_empty() {
        causes.push(Cause::required("spec.version", ""));
    }
    if meta::name(o) != want.trim_end_matches('.') {
        causes.push(Cause::invalid("metadata.name", &json!(meta::name(o)), &format!("must be `spec.version+\".\"+spec.group`: {want:?}")));
    }
    causes
}

/// The resources of the smaller groups, group by group.
pub fn resources() -> Vec<ResourceDef> {
    vec![
        def("leases", "lease", "Lease", true, &[], &[]).build("coordination.k8s.io", "v1", Box::new(Simple::new().with_table(lease_columns, lease_cells))),
        def("events", "event", "Event", true, &["ev"], &[]).build("events.k8s.io", "v1", Box::new(EventsV1)),
        def("poddisruptionbudgets", "poddisruptionbudget", "PodDisruptionBudget", true, &["pdb"], &[]).build(
            "policy",
            "v1",
            Box::new(Simple::new().with_status().with_validation(pdb_validate).with_table(pdb_columns, pdb_cells)),
        ),
        def("storageclasses", "storageclass", "StorageClass", false, &["sc"], &[]).build(
            "storage.k8s.io",
            "v1",
            Box::new(Simple::new().with_defaults(sc_defaults).with_validation(sc_validate).with_table(sc_columns, sc_cells)),
        ),
        def("priorityclasses", "priorityclass", "PriorityClass", false, &["pc"], &[]).build(
            "scheduling.k8s.io",
            "v1",
            Box::new(Simple::new().with_defaults(pc_defaults).with_validation(pc_validate).with_table(pc_columns, pc_cells)),
        ),
        def("runtimeclasses", "runtimeclass", "RuntimeClass", false, &[], &[]).build("node.k8s.io", "v1", Box::new(Simple::new().with_validation(rc_validate).with_table(rc_columns, rc_cells))),
        def("apiservices", "apiservice", "APIService", false, &[], &["api-extensions"]).build(
            "apiregistration.k8s.io",
            "v1",
            Box::new(Simple::new().with_status().with_validation(apiservice_validate).with_table(apiservice_columns, apiservice_cells)),
        ),
    ]
}
