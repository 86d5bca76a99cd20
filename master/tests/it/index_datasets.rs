//! ReportIndexDataset: a job over the indices `[0, size)` in tasks of `shard_size`. The first
//! report of either kind wins, repeats are answered, differences refused by name; tasks cover
//! the range exactly once per pass, the last shard short, with no overflow near `u64::MAX`.

use client::TaskData;
use master::state::{
    ChunkList, Command, DatasetKindView, MasterState, Request, Response, JOB_NAME_BYTES_MAX,
    LOADING_IDLE_MS_MAX, TASK_COUNT_MAX,
};
use proptest::prelude::*;

use crate::support::{
    accepted, at, counts, finished, get, is, policy, register, report, run, task, Expect, Step,
};

/// An index report of `job` with the scripts' policy.
fn index(job: &str, size: u64, shard_size: u64, passes: u32) -> Command {
    Command::ReportIndexDataset { job: job.to_string(), size, shard_size, passes, policy: policy() }
}

/// The first batch of a RecordIO report of three chunks, still loading after it.
fn first_batch() -> Command {
    let all = crate::support::chunks(3);
    Command::ReportDatasetBatch {
        job: "job".to_string(),
        passes: 1,
        policy: policy(),
        total_chunks: 3,
        digest: master::state::chunks_digest(&all),
        first_chunk: 0,
        chunks: ChunkList::from_refs(&all[..1]),
    }
}

/// Index reports are validated naming the field, the first report of either kind wins,
/// identical repeats get the same answer and different ones are refused with what differs.
#[test]
fn index_reports() {
    let other_policy = master::state::QueuePolicy { max_task_failures: 9, ..policy() };
    let repeat_elsewhere = Command::ReportIndexDataset {
        job: "job".into(),
        size: 1003,
        shard_size: 100,
        passes: 2,
        policy: other_policy,
    };
    let long_name = "j".repeat(JOB_NAME_BYTES_MAX + 1);
    let cases: Vec<(&str, Vec<Step>)> = vec![
        (
            "ceil(size / shard_size) tasks, all in todo",
            vec![
                at(0, index("job", 1003, 100, 2), accepted(11, 2)),
                counts(0, [11, 0, 0, 0], false),
            ],
        ),
        (
            "an identical repeat, also under another leader's policy, gets the first answer",
            vec![
                at(0, index("job", 1003, 100, 2), accepted(11, 2)),
                at(5, index("job", 1003, 100, 2), accepted(11, 2)),
                at(6, repeat_elsewhere, accepted(11, 2)),
                counts(0, [11, 0, 0, 0], false),
            ],
        ),
        (
            "another size, shard size or pass count is refused and named",
            vec![
                at(0, index("job", 1003, 100, 2), accepted(11, 2)),
                at(0, index("job", 1004, 100, 2), Expect::RejectedWith("size 1004 differs")),
                at(0, index("job", 1003, 101, 2), Expect::RejectedWith("shard_size 101 differs")),
                at(0, index("job", 1003, 100, 3), Expect::RejectedWith("passes 3")),
                counts(0, [11, 0, 0, 0], false),
            ],
        ),
        (
            "a RecordIO report after an index job is refused, naming both kinds",
            vec![
                at(0, index("job", 10, 5, 1), accepted(2, 1)),
                at(
                    0,
                    report(3, 1, policy()),
                    Expect::RejectedWith("index range (size 10, shard size 5)"),
                ),
                at(0, first_batch(), Expect::RejectedWith("this report lists RecordIO files")),
            ],
        ),
        (
            "an index report after a RecordIO job is refused, naming both kinds",
            vec![
                at(0, report(3, 1, policy()), accepted(3, 1)),
                at(0, index("job", 3, 1, 1), Expect::RejectedWith("RecordIO files (3 chunks)")),
            ],
        ),
        (
            "invalid reports are refused naming the field; a valid one after them wins",
            vec![
                at(0, index("job", 0, 1, 1), Expect::RejectedWith("size must be at least 1")),
                at(0, index("job", 1, 0, 1), Expect::RejectedWith("shard_size must be at least 1")),
                at(0, index("job", 1, 1, 0), Expect::RejectedWith("passes must be at least 1")),
                at(0, index(&long_name, 1, 1, 1), Expect::RejectedWith("job name")),
                at(
                    0,
                    index("job", u64::MAX, 1, 1),
                    Expect::RejectedWith("use a shard_size of at least"),
                ),
                at(
                    0,
                    index("job", TASK_COUNT_MAX + 1, 1, 1),
                    Expect::RejectedWith("tasks, more than"),
                ),
                at(0, index("job", 7, 3, 1), accepted(3, 1)),
            ],
        ),
        (
            "a RecordIO report still loading keeps its place until idle, then the index one wins",
            vec![
                at(0, first_batch(), is(Response::DatasetLoading { received: 1, total: 3 })),
                at(
                    LOADING_IDLE_MS_MAX,
                    index("job", 7, 3, 1),
                    Expect::RejectedWith("another dataset is being reported"),
                ),
                at(LOADING_IDLE_MS_MAX + 1, index("job", 7, 3, 1), accepted(3, 1)),
                at(
                    LOADING_IDLE_MS_MAX + 2,
                    first_batch(),
                    Expect::RejectedWith("is an index range"),
                ),
                counts(0, [3, 0, 0, 0], false),
            ],
        ),
    ];
    for (name, steps) in cases {
        run(name, &steps);
    }
}

