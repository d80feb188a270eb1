//! The daemon's HTTP endpoints (edge): health, readiness, the active policy, pending jobs and
//! metrics. Every handler reads [`Shared`]; none blocks on a cycle.

use std::sync::Arc;

use axum::Router;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::daemon::Shared;

const JSON: &str = "application/json";

/// The routes, over the daemon's shared state.
pub fn router(shared: Arc<Shared>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/policy", get(policy))
        .route("/pending", get(pending))
        .route("/metrics", get(metrics))
        .with_state(shared)
}

type State = axum::extract::State<Arc<Shared>>;

async fn readyz(axum::extract::State(shared): State) -> impl IntoResponse {
    match shared.not_ready() {
        None => (StatusCode::OK, "ready\n".to_string()),
        Some(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {why}\n"),
        ),
    }
}

async fn policy(axum::extract::State(shared): State) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, JSON)],
        shared.policy_json().to_string(),
    )
}

async fn pending(axum::extract::State(shared): State) -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, JSON)],
        shared.pending_json().to_string(),
    )
}

async fn metrics(axum::extract::State(shared): State) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        shared.metrics.encode(),
    )
}
