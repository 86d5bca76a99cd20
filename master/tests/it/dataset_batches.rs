//! ReportDatasetBatch: a dataset too large for one log entry arrives in batches; the batch that
//! completes the list defines the job, and every repeat is checked, never applied twice.

use master::state::{chunks_digest, ChunkList, ChunkRef, Command, Response, LOADING_IDLE_MS_MAX};

use crate::support::{accepted, at, chunks, counts, is, policy, run, Expect, Step};

/// The batch of `all[first..first + count]` of a `job` report with `passes` passes.
fn batch(job: &str, all: &[ChunkRef], first: usize, count: usize) -> Command {
    Command::ReportDatasetBatch {
        job: job.to_string(),
        passes: 1,
        policy: policy(),
        total_chunks: all.len() as u64,
        digest: chunks_digest(all),
        first_chunk: first as u64,
        chunks: ChunkList::from_refs(&all[first..first + count]),
    }
}

fn loading(received: u64, total: u64) -> Expect {
    is(Response::DatasetLoading { received, total })
}

/// Batches in order define the job; retried and restarted batches are checked and skipped;
/// gaps, conflicts, overruns and a wrong digest are refused with what is wrong.
#[test]
fn batched_reports() {
    let all = chunks(5);
    let mut changed = all.clone();
    changed[3] = ChunkRef { offset: 4242, ..changed[3].clone() };
    let mut lying = batch("job", &all, 3, 2);
    if let Command::ReportDatasetBatch { digest, .. } = &mut lying {
        *digest ^= 1;
    }
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "batches in order: loading, then the job with all tasks",
            vec![
                at(0, batch("job", &all, 0, 2), loading(2, 5)),
                counts(0, [0, 0, 0, 0], false),
                at(0, batch("job", &all, 2, 2), loading(4, 5)),
                at(0, batch("job", &all, 4, 1), accepted(5, 1)),
                counts(0, [5, 0, 0, 0], false),
            ],
        ),
        (
            "a retried batch and a report started over by a new leader are checked and skipped",
            vec![
                at(0, batch("job", &all, 0, 2), loading(2, 5)),
                at(0, batch("job", &all, 0, 2), loading(2, 5)),
                at(0, batch("job", &all, 0, 3), loading(3, 5)),
                at(0, batch("job", &all, 1, 4), accepted(5, 1)),
                at(0, batch("job", &all, 0, 2), accepted(5, 1)),
            ],
        ),
        (
            "a gap, another job, a changed chunk or an overrun is refused and changes nothing",
            vec![
                at(0, batch("job", &all, 2, 1), Expect::RejectedWith("starts at chunk 0")),
                at(0, batch("job", &all, 0, 2), loading(2, 5)),
                at(0, batch("job", &all, 3, 1), Expect::RejectedWith("only 2 chunks have arrived")),
                // Another name is another job, whose report must start at chunk 0.
                at(0, batch("other", &all, 2, 1), Expect::RejectedWith("starts at chunk 0")),
                at(0, batch("job", &changed, 2, 2), Expect::RejectedWith("another dataset")),
                at(0, batch("job", &all, 2, 2), loading(4, 5)),
                at(0, batch("job", &all, 4, 1), accepted(5, 1)),
                at(0, batch("job", &changed, 3, 1), Expect::RejectedWith("chunk 3")),
            ],
        ),
        (
            "a report left unfinished blocks a different one only until it has been idle too long",
            vec![
                at(0, batch("job", &all, 0, 2), loading(2, 5)),
                at(
                    LOADING_IDLE_MS_MAX,
                    batch("job", &changed, 0, 2),
                    Expect::RejectedWith("abandoned once no batch"),
                ),
                at(
                    LOADING_IDLE_MS_MAX + 1,
                    batch("job", &changed, 2, 1),
                    Expect::RejectedWith("another dataset"),
                ),
                at(LOADING_IDLE_MS_MAX + 1, batch("job", &changed, 0, 2), loading(2, 5)),
                at(LOADING_IDLE_MS_MAX + 2, batch("job", &changed, 2, 3), accepted(5, 1)),
                at(
                    LOADING_IDLE_MS_MAX + 3,
                    batch("job", &all, 0, 5),
                    Expect::RejectedWith("different dataset"),
                ),
            ],
        ),
        (
            "a digest that does not match the assembled list is refused at the end",
            vec![
                at(0, batch("job", &all, 0, 3), loading(3, 5)),
                at(0, lying, Expect::RejectedWith("another dataset")),
            ],
        ),
    ];
    for (name, steps) in cases {
        run(name, &steps);
    }
}

/// A whole report in one `ReportDataset` and the same list in batches define the same job,
/// and each is accepted as a repeat of the other.
#[test]
fn one_entry_and_batches_agree() {
    let all = chunks(4);
    let whole = Command::ReportDataset {
        job: "job".into(),
        chunks: all.clone(),
        passes: 1,
        policy: policy(),
    };
    run(
        "whole, then batches",
        &[at(0, whole.clone(), accepted(4, 1)), at(0, batch("job", &all, 2, 2), accepted(4, 1))],
    );
    let batched = run(
        "batches, then whole",
        &[
            at(0, batch("job", &all, 0, 2), loading(2, 4)),
            at(0, batch("job", &all, 2, 2), accepted(4, 1)),
            at(0, whole, accepted(4, 1)),
        ],
    );
    assert_eq!(batched.status().task_count, 4);
}
