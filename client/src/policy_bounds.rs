//! The values a job can run with, checked wherever a job's spec or the masters' defaults come
//! in (`raftrain job submit` flags and TOML, `raftrain master` flags, the master's admission
//! of a submit or report): a zero task timeout failed every task at once, zero chunks per task
//! or shard size made no tasks. Each refusal names the field and the accepted range.

use super::jobs::PolicyOverrides;

/// The shortest task timeout accepted: below this a task times out before a trainer can
/// report it (the shortest trainer lease the masters accept is the same).
pub const TASK_TIMEOUT_MIN_MS_FLOOR: u64 = 100;
/// The longest minimum task timeout accepted: a week; deadlines stay far from overflowing.
pub const TASK_TIMEOUT_MIN_MS_MAX: u64 = 7 * 24 * 60 * 60 * 1000;
/// The largest timeout factor k accepted (deadline = max(min, k x average task time)).
pub const TIMEOUT_FACTOR_MAX: u32 = 1000;
/// The most failures plus timeouts a task may have in a pass before it moves to `failed`:
/// far above what any job needs (the fault harness uses this much), yet a bound.
pub const MAX_TASK_FAILURES_MAX: u32 = 1_000_000;
/// The most chunks one task may hold (the master's `CHUNKS_PER_TASK_MAX` is this value).
pub const CHUNKS_PER_TASK_MAX: u32 = 1024;
/// The most passes a job may ask for.
pub const PASS_COUNT_MAX: u32 = 1_000_000;

/// Checks every policy value given; the error names the first field out of its range.
pub fn check_policy(policy: &PolicyOverrides) -> Result<(), String> {
    if let Some(value) = policy.chunks_per_task {
        within("chunks-per-task", value.into(), 1, CHUNKS_PER_TASK_MAX.into())?;
    }
    if let Some(value) = policy.task_timeout_min_ms {
        within("task-timeout-min-ms", value, TASK_TIMEOUT_MIN_MS_FLOOR, TASK_TIMEOUT_MIN_MS_MAX)?;
    }
    if let Some(value) = policy.timeout_factor {
        within("timeout-factor", value.into(), 1, TIMEOUT_FACTOR_MAX.into())?;
    }
    if let Some(value) = policy.max_task_failures {
        within("max-task-failures", value.into(), 0, MAX_TASK_FAILURES_MAX.into())?;
    }
    Ok(())
}

/// Checks a job's pass count.
pub fn check_passes(passes: u32) -> Result<(), String> {
    within("passes", passes.into(), 1, PASS_COUNT_MAX.into())
}

/// Checks an index dataset's size and shard size: each at least one.
pub fn check_index_range(size: u64, shard_size: u64) -> Result<(), String> {
    within("index (the dataset's size)", size, 1, u64::MAX)?;
    within("shard-size", shard_size, 1, u64::MAX)
}

fn within(field: &str, value: u64, min: u64, max: u64) -> Result<(), String> {
    if (min..=max).contains(&value) {
        return Ok(());
    }
    match max {
        u64::MAX => Err(format!("{field}: {value} is not accepted; give at least {min}")),
        _ => Err(format!("{field}: {value} is not accepted; give {min} to {max}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `policy` is accepted, or refused with an error containing `expected`.
    fn check(policy: PolicyOverrides, expected: Option<&str>) {
        match (check_policy(&policy), expected) {
            (Ok(()), None) => {}
            (Err(error), Some(expected)) => {
                assert!(error.contains(expected), "{policy:?}: {error} lacks {expected:?}")
            }
            (outcome, expected) => panic!("{policy:?}: {outcome:?}, expected {expected:?}"),
        }
    }

    /// The values tests, manifests and the defaults use are accepted; values no job can run
    /// with are refused naming the field and the range.
    #[test]
    fn policies_no_job_can_run_with_are_refused() {
        let none = PolicyOverrides::default();
        check(none, None);
        let usual = PolicyOverrides {
            chunks_per_task: Some(1),
            task_timeout_min_ms: Some(300),
            timeout_factor: Some(1),
            max_task_failures: Some(0),
            retry_failed_next_pass: Some(true),
        };
        check(usual, None);
        check(PolicyOverrides { max_task_failures: Some(1_000_000), ..none }, None);
        let cases = [
            (PolicyOverrides { task_timeout_min_ms: Some(0), ..none }, "task-timeout-min-ms: 0"),
            (PolicyOverrides { task_timeout_min_ms: Some(u64::MAX), ..none }, "100 to 604800000"),
            (PolicyOverrides { timeout_factor: Some(0), ..none }, "timeout-factor: 0"),
            (PolicyOverrides { chunks_per_task: Some(0), ..none }, "chunks-per-task: 0"),
            (PolicyOverrides { chunks_per_task: Some(1025), ..none }, "1 to 1024"),
            (PolicyOverrides { max_task_failures: Some(u32::MAX), ..none }, "0 to 1000000"),
        ];
        for (policy, expected) in cases {
            check(policy, Some(expected));
        }
        assert!(check_passes(0).expect_err("zero passes").contains("passes: 0"));
        assert!(check_index_range(10, 0).expect_err("zero shard").contains("shard-size: 0"));
        assert!(check_index_range(0, 1).expect_err("zero size").contains("index"));
    }
}
