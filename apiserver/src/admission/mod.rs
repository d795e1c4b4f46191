//! Admission: plugins that may change (mutating) or refuse (validating) a
//! write before it is stored (kube-apiserver
//! `staging/src/k8s.io/apiserver/pkg/admission`).
//!
//! The registry's generic store (`registry/store.rs`) runs, for every create,
//! update and delete:
//!
//! ```text
//! decode, prepare (defaults, managedFields)
//!   → Chain::admit     (mutating plugins, in order; each may change the object)
//!   → validation       (the resource's strategy)
//!   → Chain::validate  (validating plugins, in order; none may change it)
//!   → storage
//! ```
//!
//! A plugin sees [`Attributes`]: the operation, the object and the old one,
//! the options, the user, dry-run, the resource and subresource, and the
//! kind. Which plugins run is chosen with kube's flags
//! `--enable-admission-plugins` and `--disable-admission-plugins` over
//! kube's plugin names ([`plugins`]); they run in kube's order whatever
//! order the flags give. An admission plugin is a file in this folder and a
//! line in [`plugins::build`].

pub mod always;
pub mod cel_authorizer;
pub mod config;
pub mod default_storage_class;
pub mod default_toleration_seconds;
pub mod limit_ranger;
pub mod lookup;
pub mod matching;
pub mod namespace_lifecycle;
pub mod node_restriction;
pub mod plugins;
pub mod pod_resources;
pub mod pod_security;
pub mod policy;
pub mod priority;
pub mod resource_quota;
pub mod runtime_class;
pub mod service_account;
pub mod sources;
pub mod storage_object_in_use_protection;
#[cfg(test)]
pub(crate) mod testing;
pub mod webhook;

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::Value;

use crate::authn::UserInfo;
use crate::errors::Status;
use crate::warning::Warnings;

/// The operation being admitted (kube's `admission.Operation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// A create, or an update that creates.
    Create,
    /// An update or patch.
    Update,
    /// A delete (one object of a delete or deletecollection).
    Delete,
    /// A connect (exec, proxy); not served yet.
    Connect,
}

impl Operation {
    /// The wire name (`CREATE`, `UPDATE`, `DELETE`, `CONNECT`).
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Create => "CREATE",
            Operation::Update => "UPDATE",
            Operation::Delete => "DELETE",
            Operation::Connect => "CONNECT",
        }
    }
}

/// A group, version and kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Kind<'a> {
    /// API group (`""` for core).
    pub group: &'a str,
    /// Version.
    pub version: &'a str,
    /// Kind.
    pub kind: &'a str,
}

/// A group, version and resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Resource<'a> {
    /// API group (`""` for core).
    pub group: &'a str,
    /// Version.
    pub version: &'a str,
    /// Resource (plural).
    pub resource: &'a str,
}

/// What is being admitted (kube's `admission.Attributes`).
#[derive(Debug)]
pub struct Attributes<'a> {
    /// The operation.
    pub operation: Operation,
    /// The object's name (empty for a create with `generateName`, until
    /// the store generates it).
    pub name: &'a str,
    /// The object's namespace (empty for cluster-scoped resources).
    pub namespace: &'a str,
    /// The resource written.
    pub resource: Resource<'a>,
    /// The subresource written (`status`, `scale`), or empty.
    pub subresource: &'a str,
    /// The kind of [`Attributes::object`].
    pub kind: Kind<'a>,
    /// The kind the client sent, before any conversion; equal to `kind`
    /// until conversion webhooks map one version onto another.
    pub request_kind: Kind<'a>,
    /// The new object (create, update), which mutating plugins may change;
    /// `None` for deletes.
    pub object: Option<Value>,
    /// The object before the update or delete.
    pub old_object: Option<&'a Value>,
    /// The request's options as `meta.k8s.io/v1` JSON (`CreateOptions`,
    /// `UpdateOptions`, `DeleteOptions`).
    pub options: &'a Value,
    /// Who asked.
    pub user: &'a UserInfo,
    /// Whether nothing will be stored (`dryRun=All`): plugins with side
    /// effects must not have them.
    pub dry_run: bool,
    /// Warnings for the client (`Warning` headers): admission webhooks'
    /// warnings and the `Warn` action of ValidatingAdmissionPolicy.
    pub warnings: &'a Warnings,
    /// The request's audit record, when the request is audited.
    pub audit: Option<&'a dyn AuditAnnotations>,
    /// Whether this is the second run of the reinvocable mutating plugins
    /// (`reinvocationPolicy: IfNeeded`), because a later plugin changed the
    /// object after they ran; see [`Chain::admit`].
    pub reinvocation: bool,
}

