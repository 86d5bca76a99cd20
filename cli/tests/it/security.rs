//! TLS and the cluster token with real processes: masters and pservers refuse callers without
//! the token, with a wrong one, without a certificate or with one another CA signed; a master
//! with the wrong token or certificate cannot join the group; a forged Raft vote from an
//! outsider changes neither the term nor the leader; refusals are counted in metrics.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use bincode::Options as _;
use client::{ClientOptions, MasterClient};
use openraft::{CommittedLeaderId, LogId, Vote};
use platform::security::{Security, SecurityFiles};
use proto::pserver::p_server_service_client::PServerServiceClient;
use proto::raft::raft_service_client::RaftServiceClient;

use crate::master_group::{free_loopback_addr, MasterGroup};
use crate::metrics::http;
use crate::pserver_processes::PServerProcesses;

/// Two independent throwaway PKIs from `raftrain certs`: the cluster's, and an impostor's.
pub struct Pki {
    _dir: tempfile::TempDir,
    pub cluster: SecurityFiles,
    impostor: SecurityFiles,
}

impl Pki {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("create the PKI directory");
        let cluster = certs(&dir.path().join("cluster"));
        let impostor = certs(&dir.path().join("impostor"));
        Self { _dir: dir, cluster, impostor }
    }

    /// The cluster's certificates with the impostor's token.
    fn wrong_token(&self) -> SecurityFiles {
        SecurityFiles { token_file: self.impostor.token_file.clone(), ..self.cluster.clone() }
    }

    /// The impostor's certificate (another CA) with the cluster's token.
    fn wrong_certificate(&self) -> SecurityFiles {
        SecurityFiles { token_file: self.cluster.token_file.clone(), ..self.impostor.clone() }
    }
}

fn certs(dir: &Path) -> SecurityFiles {
    let status = Command::new(env!("CARGO_BIN_EXE_raftrain"))
        .args(["certs", "--out", &dir.display().to_string()])
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run raftrain certs");
    assert!(status.success(), "raftrain certs failed");
    let file = |name: &str| Some(dir.join(name));
    SecurityFiles {
        tls_cert: file("node.pem"),
        tls_key: file("node.key"),
        tls_ca: file("ca.pem"),
        token_file: file("token"),
    }
}

