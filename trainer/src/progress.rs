//! `Progress`: what this trainer has done so far.

use crate::model::Evaluation;
use crate::run::Summary;

#[derive(Debug, Default)]
pub struct Progress {
    pub tasks_done: u64,
    pub tasks_failed: u64,
    pub examples: u64,
    pub last_eval: Option<Evaluation>,
}

impl Progress {
    pub fn summary(&self) -> Summary {
        Summary {
            tasks_done: self.tasks_done,
            tasks_failed: self.tasks_failed,
            examples: self.examples,
            last_eval: self.last_eval,
        }
    }
}
