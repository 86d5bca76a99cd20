//! `PassWalker`: the one walk through a job's passes every trainer makes. It asks for a task
//! of the pass it walks; when the masters say that pass is over it moves on to theirs (and
//! says the pass ended), when they say theirs is behind (a restore put the job back) it goes
//! back with them; while nothing is free it says how long to wait; a trainer the masters
//! forgot registers again (once per ask); and it stops at a finished or cancelled job. Each
//! answer is typed ([`Walked`], or a [`Step::Wait`] for a caller that waits its own way, as
//! the Python extension does to stay interruptible): the Rust trainer, the benchmarks, the fault harness, the
//! simulation and the Python extension all walk with it, each only deciding what to do with a
//! task and how to wait.

use std::time::Duration;

use crate::{ClientError, HandOffSource, Task, TaskOutcome, TaskSource, Together};

/// How long to wait, by default, before asking again when nothing is free: a task freed by
/// another trainer is taken within this.
pub const WALK_IDLE_DEFAULT: Duration = Duration::from_millis(200);

/// What the walk met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Walked {
    /// A task of the pass walked: hold it until it is reported (the masters answer a trainer
    /// that holds one with that task).
    Task(Task),
    /// Pass `pass` is over; the walk goes on with `next`.
    PassOver { pass: u32, next: u32 },
    /// The job's pass is behind the walk's (a restore put it back): the walk goes back to `to`.
    PassRewound { pass: u32, to: u32 },
    /// The job finished: every pass of every task is done.
    Finished,
    /// The job was cancelled.
    Cancelled,
}

/// What one ask met: something to act on, or a wait.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Walked(Walked),
    /// Nothing to hand out now: ask again after `retry_in`.
    Wait {
        why: Waiting,
        retry_in: Duration,
    },
}

/// Why nothing is handed out now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Waiting {
    /// The pass's remaining tasks are held by other trainers, or a restore holds the queue
    /// while the pservers reload.
    HeldElsewhere,
    /// The job has no dataset yet.
    NoDataset,
}

/// One trainer's walk through its job's passes.
pub struct PassWalker<S> {
    source: S,
    pass: u32,
    idle: Duration,
}

impl<S: TaskSource> PassWalker<S> {
    /// A walk from pass 0, asking `source`.
    pub fn new(source: S) -> Self {
        Self { source, pass: 0, idle: WALK_IDLE_DEFAULT }
    }

    /// The wait to say when nothing is free (default [`WALK_IDLE_DEFAULT`]).
    pub fn with_idle(mut self, idle: Duration) -> Self {
        self.idle = idle;
        self
    }

    /// The pass the next ask is for.
    pub fn pass(&self) -> u32 {
        self.pass
    }

    /// Walks pass `pass` from now on (a restore answered where the job is).
    pub fn go_to(&mut self, pass: u32) {
        self.pass = pass;
    }

    pub fn source(&self) -> &S {
        &self.source
    }

    /// One ask, without waiting.
    pub async fn step(&mut self) -> Result<Step, ClientError> {
        let outcome = self.ask().await?;
        self.walk(outcome)
    }

    /// What the walk makes of one answer.
    fn walk(&mut self, outcome: TaskOutcome) -> Result<Step, ClientError> {
        let walked = match outcome {
            TaskOutcome::Task(task) => Walked::Task(task),
            TaskOutcome::PassBefore { current } | TaskOutcome::PassAfter { current } => {
                return Ok(self.move_to(current));
            }
            TaskOutcome::NoMoreAvailable => return Ok(self.wait(Waiting::HeldElsewhere)),
            TaskOutcome::NoDataset => return Ok(self.wait(Waiting::NoDataset)),
            TaskOutcome::JobFinished => Walked::Finished,
            TaskOutcome::JobCancelled => Walked::Cancelled,
            TaskOutcome::UnknownTrainer => {
                return Err(ClientError::UnknownTrainer { call: "GetTask" });
            }
        };
        Ok(Step::Walked(walked))
    }

