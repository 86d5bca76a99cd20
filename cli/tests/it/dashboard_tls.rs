//! The dashboard with TLS configured: the masters' HTTP port speaks TLS and plain HTTP both
//! (told apart by the first byte). Probes and metrics still answer in the clear; the page and
//! its JSON answer only over TLS (a plain request is redirected to `https://`), with the
//! master's certificate, and a follower's JSON carries the leader's view it fetched over the
//! token and mutual TLS of the master service; headless chromium loads the page over TLS.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};

use crate::headless_browser::HeadlessBrowser;
use crate::metrics::http;
use crate::security::{leader_and_term, secure_group, Pki};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_is_served_over_tls_and_probes_stay_plain() {
    let pki = Pki::new();
    let cluster = &pki.cluster;
    let (group, metrics) = secure_group([cluster, cluster, cluster]);
    let (leader, term) = leader_and_term(&group, &pki).await;

    tracing::info!("--- in the clear: metrics and probes answer, the dashboard redirects");
    let ready = http(&metrics, "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(ready.starts_with("HTTP/1.1 200"), "{ready}");
    let plain =
        format!("GET /api/v1/view HTTP/1.1\r\nHost: {metrics}\r\nConnection: close\r\n\r\n");
    let redirected = http(&metrics, &plain);
    assert!(redirected.starts_with("HTTP/1.1 308"), "{redirected}");
    let location = format!("location: https://{metrics}/api/v1/view");
    assert!(redirected.to_lowercase().contains(&location), "{redirected}");
    assert!(!redirected.contains("\"jobs\""), "no view in the clear: {redirected}");

    tracing::info!("--- over TLS: the view names the leader, and the page loads");
    let ca = cluster.tls_ca.as_ref().expect("the PKI has a CA");
    let view = tokio::task::block_in_place(|| view_over_tls(&metrics, ca, leader));
    assert_eq!(view["group"]["leader"], serde_json::json!(leader), "{view}");
    assert!(view["group"]["term"].as_u64() >= Some(term), "{view}");
    let dir = tempfile::tempdir().expect("a directory for the browser's logs");
    let mut browser = HeadlessBrowser::trusting_any_certificate(dir.path());
    let look = tokio::task::block_in_place(|| browser.dump_dom(&format!("https://{metrics}/")));
    assert!(look.console.is_empty(), "console messages: {:?}", look.console);
    let shown = format!("<p id=\"leader\">leader: master {leader}, term ");
    assert!(look.dom.contains(&shown), "the page over TLS shows the leader:\n{}", look.dom);
}

/// A plain request whose `Host` names another server is not redirected there (an open
/// redirect would send a user who followed a crafted link anywhere): it is answered 400 with
/// the reason and no `Location`; one naming the server itself is still redirected to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_request_is_never_redirected_to_another_host() {
    let pki = Pki::new();
    let cluster = &pki.cluster;
    let (_group, metrics) = secure_group([cluster, cluster, cluster]);
    let port = metrics.rsplit(':').next().expect("the address has a port");
    let hostile_hosts = ["evil.example", &format!("evil.example:{port}"), "127.0.0.2:1"];
    for host in hostile_hosts {
        let request =
            format!("GET /api/v1/view HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let answer = http(&metrics, &request);
        assert!(answer.starts_with("HTTP/1.1 400"), "Host {host}: {answer}");
        assert!(!answer.to_lowercase().contains("location:"), "Host {host}: {answer}");
        assert!(answer.contains("served over TLS only"), "Host {host}: {answer}");
    }
    let own = format!("GET / HTTP/1.1\r\nHost: localhost:{port}\r\nConnection: close\r\n\r\n");
    let redirected = http(&metrics, &own);
    assert!(redirected.starts_with("HTTP/1.1 308"), "{redirected}");
    let location = format!("location: https://localhost:{port}/");
    assert!(redirected.to_lowercase().contains(&location), "{redirected}");
}

/// `GET /api/v1/view` over TLS, trusting only `ca`, until it names `leader` (about 15 s).
fn view_over_tls(addr: &str, ca: &std::path::Path, leader: u64) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let response = https_get(addr, ca, "/api/v1/view");
        let body = response.split_once("\r\n\r\n").map_or("", |(_, body)| body);
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
        let view: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
        if view["group"]["leader"] == serde_json::json!(leader) || Instant::now() > deadline {
            return view;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// One HTTP/1.1 GET over TLS (rustls, HTTP/1.1 by ALPN), the whole response as text.
pub fn https_get(addr: &str, ca: &std::path::Path, path: &str) -> String {
    let mut roots = rustls::RootCertStore::empty();
    for certificate in CertificateDer::pem_file_iter(ca).expect("read the CA") {
        roots.add(certificate.expect("a CA certificate")).expect("a usable CA certificate");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("ring's protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let name = ServerName::try_from("127.0.0.1").expect("an IP address is a server name");
    let connection =
        rustls::ClientConnection::new(Arc::new(config), name).expect("a TLS client connection");
    let socket = TcpStream::connect(addr).expect("connect to the HTTP port");
    let mut tls = rustls::StreamOwned::new(connection, socket);
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).expect("send the request over TLS");
    let mut response = Vec::new();
    // A server may close without TLS's close_notify; what arrived is the response.
    let _ = tls.read_to_end(&mut response);
    String::from_utf8_lossy(&response).into_owned()
}