/// Where admission writes audit annotations: the request's audit record
/// (the audit layer's record of a request implements it; the trait lives here so
/// that admission and the registry need not know the audit layer).
pub trait AuditAnnotations: Send + Sync + std::fmt::Debug {
    /// Adds `key: value`; a key set already keeps its first value, as kube's
    /// `AddAuditAnnotation` does.
    fn add_annotation(&self, key: &str, value: &str);

    /// Whether the record keeps request bodies (level `Request` or
    /// above): kube records a mutating webhook's patch only then.
    fn records_request_bodies(&self) -> bool {
        false
    }
}

impl Attributes<'_> {
    /// Adds an audit annotation (`key` is `<plugin or webhook>/<name>`, as
    /// kube writes them); a key set already keeps its first value.
    pub fn add_audit_annotation(&self, key: &str, value: &str) {
        if let Some(a) = self.audit {
            a.add_annotation(key, value);
        }
    }
}

/// A plugin that may change what is written (kube's
/// `admission.MutationInterface`).
#[async_trait]
pub trait Mutating: Send + Sync {
    /// kube's name of the plugin (`NamespaceLifecycle`).
    fn name(&self) -> &'static str;

    /// Whether the plugin looks at `op` at all (kube's `Handles`).
    fn handles(&self, op: Operation) -> bool;

    /// Admits `attrs`, possibly changing `attrs.object`.
    ///
    /// # Errors
    /// The Status refusing the request (usually 403 Forbidden, 404 for a
    /// missing namespace).
    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status>;

    /// Whether the plugin asks to run again when a later plugin changed the
    /// object after it ran (kube's `reinvocationPolicy: IfNeeded`, for
    /// admission webhooks and MutatingAdmissionPolicies). The second run has
    /// [`Attributes::reinvocation`] set.
    fn reinvocable(&self) -> bool {
        false
    }

    /// [`Mutating::admit`] for a reinvocable plugin that remembers, in
    /// `memory`, what it did in the first run of this request for use in
    /// the second (kube keeps this in the request's reinvocation context
    /// under the plugin's name), and that may itself ask for the second
    /// run: `Ok(true)` when one of its parts changed the object after an
    /// earlier part that asks to be reinvoked ran (kube's
    /// `SetShouldReinvoke`; admission webhooks are parts of one plugin). The
    /// answer of the second run is ignored. The default runs
    /// [`Mutating::admit`] and asks for nothing.
    ///
    /// # Errors
    /// As [`Mutating::admit`].
    async fn admit_remembering(&self, attrs: &mut Attributes<'_>, memory: &mut Memory) -> Result<bool, Status> {
        let _ = memory;
        self.admit(attrs).await.map(|()| false)
    }
}

/// What a mutating plugin keeps of one request between its first run and
/// its reinvocation (see [`Mutating::admit_remembering`]): any value of
/// the plugin's own type, empty at first.
#[derive(Default)]
pub struct Memory(Option<Box<dyn std::any::Any + Send + Sync>>);

impl Memory {
    /// The plugin's value, created with `T::default()` on first use (or
    /// when a value of another type was left).
    pub fn get<T: Default + Send + Sync + 'static>(&mut self) -> &mut T {
        if !self.0.as_ref().is_some_and(|b| b.is::<T>()) {
            self.0 = Some(Box::new(T::default()));
        }
        match self.0.as_mut().and_then(|b| b.downcast_mut::<T>()) {
            Some(t) => t,
            None => unreachable!("the memory was just set to a T"),
        }
    }
}

/// A plugin that may refuse what is written, without changing it (kube's
/// `admission.ValidationInterface`).
#[async_trait]
pub trait Validating: Send + Sync {
    /// kube's name of the plugin.
    fn name(&self) -> &'static str;