    /// One ask that first reports `finished` (receipts `(task_id, epoch)` of tasks done,
    /// this trainer's or others' of its process), in one write where the masters can: per
    /// receipt whether its finish was accepted, and the step. `together`: how many walks'
    /// asks (this one included) the caller sends at once, which the masters then write
    /// together (1: alone). A trainer the masters forgot registers again and asks once more
    /// (the finishes were already applied).
    pub async fn hand_off(
        &mut self,
        finished: &[(u64, u64)],
        together: &Together,
    ) -> Result<(Vec<bool>, Step), ClientError>
    where
        S: HandOffSource,
    {
        let handed = self.source.finished_then_get_task(self.pass, finished, together).await?;
        let outcome = match handed.outcome {
            TaskOutcome::UnknownTrainer => {
                self.source.renew().await?;
                self.source.get_task(self.pass).await?
            }
            outcome => outcome,
        };
        Ok((handed.finished, self.walk(outcome)?))
    }

    /// What the walk meets next, waiting as each wait says meanwhile.
    pub async fn next(&mut self) -> Result<Walked, ClientError> {
        loop {
            match self.step().await? {
                Step::Wait { retry_in, .. } => tokio::time::sleep(retry_in).await,
                Step::Walked(walked) => return Ok(walked),
            }
        }
    }

    /// `GetTask` for the walked pass; a trainer the masters forgot registers again and asks
    /// once more.
    async fn ask(&self) -> Result<TaskOutcome, ClientError> {
        match self.source.get_task(self.pass).await? {
            TaskOutcome::UnknownTrainer => {
                self.source.renew().await?;
                self.source.get_task(self.pass).await
            }
            outcome => Ok(outcome),
        }
    }

    /// The masters walk pass `current`: the walk follows them.
    fn move_to(&mut self, current: u32) -> Step {
        let pass = std::mem::replace(&mut self.pass, current);
        match current.cmp(&pass) {
            std::cmp::Ordering::Greater => Step::Walked(Walked::PassOver { pass, next: current }),
            std::cmp::Ordering::Less => Step::Walked(Walked::PassRewound { pass, to: current }),
            // Said of the pass walked: it is neither over nor ahead, so ask again.
            std::cmp::Ordering::Equal => self.wait(Waiting::HeldElsewhere),
        }
    }

