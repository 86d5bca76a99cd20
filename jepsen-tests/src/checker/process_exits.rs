//! Process exits: no trainer or pserver exits non-zero by itself while the job runs, and no
//! process the harness stops gracefully ignores SIGTERM. Every exit the supervisor saw is in
//! the history with its status and cause ([`ExitCause`]); this file judges them.
//!
//! How each exit is treated:
//! - killed by the harness (`kill -9`, [`ExitCause::Killed`]): the nemesis did it; fine.
//! - stopped by SIGTERM ([`ExitCause::Terminated`]): fine if it exited within the bound
//!   (whatever its status: the harness asked it to stop); a violation if it had to be killed
//!   (`forced`), whatever its role: a process that ignores SIGTERM turns every rolling
//!   restart into an outage.
//! - stopped at the end of the run ([`ExitCause::Stopped`], every process at once): not
//!   judged (reported only).
//! - exited by itself ([`ExitCause::Own`]): a trainer or pserver exiting non-zero is a
//!   violation, with two exceptions the nemesis caused, each named in the report as excused:
//!   a pserver the nemesis paused (its lease lapsed and a standby took its slot: exiting 1 is
//!   its documented reaction to being fenced off), and a trainer the nemesis gave a broken
//!   view of its data (it may stop with an error; its tasks' fate is the other checkers'),
//!   each from the fault's start until [`EXCUSED_AFTER_HEAL_MS`] after its heal. A trainer
//!   exiting 0 finished the job. Masters' own exits are reported, not judged here (a master
//!   whose Raft core stopped exits on purpose so that its supervisor restarts it).

use crate::checker::Violation;
use crate::history::{Op, Operation, Phase, Value};
use crate::supervisor::{ExitCause, ProcessExit};

const NAME: &str = "process-exits";

/// How long after a heal an exit still counts as the fault's doing (the harness polls exits
/// every quarter second; a resumed pserver notices its lost lease within a second or two).
pub const EXCUSED_AFTER_HEAL_MS: u64 = 10_000;

/// The faults whose target may exit by itself, and the role of that target.
const EXCUSING_FAULTS: [(&str, &str); 2] =
    [("pause-pserver", "pserver"), ("break-trainer-data", "trainer")];

pub fn check(ops: &[Op]) -> Vec<Violation> {
    let windows = FaultWindow::all(ops);
    exits(ops).filter_map(|(op, exit)| judge(exit, op, &windows).err()).collect()
}

/// One line per exit that is not plainly fine, for the report: graceful stops with their
/// time and status, excused exits, masters' own exits.
pub fn summary(ops: &[Op]) -> Vec<String> {
    let windows = FaultWindow::all(ops);
    exits(ops)
        .filter_map(|(op, exit)| {
            let at = op.time_ms;
            let status = status_text(exit);
            match (judge(exit, op, &windows), exit.cause) {
                (Err(_), _) => None,
                (Ok(Some(excuse)), _) => {
                    Some(format!("{at:>7} ms {} {status}: excused ({excuse})", exit.name))
                }
                (Ok(None), ExitCause::Terminated { after_ms, .. }) => {
                    Some(format!("{at:>7} ms {} SIGTERM -> {status} in {after_ms} ms", exit.name))
                }
                (Ok(None), ExitCause::Own) if role(&exit.name) == "master" => {
                    Some(format!("{at:>7} ms {} exited by itself: {status}", exit.name))
                }
                (Ok(None), ExitCause::Stopped { forced: true, after_ms }) => Some(format!(
                    "{at:>7} ms {} still running {after_ms} ms after the final SIGTERM: killed",
                    exit.name
                )),
                _ => None,
            }
        })
        .collect()
}

/// Every exit in the history, with its op.
fn exits(ops: &[Op]) -> impl Iterator<Item = (&Op, &ProcessExit)> {
    ops.iter().filter_map(|op| match (&op.f, &op.value) {
        (Operation::ProcessExit { .. }, Value::Exit(exit)) => Some((op, exit)),
        _ => None,
    })
}

/// `Ok(None)` when the exit is fine, `Ok(Some(why))` when excused by a fault, `Err` when a
/// violation.
fn judge(
    exit: &ProcessExit,
    op: &Op,
    windows: &[FaultWindow],
) -> Result<Option<String>, Violation> {
    let violation = |message: String| Err(Violation::new(NAME, message, vec![op.index]));
    match exit.cause {
        ExitCause::Terminated { forced: true, after_ms } => violation(format!(
            "{} ignored SIGTERM: still running {after_ms} ms after it, killed",
            exit.name
        )),
        ExitCause::Own if !exit.success() && matches!(role(&exit.name), "trainer" | "pserver") => {
            match windows.iter().find(|window| window.excuses(&exit.name, op.time_ms)) {
                Some(window) => {
                    Ok(Some(format!("after {} at {} ms", window.fault, window.start_ms)))
                }
                None => violation(format!(
                    "{} exited by itself with {} while the job ran",
                    exit.name,
                    status_text(exit)
                )),
            }
        }
        _ => Ok(None),
    }
}

/// A fault window that may excuse its targets' exits.
struct FaultWindow {
    fault: String,
    /// The process names it hit.
    names: Vec<String>,
    start_ms: u64,
    /// When healed (`u64::MAX` if never).
    stop_ms: u64,
}

