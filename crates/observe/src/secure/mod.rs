//! The metrics port as MetalLB v0.16.2 serves it (controller-runtime's secure metrics server,
//! `SecureServing` with `filters.WithAuthenticationAndAuthorization`): HTTPS, and every
//! request on a protected route authenticated with TokenReview and authorised with
//! SubjectAccessReview before the route answers. One implementation for the speaker and the
//! controller.
//!
//! What a request meets, and what it is answered (MetalLB's status codes and texts):
//!
//! | request | answer |
//! |---|---|
//! | a path that is not served | 404, before any review |
//! | no `Authorization: Bearer <token>` (or an empty token) | 401 `Unauthorized` |
//! | a token TokenReview refuses, or a TokenReview that fails (no RBAC for it, API down) | 500 `Authentication failed` |
//! | a SubjectAccessReview that fails | 500 `Authorization for user <name> failed` |
//! | a user not allowed `get` on the non-resource URL (`/metrics`, `/status`) | 403 `Authorization denied for user <name>` |
//! | allowed | the route's answer |
//!
//! The reviews' answers are kept as controller-runtime keeps them ([`cache`]). The reviews
//! are made with the program's own ServiceAccount, which needs `create` on
//! `tokenreviews.authentication.k8s.io` and `subjectaccessreviews.authorization.k8s.io`
//! (MetalLB's chart grants both; its kustomize manifests only in the prometheus overlay).
//! A scraper needs `get` on the non-resource URL `/metrics` (and `/status` for vigil's
//! status).

pub mod cache;
mod review;

pub use cache::{Access, ReviewCache, TokenVerdict, User};
pub use review::ReviewError;

use crate::http::text;
use crate::tls::{TlsError, TlsSettings};
use axum::Router;
use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::Response;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;
use tokio::net::TcpListener;

/// HTTPS with the review gate: build once at start, then [`SecureServing::serve`].
#[derive(Clone)]
pub struct SecureServing {
    tls: Arc<rustls::ServerConfig>,
    gate: Gate,
}

impl std::fmt::Debug for SecureServing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecureServing").finish_non_exhaustive()
    }
}

impl SecureServing {
    /// TLS from `settings` (its certificate loaded or made now) and reviews through `client`.
    pub fn new(settings: &TlsSettings, client: kube::Client) -> Result<Self, TlsError> {
        let tls = settings.server_config(settings.certificates()?)?;
        Ok(Self {
            tls,
            gate: Gate::new(client),
        })
    }

    /// The gate, to protect routes served elsewhere.
    pub fn gate(&self) -> &Gate {
        &self.gate
    }

    /// Serves `router` over HTTPS on `listener` until `shutdown`, every route behind the
    /// gate (paths not routed answer 404 without a review, as MetalLB's mux does).
    pub async fn serve(
        &self,
        listener: TcpListener,
        router: Router,
        shutdown: impl Future<Output = ()>,
    ) {
        let router = self.gate.protect(router);
        crate::http::serve_tls(listener, Arc::clone(&self.tls), router, shutdown).await;
    }
}

/// The review gate: authentication by TokenReview, authorisation by SubjectAccessReview,
/// answers kept in a [`ReviewCache`]. Cheap to clone.
#[derive(Clone)]
pub struct Gate {
    client: kube::Client,
    cache: Arc<Mutex<ReviewCache>>,
}

impl Gate {
    /// A gate asking the API server `client` talks to.
    pub fn new(client: kube::Client) -> Self {
        Self {
            client,
            cache: Arc::default(),
        }
    }

    /// `router` with every route behind the gate.
    pub fn protect(&self, router: Router) -> Router {
        router.route_layer(axum::middleware::from_fn_with_state(self.clone(), admit))
    }

    fn cached_token(&self, token: &str) -> Option<TokenVerdict> {
        self.lock().token(token, Instant::now())
    }

    fn cached_access(&self, access: &Access) -> Option<bool> {
        self.lock().access(access, Instant::now())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReviewCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Who `token` is, from the cache or a TokenReview.
    async fn authenticate(&self, token: &str) -> Result<TokenVerdict, ReviewError> {
        if let Some(verdict) = self.cached_token(token) {
            return Ok(verdict);
        }
        let verdict = review::token_review(&self.client, token).await?;
        self.lock().put_token(token, &verdict, Instant::now());
        Ok(verdict)
    }

    /// Whether `access` is allowed, from the cache or a SubjectAccessReview.
    async fn authorize(&self, access: &Access) -> Result<bool, ReviewError> {
        if let Some(allowed) = self.cached_access(access) {
            return Ok(allowed);
        }
        let allowed = review::access_review(&self.client, access).await?;
        self.lock()
            .put_access(access.clone(), allowed, Instant::now());
        Ok(allowed)
    }
}

/// The bearer token of a request, read as the API server's bearer-token authenticator reads
/// it: `Bearer` in any case, the token the next word; empty means none.
pub fn bearer_token(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?.trim();
    let mut parts = value.splitn(3, ' ');
    let scheme = parts.next()?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    parts.next().filter(|t| !t.is_empty())
}

async fn admit(State(gate): State<Gate>, request: Request, next: Next) -> Response {
    let header = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let Some(token) = bearer_token(header) else {
        return text(StatusCode::UNAUTHORIZED, "Unauthorized");
    };
    let user = match gate.authenticate(token).await {
        Ok(TokenVerdict::Authenticated(user)) => user,
        Ok(TokenVerdict::Refused(why)) => {
            tracing::debug!(event = "metrics_token_refused", reason = %why, "metrics request with a refused token");
            return text(StatusCode::INTERNAL_SERVER_ERROR, "Authentication failed");
        }
        Err(e) => {
            tracing::warn!(event = "metrics_token_review_failed", error = %e, "TokenReview failed");
            return text(StatusCode::INTERNAL_SERVER_ERROR, "Authentication failed");
        }
    };
    let access = Access {
        verb: request.method().as_str().to_ascii_lowercase(),
        path: request.uri().path().to_string(),
        user,
    };
    match gate.authorize(&access).await {
        Ok(true) => next.run(request).await,
        Ok(false) => {
            tracing::debug!(event = "metrics_access_denied", user = %access.user.name, path = %access.path, "metrics request denied");
            text(
                StatusCode::FORBIDDEN,
                format!("Authorization denied for user {}", access.user.name),
            )
        }
        Err(e) => {
            tracing::warn!(event = "metrics_access_review_failed", error = %e, "SubjectAccessReview failed");
            text(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Authorization for user {} failed", access.user.name),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::bearer_token;

    #[test]
    fn bearer_tokens_are_read_as_the_api_server_reads_them() {
        assert_eq!(bearer_token(Some("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(Some("  bearer abc  ")), Some("abc"));
        assert_eq!(bearer_token(Some("BEARER abc extra")), Some("abc"));
        assert_eq!(bearer_token(Some("Bearer  abc")), None);
        assert_eq!(bearer_token(Some("Bearer")), None);
        assert_eq!(bearer_token(Some("Basic abc")), None);
        assert_eq!(bearer_token(None), None);
    }
}
