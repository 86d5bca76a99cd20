//! The consensus benchmark's same-run anchor: a three-member etcd group on loopback (fsync on,
//! etcd's defaults; data directories in the benchmark's temporary directory) and a client that
//! writes to its leader with etcd's own gRPC `KV/Put`, so raftrain's rows can be read against
//! etcd's on the same disk, cores and load.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use proto::etcd::kv_client::KvClient;
use proto::etcd::maintenance_client::MaintenanceClient;
use proto::etcd::{PutRequest, StatusRequest};
use tonic::transport::Channel;
use tonic::Request;

use consensus::network::endpoint;
use platform::security::Security;

use crate::process_group::{free_loopback_addrs, ProcessGroup};

/// Members of the etcd group, as many as raftrain's.
const MEMBER_COUNT: usize = 3;
/// The group must elect a leader within this long.
const LEADER_WAIT_MS_MAX: u64 = 30_000;
/// Every client RPC fails after this long.
const RPC_TIMEOUT_MS: u64 = 10_000;

/// The flags that choose the same-run etcd anchor (`bench consensus`, `bench master`).
#[derive(Debug, Clone, clap::Args)]
pub struct EtcdAnchorArgs {
    /// The etcd binary of the anchor group (etcd 3.4's flags); without it, `etcd` on `PATH`.
    /// The same measurement is then also taken of a three-member etcd group, and raftrain's
    /// rows are read against it.
    #[arg(long)]
    pub etcd: Option<PathBuf>,
    /// Do not run the etcd anchor even if etcd is found.
    #[arg(long)]
    pub no_etcd: bool,
}

impl EtcdAnchorArgs {
    /// The etcd binary to run, or `None` after saying in one line why there are no etcd rows.
    pub(crate) fn binary(&self) -> Option<PathBuf> {
        if self.no_etcd {
            println!("etcd anchor: off (--no-etcd)");
            return None;
        }
        let found = find_etcd(self.etcd.as_deref());
        if found.is_none() {
            match &self.etcd {
                Some(path) => {
                    println!("etcd anchor: {} is not a file; no etcd rows", path.display())
                }
                None => println!("etcd anchor: no `etcd` on PATH (give --etcd); no etcd rows"),
            }
        }
        found
    }
}

/// Where the etcd binary is: `given`, or else `etcd` on `PATH`; `None` if neither exists.
fn find_etcd(given: Option<&Path>) -> Option<PathBuf> {
    if let Some(path) = given {
        return path.is_file().then(|| path.to_path_buf());
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("etcd")).find(|candidate| candidate.is_file())
}

/// The three etcd processes; killed when dropped, also on error or panic.
pub(crate) struct EtcdGroup {
    processes: ProcessGroup,
    client_addrs: Vec<String>,
    root: PathBuf,
}

impl EtcdGroup {
    /// Starts the group from `etcd`, with its data directories and logs under `root`.
    pub(crate) fn spawn(etcd: &Path, root: &Path) -> anyhow::Result<Self> {
        let addrs = free_loopback_addrs(2 * MEMBER_COUNT)?;
        let (client_addrs, peer_addrs) = addrs.split_at(MEMBER_COUNT);
        let names: Vec<String> =
            (1..=MEMBER_COUNT).map(|member| format!("etcd-{member}")).collect();
        let cluster: Vec<String> = names
            .iter()
            .zip(peer_addrs)
            .map(|(name, peer)| format!("{name}=http://{peer}"))
            .collect();
        let cluster = cluster.join(",");
        let mut processes = ProcessGroup::new(etcd.to_path_buf(), root);
        for (member, name) in names.iter().enumerate() {
            let data_dir = root.join(name).display().to_string();
            let client = format!("http://{}", client_addrs[member]);
            let peer = format!("http://{}", peer_addrs[member]);
            let args = [
                "--name",
                name,
                "--data-dir",
                &data_dir,
                "--listen-client-urls",
                &client,
                "--advertise-client-urls",
                &client,
                "--listen-peer-urls",
                &peer,
                "--initial-advertise-peer-urls",
                &peer,
                "--initial-cluster",
                &cluster,
                "--initial-cluster-state",
                "new",
                "--initial-cluster-token",
                "raftrain-bench",
                "--logger",
                "zap",
                "--log-level",
                "warn",
            ];
            processes.add(name, args.iter().map(|arg| arg.to_string()).collect())?;
        }
        Ok(Self { processes, client_addrs: client_addrs.to_vec(), root: root.to_path_buf() })
    }

