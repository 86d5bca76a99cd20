//! The benchmark's key-value service over real gRPC on a one-node group: `Put` and `PutStream`
//! commit, `Load` runs writers inside the node and reports each write, and bad arguments are
//! refused.

use std::collections::BTreeMap;
use std::time::Duration;

use super::service::{run_node, KvClient, WRITERS_MAX};
use consensus::{NodeConfig, COMMAND_BYTES_MAX};
use tokio::net::TcpListener;

/// `Load` reports one latency per committed write; a request outside the limits is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_runs_writers_inside_the_node() -> anyhow::Result<()> {
    let node = SingleNode::start().await?;
    let mut client = node.client().await?;
    client.put("key".to_string(), "value".to_string()).await?;
    let (latencies, elapsed) = client.load(4, Duration::from_millis(300), 10).await?;
    assert!(!latencies.is_empty(), "the writers committed something");
    assert!(elapsed >= Duration::from_millis(300), "the load ran to its deadline: {elapsed:?}");
    for (writers, millis) in [(0, 100), (WRITERS_MAX + 1, 100), (1, 0)] {
        let refused = client.load(writers, Duration::from_millis(millis), 10).await;
        let message = format!("{:#}", refused.expect_err("outside the limits"));
        assert!(message.contains("must be in 1..="), "{writers} {millis}: {message}");
    }

    node.stop().await
}

/// A write stream answers each write in turn; a write the node refuses ends that stream with
/// the node's reason, and a new stream writes again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_stream_answers_each_write_until_one_fails() -> anyhow::Result<()> {
    let node = SingleNode::start().await?;
    let mut client = node.client().await?;
    let mut stream = client.open_stream().await?;
    for sequence in 0..50 {
        stream.put(format!("key-{sequence}"), "value".to_string()).await?;
    }
    let too_large = "v".repeat(COMMAND_BYTES_MAX + 1);
    let refused = stream.put("key".to_string(), too_large).await.expect_err("over the limit");
    assert!(format!("{refused:#}").contains("bytes"), "{refused:#}");
    let after = stream.put("key".to_string(), "value".to_string()).await;
    assert!(after.is_err(), "the failed stream is closed");
    client.open_stream().await?.put("key".to_string(), "value".to_string()).await?;

    node.stop().await
}

/// A one-node group serving the key-value service on a loopback port.
struct SingleNode {
    addr: String,
    stop: tokio::sync::oneshot::Sender<()>,
    serving: tokio::task::JoinHandle<anyhow::Result<()>>,
    _root: tempfile::TempDir,
}

impl SingleNode {
    async fn start() -> anyhow::Result<Self> {
        let root = tempfile::tempdir()?;
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let peers = BTreeMap::from([(1, addr.to_string())]);
        let config = NodeConfig::new(1, addr, peers, root.path().join("node"));
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(run_node(config, listener, async {
            let _ = stopped.await;
        }));
        Ok(Self { addr: addr.to_string(), stop, serving, _root: root })
    }

    /// Connects once the node serves (its leader election takes a moment, not its bind).
    async fn client(&self) -> anyhow::Result<KvClient> {
        let client = KvClient::connect(&self.addr).await?;
        for _ in 0..100 {
            let info = super::service::cluster_info(&self.addr).await?;
            if info.leader_id == Some(1) {
                return Ok(client);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        anyhow::bail!("the single node did not become leader")
    }

    async fn stop(self) -> anyhow::Result<()> {
        let _ = self.stop.send(());
        self.serving.await?
    }
}
