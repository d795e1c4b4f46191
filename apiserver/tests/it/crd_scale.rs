//! The scale subresource of custom resources, driven by kubectl 1.33 and
//! 1.27, curl and the `kube` crate: a CRD with `subresources.scale` (and a
//! label selector path) serves `/scale` as an `autoscaling/v1` Scale,
//! discovery and OpenAPI list it, `kubectl scale` and `get
//! --subresource=scale` work, the custom resource's schema still decides
//! (a negative size is refused), a bad scale path is refused with kube's
//! message, and a server-side apply on `/scale` owns the custom resource's
//! replicas field (entry with subresource `scale`), with conflicts as on
//! built-ins.

use std::time::Duration;

use serde_json::{json, Value};

use crate::common::{body_of, curl_admin, eventually, json, Server};

/// A CRD of group `scaleTAG.example.com` whose Widgets keep their replicas
/// at `.spec.size`.
fn crd(tag: &str) -> String {
    r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.scaleTAG.example.com
spec:
  group: scaleTAG.example.com
  scope: Namespaced
  names:
    plural: widgets
    singular: widget
    kind: Widget
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {}
      scale:
        specReplicasPath: .spec.size
        statusReplicasPath: .status.ready
        labelSelectorPath: .status.selector
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: integer
                minimum: 0
              color:
                type: string
          status:
            type: object
            properties:
              ready:
                type: integer
              selector:
                type: string
"#
    .replace("TAG", tag)
}

fn widget(tag: &str, name: &str, size: i64) -> String {
    format!("apiVersion: scale{tag}.example.com/v1\nkind: Widget\nmetadata:\n  name: {name}\nspec:\n  size: {size}\n  color: red\n")
}

/// The `widgets/scale` entry of the group version's discovery document.
fn discovered_scale(s: &Server, minor: u32, tag: &str) -> Option<Value> {
    let doc = json(&s.kubectl(minor, &["get", "--raw", &format!("/apis/scale{tag}.example.com/v1")]));
    doc["resources"].as_array()?.iter().find(|r| r["name"] == "widgets/scale").cloned()
}

/// A PATCH of `path` through curl as admin: (status code, body).
fn patch(s: &Server, path: &str, content_type: &str, body: &str) -> (u16, Value) {
    let resp = curl_admin(s, path, &["-X", "PATCH", "-H", &format!("Content-Type: {content_type}"), "--data-binary", body]);
    let code = resp.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = serde_json::from_str(&body_of(&resp)).unwrap_or(Value::Null);
    (code, body)
}