/// Every security flag of `files` as `RAFTRAIN_*` variables for master `index`.
fn env_for(index: usize, files: &SecurityFiles) -> Vec<(usize, &'static str, String)> {
    let variables = [
        ("RAFTRAIN_TLS_CERT", &files.tls_cert),
        ("RAFTRAIN_TLS_KEY", &files.tls_key),
        ("RAFTRAIN_TLS_CA", &files.tls_ca),
        ("RAFTRAIN_TOKEN_FILE", &files.token_file),
    ];
    let present = variables.into_iter().filter_map(|(name, path)| Some((name, path.as_ref()?)));
    present.map(|(name, path)| (index, name, display(path))).collect()
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

/// Three masters; `files[i]` is master `i`'s security; master 1 serves metrics on the address
/// returned.
pub fn secure_group(files: [&SecurityFiles; 3]) -> (MasterGroup, String) {
    let metrics = free_loopback_addr();
    let mut envs: Vec<(usize, &str, String)> =
        files.iter().enumerate().flat_map(|(index, files)| env_for(index, files)).collect();
    envs.push((0, "RAFTRAIN_METRICS_LISTEN", metrics.clone()));
    let borrowed: Vec<(usize, &str, &str)> =
        envs.iter().map(|(index, name, value)| (*index, *name, value.as_str())).collect();
    (MasterGroup::start_with_env(3, &[], &borrowed), metrics)
}

pub fn client(addrs: &[String], files: &SecurityFiles, deadline: Duration) -> MasterClient {
    let security = Security::load(files).expect("the test's files load");
    let options =
        ClientOptions { call_deadline: Some(deadline), security, ..ClientOptions::default() };
    MasterClient::new(addrs, options).expect("valid addresses")
}

/// The group's leader id and term, asked of the cluster's own members.
pub async fn leader_and_term(group: &MasterGroup, pki: &Pki) -> (u64, u64) {
    let status = client(&group.addrs, &pki.cluster, Duration::from_secs(30))
        .status()
        .await
        .unwrap_or_else(|error| panic!("status: {error}\n{}", group.logs()));
    (status.group.leader_id.expect("a status answer names its leader"), status.group.term)
}

/// Callers without the token, with a wrong one, without a certificate, with another CA's,
/// or in plain TCP are refused by masters; the token refusals are counted; a forged vote
/// from an outsider changes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn masters_refuse_outsiders() {
    let pki = Pki::new();
    let (group, metrics) = secure_group([&pki.cluster, &pki.cluster, &pki.cluster]);
    tracing::info!("--- the cluster's own client is served");
    let (leader, term) = leader_and_term(&group, &pki).await;
    let first = std::slice::from_ref(&group.addrs[0]);
    let short = Duration::from_secs(2);
    client(first, &pki.cluster, short).member_info(&group.addrs[0]).await.expect("served");

    tracing::info!("--- no token, a wrong token: UNAUTHENTICATED, with the reason");
    let no_token = SecurityFiles { token_file: None, ..pki.cluster.clone() };
    let refused = client(first, &no_token, short).status().await.expect_err("no token");
    assert!(refused.to_string().contains("no cluster token"), "{refused}");
    let refused = client(first, &pki.wrong_token(), short).status().await.expect_err("wrong");
    assert!(refused.to_string().contains("wrong cluster token"), "{refused}");

    tracing::info!("--- no client certificate, another CA's certificate, plain TCP: refused");
    let no_certificate = SecurityFiles { tls_cert: None, tls_key: None, ..pki.cluster.clone() };
    let plain = SecurityFiles { token_file: pki.cluster.token_file.clone(), ..Default::default() };
    for files in [&no_certificate, &pki.wrong_certificate(), &plain] {
        let outcome = client(first, files, short).status().await;
        assert!(outcome.is_err(), "{files:?} was served: {outcome:?}");
    }

    tracing::info!("--- a forged vote for a far higher term without the token changes nothing");
    forged_vote(&group.addrs[leader as usize - 1], &no_token, term + 100).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(leader_and_term(&group, &pki).await, (leader, term), "{}", group.logs());

    tracing::info!(
        "--- `raftrain status` with the cluster's files works; without them it says what to check"
    );
    let status = |files: &SecurityFiles| {
        Command::new(env!("CARGO_BIN_EXE_raftrain"))
            .args(["status", "--masters", &group.addrs.join(","), "--timeout-ms", "2000"])
            .args(files.to_args())
            .output()
            .expect("run raftrain status")
    };
    let served = status(&pki.cluster);
    assert!(served.status.success(), "{}", String::from_utf8_lossy(&served.stderr));
    assert!(String::from_utf8_lossy(&served.stdout).contains(&format!("leader {leader}")));
    let refused = status(&SecurityFiles::default());
    assert_eq!(refused.status.code(), Some(3), "no master answered a plain client");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("--tls-ca"), "the error says what to check: {stderr}");

    tracing::info!("--- the refusals are counted by method");
    let response = http(&metrics, "GET /metrics HTTP/1.0\r\n\r\n");
    let counted = response
        .lines()
        .filter(|line| line.starts_with("raftrain_rpc_unauthenticated_total{"))
        .count();
    assert!(counted >= 1, "no unauthenticated calls counted:\n{response}");
}

/// Sends a Vote for `term` (with a log far ahead of anyone's) to `addr` with `files`'
/// security; asserts it is refused as UNAUTHENTICATED.
async fn forged_vote(addr: &str, files: &SecurityFiles, term: u64) {
    let security = Security::load(files).expect("the test's files load");
    let endpoint = platform::endpoint(&security, addr, std::time::Duration::from_secs(1))
        .expect("an endpoint");
    let mut raft = RaftServiceClient::new(security.channel(&endpoint));
    let last_log_id = Some(LogId::new(CommittedLeaderId::new(term, 3), 1_000_000));
    let vote = openraft::raft::VoteRequest { vote: Vote::new(term, 3), last_log_id };
    let payload = bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .serialize(&vote)
        .expect("encode the vote");
    let request = proto::raft::RaftRequest { payload: payload.into() };
    let status = raft.vote(request).await.expect_err("an outsider's vote is refused");
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
}

/// A master with another token, then with another CA's certificate, never joins: the other
/// two keep their leader and term, and it never learns a leader or applies an entry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_without_the_cluster_credentials_cannot_join() {
    let pki = Pki::new();
    let wrong_token = pki.wrong_token();
    let (mut group, _) = secure_group([&pki.cluster, &pki.cluster, &wrong_token]);
    let (leader, term) = leader_and_term(&group, &pki).await;
    assert_ne!(leader, 3, "the outsider cannot lead");
    for (name, files) in [("another token", wrong_token), ("another CA", pki.wrong_certificate())] {
        tracing::info!("--- master 3 with {name}: campaigns unheard for several election timeouts");
        group.kill(2);
        for (_, variable, value) in env_for(2, &files) {
            group.set_env(2, variable, &value);
        }
        group.spawn(2);
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(leader_and_term(&group, &pki).await, (leader, term), "{}", group.logs());
        let outsider = std::slice::from_ref(&group.addrs[2]);
        let view = client(outsider, &files, Duration::from_secs(5))
            .member_info(&group.addrs[2])
            .await
            .unwrap_or_else(|error| panic!("master 3 answers its own kind: {error}"));
        assert_eq!((view.leader_id, view.last_applied_index), (None, 0), "{name}: {view:?}");
    }
}

