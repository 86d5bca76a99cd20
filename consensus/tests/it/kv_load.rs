//! The benchmark's key-value service over real gRPC on a one-node group: `Put` commits, `Load`
//! runs writers inside the node and reports each write, and bad `Load` arguments are refused.

use std::collections::BTreeMap;
use std::time::Duration;

use consensus::kv_service::{run_node, KvClient, WRITERS_MAX};
use consensus::NodeConfig;
use tokio::net::TcpListener;

/// `Load` reports one latency per committed write; a request outside the limits is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_runs_writers_inside_the_node() -> anyhow::Result<()> {
    crate::init_tracing();
    let root = tempfile::tempdir()?;
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let peers = BTreeMap::from([(1, addr.to_string())]);
    let config = NodeConfig::new(1, addr, peers, root.path().join("node"));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let node = tokio::spawn(run_node(config, listener, async {
        let _ = stopped.await;
    }));

    let mut client = connect(&addr.to_string()).await?;
    client.put("key".to_string(), "value".to_string()).await?;
    let (latencies, elapsed) = client.load(4, Duration::from_millis(300), 10).await?;
    assert!(!latencies.is_empty(), "the writers committed something");
    assert!(elapsed >= Duration::from_millis(300), "the load ran to its deadline: {elapsed:?}");
    for (writers, millis) in [(0, 100), (WRITERS_MAX + 1, 100), (1, 0)] {
        let refused = client.load(writers, Duration::from_millis(millis), 10).await;
        let message = format!("{:#}", refused.expect_err("outside the limits"));
        assert!(message.contains("must be in 1..="), "{writers} {millis}: {message}");
    }

    let _ = stop.send(());
    node.await??;
    Ok(())
}

/// Connects once the single node serves (its leader election takes a moment, not its bind).
async fn connect(addr: &str) -> anyhow::Result<KvClient> {
    let client = KvClient::connect(addr).await?;
    for _ in 0..100 {
        let info = consensus::kv_service::cluster_info(addr).await?;
        if info.leader_id == Some(1) {
            return Ok(client);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    anyhow::bail!("the single node did not become leader")
}
