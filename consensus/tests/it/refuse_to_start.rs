//! A data directory that is damaged, or belongs to another node or group, refuses to start
//! with an error naming what is wrong, instead of silently starting with less.

use std::fs;

use consensus::kv::KvStore;
use consensus::StartError;

use crate::cluster::{fake_peers, put, test_config, Cluster, Node};
use crate::router::Router;

/// A data dir bootstrapped with one id and peer list refuses another id or peer list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mismatched_peers_or_id_refuse_to_start() -> anyhow::Result<()> {
    crate::init_tracing();
    let root = tempfile::tempdir()?;
    let dir = root.path().join("d1");
    let router = Router::default();
    let peers = fake_peers(3);

    tracing::info!("--- the first start records node 1 with three peers");
    let node = Node::open_with_network(
        test_config(1, &peers, dir.clone()),
        KvStore::default(),
        router.network(1),
    )
    .await?;
    node.shutdown().await?;
    drop(node);

    tracing::info!(
        "--- a restart with other peers is refused, naming the directory and both lists"
    );
    let other_peers = fake_peers(5);
    let config = test_config(1, &other_peers, dir.clone());
    let error = Node::open_with_network(config, KvStore::default(), router.network(1)).await.err();
    let Some(StartError::BootstrapMismatch { .. }) = &error else {
        anyhow::bail!("expected a bootstrap mismatch, got {error:?}");
    };
    let message = error.map(|error| error.to_string()).unwrap_or_default();
    assert!(message.contains(&dir.display().to_string()), "{message}");
    assert!(message.contains("node-5.invalid:7005"), "{message}");

    tracing::info!("--- a restart as another node is refused");
    let config = test_config(2, &peers, dir.clone());
    let error = Node::open_with_network(config, KvStore::default(), router.network(2)).await.err();
    assert!(
        matches!(
            error,
            Some(StartError::BootstrapMismatch { recorded_id: 1, configured_id: 2, .. })
        ),
        "{error:?}"
    );

    tracing::info!("--- the original configuration still starts");
    let node =
        Node::open_with_network(test_config(1, &peers, dir), KvStore::default(), router.network(1))
            .await?;
    node.shutdown().await?;
    Ok(())
}

/// A leftover temp snapshot is removed; a renamed snapshot that fails its checksum stops the
/// start with an error naming the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_snapshot_refuses_to_start() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(1, |config| config).await?;
    for index in 0..5 {
        put(cluster.node(1), &format!("key-{index}"), "v").await?;
    }
    tracing::info!("--- build a snapshot, then stop");
    cluster.node(1).raft().trigger().snapshot().await?;
    cluster.wait_for(1, "a snapshot", |m| m.snapshot.is_some()).await?;
    cluster.stop(1).await?;
    let snapshots = cluster.data_dir(1).join("snapshots");
    let files: Vec<_> = fs::read_dir(&snapshots)?
        .map(|item| item.map(|item| item.path()))
        .collect::<Result<_, _>>()?;
    assert_eq!(files.len(), 1, "{files:?}");
    let snapshot = files[0].clone();

    tracing::info!("--- a temp file from a crash mid-write is ignored and removed");
    let temp = snapshots.join("snapshot-00000000000000000099-00000000000000000001.snap.tmp");
    fs::write(&temp, b"half a snapshot")?;
    cluster.open(1).await?;
    assert!(!temp.exists(), "the temp file was removed");
    cluster.node(1).bootstrap().await?;
    cluster.converge().await?;
    assert_eq!(cluster.node(1).read(|state| state.entries().len()), 5);
    cluster.stop(1).await?;

    tracing::info!("--- a flipped byte in the snapshot body refuses the start, naming the file");
    let mut bytes = fs::read(&snapshot)?;
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(&snapshot, &bytes)?;
    let error = cluster.open(1).await.err();
    let Some(StartError::Snapshot { path, reason }) = &error else {
        anyhow::bail!("expected a snapshot error, got {error:?}");
    };
    assert_eq!(path, &snapshot);
    assert!(reason.contains("checksum"), "{reason}");
    assert!(error
        .map(|error| error.to_string())
        .unwrap_or_default()
        .contains(&snapshot.display().to_string()));
    Ok(())
}

/// A sled log with an undecodable entry, or a sled directory that is not a database,
/// refuses to start, naming the directory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corrupt_sled_directory_refuses_to_start() -> anyhow::Result<()> {
    crate::init_tracing();
    let mut cluster = Cluster::start(1, |config| config).await?;
    put(cluster.node(1), "key", "v").await?;
    cluster.stop(1).await?;
    let sled_dir = cluster.data_dir(1).join("sled");

    tracing::info!("--- overwrite log entry 1 with garbage");
    {
        let db = sled::open(&sled_dir)?;
        let mut key = b"log/".to_vec();
        key.extend_from_slice(&1u64.to_be_bytes());
        assert!(db.get(&key)?.is_some(), "entry 1 exists");
        db.insert(key, b"garbage".to_vec())?;
        db.flush()?;
    }
    let error = cluster.open(1).await.err();
    let Some(StartError::Storage { dir, reason }) = &error else {
        anyhow::bail!("expected a storage error, got {error:?}");
    };
    assert_eq!(dir, &sled_dir);
    assert!(reason.contains("does not decode"), "{reason}");

    tracing::info!("--- a directory whose database file is garbage");
    fs::remove_dir_all(&sled_dir)?;
    fs::create_dir_all(&sled_dir)?;
    fs::write(sled_dir.join("conf"), b"not a sled configuration")?;
    fs::write(sled_dir.join("db"), vec![0xa5; 4096])?;
    let error = cluster.open(1).await.err();
    assert!(
        matches!(&error, Some(StartError::Storage { dir, .. }) if dir == &sled_dir),
        "{error:?}"
    );
    Ok(())
}