/// What `task` covers, as the service hands it out.
fn range_of(state: &MasterState, task_id: u64) -> std::ops::Range<u64> {
    match state.sole().task_data(task_id) {
        Some(TaskData::IndexRange { start, end }) => start..end,
        other => panic!("task {task_id} of an index job covers {other:?}"),
    }
}

/// Two passes of 1003 indices in shards of 100: every task handed out and finished, the
/// ranges of each pass cover `[0, 1003)` exactly once in order, the last shard is 1000..1003,
/// and the job finishes after the second pass. Status says the kind, size and shard size.
#[test]
fn tasks_cover_the_range_once_per_pass() {
    let mut steps = vec![
        at(0, register("one"), is(Response::TrainerRegistered { trainer: 1 })),
        at(0, index("job", 1003, 100, 2), accepted(11, 2)),
    ];
    for pass in 0..2 {
        for task_id in 0..11 {
            let epoch = pass + 1;
            steps.push(at(1, get(1, pass as u32), task(task_id, epoch, pass as u32, 1001)));
            steps.push(at(1, finished(task_id, epoch), is(Response::Accepted)));
        }
    }
    steps.push(counts(1, [0, 0, 11, 0], true));
    let state = run("two passes over an index range", &steps);
    let ranges: Vec<_> = (0..11).map(|task_id| range_of(&state, task_id)).collect();
    let covered: Vec<u64> = ranges.iter().flat_map(Clone::clone).collect();
    assert_eq!(covered, (0..1003).collect::<Vec<_>>(), "every index once, in order");
    assert_eq!(ranges.last(), Some(&(1000..1003)), "the last shard is short");
    let status = state.status();
    let kind = DatasetKindView::IndexRange { size: 1003, shard_size: 100 };
    assert_eq!((status.dataset, status.task_count), (Some(kind), 11));
}

/// Near `u64::MAX`: the largest size in the fewest shards the task limit allows, and a shard
/// larger than the size, are accepted; their tasks end at the size, never overflowing.
#[test]
fn ranges_near_the_limits_do_not_overflow() {
    let shard_size = u64::MAX.div_ceil(TASK_COUNT_MAX);
    let mut state = MasterState::new();
    let apply = |state: &mut MasterState, command| {
        state.apply(&Request { client: None, now_ms: 0, term: None, command })
    };
    let answer = apply(&mut state, index("huge", u64::MAX, shard_size, u32::MAX));
    let task_count = u64::MAX.div_ceil(shard_size);
    assert_eq!(answer, Response::DatasetAccepted { task_count, passes: u32::MAX });
    assert!(task_count <= TASK_COUNT_MAX);
    let last = range_of(&state, task_count - 1);
    assert_eq!(last.end, u64::MAX);
    assert_eq!(range_of(&state, task_count - 2).end, last.start, "back to back");
    let mut small = MasterState::new();
    assert_eq!(
        apply(&mut small, index("small", 5, u64::MAX, 1)),
        Response::DatasetAccepted { task_count: 1, passes: 1 }
    );
    assert_eq!(range_of(&small, 0), 0..5);
}

proptest! {
    /// For any size and any shard size within the task limit, the tasks' ranges are
    /// non-empty, back to back from 0 to `size`, each at most a shard long.
    #[test]
    fn ranges_tile_the_dataset(size in 1u64..=u64::MAX, task_count_wanted in 1u64..=300) {
        let shard_size = size.div_ceil(task_count_wanted).max(1);
        let mut state = MasterState::new();
        let command = index("job", size, shard_size, 1);
        let answer = state.apply(&Request { client: None, now_ms: 0, term: None, command });
        let Response::DatasetAccepted { task_count, .. } = answer else {
            panic!("a range within the task limit is accepted: {answer:?}");
        };
        let mut next = 0;
        for task_id in 0..task_count {
            let range = range_of(&state, task_id);
            prop_assert_eq!(range.start, next);
            prop_assert!(!range.is_empty() && range.end - range.start <= shard_size);
            next = range.end;
        }
        prop_assert_eq!(next, size);
    }
}
