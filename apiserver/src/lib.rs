//! A Kubernetes API server on an embedded etcd-compatible Raft store.
//!
//! Layout (after kube-apiserver's `staging/src/k8s.io/apiserver`):
//! - [`endpoints`]: the filter chain (`filters/`), one handler per verb
//!   (`handlers/`), content negotiation and responses;
//! - [`registry`]: served resources and their strategies;
//! - [`authn`], [`authz`]: who sent a request, and whether they may;
//! - [`audit`]: the audit policy, events and backends;
//! - [`admission`]: the plugins every write passes before it is stored;
//! - [`storage`]: the storage interface and its embedded and remote etcd
//!   backends;
//! - [`watchcache`]: the per-resource caches that serve list, get and watch;
//! - [`errors`]: every `Status` a client can see;
//! - [`discovery`]: the discovery documents of the served resources;
//! - [`schema`]: one compiled schema per kind, built-in or custom, and
//!   what reads it: validation, pruning, defaulting, CRD schema checks;
//! - [`openapi`]: the OpenAPI v2/v3 documents and the `fieldValidation`
//!   directive;
//! - [`server`], [`options`], [`pki`]: flags, certificates and serving.
//! - [`webhook`]: the HTTPS client of webhooks and OIDC issuers.

// `Status` is the wire error type (~280 bytes); errors are the cold path.
#![allow(clippy::result_large_err)]

pub mod admission;
pub mod audit;
pub mod authn;
pub mod authz;
pub mod cel;
pub mod controllers;
pub mod discovery;
pub mod endpoints;
pub mod errors;
pub mod fieldmanager;
pub mod health;
pub mod meta;
pub mod openapi;
pub mod options;
pub mod pki;
pub mod protobuf;
pub mod quantity;
pub mod registry;
pub mod schema;
pub mod selectors;
pub mod server;
pub mod serving;
pub mod storage;
pub mod strategicpatch;
pub mod warning;
pub mod watchcache;
pub mod webhook;
