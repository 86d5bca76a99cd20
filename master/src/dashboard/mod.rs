//! The dashboard every master serves on its HTTP port (`--metrics-listen`): the page at `/`
//! (`assets/index.html`, with its script and style as files of their own, `/app.js` and
//! `/app.css`, all compiled into the binary), and the JSON it polls, `GET /api/v1/view`
//! (`view.rs`). The JSON joins the leader's view, fetched over the master service as any
//! client fetches it (`fetch.rs`; a follower passes it on and says it is a follower), and this
//! master's own history of rates, evaluations and events (`history.rs`, fed by
//! `recorder.rs`). The page builds its DOM with `textContent` and SVG attributes only, and the
//! Content-Security-Policy allows no inline script, so no name or reason can run as code.

mod fetch;
mod history;
mod recorder;
mod view;

use std::sync::{Arc, Mutex};

use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use consensus::ConsensusNode;
use platform::security::Security;
use tokio::sync::{watch, Semaphore};

use crate::replicated_state::ReplicatedState;
use fetch::LeaderFetcher;
use history::History;
use recorder::SharedHistory;

/// Views answered at once; more are refused with 503 (each waits for the one fetch at a time).
const VIEW_REQUESTS_MAX: usize = 8;

/// Scripts and styles only from this origin (no inline script or style, no `eval`), data only
/// from the JSON endpoint, no frames, no forms.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; base-uri 'none'; \
     form-action 'none'; frame-ancestors 'none'";

const INDEX_HTML: &str = include_str!("assets/index.html");
const APP_JS: &str = include_str!("assets/app.js");
const APP_CSS: &str = include_str!("assets/app.css");

/// What the handlers share.
#[derive(Clone)]
struct Dashboard {
    node: ConsensusNode<ReplicatedState>,
    history: SharedHistory,
    fetcher: Arc<LeaderFetcher>,
    requests: Arc<Semaphore>,
}

/// The dashboard's routes for this master, and its recorder running until `stopped`.
pub(crate) fn start(
    node: ConsensusNode<ReplicatedState>,
    seeds: &[String],
    security: Security,
    stopped: watch::Receiver<bool>,
) -> anyhow::Result<(Router, tokio::task::JoinHandle<()>)> {
    let history: SharedHistory = Arc::new(Mutex::new(History::default()));
    let recorder = recorder::spawn(node.clone(), history.clone(), stopped);
    let listed = node.clone();
    let peers: fetch::Members = Box::new(move || {
        let members = listed.cluster_info().members;
        members.into_iter().map(|member| (member.id, member.addr)).collect()
    });
    let fetcher = Arc::new(LeaderFetcher::new(seeds, peers, security)?);
    let requests = Arc::new(Semaphore::new(VIEW_REQUESTS_MAX));
    let dashboard = Dashboard { node, history, fetcher, requests };
    Ok((router(dashboard), recorder))
}

fn router(dashboard: Dashboard) -> Router {
    Router::new()
        .route("/", get(|| async { asset("text/html; charset=utf-8", INDEX_HTML) }))
        .route("/app.js", get(|| async { asset("text/javascript; charset=utf-8", APP_JS) }))
        .route("/app.css", get(|| async { asset("text/css; charset=utf-8", APP_CSS) }))
        .route(
            "/favicon.ico",
            get(|| async { with_security_headers(StatusCode::NO_CONTENT.into_response(), None) }),
        )
        .route("/api/v1/view", get(view))
        .with_state(dashboard)
}

async fn view(State(dashboard): State<Dashboard>) -> Response {
    let Ok(_permit) = dashboard.requests.clone().try_acquire_owned() else {
        let busy = (StatusCode::SERVICE_UNAVAILABLE, "too many dashboard requests\n");
        return with_security_headers(busy.into_response(), None);
    };
    let fetched = dashboard.fetcher.view().await;
    let local = dashboard.node.cluster_info();
    let body = {
        let history = dashboard.history.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let answering =
            view::Answering { local: &local, history: &history, now_ms: recorder::wall_clock_ms() };
        view::render(&answering, &fetched).to_string()
    };
    if body.len() > view::VIEW_BYTES_MAX {
        // `view::tests::largest_view_is_bounded` holds the largest group below the bound.
        tracing::warn!(bytes = body.len(), "the dashboard's view exceeds its bound");
    }
    with_security_headers(body.into_response(), Some("application/json"))
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    with_security_headers(body.into_response(), Some(content_type))
}

/// The policy and the headers that keep a browser from guessing types or caching the view.
fn with_security_headers(mut response: Response, content_type: Option<&'static str>) -> Response {
    let headers = response.headers_mut();
    if let Some(content_type) = content_type {
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    }
    headers
        .insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CONTENT_SECURITY_POLICY));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The page's script never turns text into markup or code: no HTML sinks, no `eval`, and
    /// the page loads no script but its own file (what the policy allows anyway).
    #[test]
    fn page_builds_its_dom_from_text_only() {
        for sink in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "setAttribute(\"on",
            "srcdoc",
        ] {
            assert!(!APP_JS.contains(sink), "app.js uses {sink}");
        }
        assert!(!INDEX_HTML.contains("<script>"), "index.html has an inline script");
        assert!(INDEX_HTML.contains("<script src=\"/app.js\""), "index.html loads /app.js");
        assert!(CONTENT_SECURITY_POLICY.contains("script-src 'self'"));
        assert!(!CONTENT_SECURITY_POLICY.contains("unsafe-inline"));
    }
}
