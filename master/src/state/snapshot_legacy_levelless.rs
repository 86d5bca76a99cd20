//! The state as layout 8 wrote it, field for field: no feature level, so the group opens at
//! the base level (every build that wrote layout 8 decoded level 2, but only a raise
//! decided once every member says so may take the group there).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::feature_level::BASE_FEATURE_LEVEL;
use super::job_state::JobState;
use super::master_state::MasterState;
use super::rendezvous_space::RendezvousSpace;

/// Layout 8's whole state.
#[derive(Serialize, Deserialize)]
pub(super) struct LevellessState {
    pub(super) clock_ms: u64,
    pub(super) jobs: BTreeMap<u64, JobState>,
    pub(super) next_job_id: u64,
    pub(super) rendezvous: RendezvousSpace,
}

impl From<LevellessState> for MasterState {
    fn from(old: LevellessState) -> Self {
        let LevellessState { clock_ms, jobs, next_job_id, rendezvous } = old;
        MasterState { clock_ms, jobs, next_job_id, rendezvous, feature_level: BASE_FEATURE_LEVEL }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::codec;

    /// A layout-8 snapshot opens at the base level with its jobs and runs as they were.
    #[test]
    fn layout_8_opens_at_the_base_level() {
        let old = LevellessState {
            clock_ms: 5,
            jobs: BTreeMap::from([(3, JobState::default())]),
            next_job_id: 4,
            rendezvous: RendezvousSpace::default(),
        };
        let mut bytes = vec![0xFF, 8];
        bytes.extend_from_slice(&codec::encode(&old));
        let state = MasterState::decode(&bytes).expect("layout 8 decodes");
        assert_eq!(state.feature_level(), BASE_FEATURE_LEVEL);
        assert_eq!((state.clock_ms, state.next_job_id, state.jobs.len()), (5, 4, 1));
    }
}
