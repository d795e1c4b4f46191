//! Admission webhooks (kube `admission/plugin/webhook`): the
//! `MutatingAdmissionWebhook` and `ValidatingAdmissionWebhook` plugins,
//! which send an `AdmissionReview` over HTTPS to the webhooks of the
//! MutatingWebhookConfigurations and ValidatingWebhookConfigurations and
//! act on the answers.
//!
//! - [`config`]: configurations compiled once per change into [`config::Hook`]s
//!   (rules, selectors, match conditions, failure policy, timeout, side
//!   effects, review version, reinvocation policy, an HTTPS client
//!   trusting the `caBundle`), in kube's calling order;
//! - [`dispatch`]: whether a webhook is called for a request, the call with
//!   kube's error wording, and `service` references resolved through
//!   EndpointSlices;
//! - [`review`]: the AdmissionReview sent and the checks on the answer;
//! - [`mutating`]: webhooks called one by one, JSON Patches applied,
//!   `reinvocationPolicy: IfNeeded`;
//! - [`patch`]: a webhook's JSON Patch decoded and applied as kube does,
//!   with its error wording;
//! - [`validating`]: webhooks called in parallel, any denial fails.
//!
//! Neither plugin calls a webhook about webhook configurations or
//! admission policies themselves, nor for reads, which never reach
//! admission.
//!
//! Differences from kube-apiserver: the object is sent in the version the
//! client wrote, without conversion to the version a rule under
//! `matchPolicy: Equivalent` names (kube converts, and names that version
//! in `kind` and `resource`); a patched object is not defaulted again
//! before the next webhook (kube decodes it into its typed object and
//! defaults it). Match conditions see `object`, `oldObject`, `request`
//! and `authorizer` (kube's CEL authorizer library over the server's
//! authorizer, as the request's user; conditions naming it are evaluated
//! on the blocking pool, where its checks may wait).

pub mod config;
pub mod dispatch;
pub mod mutating;
pub mod patch;
pub mod review;
pub mod service;
pub mod validating;

pub use mutating::MutatingWebhooks;
pub use validating::ValidatingWebhooks;
