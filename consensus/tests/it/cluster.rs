//! A cluster of in-process nodes with real sled directories in a temp dir, talking through
//! the in-memory [`Router`].

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use consensus::kv::{KvCommand, KvResponse, KvStore};
use consensus::{ConsensusNode, Metrics, NodeConfig, StartError, WriteError};
use openraft::ServerState;
use tempfile::TempDir;

use crate::router::Router;

/// How long any wait in a test may take before the test fails.
pub const WAIT_MS_MAX: u64 = 15_000;

pub type Node = ConsensusNode<KvStore>;

/// Short timings so failover tests finish in a few seconds.
pub fn test_config(id: u64, peers: &BTreeMap<u64, String>, data_dir: PathBuf) -> NodeConfig {
    let listen = "127.0.0.1:0".parse().expect("a literal address parses");
    NodeConfig {
        heartbeat_ms: 100,
        election_timeout_min_ms: 400,
        election_timeout_max_ms: 800,
        write_timeout_ms: 2_000,
        ..NodeConfig::new(id, listen, peers.clone(), data_dir)
    }
}

/// Fake addresses: the router ignores them, `ForwardToLeader` reports them.
pub fn fake_peers(count: u64) -> BTreeMap<u64, String> {
    (1..=count).map(|id| (id, format!("node-{id}.invalid:{}", 7000 + id))).collect()
}

pub struct Cluster {
    pub router: Router,
    pub peers: BTreeMap<u64, String>,
    pub nodes: BTreeMap<u64, Node>,
    /// Applied to every config before a node opens.
    pub tune: fn(NodeConfig) -> NodeConfig,
    root: TempDir,
}

impl Cluster {
    /// Opens `count` nodes, bootstraps them, and waits for a leader.
    pub async fn start(count: u64, tune: fn(NodeConfig) -> NodeConfig) -> anyhow::Result<Self> {
        let root = tempfile::tempdir()?;
        let mut cluster = Cluster {
            router: Router::default(),
            peers: fake_peers(count),
            nodes: BTreeMap::new(),
            tune,
            root,
        };
        for id in 1..=count {
            cluster.open(id).await?;
        }
        for node in cluster.nodes.values() {
            node.bootstrap().await?;
        }
        cluster.leader().await?;
        Ok(cluster)
    }

    pub fn data_dir(&self, id: u64) -> PathBuf {
        self.root.path().join(format!("d{id}"))
    }

    pub fn config(&self, id: u64) -> NodeConfig {
        (self.tune)(test_config(id, &self.peers, self.data_dir(id)))
    }

    /// Opens node `id` from its data dir and connects it to the router.
    pub async fn open(&mut self, id: u64) -> Result<(), StartError> {
        let node =
            Node::open_with_network(self.config(id), KvStore::default(), self.router.network(id))
                .await?;
        self.router.register(id, node.rpc_handler());
        self.nodes.insert(id, node);
        Ok(())
    }

    /// Stops node `id` and drops it, closing its files.
    pub async fn stop(&mut self, id: u64) -> anyhow::Result<()> {
        self.router.remove(id);
        let node =
            self.nodes.remove(&id).ok_or_else(|| anyhow::anyhow!("node {id} is not running"))?;
        node.shutdown().await?;
        Ok(())
    }

    pub async fn stop_all(&mut self) -> anyhow::Result<()> {
        let ids: Vec<u64> = self.nodes.keys().copied().collect();
        for id in ids {
            self.stop(id).await?;
        }
        Ok(())
    }

    pub fn node(&self, id: u64) -> &Node {
        &self.nodes[&id]
    }

    pub fn ids(&self) -> Vec<u64> {
        self.nodes.keys().copied().collect()
    }

    /// The leader every running node agrees on (the leader itself included).
    pub async fn leader(&self) -> anyhow::Result<u64> {
        self.leader_among(&self.ids()).await
    }

    /// The leader all of `ids` agree on, which must be one of them and know it leads.
    pub async fn leader_among(&self, ids: &[u64]) -> anyhow::Result<u64> {
        let deadline = Instant::now() + Duration::from_millis(WAIT_MS_MAX);
        loop {
            let leaders: Vec<Option<u64>> =
                ids.iter().map(|id| self.node(*id).metrics().borrow().current_leader).collect();
            if let Some(Some(leader)) = leaders.first().copied() {
                let agreed = leaders.iter().all(|other| *other == Some(leader));
                if agreed && ids.contains(&leader) && self.node(leader).is_leader() {
                    return Ok(leader);
                }
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "no agreed leader among {ids:?}: {leaders:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until `condition` holds for node `id`'s metrics.
    pub async fn wait_for(
        &self,
        id: u64,
        what: &str,
        condition: impl Fn(&Metrics) -> bool,
    ) -> anyhow::Result<Metrics> {
        let mut metrics = self.node(id).metrics();
        let wait = async {
            let result = metrics.wait_for(|metrics| condition(metrics)).await;
            result.map(|metrics| metrics.clone())
        };
        let result = tokio::time::timeout(Duration::from_millis(WAIT_MS_MAX), wait).await;
        match result {
            Ok(Ok(metrics)) => Ok(metrics),
            Ok(Err(_closed)) => anyhow::bail!("node {id} stopped while waiting for {what}"),
            Err(_elapsed) => {
                let metrics = self.node(id).metrics().borrow().clone();
                anyhow::bail!("node {id}: no {what} after {WAIT_MS_MAX} ms; metrics {metrics:?}")
            }
        }
    }

    /// Waits until every running node has applied everything the leader has.
    pub async fn converge(&self) -> anyhow::Result<()> {
        self.converge_among(&self.ids()).await
    }

    /// Waits until each of `ids` (the leader among them) has applied everything the leader has.
    pub async fn converge_among(&self, ids: &[u64]) -> anyhow::Result<()> {
        let leader = self.leader_among(ids).await?;
        let metrics =
            self.wait_for(leader, "a committed log", |m| m.last_applied.is_some()).await?;
        let index = metrics.last_log_index;
        for id in ids.iter().copied() {
            self.wait_for(id, "the leader's log applied", |m| {
                m.last_applied.map(|l| l.index) >= index
            })
            .await?;
        }
        Ok(())
    }

    /// Every node's key-value state, by id.
    pub fn states(&self) -> BTreeMap<u64, KvStore> {
        self.nodes.iter().map(|(id, node)| (*id, node.read(KvStore::clone))).collect()
    }

    pub fn is_leader_state(&self, id: u64) -> bool {
        self.node(id).metrics().borrow().state == ServerState::Leader
    }
}

/// Writes `key = value` through node `node`.
pub async fn put(node: &Node, key: &str, value: &str) -> Result<KvResponse, WriteError> {
    let command = KvCommand::Put { key: key.to_string(), value: value.to_string() };
    let response = node.write(command.encode()).await?;
    Ok(KvResponse::decode(&response).expect("the kv machine answers with a KvResponse"))
}