    /// Fails, with the end of its log, if a member has exited.
    pub(crate) fn check_alive(&mut self) -> anyhow::Result<()> {
        self.processes.check_alive()
    }

    /// The client address of the member that leads, once one does.
    pub(crate) async fn wait_for_leader(&mut self) -> anyhow::Result<String> {
        let leader = self.wait_for_leader_index().await?;
        Ok(self.client_addrs[leader].clone())
    }

    /// The index of the member that leads, once one does (every member running).
    pub(crate) async fn wait_for_leader_index(&mut self) -> anyhow::Result<usize> {
        let deadline = Instant::now() + Duration::from_millis(LEADER_WAIT_MS_MAX);
        while Instant::now() < deadline {
            self.check_alive()?;
            for (index, addr) in self.client_addrs.iter().enumerate() {
                if let Ok(true) = leads(addr).await {
                    return Ok(index);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        anyhow::bail!(
            "no etcd leader after {LEADER_WAIT_MS_MAX} ms; see the etcd logs in {}",
            self.root.display()
        )
    }

    /// Returns once member `index` answers and knows a leader (a restarted member rejoined).
    pub(crate) async fn wait_until_rejoined(&mut self, index: usize) -> anyhow::Result<()> {
        let deadline = Instant::now() + Duration::from_millis(LEADER_WAIT_MS_MAX);
        while Instant::now() < deadline {
            self.check_alive()?;
            if let Ok((_, leader)) = member_status(&self.client_addrs[index]).await {
                if leader != 0 {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("etcd member {} did not rejoin within {LEADER_WAIT_MS_MAX} ms", index + 1)
    }

    /// Every member's client address.
    pub(crate) fn client_addrs(&self) -> &[String] {
        &self.client_addrs
    }

    /// The member processes (to take one down and start it again).
    pub(crate) fn processes(&mut self) -> &mut ProcessGroup {
        &mut self.processes
    }
}

/// Whether the member at `addr` is the leader it reports.
async fn leads(addr: &str) -> anyhow::Result<bool> {
    let (member, leader) = member_status(addr).await?;
    Ok(leader != 0 && member == Some(leader))
}

/// The member's own id (if it says) and the leader it knows (0: none).
async fn member_status(addr: &str) -> anyhow::Result<(Option<u64>, u64)> {
    let mut client = MaintenanceClient::new(connect(addr).await?);
    let mut request = Request::new(StatusRequest {});
    request.set_timeout(Duration::from_millis(RPC_TIMEOUT_MS));
    let status = client.status(request).await?.into_inner();
    Ok((status.header.map(|header| header.member_id), status.leader))
}

async fn connect(addr: &str) -> anyhow::Result<Channel> {
    endpoint(&Security::default(), addr)?
        .connect()
        .await
        .with_context(|| format!("connect to etcd at {addr}"))
}

/// An etcd client bound to one member (the leader).
#[derive(Clone)]
pub(crate) struct EtcdClient {
    client: KvClient<Channel>,
}

impl EtcdClient {
    /// Connects to the member at `addr` (`host:port`).
    pub(crate) async fn connect(addr: &str) -> anyhow::Result<Self> {
        Ok(Self { client: KvClient::new(connect(addr).await?) })
    }

    /// Writes `key = value`; returns once etcd answers (committed and applied).
    pub(crate) async fn put(&mut self, key: String, value: String) -> anyhow::Result<()> {
        let put = PutRequest { key: key.into(), value: value.into() };
        let mut request = Request::new(put);
        request.set_timeout(Duration::from_millis(RPC_TIMEOUT_MS));
        self.client.put(request).await.context("etcd Put")?;
        Ok(())
    }
}