    fn wait(&self, why: Waiting) -> Step {
        Step::Wait { why, retry_in: self.idle }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::sync::Mutex;

    use super::*;
    use crate::TaskData;

    /// Answers from a script, recording the passes asked and the renewals.
    #[derive(Default)]
    struct Script {
        answers: Mutex<VecDeque<TaskOutcome>>,
        asked: Mutex<Vec<u32>>,
        renewals: Mutex<u32>,
        reported: Mutex<Vec<(u64, u64)>>,
    }

    impl Script {
        fn of(answers: impl IntoIterator<Item = TaskOutcome>) -> Self {
            Self { answers: Mutex::new(answers.into_iter().collect()), ..Self::default() }
        }

        fn asked(&self) -> Vec<u32> {
            self.asked.lock().expect("asked").clone()
        }
    }

    impl TaskSource for Script {
        async fn get_task(&self, pass: u32) -> Result<TaskOutcome, ClientError> {
            self.asked.lock().expect("asked").push(pass);
            Ok(self.answers.lock().expect("answers").pop_front().expect("a scripted answer"))
        }

        async fn renew(&self) -> Result<(), ClientError> {
            *self.renewals.lock().expect("renewals") += 1;
            Ok(())
        }
    }

    impl HandOffSource for Script {
        async fn finished_then_get_task(
            &self,
            pass: u32,
            finished: &[(u64, u64)],
            _together: &crate::Together,
        ) -> Result<crate::HandOff, ClientError> {
            self.reported.lock().expect("reported").extend_from_slice(finished);
            let outcome = self.get_task(pass).await?;
            // Scripted: a receipt of an odd epoch was taken back meanwhile.
            let finished = finished.iter().map(|(_task, epoch)| epoch % 2 == 0).collect();
            Ok(crate::HandOff { finished, outcome })
        }
    }

    fn task(task_id: u64, pass: u32) -> Task {
        let data = TaskData::IndexRange { start: task_id, end: task_id + 1 };
        Task { task_id, epoch: 1, pass, data, deadline_ms: 0, shuffle_seed: None }
    }

    #[tokio::test(start_paused = true)]
    async fn the_walk_follows_the_masters_pass_and_stops_at_the_end() {
        let script = Script::of([
            TaskOutcome::Task(task(0, 0)),
            TaskOutcome::NoMoreAvailable,
            TaskOutcome::PassBefore { current: 1 },
            TaskOutcome::Task(task(0, 1)),
            TaskOutcome::PassAfter { current: 0 },
            TaskOutcome::NoDataset,
            TaskOutcome::JobCancelled,
            TaskOutcome::JobFinished,
        ]);
        let mut walker = PassWalker::new(script).with_idle(Duration::from_millis(7));
        let walked = Step::Walked;
        assert_eq!(walker.step().await.expect("step"), walked(Walked::Task(task(0, 0))));
        let held = Step::Wait { why: Waiting::HeldElsewhere, retry_in: Duration::from_millis(7) };
        assert_eq!(walker.step().await.expect("step"), held);
        let over = Walked::PassOver { pass: 0, next: 1 };
        assert_eq!(walker.step().await.expect("step"), walked(over));
        assert_eq!(walker.pass(), 1);
        assert_eq!(walker.next().await.expect("next"), Walked::Task(task(0, 1)));
        assert_eq!(walker.next().await.expect("next"), Walked::PassRewound { pass: 1, to: 0 });
        let started = tokio::time::Instant::now();
        assert_eq!(walker.next().await.expect("next"), Walked::Cancelled, "the wait is waited");
        assert_eq!(started.elapsed(), Duration::from_millis(7));
        assert_eq!(walker.next().await.expect("next"), Walked::Finished);
        assert_eq!(walker.source().asked(), [0, 0, 0, 1, 1, 0, 0, 0]);
    }

    #[tokio::test]
    async fn a_forgotten_trainer_registers_again_once_per_ask() {
        let script = Script::of([
            TaskOutcome::UnknownTrainer,
            TaskOutcome::Task(task(3, 0)),
            TaskOutcome::UnknownTrainer,
            TaskOutcome::UnknownTrainer,
        ]);
        let mut walker = PassWalker::new(script);
        assert_eq!(walker.next().await.expect("next"), Walked::Task(task(3, 0)));
        let forgotten = walker.step().await.expect_err("forgotten right after registering");
        assert!(matches!(forgotten, ClientError::UnknownTrainer { call: "GetTask" }));
        assert_eq!(*walker.source().renewals.lock().expect("renewals"), 2);
    }

    #[tokio::test]
    async fn the_masters_naming_the_walked_pass_is_a_wait() {
        let mut walker = PassWalker::new(Script::of([TaskOutcome::PassBefore { current: 0 }]));
        assert!(matches!(walker.step().await.expect("step"), Step::Wait { .. }));
        assert_eq!(walker.pass(), 0);
    }

    /// A hand-off reports its receipts with the ask and walks its answer as a step does; a
    /// forgotten trainer registers again and asks once more, without the receipts (applied).
    #[tokio::test]
    async fn a_hand_off_reports_with_the_ask_and_walks_the_answer() {
        let script = Script::of([
            TaskOutcome::PassBefore { current: 1 },
            TaskOutcome::UnknownTrainer,
            TaskOutcome::Task(task(4, 1)),
        ]);
        let mut walker = PassWalker::new(script);
        let (finished, step) =
            walker.hand_off(&[(2, 2), (3, 1)], &crate::Together::Sent(2)).await.expect("hand-off");
        assert_eq!(finished, [true, false]);
        assert_eq!(step, Step::Walked(Walked::PassOver { pass: 0, next: 1 }));
        let (finished, step) =
            walker.hand_off(&[(5, 4)], &crate::Together::Alone).await.expect("hand-off");
        assert_eq!((finished, step), (vec![true], Step::Walked(Walked::Task(task(4, 1)))));
        assert_eq!(walker.source().asked(), [0, 1, 1]);
        assert_eq!(*walker.source().renewals.lock().expect("renewals"), 1);
        assert_eq!(*walker.source().reported.lock().expect("reported"), [(2, 2), (3, 1), (5, 4)]);
    }
}