    /// Whether the plugin looks at `op` at all.
    fn handles(&self, op: Operation) -> bool;

    /// Validates `attrs`.
    ///
    /// # Errors
    /// The Status refusing the request.
    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status>;
}

/// The configured plugins, each phase in kube's order (kube's
/// `admission.chainAdmissionHandler`).
#[derive(Default, Clone)]
pub struct Chain {
    mutating: Vec<Arc<dyn Mutating>>,
    validating: Vec<Arc<dyn Validating>>,
}

impl Chain {
    /// A chain of these plugins, run in the order given.
    pub fn new(mutating: Vec<Arc<dyn Mutating>>, validating: Vec<Arc<dyn Validating>>) -> Self {
        Chain { mutating, validating }
    }

    /// The names of the plugins, mutating then validating.
    pub fn names(&self) -> Vec<&'static str> {
        self.mutating.iter().map(|p| p.name()).chain(self.validating.iter().map(|p| p.name())).collect()
    }

    /// Whether some plugin of either phase looks at `op`.
    pub fn handles(&self, op: Operation) -> bool {
        self.mutates(op) || self.validates(op)
    }

    /// Whether some mutating plugin looks at `op`.
    pub fn mutates(&self, op: Operation) -> bool {
        self.mutating.iter().any(|p| p.handles(op))
    }

    /// Whether some validating plugin looks at `op`.
    pub fn validates(&self, op: Operation) -> bool {
        self.validating.iter().any(|p| p.handles(op))
    }

    /// Runs the mutating plugins that handle the operation, in order.
    ///
    /// Reinvocation (kube's `reinvokeAdmissionHandler`): a plugin that is
    /// [`Mutating::reinvocable`] is remembered with the object as it left
    /// it; when a later plugin changed the object after that, or a plugin
    /// asked for it ([`Mutating::admit_remembering`]), the reinvocable
    /// plugins run once more, in order, with [`Attributes::reinvocation`]
    /// set and each with its [`Memory`] of the first run. There is no third
    /// run.
    ///
    /// # Errors
    /// The first plugin's refusal; later plugins do not run.
    pub async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        let mut left_by_reinvocable: Vec<Value> = Vec::new();
        let mut memories: Vec<Memory> = self.mutating.iter().map(|_| Memory::default()).collect();
        let mut asked = false;
        for (p, memory) in self.mutating.iter().zip(memories.iter_mut()) {
            if p.handles(attrs.operation) {
                asked |= p.admit_remembering(attrs, memory).await?;
                if p.reinvocable() {
                    left_by_reinvocable.push(attrs.object.clone().unwrap_or(Value::Null));
                }
            }
        }
        let now = attrs.object.as_ref().unwrap_or(&Value::Null);
        if asked || left_by_reinvocable.iter().any(|o| o != now) {
            attrs.reinvocation = true;
            for (p, memory) in self.mutating.iter().zip(memories.iter_mut()) {
                if p.handles(attrs.operation) && p.reinvocable() {
                    p.admit_remembering(attrs, memory).await?;
                }
            }
            attrs.reinvocation = false;
        }
        Ok(())
    }

    /// Runs the validating plugins that handle the operation, in order.
    ///
    /// # Errors
    /// The first plugin's refusal.
    pub async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        for p in &self.validating {
            if p.handles(attrs.operation) {
                p.validate(attrs).await?;
            }
        }
        Ok(())
    }
}

/// Why the admission configuration is refused (at start-up).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A name kube-apiserver does not know.
    #[error("{flag} plugin {name:?} is unknown")]
    UnknownPlugin {
        /// The flag that named it.
        flag: &'static str,
        /// The name.
        name: String,
    },
    /// Plugins both enabled and disabled (kube's wording, the names as Go
    /// prints a list: `[A B]`).
    #[error("[{}] in enable-admission-plugins and disable-admission-plugins overlapped", .0.join(" "))]
    EnabledAndDisabled(Vec<String>),
    /// A plugin's `--admission-control-config-file` entry is wrong.
    #[error("couldn't init admission plugin {plugin:?}: {message}")]
    PluginConfig {
        /// The plugin.
        plugin: &'static str,
        /// What is wrong.
        message: String,
    },
}
