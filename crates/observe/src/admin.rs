//! The guard for mutating admin routes: off unless a token file is configured, and then only
//! for requests that present the token as `Authorization: Bearer <token>`.
//!
//! The token is kept only as its SHA-256 digest, and a presented token is compared by digest
//! in constant time, so neither the time taken nor the length of the secret leaks through the
//! comparison.

use axum::extract::{Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use subtle::ConstantTimeEq;

/// The shortest token accepted: 16 bytes, as from `head -c 16 /dev/urandom | base64`.
pub const MIN_TOKEN_LEN: usize = 16;

/// A token that admits requests to the admin routes.
#[derive(Clone)]
pub struct AdminToken {
    digest: [u8; 32],
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(..)")
    }
}

/// Why a token could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenError {
    /// The file could not be read.
    #[error("cannot read admin token file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The token (after trimming surrounding white space) is too short.
    #[error("admin token{}: {len} bytes; at least {MIN_TOKEN_LEN} needed", from.as_ref().map(|p| format!(" in {}", p.display())).unwrap_or_default())]
    TooShort {
        /// The file it came from, if any.
        from: Option<PathBuf>,
        /// Its length.
        len: usize,
    },
}

impl AdminToken {
    /// A token from its text; surrounding white space (a trailing newline) is not part of it.
    pub fn new(secret: &str) -> Result<Self, TokenError> {
        Self::checked(secret, None)
    }

    /// Reads the token from a file (its whole content, trimmed).
    pub fn read(path: &Path) -> Result<Self, TokenError> {
        let text = std::fs::read_to_string(path).map_err(|source| TokenError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::checked(&text, Some(path))
    }

    fn checked(secret: &str, from: Option<&Path>) -> Result<Self, TokenError> {
        let secret = secret.trim();
        if secret.len() < MIN_TOKEN_LEN {
            return Err(TokenError::TooShort {
                from: from.map(Path::to_path_buf),
                len: secret.len(),
            });
        }
        Ok(Self {
            digest: Sha256::digest(secret.as_bytes()).into(),
        })
    }

    /// Whether `presented` is this token (constant time in the token's content).
    pub fn matches(&self, presented: &[u8]) -> bool {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        self.digest.ct_eq(&digest).into()
    }

    /// Whether a request's headers carry this token as `Authorization: Bearer <token>`.
    pub fn admits(&self, headers: &axum::http::HeaderMap) -> bool {
        headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
            .is_some_and(|t| self.matches(t.trim_ascii()))
    }
}

/// The admin guard: wraps each mutating route so that, with no token, it answers 403 (admin
/// off), and with one, 401 unless the request presents it. It sits on the route's methods, not
/// in front of the router, so unknown paths and wrong methods still get 404 and 405.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    token: Option<Arc<AdminToken>>,
}

impl Guard {
    /// A guard admitting `token`, or nobody when `None`.
    pub fn new(token: Option<AdminToken>) -> Self {
        Self {
            token: token.map(Arc::new),
        }
    }

    /// Whether the admin routes are on (a token is configured).
    pub fn is_on(&self) -> bool {
        self.token.is_some()
    }

    /// `route` behind the guard.
    pub fn wrap<S>(&self, route: MethodRouter<S>) -> MethodRouter<S>
    where
        S: Clone + Send + Sync + 'static,
    {
        route.route_layer(middleware::from_fn_with_state(self.token.clone(), check))
    }
}

async fn check(State(token): State<Option<Arc<AdminToken>>>, req: Request, next: Next) -> Response {
    match token {
        None => (
            StatusCode::FORBIDDEN,
            "admin endpoints are off: start with an admin token file to use them\n",
        )
            .into_response(),
        Some(token) if token.admits(req.headers()) => next.run(req).await,
        Some(_) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            "give the admin token as: Authorization: Bearer <token>\n",
        )
            .into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_itself_only() {
        let t = AdminToken::new("0123456789abcdef\n").unwrap();
        assert!(t.matches(b"0123456789abcdef"));
        assert!(!t.matches(b"0123456789abcdeF"));
        assert!(!t.matches(b"0123456789abcde"));
        assert!(!t.matches(b""));
    }

    #[test]
    fn short_tokens_and_missing_files_are_refused_with_a_reason() {
        let e = AdminToken::new("  short \n").unwrap_err();
        assert!(e.to_string().contains("5 bytes"), "{e}");
        let e = AdminToken::read(Path::new("/nonexistent/token")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/token"), "{e}");
    }

    #[test]
    fn the_bearer_scheme_is_required() {
        let t = AdminToken::new("0123456789abcdef").unwrap();
        let mut h = axum::http::HeaderMap::new();
        assert!(!t.admits(&h));
        h.insert(header::AUTHORIZATION, "0123456789abcdef".parse().unwrap());
        assert!(!t.admits(&h));
        h.insert(
            header::AUTHORIZATION,
            "Basic 0123456789abcdef".parse().unwrap(),
        );
        assert!(!t.admits(&h));
        h.insert(
            header::AUTHORIZATION,
            "Bearer 0123456789abcdef".parse().unwrap(),
        );
        assert!(t.admits(&h));
    }
}

#[cfg(test)]
mod route_tests {
    use super::*;
    use axum::Router;
    use axum::body::Body;
    use axum::http::{Method, Request as HttpRequest};
    use axum::routing::{get, post};
    use tower::ServiceExt;

    fn app(token: Option<AdminToken>) -> Router {
        let guard = Guard::new(token);
        Router::new()
            .route("/members", get(|| async { "[]" }))
            .route("/leave", guard.wrap(post(|| async { "left\n" })))
            .fallback(crate::http::not_found(&["/members", "/leave"]))
    }

    async fn status(app: Router, method: Method, path: &str, auth: Option<&str>) -> StatusCode {
        let mut req = HttpRequest::builder().method(method).uri(path);
        if let Some(auth) = auth {
            req = req.header(header::AUTHORIZATION, auth);
        }
        app.oneshot(req.body(Body::empty()).unwrap())
            .await
            .unwrap()
            .status()
    }

    const TOKEN: &str = "0123456789abcdef";

    #[tokio::test]
    async fn admin_routes_are_off_without_a_token() {
        let app = app(None);
        assert_eq!(
            status(app.clone(), Method::POST, "/leave", None).await,
            StatusCode::FORBIDDEN
        );
        let bearer = format!("Bearer {TOKEN}");
        assert_eq!(
            status(app.clone(), Method::POST, "/leave", Some(&bearer)).await,
            StatusCode::FORBIDDEN
        );
        // Reads stay open.
        assert_eq!(
            status(app, Method::GET, "/members", None).await,
            StatusCode::OK
        );
    }

    #[tokio::test]
    async fn with_a_token_only_its_bearer_gets_in() {
        let app = app(Some(AdminToken::new(TOKEN).unwrap()));
        let right = format!("Bearer {TOKEN}");
        let wrong = format!("Bearer {TOKEN}x");
        assert_eq!(
            status(app.clone(), Method::POST, "/leave", None).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status(app.clone(), Method::POST, "/leave", Some(&wrong)).await,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            status(app.clone(), Method::POST, "/leave", Some(&right)).await,
            StatusCode::OK
        );
        // A wrong method or path is still 405 or 404, token or not.
        assert_eq!(
            status(app.clone(), Method::GET, "/leave", None).await,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            status(app.clone(), Method::POST, "/members", Some(&right)).await,
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(
            status(app, Method::GET, "/nope", None).await,
            StatusCode::NOT_FOUND
        );
    }
}