/// A pserver serves only callers with the cluster's certificate and token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pservers_refuse_outsiders() {
    let pki = Pki::new();
    let (group, _) = secure_group([&pki.cluster, &pki.cluster, &pki.cluster]);
    let dir = tempfile::tempdir().expect("a directory");
    let mut pservers = PServerProcesses::new(&group.addrs, dir.path(), 1);
    let flags = pki.cluster.to_args();
    let index = pservers.spawn_with(&flags.iter().map(String::as_str).collect::<Vec<_>>());
    let addr = pservers.addrs[index].clone();
    tracing::info!("--- the cluster's client is served once the slot is held");
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while pserver_status(&addr, &pki.cluster).await.is_err() {
        assert!(std::time::Instant::now() < deadline, "never served:\n{}", pservers.logs());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tracing::info!(
        "--- no token, a wrong token: UNAUTHENTICATED; no or a foreign certificate: refused"
    );
    let no_token = SecurityFiles { token_file: None, ..pki.cluster.clone() };
    for files in [&no_token, &pki.wrong_token()] {
        let status = pserver_status(&addr, files).await.expect_err("refused");
        assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
    }
    let no_certificate = SecurityFiles { tls_cert: None, tls_key: None, ..pki.cluster.clone() };
    for files in [&no_certificate, &pki.wrong_certificate()] {
        let status = pserver_status(&addr, files).await.expect_err("refused");
        assert_ne!(status.code(), tonic::Code::Ok, "{status:?}");
    }
}

async fn pserver_status(addr: &str, files: &SecurityFiles) -> Result<(), tonic::Status> {
    let security = Security::load(files).expect("the test's files load");
    let endpoint = platform::endpoint(&security, addr, std::time::Duration::from_secs(1))
        .expect("an endpoint");
    let mut client = PServerServiceClient::new(security.channel(&endpoint));
    let mut request = tonic::Request::new(proto::pserver::StatusRequest {});
    request.set_timeout(Duration::from_secs(2));
    client.status(request).await.map(|_| ())
}

/// `--peer-listen`: Raft traffic (with TLS and the token) on its own port; the group elects
/// and commits through it, and the client port serves no Raft service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raft_on_its_own_port() {
    let pki = Pki::new();
    let peer_ports: Vec<String> = (0..3).map(|_| free_loopback_addr()).collect();
    let peer_addrs: Vec<String> = peer_ports
        .iter()
        .enumerate()
        .map(|(index, addr)| format!("{}={addr}", index + 1))
        .collect();
    let peer_addrs = peer_addrs.join(",");
    let mut envs: Vec<(usize, &str, String)> =
        (0..3).flat_map(|index| env_for(index, &pki.cluster)).collect();
    for (index, addr) in peer_ports.iter().enumerate() {
        envs.push((index, "RAFTRAIN_PEER_LISTEN", addr.clone()));
        envs.push((index, "RAFTRAIN_PEER_ADDRS", peer_addrs.clone()));
    }
    let borrowed: Vec<(usize, &str, &str)> =
        envs.iter().map(|(index, name, value)| (*index, *name, value.as_str())).collect();
    let group = MasterGroup::start_with_env(3, &[], &borrowed);
    tracing::info!("--- the group elects and commits over the peer ports");
    let masters = client(&group.addrs, &pki.cluster, Duration::from_secs(30));
    masters
        .register_trainer("peer-port")
        .await
        .unwrap_or_else(|error| panic!("{error}\n{}", group.logs()));
    let (leader, _) = leader_and_term(&group, &pki).await;
    tracing::info!("--- the client port has no Raft service; the peer port has no master service");
    let security = Security::load(&pki.cluster).expect("the test's files load");
    let raft_at = |addr: &str| {
        let endpoint = platform::endpoint(&security, addr, std::time::Duration::from_secs(1))
            .expect("an endpoint");
        RaftServiceClient::new(security.channel(&endpoint))
    };
    let leader_index = leader as usize - 1;
    let on_client_port = raft_at(&group.addrs[leader_index])
        .cluster_info(proto::raft::ClusterInfoRequest::default())
        .await
        .expect_err("no Raft service on the client port");
    assert_eq!(on_client_port.code(), tonic::Code::Unimplemented, "{on_client_port:?}");
    let on_peer_port = raft_at(&peer_ports[leader_index])
        .cluster_info(proto::raft::ClusterInfoRequest::default())
        .await
        .expect("the Raft service on the peer port");
    assert_eq!(on_peer_port.into_inner().leader_id, leader);
    let outsider = client(
        std::slice::from_ref(&peer_ports[leader_index]),
        &pki.cluster,
        Duration::from_secs(2),
    );
    assert!(outsider.status().await.is_err(), "no master service on the peer port");
}
