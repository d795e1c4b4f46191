//! Which fields of each generated message reach JSON, under which name, and
//! by which of Go's rules ([`super::to_json`]).
//!
//! These are the fields kubectl's generators and typed clients set, and the
//! metadata a client may send; the rest of a message is dropped, as a
//! server that does not know a field would. Names and rules are Go's
//! `json` struct tags in `k8s.io/api` and `k8s.io/apimachinery`; a field
//! with a pointer type in Go is `ptr`.

use k8s_pb::api::apps::v1 as appsv1;
use k8s_pb::api::authentication::{v1 as authnv1, v1alpha1 as authnv1alpha1, v1beta1 as authnv1beta1};
use k8s_pb::api::authorization::v1 as authzv1;
use k8s_pb::api::autoscaling::{v1 as autoscalingv1, v2 as autoscalingv2};
use k8s_pb::api::batch::v1 as batchv1;
use k8s_pb::api::core::v1 as corev1;
use k8s_pb::api::networking::v1 as networkingv1;
use k8s_pb::api::policy::v1 as policyv1;
use k8s_pb::api::rbac::v1 as rbacv1;
use k8s_pb::api::scheduling::v1 as schedulingv1;
use k8s_pb::apimachinery::pkg::apis::meta::v1 as metav1;
use serde_json::Value;

use super::to_json::{Object, ToJson};

/// `impl ToJson` for one or more message types whose JSON is built the
/// same way from the message `$m`.
macro_rules! to_json {
    ($($ty:ty),+ => |$m:ident| $obj:expr) => {$(
        impl ToJson for $ty {
            fn to_json(&self) -> Value {
                let $m = self;
                $obj.build()
            }
        }
    )+};
}

// meta/v1

to_json!(metav1::ObjectMeta => |m| Object::new()
    .omit("name", &m.name)
    .omit("generateName", &m.generate_name)
    .omit("namespace", &m.namespace)
    .omit("uid", &m.uid)
    .omit("resourceVersion", &m.resource_version)
    .omit("generation", &m.generation)
    .omit("creationTimestamp", &m.creation_timestamp)
    .omit("labels", &m.labels)
    .omit("annotations", &m.annotations)
    .omit("ownerReferences", &m.owner_references)
    .omit("finalizers", &m.finalizers));

to_json!(metav1::OwnerReference => |m| Object::new()
    .always("apiVersion", &m.api_version)
    .always("kind", &m.kind)
    .always("name", &m.name)
    .always("uid", &m.uid)
    .ptr("controller", &m.controller)
    .ptr("blockOwnerDeletion", &m.block_owner_deletion));

to_json!(metav1::LabelSelector => |m| Object::new()
    .omit("matchLabels", &m.match_labels)
    .omit("matchExpressions", &m.match_expressions));

to_json!(metav1::LabelSelectorRequirement => |m| Object::new()
    .always("key", &m.key)
    .always("operator", &m.operator)
    .omit("values", &m.values));

// core/v1