impl FaultWindow {
    fn all(ops: &[Op]) -> Vec<Self> {
        let mut windows: Vec<Self> = Vec::new();
        for op in ops {
            let Operation::Nemesis { fault, targets, phase } = &op.f else { continue };
            let Some((_, role)) = EXCUSING_FAULTS.iter().find(|(name, _)| name == fault) else {
                continue;
            };
            match phase {
                Phase::Start => windows.push(Self {
                    fault: fault.clone(),
                    names: targets.iter().map(|target| format!("{role}-{target}")).collect(),
                    start_ms: op.time_ms,
                    stop_ms: u64::MAX,
                }),
                Phase::Stop => {
                    if let Some(open) =
                        windows.last_mut().filter(|window| window.stop_ms == u64::MAX)
                    {
                        open.stop_ms = op.time_ms;
                    }
                }
            }
        }
        windows
    }

    fn excuses(&self, name: &str, time_ms: u64) -> bool {
        self.names.iter().any(|target| target == name)
            && self.start_ms <= time_ms
            && time_ms <= self.stop_ms.saturating_add(EXCUSED_AFTER_HEAL_MS)
    }
}

/// `trainer-2` -> `trainer`.
fn role(name: &str) -> &str {
    name.split('-').next().unwrap_or(name)
}

fn status_text(exit: &ProcessExit) -> String {
    match (exit.code, exit.signal) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("signal {signal}"),
        (None, None) => "unknown status".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;
    use crate::history::{OpKind, NEMESIS_PROCESS, SUPERVISOR_PROCESS};

    fn exit(builder: Builder, time_ms: u64, name: &str, code: i32, cause: ExitCause) -> Builder {
        let exit = ProcessExit { name: name.into(), code: Some(code), signal: None, cause };
        let f = Operation::ProcessExit { name: name.into() };
        builder.op(time_ms, SUPERVISOR_PROCESS, OpKind::Info, f, Value::Exit(exit))
    }

    fn fault(builder: Builder, time_ms: u64, fault: &str, target: u64, phase: Phase) -> Builder {
        let f = Operation::Nemesis { fault: fault.into(), targets: vec![target], phase };
        builder.op(time_ms, NEMESIS_PROCESS, OpKind::Info, f, Value::None)
    }

    fn messages(builder: Builder) -> Vec<String> {
        check(&builder.ops).into_iter().map(|violation| violation.message).collect()
    }

    /// A trainer or pserver exiting non-zero by itself is caught; a master's own exit, a
    /// trainer's exit 0, and exits the harness caused are not.
    #[test]
    fn an_own_non_zero_exit_of_a_trainer_or_pserver_is_caught() {
        let history = exit(Builder::default(), 1_000, "trainer-1", 1, ExitCause::Own);
        let history = exit(history, 2_000, "pserver-0", 1, ExitCause::Own);
        let history = exit(history, 3_000, "master-2", 1, ExitCause::Own);
        let history = exit(history, 4_000, "trainer-0", 0, ExitCause::Own);
        let history = exit(history, 5_000, "trainer-2", 137, ExitCause::Killed);
        let stopped = ExitCause::Stopped { after_ms: 5_000, forced: true };
        let history = exit(history, 6_000, "pserver-1", 1, stopped);
        let found = messages(history);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("trainer-1 exited by itself with exit 1"), "{found:?}");
        assert!(found[1].contains("pserver-0"), "{found:?}");
    }

    /// A process that had to be killed after SIGTERM is caught, whatever its role; one that
    /// exited within the bound is fine.
    #[test]
    fn a_process_that_ignores_sigterm_is_caught() {
        let forced = ExitCause::Terminated { after_ms: 10_000, forced: true };
        let graceful = ExitCause::Terminated { after_ms: 300, forced: false };
        let history = exit(Builder::default(), 1_000, "master-1", 137, forced);
        let history = exit(history, 2_000, "master-2", 0, graceful);
        let found = messages(history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("master-1 ignored SIGTERM"), "{found:?}");
    }

    /// A pserver the nemesis paused, and a trainer whose data it broke, may exit non-zero
    /// from the fault's start until shortly after its heal, and only they: later, or another
    /// process, is caught.
    #[test]
    fn exits_the_nemesis_caused_are_excused_in_their_window_only() {
        let history = fault(Builder::default(), 1_000, "pause-pserver", 1, Phase::Start);
        let history = fault(history, 4_000, "pause-pserver", 1, Phase::Stop);
        let history = exit(history, 5_000, "pserver-1", 1, ExitCause::Own);
        let history = exit(history, 5_500, "pserver-0", 1, ExitCause::Own);
        let history = fault(history, 20_000, "break-trainer-data", 2, Phase::Start);
        let history = exit(history, 21_000, "trainer-2", 1, ExitCause::Own);
        let history = fault(history, 24_000, "break-trainer-data", 2, Phase::Stop);
        let history = exit(history, 60_000, "trainer-2", 1, ExitCause::Own);
        let found = messages(history);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found[0].contains("pserver-0"), "{found:?}");
        assert!(found[1].contains("trainer-2"), "{found:?}");
        let history = fault(Builder::default(), 1_000, "pause-pserver", 1, Phase::Start);
        let history = exit(history, 2_000, "pserver-1", 1, ExitCause::Own);
        let lines = summary(&history.ops);
        assert!(lines[0].contains("excused (after pause-pserver at 1000 ms)"), "{lines:?}");
    }
}