fn suite(s: &Server, minor: u32) {
    let tag = minor.to_string();
    let group = format!("scale{tag}.example.com");
    let crd_name = format!("widgets.{group}");
    // Qualified: each kubectl version's suite has its own group of Widgets.
    let res = crd_name.as_str();
    let w1_res = format!("{res}/w1");
    s.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&crd(&tag))).ok();
    s.kubectl(minor, &["wait", "--for=condition=Established", &format!("crd/{crd_name}"), "--timeout=30s"]).ok();

    // Discovery lists the subresource with the Scale's kind.
    let entry = eventually("widgets/scale in discovery", || discovered_scale(s, minor, &tag));
    assert_eq!((entry["kind"].clone(), entry["group"].clone(), entry["version"].clone()), (json!("Scale"), json!("autoscaling"), json!("v1")), "{entry}");
    assert_eq!(entry["verbs"], json!(["get", "patch", "update"]), "{entry}");
    let openapi = s.kubectl(minor, &["get", "--raw", &format!("/openapi/v3/apis/{group}/v1")]);
    assert!(json(&openapi)["paths"].get(format!("/apis/{group}/v1/namespaces/{{namespace}}/widgets/{{name}}/scale")).is_some(), "no scale path in the OpenAPI v3 document");

    // A widget and its Scale.
    let created = eventually("widgets to be served", || {
        let out = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&widget(&tag, "w1", 2)));
        (out.code == 0).then_some(out.stdout)
    });
    assert_eq!(created.trim(), format!("widget.{group}/w1 created"));
    s.kubectl(minor, &["patch", res, "w1", "--subresource=status", "--type=merge", "-p", r#"{"status":{"ready":1,"selector":"app=w1"}}"#]).ok();
    let w1 = json(&s.kubectl(minor, &["get", res, "w1", "-o", "json"]));
    let scale = json(&s.kubectl(minor, &["get", res, "w1", "--subresource=scale", "-o", "json"]));
    assert_eq!((scale["apiVersion"].clone(), scale["kind"].clone()), (json!("autoscaling/v1"), json!("Scale")), "{scale}");
    for k in ["name", "namespace", "uid", "resourceVersion", "creationTimestamp"] {
        assert_eq!(scale["metadata"][k], w1["metadata"][k], "{k}: {scale}");
    }
    assert_eq!(scale["spec"], json!({"replicas": 2}), "{scale}");
    assert_eq!(scale["status"], json!({"replicas": 1, "selector": "app=w1"}), "{scale}");

    // kubectl scale writes .spec.size, under the preconditions it gives.
    let scaled = s.kubectl(minor, &["scale", &w1_res, "--replicas=5"]);
    assert_eq!(scaled.ok().trim(), format!("widget.{group}/w1 scaled"));
    let w1 = json(&s.kubectl(minor, &["get", res, "w1", "-o", "json"]));
    assert_eq!(w1["spec"], json!({"size": 5, "color": "red"}), "{w1}");
    let stale = s.kubectl(minor, &["scale", &w1_res, "--replicas=6", "--resource-version=1"]);
    assert!(stale.stderr.contains("Expected resource version to be 1, was"), "{stale:?}");
    // The server holds a Scale's resourceVersion as a precondition.
    let path = format!("/apis/{group}/v1/namespaces/default/widgets/w1/scale");
    let (code, status) = patch(s, &path, "application/merge-patch+json", r#"{"metadata":{"resourceVersion":"1"},"spec":{"replicas":6}}"#);
    assert_eq!(code, 409, "{status}");
    assert_eq!(
        status["message"],
        format!("Operation cannot be fulfilled on widgets.{group} \"w1\": the object has been modified; please apply your changes to the latest version and try again"),
        "{status}"
    );
    let current = s.kubectl(minor, &["scale", &w1_res, "--replicas=3", "--current-replicas=5"]);
    assert_eq!(current.ok().trim(), format!("widget.{group}/w1 scaled"));
    let table = s.kubectl(minor, &["get", res, "w1", "--subresource=scale"]);
    // The table is the custom resource's (its columns over the Scale), as
    // kube's CR handler keeps the resource's table convertor for /scale.
    let rows: Vec<Vec<&str>> = table.ok().lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!((rows[0].clone(), rows[1][0]), (vec!["NAME", "AGE"], "w1"), "{table:?}");

    // Negative replicas: kubectl refuses them itself; through the API the
    // widget's schema and then kube's scale checks of custom resources do.
    let negative = s.kubectl(minor, &["scale", &w1_res, "--replicas=-1"]);
    assert!(negative.stderr.contains("must be greater than or equal to 0"), "{negative:?}");
    let (code, status) = patch(s, &path, "application/merge-patch+json", r#"{"spec":{"replicas":-1}}"#);
    assert_eq!(code, 422, "{status}");
    let want = format!(
        "Widget.{group} \"w1\" is invalid: [spec.size: Invalid value: -1: spec.size in body should be greater than or equal to 0, .spec.size: Invalid value: -1: should be a non-negative integer]"
    );
    assert_eq!(status["message"], want, "{status}");
    // Replicas a Go Scale cannot hold are refused as its decoder does.
    for (bad, got) in [(r#""3""#, "string"), ("1.5", "number 1.5"), ("3000000000", "number 3000000000")] {
        let (code, status) = patch(s, &path, "application/merge-patch+json", &format!(r#"{{"spec":{{"replicas":{bad}}}}}"#));
        let want = format!("Scale in version \"v1\" cannot be handled as a Scale: json: cannot unmarshal {got} into Go struct field ScaleSpec.spec.replicas of type int32");
        assert_eq!((code, status["message"].as_str()), (400, Some(want.as_str())), "{status}");
    }
    // The scale fields are checked on the custom resource itself too.
    let huge = s.kubectl(minor, &["patch", &w1_res, "--type=merge", "-p", r#"{"status":{"ready":3000000000}}"#, "--subresource=status"]);
    assert!(huge.stderr.contains(".status.ready: Invalid value: 3000000000: should be less than or equal to 2147483647"), "{huge:?}");
    // Strategic merge patches and JSON patches of the Scale work too.
    let (code, scale) = patch(s, &path, "application/strategic-merge-patch+json", r#"{"spec":{"replicas":4}}"#);
    assert_eq!((code, scale["spec"]["replicas"].clone()), (200, json!(4)), "{scale}");
    let (code, scale) = patch(s, &path, "application/json-patch+json", r#"[{"op":"replace","path":"/spec/replicas","value":7}]"#);
    assert_eq!((code, scale["spec"]["replicas"].clone()), (200, json!(7)), "{scale}");
    assert_eq!(json(&s.kubectl(minor, &["get", res, "w1", "-o", "json"]))["spec"]["size"], 7);

    // A bad scale path in a CRD, as kube words it.
    let bad = crd(&format!("bad{tag}")).replace("specReplicasPath: .spec.size", "specReplicasPath: .status.size");
    let refused = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&bad));
    assert_ne!(refused.code, 0, "{refused:?}");
    assert!(refused.stderr.contains(r#"spec.subresources.scale.specReplicasPath: Invalid value: ".status.size": should be a json path under .spec"#), "{refused:?}");
    let bad = crd(&format!("bad{tag}"))
        .replace("statusReplicasPath: .status.ready", "statusReplicasPath: status.ready")
        .replace("labelSelectorPath: .status.selector", "labelSelectorPath: .metadata.labels");
    let refused = s.kubectl_stdin(minor, &["create", "-f", "-"], Some(&bad));
    assert!(refused.stderr.contains(r#"spec.subresources.scale.statusReplicasPath: Invalid value: "status.ready": must be a simple json path starting with ."#), "{refused:?}");
    assert!(refused.stderr.contains(r#"spec.subresources.scale.labelSelectorPath: Invalid value: ".metadata.labels": should be a json path under either .spec or .status"#), "{refused:?}");

    // Server-side apply: a owns the widget's size; b's Scale conflicts.
    let applied = s.kubectl_stdin(minor, &["apply", "--server-side", "--field-manager=a", "-f", "-"], Some(&widget(&tag, "w2", 1)));
    assert_eq!(applied.ok().trim(), format!("widget.{group}/w2 serverside-applied"));
    let w2 = format!("/apis/{group}/v1/namespaces/default/widgets/w2/scale");
    let config = "apiVersion: autoscaling/v1\nkind: Scale\nmetadata:\n  name: w2\nspec:\n  replicas: 3\n";
    let (code, status) = patch(s, &format!("{w2}?fieldManager=b"), "application/apply-patch+yaml", config);
    assert_eq!(code, 409, "{status}");
    assert_eq!(status["message"], r#"Apply failed with 1 conflict: conflict with "a": .spec.replicas"#, "{status}");
    assert_eq!(status["details"]["causes"], json!([{"reason": "FieldManagerConflict", "message": "conflict with \"a\"", "field": ".spec.replicas"}]), "{status}");
    let (code, scale) = patch(s, &format!("{w2}?fieldManager=b&force=true"), "application/apply-patch+yaml", config);
    assert_eq!((code, scale["spec"]["replicas"].clone()), (200, json!(3)), "{scale}");
    let got = json(&s.kubectl(minor, &["get", res, "w2", "-o", "json", "--show-managed-fields"]));
    assert_eq!(got["spec"]["size"], 3, "{got}");
    let entries = got["metadata"]["managedFields"].as_array().cloned().unwrap_or_default();
    let entry = |m: &str| entries.iter().find(|e| e["manager"] == m).cloned().unwrap_or_else(|| panic!("no entry of {m} in {got}"));
    let b = entry("b");
    assert_eq!((b["operation"].clone(), b["apiVersion"].clone(), b["subresource"].clone()), (json!("Apply"), json!(format!("{group}/v1")), json!("scale")), "{b}");
    assert_eq!(b["fieldsV1"], json!({"f:spec": {"f:size": {}}}), "{b}");
    let a = entry("a");
    assert_eq!(a["fieldsV1"]["f:spec"], json!({"f:color": {}}), "a lost the size: {a}");
    // a's next apply of its size conflicts with b's apply through /scale.
    let again = s.kubectl_stdin(minor, &["apply", "--server-side", "--field-manager=a", "-f", "-"], Some(&widget(&tag, "w2", 1)));
    assert!(again.stderr.contains(r#"conflict with "b" with subresource "scale": .spec.size"#), "{again:?}");

    // Without the scale subresource in the CRD, it goes from discovery.
    if minor == 33 {
        let without = crd(&tag).replace("      scale:\n        specReplicasPath: .spec.size\n        statusReplicasPath: .status.ready\n        labelSelectorPath: .status.selector\n", "");
        s.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&without)).ok();
        eventually("widgets/scale to leave discovery", || discovered_scale(s, minor, &tag).is_none().then_some(()));
        let gone = s.kubectl(minor, &["get", res, "w1", "--subresource=scale"]);
        assert_ne!(gone.code, 0, "{gone:?}");
        s.kubectl_stdin(minor, &["apply", "-f", "-"], Some(&crd(&tag))).ok();
        eventually("widgets/scale back in discovery", || discovered_scale(s, minor, &tag));
    }
}

#[test]
fn custom_resource_scale_with_kubectl() {
    let s = Server::start();
    for minor in [33, 27] {
        suite(&s, minor);
    }
}

/// `Api::get_scale` and `Api::patch_scale` with `Patch::Apply` of the
/// `kube` crate on a custom resource.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn custom_resource_scale_with_the_kube_crate() {
    use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams};
    use kube::config::{KubeConfigOptions, Kubeconfig};

    let s = Server::start();
    let kc = Kubeconfig::read_from(s.kubeconfig()).expect("kubeconfig");
    let cfg = kube::Config::from_custom_kubeconfig(kc, &KubeConfigOptions::default()).await.expect("config");
    let c = kube::Client::try_from(cfg).expect("client");
    s.kubectl_stdin(33, &["apply", "-f", "-"], Some(&crd("kube"))).ok();
    s.kubectl(33, &["wait", "--for=condition=Established", "crd/widgets.scalekube.example.com", "--timeout=30s"]).ok();
    let widgets: Api<DynamicObject> = Api::namespaced_with(c, "default", &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("scalekube.example.com", "v1", "Widget"), "widgets"));
    let w = json!({"apiVersion": "scalekube.example.com/v1", "kind": "Widget", "metadata": {"name": "k"}, "spec": {"size": 2}});
    let mut created = None;
    for _ in 0..100 {
        match widgets.patch("k", &PatchParams::apply("owner"), &Patch::Apply(&w)).await {
            Ok(o) => {
                created = Some(o);
                break;
            }
            Err(kube::Error::Api(st)) if st.code == 404 => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(created.expect("widgets never served").data["spec"]["size"], 2);

    let scale = widgets.get_scale("k").await.unwrap();
    assert_eq!(scale.spec.and_then(|s| s.replicas), Some(2));
    assert_eq!(scale.status.map(|s| s.replicas), Some(0));

    let cfg = json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "k"}, "spec": {"replicas": 4}});
    let err = widgets.patch_scale("k", &PatchParams::apply("hpa"), &Patch::Apply(&cfg)).await.unwrap_err();
    let kube::Error::Api(st) = err else { panic!("not an API error: {err:?}") };
    assert_eq!((st.code, st.message.as_str()), (409, r#"Apply failed with 1 conflict: conflict with "owner": .spec.replicas"#));
    let scaled = widgets.patch_scale("k", &PatchParams::apply("hpa").force(), &Patch::Apply(&cfg)).await.unwrap();
    assert_eq!(scaled.spec.and_then(|s| s.replicas), Some(4));
    let w = widgets.get("k").await.unwrap();
    assert_eq!(w.data["spec"]["size"], 4);
    let hpa = w.metadata.managed_fields.unwrap_or_default().into_iter().find(|e| e.manager.as_deref() == Some("hpa")).expect("no hpa entry");
    assert_eq!((hpa.operation.as_deref(), hpa.subresource.as_deref(), hpa.api_version.as_deref()), (Some("Apply"), Some("scale"), Some("scalekube.example.com/v1")));
    assert_eq!(hpa.fields_v1.map(|f| f.0), Some(json!({"f:spec": {"f:size": {}}})));
    // The Scale shows the owner of the replicas: an apply of another
    // value by the owner is its own, no conflict.
    let again = widgets
        .patch_scale("k", &PatchParams::apply("hpa"), &Patch::Apply(&json!({"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "k"}, "spec": {"replicas": 1}})))
        .await
        .unwrap();
    assert_eq!(again.spec.and_then(|s| s.replicas), Some(1));
}
