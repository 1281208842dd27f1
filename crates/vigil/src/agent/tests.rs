//! Every agent route, driven in-process with `oneshot` against a real gossip member on
//! loopback: 200 for reads, 403 for admin routes with no token, 401 with a wrong one, 404 and
//! 405 for unknown paths and methods.

use super::events::EventCounts;
use super::routes::{AgentState, router};
use axum::Router;
use axum::body::{Body, to_bytes};
use axum::http::{Method, Request, StatusCode, header};
use std::sync::{Arc, Mutex};
use tower::ServiceExt;
use vigil_gossip_net::{Memberlist, Options};
use vigil_observe::{AdminToken, Guard};

const TOKEN: &str = "agent-test-token-0123";
const KEY: &str = "AAECAwQFBgcICQoLDA0ODw=="; // 16 bytes

async fn agent(token: Option<&str>) -> (Router, Memberlist) {
    let (ml, _events) = Memberlist::start(Options::new("t", "127.0.0.1:0".parse().unwrap()))
        .await
        .unwrap();
    let state = AgentState {
        ml: ml.clone(),
        counts: Arc::new(Mutex::new(EventCounts::default())),
    };
    let guard = Guard::new(token.map(|t| AdminToken::new(t).unwrap()));
    (router(state, &guard), ml)
}

async fn call(
    app: &Router,
    method: Method,
    path: &str,
    body: &str,
    token: Option<&str>,
) -> (StatusCode, String) {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let res = app
        .clone()
        .oneshot(req.body(Body::from(body.to_string())).unwrap())
        .await
        .unwrap();
    let status = res.status();
    let body = to_bytes(res.into_body(), 1 << 20).await.unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn reads_are_open() {
    let (app, ml) = agent(None).await;
    let (status, body) = call(&app, Method::GET, "/members", "", None).await;
    assert_eq!(status, StatusCode::OK);
    let members: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(members[0]["node"], "t");
    assert_eq!(members[0]["state"], "alive");

    let (status, text) = call(&app, Method::GET, "/metrics", "", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.contains("vigil_gossip_members{state=\"alive\"} 1\n"),
        "{text}"
    );
    assert!(text.contains("vigil_gossip_suspicions_total 0\n"), "{text}");
    assert!(
        text.contains("vigil_gossip_decrypt_failures_total 0\n"),
        "{text}"
    );

    assert_eq!(
        call(&app, Method::GET, "/healthz", "", None).await.0,
        StatusCode::OK
    );
    ml.shutdown().await;
    // The driver is gone: liveness says so.
    assert_eq!(
        call(&app, Method::GET, "/healthz", "", None).await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
}

#[tokio::test]
async fn unknown_paths_and_methods() {
    let (app, ml) = agent(Some(TOKEN)).await;
    let (status, body) = call(&app, Method::GET, "/nope", "", None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.contains("/members"), "{body}");
    for path in ["/members", "/metrics", "/healthz"] {
        let status = call(&app, Method::POST, path, "", Some(TOKEN)).await.0;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
    }
    for path in [
        "/join",
        "/leave",
        "/keyring/install",
        "/meta",
        "/send",
        "/broadcast",
    ] {
        let status = call(&app, Method::GET, path, "", None).await.0;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
    }
    ml.shutdown().await;
}

const ADMIN: [&str; 8] = [
    "/meta",
    "/broadcast",
    "/send?to=127.0.0.1:9",
    "/join",
    "/leave",
    "/keyring/install",
    "/keyring/use",
    "/keyring/remove",
];

#[tokio::test]
async fn admin_routes_are_off_without_a_token_file() {
    let (app, ml) = agent(None).await;
    for path in ADMIN {
        let (status, body) = call(&app, Method::POST, path, KEY, Some(TOKEN)).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
        assert!(body.contains("off"), "{body}");
    }
    // Nothing happened: still alive, still unencrypted.
    assert_eq!(ml.keys().await.unwrap().len(), 0);
    ml.shutdown().await;
}

#[tokio::test]
async fn admin_routes_need_the_token() {
    let (app, ml) = agent(Some(TOKEN)).await;
    for path in ADMIN {
        assert_eq!(
            call(&app, Method::POST, path, KEY, None).await.0,
            StatusCode::UNAUTHORIZED,
            "{path}"
        );
        let wrong = call(&app, Method::POST, path, KEY, Some("agent-test-token-0124")).await;
        assert_eq!(wrong.0, StatusCode::UNAUTHORIZED, "{path}");
    }
    let t = Some(TOKEN);
    assert_eq!(
        call(&app, Method::POST, "/keyring/install", KEY, t).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(&app, Method::POST, "/keyring/use", KEY, t).await.0,
        StatusCode::OK
    );
    assert_eq!(ml.keys().await.unwrap().len(), 1);
    let (status, _) = call(&app, Method::POST, "/keyring/install", "not base64", t).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // The primary key cannot be removed.
    assert_eq!(
        call(&app, Method::POST, "/keyring/remove", KEY, t).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        call(&app, Method::POST, "/meta", "m", t).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(&app, Method::POST, "/broadcast", "hello", t).await.0,
        StatusCode::OK
    );
    assert_eq!(
        call(&app, Method::POST, "/send", "x", t).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        call(&app, Method::POST, "/send?to=nowhere", "x", t).await.0,
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        call(&app, Method::POST, "/join", "", t).await,
        (StatusCode::OK, "0\n".into())
    );
    assert_eq!(
        call(&app, Method::POST, "/leave", "", t).await.0,
        StatusCode::OK
    );
    let (_, body) = call(&app, Method::GET, "/members", "", None).await;
    assert!(body.contains("\"meta\":\"m\""), "{body}");
    ml.shutdown().await;
}
