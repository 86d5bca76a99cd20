//! `--data-root` through a real master process: a reported path that leaves the root is
//! refused as INVALID_ARGUMENT naming the root; without the flag, absolute paths are accepted
//! as before and the master warns that datasets are not confined.

use crate::master_group::MasterGroup;
use crate::task_consumer::{report_dataset, write_dataset};
use client::{ClientError, DatasetSizes, MasterClient};

/// Reports `patterns` as job "job" through the client.
async fn report(client: &MasterClient, patterns: Vec<String>) -> Result<DatasetSizes, ClientError> {
    client.report_dataset("job", &patterns, 1).await
}

/// Under `--data-root`, `..` escapes and absolute paths outside the root are refused with
/// INVALID_ARGUMENT naming the pattern and the root (the file is not opened: its bytes never
/// appear), too many patterns are refused, and a relative pattern inside the root is read
/// relative to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_root_refuses_paths_outside_it() {
    let data = tempfile::tempdir().expect("create the data root");
    let root = std::fs::canonicalize(data.path()).expect("resolve the root");
    write_dataset(&root, 3);
    let root_text = root.display().to_string();
    let group = MasterGroup::start(1, &["--data-root", &root_text]);
    let client = group.client();
    for pattern in ["../../../../../../../etc/passwd", "/etc/passwd", "../*/passwd"] {
        let error = report(&client, vec![pattern.to_string()]).await.expect_err(pattern);
        let ClientError::InvalidArgument { message, .. } = &error else {
            panic!("{pattern}: expected INVALID_ARGUMENT, got {error}");
        };
        let named = format!("pattern {pattern:?}");
        assert!(message.contains(&named) && message.contains(&root_text), "{message}");
        assert!(!message.contains("root:"), "no bytes of /etc/passwd: {message}");
    }
    let too_many = vec!["dataset.recordio".to_string(); 1025];
    let error = report(&client, too_many).await.expect_err("too many patterns").to_string();
    assert!(error.contains("at most 1024"), "{error}");
    let reply = report(&client, vec!["dataset.recordio".into()]).await.expect("inside the root");
    assert_eq!(reply.chunk_count, 3);
    assert!(!group.logs().contains("datasets are not confined"), "{}", group.logs());
}

/// Without `--data-root`, an absolute path anywhere is accepted as before, and the master
/// warned at start that datasets are not confined, naming the flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_data_root_absolute_paths_are_accepted() {
    let group = MasterGroup::start(1, &[]);
    let path = write_dataset(group.dir.path(), 2);
    assert!(path.starts_with('/'), "{path}");
    assert_eq!(report_dataset(&group.client(), &path, 1).await, 2);
    let logs = group.logs();
    assert!(logs.contains("datasets are not confined") && logs.contains("--data-root"), "{logs}");
}
