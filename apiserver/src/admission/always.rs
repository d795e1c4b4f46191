//! `AlwaysAdmit` and `AlwaysDeny` (kube `plugin/pkg/admission/admit` and
//! `deny`): the trivial plugins, kept for kube's flags and for tests that
//! need a plugin with a known answer.

use async_trait::async_trait;

use super::{Attributes, Mutating, Operation, Validating};
use crate::errors::Status;

/// Admits everything.
pub struct AlwaysAdmit;

#[async_trait]
impl Mutating for AlwaysAdmit {
    fn name(&self) -> &'static str {
        "AlwaysAdmit"
    }

    fn handles(&self, _op: Operation) -> bool {
        false
    }

    async fn admit(&self, _attrs: &mut Attributes<'_>) -> Result<(), Status> {
        Ok(())
    }
}

/// Refuses every write, in both phases.
pub struct AlwaysDeny;

fn deny(attrs: &Attributes<'_>) -> Status {
    Status::forbidden_because(attrs.resource.group, attrs.resource.resource, attrs.name, "admission control is denying all modifications")
}

#[async_trait]
impl Mutating for AlwaysDeny {
    fn name(&self) -> &'static str {
        "AlwaysDeny"
    }

    fn handles(&self, _op: Operation) -> bool {
        true
    }

    async fn admit(&self, attrs: &mut Attributes<'_>) -> Result<(), Status> {
        Err(deny(attrs))
    }
}

#[async_trait]
impl Validating for AlwaysDeny {
    fn name(&self) -> &'static str {
        "AlwaysDeny"
    }

    fn handles(&self, _op: Operation) -> bool {
        true
    }

    async fn validate(&self, attrs: &Attributes<'_>) -> Result<(), Status> {
        Err(deny(attrs))
    }
}
