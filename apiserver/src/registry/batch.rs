//! The `batch` group, version v1: jobs and cronjobs.

use std::time::SystemTime;

use serde_json::{json, Value};

use super::core::{default_pod_spec, validate_pod_spec};
use super::printers::{age, human_duration, label_selector, or_none, since, str_cell};
use super::simple::{def, Simple};
use super::strategy::{Column, Strategy, AGE_COLUMN, NAME_COLUMN};
use super::ResourceDef;
use crate::errors::Cause;
use crate::meta;

const GROUP: &str = "batch";

fn wide_template_columns() -> [Column; 3] {
    [
        Column::wide("Containers", "string", "Names of each container in the template."),
        Column::wide("Images", "string", "Images referenced by each container in the template."),
        Column::wide("Selector", "string", "Selector is a label query over pods that should match the pod count."),
    ]
}

fn template_cells(template: &Value, selector: &Value) -> [Value; 3] {
    let cs = template["spec"]["containers"].as_array().cloned().unwrap_or_default();
    let names: Vec<&str> = cs.iter().map(|c| c["name"].as_str().unwrap_or("")).collect();
    let images: Vec<&str> = cs.iter().map(|c| c["image"].as_str().unwrap_or("")).collect();
    [json!(names.join(",")), json!(images.join(",")), json!(label_selector(selector))]
}

fn default_job_spec(spec: &mut Value) {
    let Some(s) = spec.as_object_mut() else { return };
    let indexed = s.get("completionMode").and_then(Value::as_str) == Some("Indexed");
    if s.get("completions").is_none_or(Value::is_null) && s.get("parallelism").is_none_or(Value::is_null) {
        s.insert("completions".into(), json!(1));
        s.insert("parallelism".into(), json!(1));
    }
    s.entry("parallelism").or_insert_with(|| json!(1));
    s.entry("backoffLimit").or_insert_with(|| json!(if indexed { 2147483647 } else { 6 }));
    s.entry("completionMode").or_insert_with(|| json!("NonIndexed"));
    s.entry("suspend").or_insert_with(|| json!(false));
    s.entry("podReplacementPolicy").or_insert_with(|| json!("TerminatingOrFailed"));
    if let Some(t) = s.get_mut("template") {
        default_pod_spec(&mut t["spec"]);
    }
}

fn validate_job_template(spec: &Value, path: &str) -> Vec<Cause> {
    let mut causes = validate_pod_spec(&spec["template"]["spec"], &format!("{path}.template.spec"));
    let rp = &spec["template"]["spec"]["restartPolicy"];
    if !matches!(rp.as_str(), Some("OnFailure" | "Never")) {
        let mut c = Cause::invalid(&format!("{path}.template.spec.restartPolicy"), rp, "");
        c.reason = "FieldValueNotSupported".into();
        c.message = format!("Unsupported value: {}: supported values: \"OnFailure\", \"Never\"", rp.as_str().map(|s| format!("{s:?}")).unwrap_or_else(|| "\"\"".into()));
        causes.push(c);
    }
    for f in ["parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"] {
        if spec[f].as_i64().is_some_and(|n| n < 0) {
            causes.push(Cause::invalid(&format!("{path}.{f}"), &spec[f], "must be greater than or equal to 0"));
        }
    }
    causes
}

