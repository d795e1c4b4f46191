//! The `authorizer` variable of admission policies (kube's CEL
//! `authorizer` library: `authorizer.group('apps').resource('deployments')
//! .namespace('ns').name('n').check('create').allowed()`, `.path('/x')`,
//! `.serviceAccount(ns, name)`, `.reason()`, `.errored()`, `.error()`).
//!
//! Not written yet: [`register`] adds no function.

use kube_cel::cel::Context;

/// Registers the authorizer's functions into `ctx`.
pub(super) fn register(_ctx: &mut Context<'static>) {}
