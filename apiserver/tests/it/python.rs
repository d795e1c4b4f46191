//! The Python `kubernetes` client (PyPI; `.ci/setup` installs it): create,
//! list and watch, with typed models and plain JSON on the wire.

use std::process::Command;

use crate::common::Server;

const SCRIPT: &str = r#"
import sys, threading, time
from kubernetes import client, config, watch

config.load_kube_config(config_file=sys.argv[1])
core = client.CoreV1Api()
labels = {"from": "python"}
core.create_namespaced_config_map("default", {"metadata": {"name": "py1", "labels": labels}, "data": {"a": "1"}})
cms = core.list_namespaced_config_map("default", label_selector="from=python")
assert [c.metadata.name for c in cms.items] == ["py1"], cms
assert cms.items[0].data == {"a": "1"}

# A watch without a resourceVersion starts with synthetic ADDED events.
w = watch.Watch()
first = next(iter(w.stream(core.list_namespaced_config_map, "default", label_selector="from=python", timeout_seconds=5)))
w.stop()
assert (first["type"], first["object"].metadata.name) == ("ADDED", "py1"), first

# From the list's resourceVersion it sees only later changes.
def later():
    time.sleep(1)
    core.create_namespaced_config_map("default", {"metadata": {"name": "py2", "labels": labels}})
    core.patch_namespaced_config_map("py2", "default", {"data": {"b": "2"}})
    core.delete_namespaced_config_map("py2", "default")
threading.Thread(target=later).start()
seen = []
w = watch.Watch()
for ev in w.stream(core.list_namespaced_config_map, "default", label_selector="from=python", resource_version=cms.metadata.resource_version, timeout_seconds=20):
    seen.append((ev["type"], ev["object"].metadata.name))
    if ev["type"] == "DELETED":
        w.stop()
assert seen == [("ADDED", "py2"), ("MODIFIED", "py2"), ("DELETED", "py2")], seen

# Another group, and a version stored as another.
apps = client.AppsV1Api()
apps.create_namespaced_deployment("default", {
    "metadata": {"name": "pyweb"},
    "spec": {"selector": {"matchLabels": {"app": "pyweb"}},
             "template": {"metadata": {"labels": {"app": "pyweb"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}})
assert apps.read_namespaced_deployment("pyweb", "default").spec.replicas == 1
hpa = client.AutoscalingV1Api().create_namespaced_horizontal_pod_autoscaler("default", {
    "metadata": {"name": "pyhpa"},
    "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "pyweb"}, "maxReplicas": 4, "targetCPUUtilizationPercentage": 50}})
assert hpa.spec.target_cpu_utilization_percentage == 50
v2 = client.AutoscalingV2Api().read_namespaced_horizontal_pod_autoscaler("pyhpa", "default")
assert v2.spec.metrics[0].resource.target.average_utilization == 50, v2
print("ok")
"#;

#[test]
fn python_client_create_list_watch() {
    let s = Server::start();
    let script = s.dir.path().join("client.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = Command::new("python3").arg(&script).arg(s.kubeconfig()).output().expect("python3");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success() && stdout.trim() == "ok", "python client failed (is `kubernetes` installed? see .ci/setup)\nstdout: {stdout}\nstderr: {stderr}");
}
