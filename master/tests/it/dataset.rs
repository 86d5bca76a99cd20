//! ReportDataset: the first valid report defines the job; later ones must match it.

use master::state::{ChunkRef, Command, Response};

use crate::support::{
    accepted, at, chunks, counts, get, is, policy, register, report, run, Expect, Step,
};

fn check(name: &str, steps: &[Step]) {
    run(name, steps);
}

fn named(job: &str, chunk_count: u64, passes: u32) -> Command {
    Command::ReportDataset {
        job: job.to_string(),
        chunks: chunks(chunk_count),
        passes,
        policy: policy(),
    }
}

/// Reports are validated, the first wins, identical repeats get the same answer and different
/// ones are rejected with what differs, without touching the job.
#[test]
fn dataset_reports() {
    let mut moved = chunks(3);
    moved[1] = ChunkRef { offset: 999, ..moved[1].clone() };
    let mut by_two = policy();
    by_two.chunks_per_task = 2;
    let mut zero_per_task = policy();
    zero_per_task.chunks_per_task = 0;
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "tasks are groups of chunks_per_task chunks, the last one short",
            vec![at(0, report(5, 1, by_two), accepted(3, 1)), counts(0, [3, 0, 0, 0], false)],
        ),
        (
            "an identical second report gets the first answer and changes nothing",
            vec![
                at(0, report(3, 2, policy()), accepted(3, 2)),
                at(5, report(3, 2, policy()), accepted(3, 2)),
                counts(0, [3, 0, 0, 0], false),
            ],
        ),
        (
            "a repeat under another leader's policy is the same job: the first policy stays",
            vec![at(0, report(3, 2, policy()), accepted(3, 2)), at(0, report(3, 2, by_two), accepted(3, 2))],
        ),
        (
            "a different pass count, chunk count or chunk is rejected and named",
            vec![
                at(0, named("job", 3, 2), accepted(3, 2)),
                at(0, named("job", 3, 4), Expect::RejectedWith("passes 4")),
                at(0, named("job", 4, 2), Expect::RejectedWith("4 chunks")),
                at(
                    0,
                    Command::ReportDataset { job: "job".into(), chunks: moved, passes: 2, policy: policy() },
                    // Both chunks named, the reported one too (a path given relative to
                    // another directory differs from the accepted one only there).
                    Expect::RejectedWith(
                        "chunk 1 (\"data/train.recordio\" at offset 999) differs from the \
                         reported one (\"data/train.recordio\" at offset 100)",
                    ),
                ),
                counts(0, [3, 0, 0, 0], false),
            ],
        ),
        (
            "empty chunks, zero passes and zero chunks_per_task are rejected; a valid report after them wins",
            vec![
                at(0, register("one"), is(Response::TrainerRegistered { trainer: 1 })),
                at(0, report(0, 1, policy()), Expect::RejectedWith("no chunks")),
                at(0, report(3, 0, policy()), Expect::RejectedWith("passes")),
                at(0, report(3, 1, zero_per_task), Expect::RejectedWith("chunks_per_task")),
                at(0, get(1, 0), is(Response::NoDataset)),
                at(0, report(2, 1, policy()), accepted(2, 1)),
                counts(0, [2, 0, 0, 0], false),
            ],
        ),
    ];
    for (name, steps) in cases {
        check(name, &steps);
    }
}

/// Reports without a dataset are refused as `NoDataset`, whatever the task command.
#[test]
fn task_commands_before_a_dataset() {
    let steps = vec![
        at(0, crate::support::finished(0, 1), is(Response::NoDataset)),
        at(0, crate::support::failed(0, 1, "x"), is(Response::NoDataset)),
        at(0, Command::ExpireTasks, is(Response::NoDataset)),
    ];
    check("task commands before a dataset", &steps);
}
