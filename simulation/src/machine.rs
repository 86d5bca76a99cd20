//! The application state a simulated node applies: the master's real `ReplicatedState`, or a
//! wrapper around it with a planted fencing bug.

use consensus::{RestoreError, StateMachine};
use master::state::{decode_request, encode_request, Command, MasterState, Response};
use master::ReplicatedState;

/// A master state machine the checkers can look into.
pub trait MasterMachine: StateMachine {
    /// The task-queue state after everything applied so far.
    fn master_state(&self) -> &MasterState;
}

impl MasterMachine for ReplicatedState {
    fn master_state(&self) -> &MasterState {
        self.state()
    }
}

/// How far past a stale epoch the broken wrapper looks for the pending one.
const EPOCH_SEARCH_MAX: u64 = 64;

/// The planted bug "accept a stale epoch": a `TaskFinished` whose epoch is not the pending one
/// is rewritten to the pending epoch, so a late report from a trainer the task was taken from
/// completes the task another trainer now holds.
#[derive(Default)]
pub struct FenceBreakingState {
    inner: ReplicatedState,
}

impl FenceBreakingState {
    /// The pending epoch of `task` if it is not `epoch`, found by trying later epochs on a copy.
    fn pending_epoch(&self, task: u64, epoch: u64, now_ms: u64) -> Option<u64> {
        let probe = |candidate: u64| {
            let mut copy = self.inner.state().clone();
            let command = Command::TaskFinished { task, epoch: candidate };
            let request = master::state::Request { client: None, now_ms, term: None, command };
            copy.apply(&request) == Response::Accepted
        };
        if probe(epoch) {
            return None;
        }
        (epoch + 1..epoch + EPOCH_SEARCH_MAX).find(|candidate| probe(*candidate))
    }
}

impl StateMachine for FenceBreakingState {
    fn apply(&mut self, command: &[u8], entry_term: u64) -> Vec<u8> {
        let Ok(mut request) = decode_request(command) else {
            return self.inner.apply(command, entry_term);
        };
        let Command::TaskFinished { task, epoch } = request.command else {
            return self.inner.apply(command, entry_term);
        };
        match self.pending_epoch(task, epoch, request.now_ms) {
            None => self.inner.apply(command, entry_term),
            Some(pending) => {
                request.command = Command::TaskFinished { task, epoch: pending };
                self.inner.apply(&encode_request(&request), entry_term)
            }
        }
    }

    fn snapshot(&self) -> Vec<u8> {
        self.inner.snapshot()
    }

    fn restore(&mut self, snapshot: &[u8]) -> Result<(), RestoreError> {
        self.inner.restore(snapshot)
    }
}

impl MasterMachine for FenceBreakingState {
    fn master_state(&self) -> &MasterState {
        self.inner.state()
    }
}
