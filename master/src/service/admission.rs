//! What the service refuses before it proposes anything, whichever client sent it (the CLI
//! and the Python package check the same rules, but a hostile client bypasses them): a name
//! that creates a job must be a DNS label, a command that changes a job must name one, and a
//! job's policy must be one it can run with. Checked here, at admission, not when an entry is
//! applied: entries committed before these rules must still replay to the same state.

use crate::replicated_state::ReplicatedState;
use crate::state::QueuePolicy;
use client::PolicyOverrides;
use consensus::ConsensusNode;
use tonic::Status;

/// A report or submit that may create job `job` with `passes`: the name must be a DNS label
/// unless a job already has it (one admitted before the rule stays reachable).
pub(crate) fn check_report(
    node: &ConsensusNode<ReplicatedState>,
    job: &str,
    passes: u32,
) -> Result<(), Status> {
    client::check_passes(passes).map_err(Status::invalid_argument)?;
    let exists = || node.read(|state| state.state().job_named(job).is_some());
    match client::check_job_name(job) {
        Ok(()) => Ok(()),
        // A job admitted before the rule keeps its name: its members' reports still reach it.
        Err(_) if !job.is_empty() && exists() => Ok(()),
        Err(message) => Err(Status::invalid_argument(message)),
    }
}

/// A command that changes a job (cancel, checkpoint, restore) must name it: the empty name
/// would mean the group's only job.
pub(crate) fn require_named(job: &str) -> Result<(), Status> {
    client::require_job_name(job).map_err(Status::invalid_argument)
}

/// The policy a submitted job would run under (the masters' flags with its overrides).
pub(crate) fn check_policy(policy: &QueuePolicy) -> Result<(), Status> {
    let every_field = PolicyOverrides {
        chunks_per_task: Some(policy.chunks_per_task),
        task_timeout_min_ms: Some(policy.task_timeout_min_ms),
        timeout_factor: Some(policy.timeout_factor),
        max_task_failures: Some(policy.max_task_failures),
        retry_failed_next_pass: Some(policy.retry_failed_next_pass),
    };
    client::check_policy(&every_field).map_err(Status::invalid_argument)
}
