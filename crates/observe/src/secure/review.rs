//! TokenReview and SubjectAccessReview through kube, with controller-runtime's retries: a
//! review that fails for a reason worth another try (the API server overloaded or away) is
//! tried again after 0.5 s, then 0.75 s, ... five tries in all; a TokenReview gets 10 s.

use super::cache::{Access, TokenVerdict, User};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::{Api, PostParams};
use std::future::Future;
use std::time::Duration;

/// Tries of one review.
const TRIES: u32 = 5;
/// The pause before the second try; each next one is 1.5 times longer.
const FIRST_PAUSE: Duration = Duration::from_millis(500);
/// How long a TokenReview may take, tries included (controller-runtime's
/// `TokenAccessReviewTimeout`).
const TOKEN_REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// A review the API server did not answer.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    /// The API server refused or failed the request (e.g. 403: no RBAC to create reviews).
    #[error("{0}")]
    Api(#[from] kube::Error),
    /// No answer in time.
    #[error("no answer within {0:?}")]
    Timeout(Duration),
}

/// Whether another try may do better.
fn worth_retrying(e: &kube::Error) -> bool {
    match e {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

async fn with_retries<T, F, Fut>(mut call: F) -> Result<T, kube::Error>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let mut pause = FIRST_PAUSE;
    let mut tries = 1;
    loop {
        match call().await {
            Err(e) if tries < TRIES && worth_retrying(&e) => {
                tokio::time::sleep(pause).await;
                pause = pause.mul_f32(1.5);
                tries += 1;
            }
            done => return done,
        }
    }
}

/// Asks who `token` is.
pub(super) async fn token_review(
    client: &kube::Client,
    token: &str,
) -> Result<TokenVerdict, ReviewError> {
    let api: Api<TokenReview> = Api::all(client.clone());
    let review = TokenReview {
        spec: TokenReviewSpec {
            token: Some(token.to_string()),
            audiences: None,
        },
        ..TokenReview::default()
    };
    let params = PostParams::default();
    let asked = with_retries(|| api.create(&params, &review));
    let answer = tokio::time::timeout(TOKEN_REVIEW_TIMEOUT, asked)
        .await
        .map_err(|_| ReviewError::Timeout(TOKEN_REVIEW_TIMEOUT))??;
    let status = answer.status.unwrap_or_default();
    if status.authenticated != Some(true) {
        return Ok(TokenVerdict::Refused(status.error.unwrap_or_default()));
    }
    let info = status.user.unwrap_or_default();
    let mut groups = info.groups.unwrap_or_default();
    if !groups.iter().any(|g| g == "system:authenticated") {
        groups.push("system:authenticated".into());
    }
    Ok(TokenVerdict::Authenticated(User {
        name: info.username.unwrap_or_default(),
        uid: info.uid.unwrap_or_default(),
        groups,
        extra: info.extra.unwrap_or_default().into_iter().collect(),
    }))
}

/// Asks whether `access` is allowed (a denial and "no opinion" are both `false`).
pub(super) async fn access_review(
    client: &kube::Client,
    access: &Access,
) -> Result<bool, ReviewError> {
    let api: Api<SubjectAccessReview> = Api::all(client.clone());
    let user = &access.user;
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
            groups: Some(user.groups.clone()),
            extra: (!user.extra.is_empty()).then(|| user.extra.iter().cloned().collect()),
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(access.path.clone()),
                verb: Some(access.verb.clone()),
            }),
            resource_attributes: None,
        },
        ..SubjectAccessReview::default()
    };
    let params = PostParams::default();
    let answer = with_retries(|| api.create(&params, &review)).await?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}
