//! CEL's `authorizer` over the server's authorizer, shared by admission
//! policies and webhook match conditions: checks block on the async
//! authorizer, which is sound only on the blocking pool ([`run`]).

use std::sync::Arc;

use crate::errors::Status;

thread_local! {
    /// Whether this thread may block on the authorizer (see [`run`]).
    static MAY_BLOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The CEL `authorizer` variable of a request: `authorizer` asked as the
/// request's user, with `authorizer.requestResource` naming what `attrs`
/// write. Call it on the request's runtime.
pub fn variable(attrs: &crate::admission::Attributes<'_>, authorizer: &Arc<dyn crate::authz::Authorizer>) -> kube_cel::cel::Value {
    let checker = Arc::new(AuthzChecker { user: attrs.user.clone(), authorizer: authorizer.clone(), runtime: tokio::runtime::Handle::current() });
    let request = crate::cel::authorizer::RequestResource {
        group: attrs.resource.group.to_string(),
        version: attrs.resource.version.to_string(),
        resource: attrs.resource.resource.to_string(),
        subresource: attrs.subresource.to_string(),
        namespace: attrs.namespace.to_string(),
        name: attrs.name.to_string(),
    };
    crate::cel::authorizer::variable(checker, request)
}

/// CEL's `authorizer` for one user: the server's (async) authorizer,
/// asked with [`tokio::runtime::Handle::block_on`] on the runtime of the
/// request. Blocking is sound only on the blocking pool, inside [`run`];
/// anywhere else a check answers an error instead of blocking a worker.
pub struct AuthzChecker {
    /// Who is asking.
    pub user: crate::authn::UserInfo,
    /// The server's authorizer.
    pub authorizer: Arc<dyn crate::authz::Authorizer>,
    /// The runtime of the request.
    pub runtime: tokio::runtime::Handle,
}

impl crate::cel::authorizer::Checker for AuthzChecker {
    fn check(&self, c: &crate::cel::authorizer::Check<'_>) -> crate::cel::authorizer::Decision {
        use crate::cel::authorizer::Decision;
        if !MAY_BLOCK.with(std::cell::Cell::get) {
            return Decision { error: Some("authorizer checks are not available here".into()), ..Default::default() };
        }
        let attrs = crate::authz::Attributes {
            user: &self.user,
            verb: c.verb,
            resource_request: c.resource_request,
            path: c.path,
            namespace: c.namespace,
            api_group: c.group,
            api_version: c.version,
            resource: c.resource,
            subresource: c.subresource,
            name: c.name,
        };
        match self.runtime.block_on(self.authorizer.authorize(&attrs)) {
            Ok(a) => Decision { allowed: a.decision == crate::authz::Decision::Allow, reason: a.reason, error: None },
            Err(e) => Decision { error: Some(e.to_string()), ..Default::default() },
        }
    }

    /// As the ServiceAccount: its user name and kube's two ServiceAccount
    /// groups.
    fn service_account(&self, namespace: &str, name: &str) -> Arc<dyn crate::cel::authorizer::Checker> {
        let user = crate::authn::UserInfo {
            name: crate::authn::service_account_user(namespace, name),
            groups: vec!["system:serviceaccounts".to_string(), format!("system:serviceaccounts:{namespace}")],
            ..Default::default()
        };
        Arc::new(AuthzChecker { user, authorizer: self.authorizer.clone(), runtime: self.runtime.clone() })
    }
}

/// Runs `f` in place, or on the blocking pool (where the authorizer may be
/// called) when `blocking`.
///
/// # Errors
/// 500 when the blocking task failed.
pub async fn run<T: Send + 'static>(blocking: bool, f: impl FnOnce() -> T + Send + 'static) -> Result<T, Status> {
    if blocking {
        /// Clears the flag however `f` ends (a pool thread is reused).
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                MAY_BLOCK.with(|b| b.set(false));
            }
        }
        let task = move || {
            MAY_BLOCK.with(|b| b.set(true));
            let _reset = Reset;
            f()
        };
        tokio::task::spawn_blocking(task).await.map_err(|e| Status::internal(format!("admission policy evaluation failed: {e}")))
    } else {
        Ok(f())
    }
}