/// Jobs: the generated `controller-uid` selector and template labels of
/// kube's job strategy, unless `manualSelector` is set.
struct Jobs;
impl Strategy for Jobs {
    fn has_status(&self) -> bool {
        true
    }
    fn has_generation(&self) -> bool {
        true
    }
    fn default(&self, o: &mut Value) {
        default_job_spec(&mut o["spec"]);
    }
    fn prepare_for_create(&self, o: &mut Value) {
        if let Some(m) = o.as_object_mut() {
            m.remove("status");
        }
        if o["spec"]["manualSelector"].as_bool() == Some(true) {
            return;
        }
        let uid = meta::meta_str(o, "uid").to_string();
        let name = meta::name(o).to_string();
        if o["spec"]["selector"].is_null() {
            o["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
        }
        let labels = &mut o["spec"]["template"]["metadata"]["labels"];
        if !labels.is_object() {
            *labels = json!({});
        }
        if let Some(l) = labels.as_object_mut() {
            l.insert("batch.kubernetes.io/controller-uid".into(), json!(uid));
            l.insert("batch.kubernetes.io/job-name".into(), json!(name));
            l.insert("controller-uid".into(), json!(uid));
            l.insert("job-name".into(), json!(name));
        }
    }
    fn validate(&self, o: &Value) -> Vec<Cause> {
        validate_job_template(&o["spec"], "spec")
    }
    fn selectable_fields(&self) -> &'static [&'static str] {
        &["status.successful"]
    }
    fn field_value(&self, o: &Value, field: &str) -> String {
        if field == "status.successful" {
            return o["status"]["succeeded"].as_i64().unwrap_or(0).to_string();
        }
        super::validation::field_string(o, field)
    }
    fn columns(&self) -> Vec<Column> {
        let mut c = vec![
            NAME_COLUMN,
            Column::new("Status", "string", "Status of the job."),
            Column::new("Completions", "string", "The number of pods which reached phase Succeeded."),
            Column::new("Duration", "string", "Time required to complete the job."),
            AGE_COLUMN,
        ];
        c.extend(wide_template_columns());
        c
    }
    fn cells(&self, o: &Value) -> Vec<Value> {
        let spec = &o["spec"];
        let st = &o["status"];
        let succeeded = st["succeeded"].as_i64().unwrap_or(0);
        let completions = match spec["completions"].as_i64() {
            Some(c) => format!("{succeeded}/{c}"),
            None => match spec["parallelism"].as_i64() {
                Some(p) if p > 1 => format!("{succeeded}/1 of {p}"),
                _ => format!("{succeeded}/1"),
            },
        };
        let start = st["startTime"].as_str().and_then(meta::parse_time);
        let end = st["completionTime"].as_str().and_then(meta::parse_time).unwrap_or_else(SystemTime::now);
        let duration = match start {
            Some(s) => end.duration_since(s).map(human_duration).unwrap_or_default(),
            None => String::new(),
        };
        let has = |t: &str| st["conditions"].as_array().is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"));
        let status = if has("Failed") {
            "Failed"
        } else if has("Complete") {
            "Complete"
        } else if has("FailureTarget") {
            "FailureTarget"
        } else if has("SuccessCriteriaMet") {
            "SuccessCriteriaMet"
        } else if spec["suspend"].as_bool() == Some(true) || has("Suspended") {
            "Suspended"
        } else if meta::is_deleting(o) {
            "Terminating"
        } else {
            "Running"
        };
        let mut cells = vec![json!(meta::name(o)), json!(status), json!(completions), json!(duration), json!(age(o))];
        cells.extend(template_cells(&spec["template"], &spec["selector"]));
        cells
    }
}

fn cronjob_defaults(o: &mut Value) {
    let Some(s) = o.get_mut("spec").and_then(Value::as_object_mut) else { return };
    s.entry("concurrencyPolicy").or_insert_with(|| json!("Allow"));
    s.entry("suspend").or_insert_with(|| json!(false));
    s.entry("successfulJobsHistoryLimit").or_insert_with(|| json!(3));
    s.entry("failedJobsHistoryLimit").or_insert_with(|| json!(1));
    if let Some(js) = s.get_mut("jobTemplate").and_then(|t| t.get_mut("spec")) {
        default_job_spec(js);
    }
}

fn cronjob_validate(o: &Value) -> Vec<Cause> {
    let spec = &o["spec"];
    let mut causes = Vec::new();
    let schedule = spec["schedule"].as_str().unwrap_or("");
    if schedule.is_empty() {
        causes.push(Cause::required("spec.schedule", ""));
    } else if !schedule.starts_with('@') && schedule.split_whitespace().count() != 5 {
        causes.push(Cause::invalid("spec.schedule", &spec["schedule"], &format!("expected exactly 5 fields, found {}: {schedule}", schedule.split_whitespace().count())));
    }
    causes.extend(validate_job_template(&spec["jobTemplate"]["spec"], "spec.jobTemplate.spec"));
    causes
}

fn cronjob_columns() -> Vec<Column> {
    let mut c = vec![
        NAME_COLUMN,
        Column::new("Schedule", "string", "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron."),
        Column::new("Timezone", "string", "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones."),
        Column::new("Suspend", "boolean", "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions."),
        Column::new("Active", "integer", "A list of pointers to currently running jobs."),
        Column::new("Last Schedule", "string", "Information when was the last time the job was successfully scheduled."),
        AGE_COLUMN,
    ];
    c.extend(wide_template_columns());
    c
}

fn cronjob_cells(o: &Value) -> Vec<Value> {
    let spec = &o["spec"];
    let last = if o["status"]["lastScheduleTime"].is_string() { since(&o["status"]["lastScheduleTime"]) } else { "<none>".into() };
    let suspend = if spec["suspend"].as_bool() == Some(true) { "True" } else { "False" };
    let mut cells = vec![
        json!(meta::name(o)),
        str_cell(&spec["schedule"]),
        json!(or_none(spec["timeZone"].as_str().unwrap_or("").to_string())),
        json!(suspend),
        json!(o["status"]["active"].as_array().map_or(0, Vec::len)),
        json!(last),
        json!(age(o)),
    ];
    cells.extend(template_cells(&spec["jobTemplate"]["spec"]["template"], &spec["jobTemplate"]["spec"]["selector"]));
    cells
}

/// batch/v1 resources.
pub fn resources() -> Vec<ResourceDef> {
    vec![
        def("cronjobs", "cronjob", "CronJob", true, &["cj"], &["all"]).build(
            GROUP,
            "v1",
            Box::new(Simple::new().with_status().with_defaults(cronjob_defaults).with_validation(cronjob_validate).with_table(cronjob_columns, cronjob_cells)),
        ),
        def("jobs", "job", "Job", true, &[], &["all"]).build(GROUP, "v1", Box::new(Jobs)),
    ]
}
