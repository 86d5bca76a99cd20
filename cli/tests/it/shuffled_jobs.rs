//! `raftrain job submit --shuffle --seed N` on real masters: the job's tasks come in the
//! seed's permutation of each pass (`client::shuffle`), every task once per pass, each task
//! carries the seed, and a second submit with another seed is refused naming both.

use client::shuffle::task_rank;
use client::{MasterClient, TaskOutcome};

use crate::command::{raftrain, Output};
use crate::master_group::MasterGroup;

const TASKS: u64 = 12;

/// Submits index job `name` of `TASKS` one-index tasks, two passes, shuffled with `seed`.
fn submit(masters: &str, name: &str, seed: &str) -> Output {
    let mut args = vec!["job", "submit", "--masters", masters, "--name", name];
    args.extend(["--index", "12", "--shard-size", "1", "--passes", "2", "--shuffle"]);
    args.extend(["--seed", seed]);
    raftrain(&args, b"")
}

/// One pass of the group's only job, taken and finished by `trainer`: the task ids in
/// dispatch order.
async fn walk(client: &MasterClient, trainer: u64, pass: u32) -> Vec<u64> {
    let mut order = Vec::new();
    loop {
        let task = match client.get_task(trainer, pass).await.expect("get_task") {
            TaskOutcome::Task(task) => task,
            TaskOutcome::PassBefore { .. } | TaskOutcome::JobFinished => return order,
            other => panic!("pass {pass}: {other:?}"),
        };
        assert_eq!(task.shuffle_seed, Some(7), "each task carries the job's seed");
        order.push(task.task_id);
        assert!(client.task_finished(task.task_id, task.epoch).await.expect("task_finished"));
    }
}

/// A submitted shuffle hands each pass out in the seed's permutation and is fixed with the job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_shuffle_orders_each_pass_and_is_fixed() {
    let group = MasterGroup::start(1, &[]);
    let masters = group.addrs.join(",");
    assert!(submit(&masters, "mixed", "7").success, "{}", group.logs());
    assert!(submit(&masters, "mixed", "7").success, "the same spec again is a repeat");

    tracing::info!("--- another seed is refused, naming both");
    let refused = submit(&masters, "mixed", "8");
    let stderr = &refused.stderr;
    assert!(!refused.success, "{stderr}");
    assert!(stderr.contains("shuffle seed 8") && stderr.contains("shuffle seed 7"), "{stderr}");

    tracing::info!("--- every task once per pass, in the seed's order of that pass");
    let client = group.client();
    let trainer = client.register_trainer("t").await.expect("register").trainer_id;
    let passes = [walk(&client, trainer, 0).await, walk(&client, trainer, 1).await];
    for (pass, order) in passes.iter().enumerate() {
        let mut expected: Vec<u64> = (0..TASKS).collect();
        expected.sort_by_key(|task_id| task_rank(7, pass as u32, *task_id));
        assert_eq!(*order, expected, "pass {pass}");
    }
    assert_ne!(passes[0], passes[1], "each pass has its own order");
}
