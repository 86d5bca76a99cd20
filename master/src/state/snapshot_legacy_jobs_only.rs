//! The state as layout 7 wrote it, field for field: the jobs without the rendezvous key
//! space, which such a state reads back empty.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::job_state::JobState;
use super::master_state::MasterState;

/// Layout 7's whole state.
#[derive(Serialize, Deserialize)]
pub(super) struct JobsOnlyState {
    clock_ms: u64,
    jobs: BTreeMap<u64, JobState>,
    next_job_id: u64,
}

impl From<JobsOnlyState> for MasterState {
    fn from(old: JobsOnlyState) -> Self {
        MasterState {
            clock_ms: old.clock_ms,
            jobs: old.jobs,
            next_job_id: old.next_job_id,
            ..MasterState::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{Command, Request};

    /// A layout-7 snapshot of a group with a job decodes to the same jobs and no rendezvous
    /// run, and re-encodes in the current layout.
    #[test]
    fn a_layout_7_snapshot_still_decodes() {
        let mut state = MasterState::new();
        let report = Command::ReportIndexDataset {
            job: "a".into(),
            size: 10,
            shard_size: 2,
            passes: 1,
            policy: crate::state::QueuePolicy {
                chunks_per_task: 1,
                task_timeout_min_ms: 1_000,
                timeout_factor: 2,
                max_task_failures: 3,
                retry_failed_next_pass: false,
            },
        };
        state.apply(&Request { client: None, now_ms: 5, term: None, command: report });
        let old = JobsOnlyState {
            clock_ms: state.clock_ms,
            jobs: state.jobs.clone(),
            next_job_id: state.next_job_id,
        };
        let mut bytes = vec![0xFF, 7];
        bytes.extend_from_slice(&super::super::codec::encode(&old));
        let decoded = MasterState::decode(&bytes).expect("layout 7 decodes");
        assert_eq!(decoded, state);
        assert!(decoded.rendezvous.runs.is_empty());
        assert_eq!(&decoded.encode()[..2], &[0xFF, 8]);
    }
}
