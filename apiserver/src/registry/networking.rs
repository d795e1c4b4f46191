//! `networking.k8s.io/v1` (ingresses, ingressclasses, networkpolicies) and
//! `discovery.k8s.io/v1` (endpointslices).

use serde_json::{json, Value};

use super::printers::{age, label_selector, or_none, str_cell};
use super::simple::{def, Simple};
use super::strategy::{Column, AGE_COLUMN, NAME_COLUMN};
use super::ResourceDef;
use crate::meta;

fn name(o: &Value) -> Value {
    json!(meta::name(o))
}

fn ingress_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Class", "string", "The name of the IngressClass resource that should be used for this Ingress."),
        Column::new("Hosts", "string", "Hosts that incoming requests are matched against before the ingress rule"),
        Column::new("Address", "string", "Address is a list containing ingress points for the load-balancer"),
        Column::new("Ports", "string", "Ports of TLS configurations that open"),
        AGE_COLUMN,
    ]
}

fn ingress_cells(o: &Value) -> Vec<Value> {
    let spec = &o["spec"];
    let class = spec["ingressClassName"].as_str().or(o["metadata"]["annotations"]["kubernetes.io/ingress.class"].as_str()).unwrap_or("<none>");
    let rules = spec["rules"].as_array().cloned().unwrap_or_default();
    let hosts: Vec<String> = rules.iter().map(|r| r["host"].as_str().filter(|h| !h.is_empty()).unwrap_or("*").to_string()).collect();
    let hosts = if hosts.is_empty() { "*".to_string() } else { hosts.join(",") };
    let addrs: Vec<&str> = o["status"]["loadBalancer"]["ingress"].as_array().map(|a| a.iter().filter_map(|i| i["ip"].as_str().or(i["hostname"].as_str())).collect()).unwrap_or_default();
    let ports = if spec["tls"].as_array().is_some_and(|t| !t.is_empty()) { "80, 443" } else { "80" };
    vec![name(o), json!(class), json!(hosts), json!(addrs.join(",")), json!(ports), json!(age(o))]
}

fn ingress_defaults(o: &mut Value) {
    for rule in o["spec"]["rules"].as_array_mut().into_iter().flatten() {
        for path in rule["http"]["paths"].as_array_mut().into_iter().flatten() {
            if let Some(p) = path.as_object_mut() {
                p.entry("pathType").or_insert_with(|| json!("ImplementationSpecific"));
            }
        }
    }
}

fn ingressclass_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("Controller", "string", "Controller that is responsible for handling this class"),
        Column::new("Parameters", "string", "A reference to a resource with additional parameters"),
        AGE_COLUMN,
    ]
}

fn ingressclass_cells(o: &Value) -> Vec<Value> {
    let p = &o["spec"]["parameters"];
    let params = if p.is_object() {
        let group = p["apiGroup"].as_str().map(|g| format!(".{g}")).unwrap_or_default();
        format!("{}{group}/{}", p["kind"].as_str().unwrap_or(""), p["name"].as_str().unwrap_or(""))
    } else {
        "<none>".into()
    };
    vec![name(o), str_cell(&o["spec"]["controller"]), json!(params), json!(age(o))]
}

fn netpol_columns() -> Vec<Column> {
    vec![NAME_COLUMN, Column::new("Pod-Selector", "string", "Selects the pods to which this NetworkPolicy object applies."), AGE_COLUMN]
}

fn netpol_cells(o: &Value) -> Vec<Value> {
    vec![name(o), json!(label_selector(&o["spec"]["podSelector"])), json!(age(o))]
}

fn netpol_defaults(o: &mut Value) {
    let Some(spec) = o.get_mut("spec").and_then(Value::as_object_mut) else { return };
    if spec.get("policyTypes").is_none_or(Value::is_null) {
        let mut types = vec![json!("Ingress")];
        if spec.get("egress").is_some_and(|e| !e.is_null()) {
            types.push(json!("Egress"));
        }
        spec.insert("policyTypes".into(), Value::Array(types));
    }
}

fn endpointslice_columns() -> Vec<Column> {
    vec![
        NAME_COLUMN,
        Column::new("AddressType", "string", "The IP protocol for this slice"),
        Column::new("Ports", "string", "The ports contained in this slice"),
        Column::new("Endpoints", "string", "The endpoints contained in this slice"),
        AGE_COLUMN,
    ]
}

fn endpointslice_cells(o: &Value) -> Vec<Value> {
    let ports: Vec<String> = o["ports"].as_array().map(|a| a.iter().map(|p| p["port"].as_i64().map_or("<unset>".into(), |n| n.to_string())).collect()).unwrap_or_default();
    let addrs: Vec<&str> = o["endpoints"].as_array().map(|a| a.iter().flat_map(|e| e["addresses"].as_array().into_iter().flatten().filter_map(Value::as_str)).collect()).unwrap_or_default();
    let endpoints = if addrs.len() > 3 { format!("{} + {} more...", addrs[..3].join(","), addrs.len() - 3) } else { or_none(addrs.join(",")) };
    let ports = if o["ports"].is_null() { "<unset>".to_string() } else { or_none(ports.join(",")) };
    vec![name(o), str_cell(&o["addressType"]), json!(ports), json!(endpoints), json!(age(o))]
}

/// networking.k8s.io/v1 and discovery.k8s.io/v1 resources.
pub fn resources() -> Vec<ResourceDef> {
    const NET: &str = "networking.k8s.io";
    vec![
        def("endpointslices", "endpointslice", "EndpointSlice", true, &[], &[]).build(
            "discovery.k8s.io",
            "v1",
            Box::new(Simple::new().with_fields(&["addressType"]).with_table(endpointslice_columns, endpointslice_cells)),
        ),
        def("ingressclasses", "ingressclass", "IngressClass", false, &[], &[]).build(NET, "v1", Box::new(Simple::new().with_table(ingressclass_columns, ingressclass_cells))),
        def("ingresses", "ingress", "Ingress", true, &["ing"], &[]).build(NET, "v1", Box::new(Simple::new().with_status().with_defaults(ingress_defaults).with_table(ingress_columns, ingress_cells))),
        def("networkpolicies", "networkpolicy", "NetworkPolicy", true, &["netpol"], &[]).build(
            NET,
            "v1",
            Box::new(Simple::new().with_generation().with_defaults(netpol_defaults).with_table(netpol_columns, netpol_cells)),
        ),
    ]
}
