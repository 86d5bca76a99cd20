//! The dashboard's page shows hostile text as text: the page's own files (the ones the masters
//! embed) are served with a view in which every user-supplied field (job, trainer and member
//! names and addresses, failure reasons, errors, rendezvous run ids) carries markup, quotes and an event handler;
//! headless chromium renders it, and no element may come of it, nor any script run, nor any
//! console message appear, while the text itself is shown. No cluster: a few seconds.

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use serde_json::json;

use crate::headless_browser::HeadlessBrowser;

const INDEX_HTML: &str = include_str!("../../../master/src/dashboard/assets/index.html");
const APP_JS: &str = include_str!("../../../master/src/dashboard/assets/app.js");
const APP_CSS: &str = include_str!("../../../master/src/dashboard/assets/app.css");

/// Markup that a careless page would turn into elements, one of which would run script.
const HOSTILE: &str =
    "<script>document.title='pwned'</script>\"'&<img src=x onerror=\"document.title='pwned'\">";
const HOSTILE_SHOWN: &str = "&lt;script&gt;document.title='pwned'&lt;/script&gt;\"'&amp;&lt;img";

#[test]
fn hostile_names_and_reasons_render_as_text() {
    let dir = tempfile::tempdir().expect("a directory for the browser's logs");
    let server = FixtureServer::start(hostile_view().to_string());
    let mut browser = HeadlessBrowser::find(dir.path());
    let look = browser.dump_dom(&format!("http://{}/", server.addr));
    assert!(look.console.is_empty(), "console messages: {:?}", look.console);
    assert!(!look.dom.contains("data-errors"), "the page counted errors:\n{}", look.dom);
    assert!(look.dom.contains("data-renders"), "the page never rendered a view:\n{}", look.dom);
    assert!(!look.dom.contains("pwned</title>"), "script ran:\n{}", look.dom);
    let dom_without_own_script =
        look.dom.replace("<script src=\"/app.js\" defer=\"\"></script>", "");
    assert!(!dom_without_own_script.contains("<script"), "a script element:\n{}", look.dom);
    assert!(!look.dom.contains("<img"), "an image element:\n{}", look.dom);
    // Job name, trainer name, pserver address, failure reason, member address and error,
    // leader error, rendezvous run: each shown once as text.
    let shown = look.dom.matches(HOSTILE_SHOWN).count();
    assert!(shown >= 7, "the hostile text is shown {shown} times:\n{}", look.dom);
}

/// A view of one job in which every text a client or an operator chose is hostile.
fn hostile_view() -> serde_json::Value {
    let trainer = json!({"id": 1, "name": HOSTILE, "last_heartbeat_ms_ago": 5, "tasks_done": 3, "tasks_per_second": 1.5});
    let pserver = json!({"index": 0, "addr": HOSTILE, "generation": 2, "checkpoint_step": 7, "checkpoint_created_ms": 1});
    let job = json!({
        "name": HOSTILE, "job": HOSTILE, "state": "running", "pass": 0, "passes": 2, "tasks": 4,
        "todo": 1, "pending": 1, "done": 1, "failed": 1, "dataset_kind": "recordio", "dispatched": 3,
        "trainers": [trainer], "trainers_total": 1, "pservers": [pserver], "pservers_desired": 1,
        "pservers_total": 1, "failed_tasks": [{"task": 3, "reason": HOSTILE}], "failed_tasks_total": 1,
        "rates": [[1_000, 0.5], [2_000, 1.0]], "evals": [{"pass": 0, "loss": 0.5, "accuracy": 0.75}],
    });
    let members = [
        json!({"id": 1, "addr": HOSTILE, "role": "leader", "reachable": true, "term": 2, "leader": 1, "last_log_index": 9, "last_applied_index": 9}),
        json!({"id": 2, "addr": "127.0.0.1:1", "role": "follower", "reachable": false, "error": HOSTILE}),
    ];
    json!({
        "version": 1, "now_ms": 2_000,
        "served_by": {"id": 2, "role": "follower", "leader": 1, "term": 2},
        "leader_reachable": false, "leader_error": HOSTILE,
        "group": {"leader": 1, "term": 2, "leader_since_ms": 1_000, "members": members},
        "jobs": [job],
        "rendezvous": {"runs": [{"run": HOSTILE, "keys": 3, "bytes": 120, "idle_ms": 1_500}], "error": null},
        "timeline": [{"at_ms": 1_000, "kind": "slot", "job": HOSTILE, "slot": 0, "from_generation": 1, "to_generation": 2}],
    })
}

/// Serves the page's files and `view` on a loopback port until dropped.
struct FixtureServer {
    addr: String,
    stop: Arc<AtomicBool>,
}

impl FixtureServer {
    fn start(view: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let addr = listener.local_addr().expect("a bound address").to_string();
        listener.set_nonblocking(true).expect("a non-blocking listener");
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((stream, _)) => answer(stream, &view),
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(5)),
                }
            }
        });
        Self { addr, stop }
    }
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Answers one HTTP/1.1 request and closes the connection.
fn answer(stream: TcpStream, view: &str) {
    let _ = stream.set_nonblocking(false);
    let mut reader = BufReader::new(&stream);
    let mut request_line = String::new();
    if reader.read_line(&mut request_line).is_err() {
        return;
    }
    let mut header = String::new();
    while reader.read_line(&mut header).is_ok_and(|read| read > 2) {
        header.clear();
    }
    let path = request_line.split_whitespace().nth(1).unwrap_or("/");
    let (status, content_type, body) = match path {
        "/" => ("200 OK", "text/html; charset=utf-8", INDEX_HTML),
        "/app.js" => ("200 OK", "text/javascript; charset=utf-8", APP_JS),
        "/app.css" => ("200 OK", "text/css; charset=utf-8", APP_CSS),
        "/api/v1/view" => ("200 OK", "application/json", view),
        _ => ("204 No Content", "text/plain", ""),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let mut stream = &stream;
    let _ = stream.write_all(head.as_bytes()).and_then(|()| stream.write_all(body.as_bytes()));
}
