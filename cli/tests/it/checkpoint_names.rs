//! The production `Checkpointer` against a real master: a checkpoint name (slot, step,
//! generation) is used once. A `Stale` answer (the master recorded a newer step, from a round
//! whose answer was lost) moves the shard's step past the master's, and a name already on
//! disk is never replaced: the step moves past it too.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use client::pserver::layout::{JobLayout, ParamSpec};
use client::{new_slot_secret, CheckpointMeta, CheckpointRecorded};
use optimizer::{OptimizerConfig, OptimizerKind};
use pserver::block_state::BlockState;
use pserver::checkpointer::{Checkpointer, Round};
use pserver::clock::{Clock as _, SystemClock};
use pserver::held_slot::HeldSlot;
use pserver::shard::Shard;
use pserver::shard_cell::ShardCell;
use storage::checkpoint::{file_name, CheckpointDir};

use crate::master_group::MasterGroup;

fn layout() -> JobLayout {
    let params = vec![ParamSpec { name: "w".into(), shape: vec![8] }];
    let optimizer = OptimizerConfig { learning_rate: 0.5, kind: OptimizerKind::Sgd };
    JobLayout { params, block_elements: 4, slot_count: 1, optimizer }
}

/// Slot 0's shard at `step`, every value 1.
fn shard(step: u64) -> Shard {
    let optimizer = layout().optimizer;
    let blocks = layout()
        .blocks_of_slot(0)
        .into_iter()
        .map(|(id, length)| (id, BlockState::fresh(vec![1.0; length], &optimizer)))
        .collect::<BTreeMap<_, _>>();
    Shard::new(layout(), 0, step, blocks).expect("a complete shard")
}

/// A round answered `Stale` at step 10 moves a shard at step 5 to 11; the next round records
/// 11; a file already named for step 12 stays byte for byte, the round moves to 13 and
/// records that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checkpoint_name_is_used_once() {
    let group = MasterGroup::start(1, &["--pserver-lease-ms", "60000"]);
    let master = Arc::new(group.client());
    let lease = master.claim_slot("127.0.0.1:7101", 1, new_slot_secret()).await.expect("claim");
    let lease = lease.expect("granted");
    let lease_time = Duration::from_millis(lease.lease_ms);
    let clock = Arc::new(SystemClock);
    let held =
        Arc::new(HeldSlot::granted(0, lease.generation, lease_time, clock, SystemClock.now()));
    let temp = tempfile::tempdir().expect("temp dir");
    let dir = CheckpointDir::open(temp.path()).expect("checkpoint dir");
    let cell = Arc::new(ShardCell::restored(0, shard(5)));
    let recorded = Arc::new(AtomicU64::new(0));
    let mut checkpointer =
        Checkpointer::new(dir.clone(), master.clone(), held, lease.clone(), cell.clone(), recorded);
    let step = || cell.ready().expect("serving").step();

    tracing::info!("--- the master already recorded step 10 (a round whose answer was lost)");
    let name = |step| temp.path().join(file_name(0, step, lease.generation));
    let meta =
        CheckpointMeta { path: name(10).display().to_string(), step: 10, crc32: 1, created_ms: 0 };
    let answer = master.record_checkpoint(&lease, &meta).await.expect("record");
    assert_eq!(answer, CheckpointRecorded::Recorded);
    let round = checkpointer.round().await.expect("a round");
    assert_eq!(round, Round::Stale { step: 5, recorded_step: 10 });
    assert_eq!(step(), 11, "the master's step adopted");
    let round = checkpointer.round().await.expect("a round");
    assert_eq!(round, Round::Recorded { step: 11 });

    tracing::info!("--- a file named for step 12 is on disk already: never replaced");
    cell.ready().expect("serving").adopt_step(12);
    std::fs::write(name(12), b"someone else's bytes").expect("write");
    let round = checkpointer.round().await.expect("a round");
    assert_eq!(round, Round::NameTaken { step: 12 });
    assert_eq!(std::fs::read(name(12)).expect("read"), b"someone else's bytes");
    let round = checkpointer.round().await.expect("a round");
    assert_eq!(round, Round::Recorded { step: 13 });
    assert!(name(13).exists(), "the recorded file");
}