to_json!(corev1::Namespace => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(corev1::NamespaceSpec => |m| Object::new()
    .omit("finalizers", &m.finalizers));

to_json!(corev1::ConfigMap => |m| Object::new()
    .always("metadata", &m.metadata)
    .omit("data", &m.data)
    .omit("binaryData", &m.binary_data)
    .ptr("immutable", &m.immutable));

to_json!(corev1::Secret => |m| Object::new()
    .always("metadata", &m.metadata)
    .omit("data", &m.data)
    .omit("type", &m.r#type)
    .omit("stringData", &m.string_data)
    .ptr("immutable", &m.immutable));

// Secrets and image pull secrets of a service account are not sent by
// kubectl's generator.
to_json!(corev1::ServiceAccount => |m| Object::new()
    .always("metadata", &m.metadata));

to_json!(corev1::Service => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(corev1::ServiceSpec => |m| Object::new()
    .omit("ports", &m.ports)
    .omit("selector", &m.selector)
    .omit("clusterIP", &m.cluster_ip)
    .omit("type", &m.r#type)
    .omit("externalIPs", &m.external_ips)
    .omit("sessionAffinity", &m.session_affinity)
    .omit("externalName", &m.external_name)
    .omit("clusterIPs", &m.cluster_ips));

to_json!(corev1::ServicePort => |m| Object::new()
    .omit("name", &m.name)
    .omit("protocol", &m.protocol)
    .always("port", &m.port)
    .omit("targetPort", &m.target_port)
    .omit("nodePort", &m.node_port));

to_json!(corev1::PodTemplateSpec => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(corev1::PodSpec => |m| Object::new()
    .omit("initContainers", &m.init_containers)
    .always("containers", &m.containers)
    .omit("restartPolicy", &m.restart_policy)
    .ptr("terminationGracePeriodSeconds", &m.termination_grace_period_seconds)
    .ptr("activeDeadlineSeconds", &m.active_deadline_seconds)
    .omit("dnsPolicy", &m.dns_policy)
    .omit("nodeSelector", &m.node_selector)
    .omit("serviceAccountName", &m.service_account_name)
    .omit("nodeName", &m.node_name)
    .omit("hostNetwork", &m.host_network)
    .omit("imagePullSecrets", &m.image_pull_secrets)
    .omit("hostname", &m.hostname)
    .omit("schedulerName", &m.scheduler_name)
    .omit("priorityClassName", &m.priority_class_name));

to_json!(corev1::Container => |m| Object::new()
    .always("name", &m.name)
    .omit("image", &m.image)
    .omit("command", &m.command)
    .omit("args", &m.args)
    .omit("workingDir", &m.working_dir)
    .omit("ports", &m.ports)
    .omit("env", &m.env)
    .always("resources", &m.resources)
    .omit("volumeMounts", &m.volume_mounts)
    .omit("terminationMessagePath", &m.termination_message_path)
    .omit("terminationMessagePolicy", &m.termination_message_policy)
    .omit("imagePullPolicy", &m.image_pull_policy)
    .omit("stdin", &m.stdin)
    .omit("stdinOnce", &m.stdin_once)
    .omit("tty", &m.tty));

to_json!(corev1::ContainerPort => |m| Object::new()
    .omit("name", &m.name)
    .omit("hostPort", &m.host_port)
    .always("containerPort", &m.container_port)
    .omit("protocol", &m.protocol)
    .omit("hostIP", &m.host_ip));

// Literal values only: kubectl's generators never send valueFrom.
to_json!(corev1::EnvVar => |m| Object::new()
    .always("name", &m.name)
    .omit("value", &m.value));

to_json!(corev1::ResourceRequirements => |m| Object::new()
    .omit("limits", &m.limits)
    .omit("requests", &m.requests));

to_json!(corev1::VolumeMount => |m| Object::new()
    .always("name", &m.name)
    .omit("readOnly", &m.read_only)
    .always("mountPath", &m.mount_path)
    .omit("subPath", &m.sub_path));

to_json!(corev1::LocalObjectReference => |m| Object::new()
    .always("name", &m.name));

to_json!(corev1::TypedLocalObjectReference => |m| Object::new()
    .ptr("apiGroup", &m.api_group)
    .always("kind", &m.kind)
    .always("name", &m.name));

to_json!(corev1::ResourceQuota => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(corev1::ResourceQuotaSpec => |m| Object::new()
    .omit("hard", &m.hard)
    .omit("scopes", &m.scopes)
    .ptr("scopeSelector", &m.scope_selector));

to_json!(corev1::ScopeSelector => |m| Object::new()
    .omit("matchExpressions", &m.match_expressions));

to_json!(corev1::ScopedResourceSelectorRequirement => |m| Object::new()
    .always("scopeName", &m.scope_name)
    .always("operator", &m.operator)
    .omit("values", &m.values));

// apps/v1 (status is the server's and not read)

to_json!(appsv1::Deployment => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(appsv1::DeploymentSpec => |m| Object::new()
    .ptr("replicas", &m.replicas)
    .ptr("selector", &m.selector)
    .always("template", &m.template)
    .always("strategy", &m.strategy)
    .omit("minReadySeconds", &m.min_ready_seconds)
    .ptr("revisionHistoryLimit", &m.revision_history_limit)
    .omit("paused", &m.paused)
    .ptr("progressDeadlineSeconds", &m.progress_deadline_seconds));

to_json!(appsv1::DeploymentStrategy => |m| Object::new()
    .omit("type", &m.r#type)
    .ptr("rollingUpdate", &m.rolling_update));

to_json!(appsv1::RollingUpdateDeployment => |m| Object::new()
    .ptr("maxUnavailable", &m.max_unavailable)
    .ptr("maxSurge", &m.max_surge));

// batch/v1

to_json!(batchv1::Job => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(batchv1::JobTemplateSpec => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(batchv1::JobSpec => |m| Object::new()
    .ptr("parallelism", &m.parallelism)
    .ptr("completions", &m.completions)
    .ptr("activeDeadlineSeconds", &m.active_deadline_seconds)
    .ptr("backoffLimit", &m.backoff_limit)
    .ptr("selector", &m.selector)
    .ptr("manualSelector", &m.manual_selector)
    .always("template", &m.template)
    .ptr("ttlSecondsAfterFinished", &m.ttl_seconds_after_finished)
    .ptr("completionMode", &m.completion_mode)
    .ptr("suspend", &m.suspend));

to_json!(batchv1::CronJob => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(batchv1::CronJobSpec => |m| Object::new()
    .always("schedule", &m.schedule)
    .ptr("timeZone", &m.time_zone)
    .ptr("startingDeadlineSeconds", &m.starting_deadline_seconds)
    .omit("concurrencyPolicy", &m.concurrency_policy)
    .ptr("suspend", &m.suspend)
    .always("jobTemplate", &m.job_template)
    .ptr("successfulJobsHistoryLimit", &m.successful_jobs_history_limit)
    .ptr("failedJobsHistoryLimit", &m.failed_jobs_history_limit));

// networking/v1

to_json!(networkingv1::Ingress => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(networkingv1::IngressSpec => |m| Object::new()
    .ptr("ingressClassName", &m.ingress_class_name)
    .ptr("defaultBackend", &m.default_backend)
    .omit("tls", &m.tls)
    .omit("rules", &m.rules));

to_json!(networkingv1::IngressTls => |m| Object::new()
    .omit("hosts", &m.hosts)
    .omit("secretName", &m.secret_name));

to_json!(networkingv1::IngressRule => |m| Object::new()
    .omit("host", &m.host)
    .inline(&m.ingress_rule_value));

to_json!(networkingv1::IngressRuleValue => |m| Object::new()
    .ptr("http", &m.http));

to_json!(networkingv1::HttpIngressRuleValue => |m| Object::new()
    .always("paths", &m.paths));

to_json!(networkingv1::HttpIngressPath => |m| Object::new()
    .omit("path", &m.path)
    .ptr("pathType", &m.path_type)
    .always("backend", &m.backend));

to_json!(networkingv1::IngressBackend => |m| Object::new()
    .ptr("service", &m.service)
    .ptr("resource", &m.resource));

to_json!(networkingv1::IngressServiceBackend => |m| Object::new()
    .always("name", &m.name)
    .ptr("port", &m.port));

to_json!(networkingv1::ServiceBackendPort => |m| Object::new()
    .omit("name", &m.name)
    .omit("number", &m.number));

// policy/v1

to_json!(policyv1::PodDisruptionBudget => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(policyv1::PodDisruptionBudgetSpec => |m| Object::new()
    .ptr("minAvailable", &m.min_available)
    .ptr("selector", &m.selector)
    .ptr("maxUnavailable", &m.max_unavailable)
    .ptr("unhealthyPodEvictionPolicy", &m.unhealthy_pod_eviction_policy));

// autoscaling/v1 and v2 (kubectl autoscale)

to_json!(autoscalingv1::HorizontalPodAutoscaler, autoscalingv2::HorizontalPodAutoscaler => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(autoscalingv1::CrossVersionObjectReference, autoscalingv2::CrossVersionObjectReference => |m| Object::new()
    .always("kind", &m.kind)
    .always("name", &m.name)
    .omit("apiVersion", &m.api_version));

to_json!(autoscalingv1::HorizontalPodAutoscalerSpec => |m| Object::new()
    .always("scaleTargetRef", &m.scale_target_ref)
    .ptr("minReplicas", &m.min_replicas)
    .always("maxReplicas", &m.max_replicas)
    .ptr("targetCPUUtilizationPercentage", &m.target_cpu_utilization_percentage));

to_json!(autoscalingv2::HorizontalPodAutoscalerSpec => |m| Object::new()
    .always("scaleTargetRef", &m.scale_target_ref)
    .ptr("minReplicas", &m.min_replicas)
    .always("maxReplicas", &m.max_replicas)
    .omit("metrics", &m.metrics));

// Resource metrics only, the ones kubectl autoscale writes.
to_json!(autoscalingv2::MetricSpec => |m| Object::new()
    .always("type", &m.r#type)
    .ptr("resource", &m.resource));

to_json!(autoscalingv2::ResourceMetricSource => |m| Object::new()
    .always("name", &m.name)
    .always("target", &m.target));

to_json!(autoscalingv2::MetricTarget => |m| Object::new()
    .always("type", &m.r#type)
    .ptr("value", &m.value)
    .ptr("averageValue", &m.average_value)
    .ptr("averageUtilization", &m.average_utilization));

// rbac/v1 (a ClusterRole's aggregationRule is not read)

to_json!(rbacv1::Role, rbacv1::ClusterRole => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("rules", &m.rules));

to_json!(rbacv1::PolicyRule => |m| Object::new()
    .always("verbs", &m.verbs)
    .omit("apiGroups", &m.api_groups)
    .omit("resources", &m.resources)
    .omit("resourceNames", &m.resource_names)
    .omit("nonResourceURLs", &m.non_resource_ur_ls));

to_json!(rbacv1::RoleBinding, rbacv1::ClusterRoleBinding => |m| Object::new()
    .always("metadata", &m.metadata)
    .omit("subjects", &m.subjects)
    .always("roleRef", &m.role_ref));

to_json!(rbacv1::Subject => |m| Object::new()
    .always("kind", &m.kind)
    .omit("apiGroup", &m.api_group)
    .always("name", &m.name)
    .omit("namespace", &m.namespace));

to_json!(rbacv1::RoleRef => |m| Object::new()
    .always("apiGroup", &m.api_group)
    .always("kind", &m.kind)
    .always("name", &m.name));

// scheduling/v1

to_json!(schedulingv1::PriorityClass => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("value", &m.value)
    .omit("globalDefault", &m.global_default)
    .omit("description", &m.description)
    .ptr("preemptionPolicy", &m.preemption_policy));

// authorization/v1 (kubectl auth can-i; the 1.31+ field and label
// selectors of ResourceAttributes are not read)

to_json!(authzv1::SelfSubjectAccessReview => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(authzv1::SelfSubjectAccessReviewSpec => |m| Object::new()
    .ptr("resourceAttributes", &m.resource_attributes)
    .ptr("nonResourceAttributes", &m.non_resource_attributes));

to_json!(authzv1::ResourceAttributes => |m| Object::new()
    .omit("namespace", &m.namespace)
    .omit("verb", &m.verb)
    .omit("group", &m.group)
    .omit("version", &m.version)
    .omit("resource", &m.resource)
    .omit("subresource", &m.subresource)
    .omit("name", &m.name));

to_json!(authzv1::NonResourceAttributes => |m| Object::new()
    .omit("path", &m.path)
    .omit("verb", &m.verb));

to_json!(authzv1::SelfSubjectRulesReview => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(authzv1::SelfSubjectRulesReviewSpec => |m| Object::new()
    .omit("namespace", &m.namespace));

// authentication (kubectl auth whoami): the request is metadata only.

to_json!(authnv1::SelfSubjectReview, authnv1beta1::SelfSubjectReview, authnv1alpha1::SelfSubjectReview => |m| Object::new()
    .always("metadata", &m.metadata));

// authentication: `kubectl create token` (a ServiceAccount's `token`
// subresource) and TokenReview.

to_json!(authnv1::TokenRequest => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(authnv1::TokenRequestSpec => |m| Object::new()
    .omit("audiences", &m.audiences)
    .ptr("expirationSeconds", &m.expiration_seconds)
    .ptr("boundObjectRef", &m.bound_object_ref));

to_json!(authnv1::BoundObjectReference => |m| Object::new()
    .omit("kind", &m.kind)
    .omit("apiVersion", &m.api_version)
    .omit("name", &m.name)
    .omit("uid", &m.u_id));

to_json!(authnv1::TokenReview => |m| Object::new()
    .always("metadata", &m.metadata)
    .always("spec", &m.spec));

to_json!(authnv1::TokenReviewSpec => |m| Object::new()
    .omit("token", &m.token)
    .omit("audiences", &m.audiences));
