//! Pserver slots have one holder at a time, as the master tells it. Slot indices and
//! generations are a job's own (each job draws its generations from a counter of its own), so
//! everything below holds per job.
//! - A pserver may serve slot i under generation g from the moment it sent a heartbeat (or
//!   claim) the master answered "held" until most of a lease later (an answer that comes later
//!   than that is not acted on). No generation of slot i
//!   may be granted to another pserver inside such a window (a pserver that restarts claims
//!   its slot again at once, under a new generation), and no older generation may be
//!   confirmed after a newer one was granted.
//! - A pserver's own judgement of its lease (production `HeldSlot`, on the pserver's skewed
//!   clock) lets it serve only inside such a window: it never trusts a lease longer than the
//!   master may honour it.
//! - No checkpoint is recorded under a generation that does not hold its slot (read from the
//!   applied log in order).

use std::collections::BTreeMap;

use master::state::{Command, Response};

use super::job_directory::JobDirectory;
use super::per_job::PerJob;
use super::state_machine_safety::LogCursor;
use super::{CanonicalLog, Violation};
use crate::history::{SlotEvent, SlotEventKind};

/// Of a lease, the part a confirmed holder may serve for after sending its heartbeat.
const SERVE_PART_PERCENT: u64 = 85;

/// Per job, its slots' holders and serving windows.
pub struct SlotHolders {
    lease_ms: u64,
    jobs: PerJob<JobSlots>,
    cursor: LogCursor,
}

/// One job's slots: the newest generation granted and the confirmed serving windows.
#[derive(Default)]
struct JobSlots {
    /// Per slot and generation: serving until when, and by which pserver.
    serving: BTreeMap<u32, BTreeMap<u64, (u64, u64)>>,
    /// Per slot: the newest generation a client was told it was granted, and when.
    granted: BTreeMap<u32, (u64, u64)>,
    /// Per slot, the generation that holds it in the applied log.
    holder: BTreeMap<u32, u64>,
}

impl SlotHolders {
    pub fn new(lease_ms: u64) -> Self {
        Self { lease_ms, jobs: PerJob::default(), cursor: LogCursor::default() }
    }

    pub fn check(
        &mut self,
        events: &[SlotEvent],
        canonical: &CanonicalLog,
        jobs: &JobDirectory,
    ) -> Result<(), Violation> {
        for event in events {
            self.event(event)?;
        }
        self.read_log(canonical, jobs)
    }

    fn event(&mut self, event: &SlotEvent) -> Result<(), Violation> {
        let serve_ms = self.lease_ms * SERVE_PART_PERCENT / 100;
        let slots = self.jobs.of(&event.job);
        let violation = |detail: String| {
            Err(Violation::new("slot holders", format!("job {:?}: {detail}", event.job)))
        };
        let SlotEvent { slot, generation, pserver, invoked_ms, answered_ms, kind, .. } = *event;
        if kind == SlotEventKind::Serving {
            return slots.served(slot, generation, pserver, answered_ms).or_else(violation);
        }
        if answered_ms >= invoked_ms + serve_ms {
            // Answered too late to serve on: the pserver does not (and `serve` below would
            // hold an empty window).
            return Ok(());
        }
        if kind == SlotEventKind::Granted {
            let windows = slots.serving.entry(slot).or_default();
            let overlapping = windows.iter().find(|(other, (until, holder))| {
                **other != generation && *holder != pserver && *until > answered_ms
            });
            if let Some((other, (until, holder))) = overlapping {
                return violation(format!(
                    "slot {slot} was granted to pserver {pserver} as generation {generation} \
                     at {answered_ms} ms while pserver {holder} may serve it as generation \
                     {other} until {until} ms"
                ));
            }
            let newest = slots.granted.get(&slot).map_or(0, |(newest, _)| *newest);
            slots.granted.insert(slot, (generation.max(newest), answered_ms));
        } else if let Some((newest, at_ms)) = slots.granted.get(&slot) {
            if *newest > generation && invoked_ms > *at_ms {
                return violation(format!(
                    "slot {slot} generation {generation} was confirmed for a heartbeat sent at \
                     {invoked_ms} ms, after generation {newest} was granted at {at_ms} ms"
                ));
            }
        }
        let until = invoked_ms + serve_ms;
        let windows = slots.serving.entry(slot).or_default();
        let window = windows.entry(generation).or_insert((until, pserver));
        window.0 = window.0.max(until);
        Ok(())
    }

    fn read_log(&mut self, canonical: &CanonicalLog, jobs: &JobDirectory) -> Result<(), Violation> {
        for applied in self.cursor.read(canonical).into_iter().filter(|applied| !applied.replay) {
            let (request, response) = (applied.request, applied.response);
            let Some(job) = jobs.job_of(&request.command)? else { continue };
            let holder = &mut self.jobs.of(job).holder;
            if let Response::SlotClaimed { slot, generation, .. } = response {
                holder.insert(*slot, *generation);
            }
            let Command::RecordCheckpoint { slot, generation, .. } = request.command.scoped().1
            else {
                continue;
            };
            let holder = holder.get(slot).copied();
            if *response == Response::Accepted && holder != Some(*generation) {
                return Err(Violation::new(
                    "slot holders",
                    format!(
                        "entry {} recorded a checkpoint of slot {slot} of job {job:?} under \
                         generation {generation}, but generation {holder:?} holds it",
                        applied.log_id
                    ),
                ));
            }
        }
        Ok(())
    }
}

impl JobSlots {
    /// `pserver` found at `at_ms` that it may serve slot `index` as `generation`; why it may
    /// not, if it may not.
    fn served(&self, slot: u32, generation: u64, pserver: u64, at_ms: u64) -> Result<(), String> {
        let window = self.serving.get(&slot).and_then(|windows| windows.get(&generation));
        let until = window.filter(|(_, holder)| *holder == pserver).map(|(until, _)| *until);
        if until.is_some_and(|until| at_ms < until) {
            return Ok(());
        }
        Err(format!(
            "pserver {pserver} would serve slot {slot} as generation {generation} at {at_ms} \
             ms, but what it was told lets it serve until {until:?} ms"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE_MS: u64 = 1_000;

    /// Slot 0 of job `job`, generation `generation`, told to or seen by `pserver`.
    fn event_in(
        job: &str,
        kind: SlotEventKind,
        generation: u64,
        pserver: u64,
        times_ms: (u64, u64),
    ) -> SlotEvent {
        let (invoked_ms, answered_ms, job) = (times_ms.0, times_ms.1, job.to_string());
        SlotEvent { job, slot: 0, generation, pserver, invoked_ms, answered_ms, kind }
    }

    /// The same in job "a".
    fn event(
        kind: SlotEventKind,
        generation: u64,
        pserver: u64,
        times_ms: (u64, u64),
    ) -> SlotEvent {
        event_in("a", kind, generation, pserver, times_ms)
    }

    fn serving(generation: u64, pserver: u64, at_ms: u64) -> SlotEvent {
        event(SlotEventKind::Serving, generation, pserver, (at_ms, at_ms))
    }

    /// Whether `events`, in order, keep the invariants.
    fn check(events: &[SlotEvent]) -> bool {
        let mut holders = SlotHolders::new(LEASE_MS);
        events.iter().all(|event| holders.event(event).is_ok())
    }

    /// A pserver serves only inside what it was told: from a grant or confirmation until 85%
    /// of a lease after its send, under its own generation.
    #[test]
    fn serving_is_held_to_what_the_pserver_was_told() {
        use SlotEventKind::{Confirmed, Granted};
        let granted = || event(Granted, 3, 7, (100, 150));
        let confirmed = || event(Confirmed, 3, 7, (600, 620));
        let cases: [(&str, Vec<SlotEvent>, bool); 6] = [
            ("inside the grant's window", vec![granted(), serving(3, 7, 949)], true),
            ("at the window's end", vec![granted(), serving(3, 7, 950)], false),
            ("after a renewal", vec![granted(), confirmed(), serving(3, 7, 1_449)], true),
            (
                "past the renewal's window",
                vec![granted(), confirmed(), serving(3, 7, 1_450)],
                false,
            ),
            ("under a generation never told", vec![granted(), serving(4, 7, 200)], false),
            ("another pserver's generation", vec![granted(), serving(3, 8, 200)], false),
        ];
        for (case, events, holds) in cases {
            assert_eq!(check(&events), holds, "{case}");
        }
    }

    /// Slot 0 of one job and slot 0 of another are two slots: a grant in job "b" while a
    /// pserver of job "a" serves its slot 0 is no second holder, and a pserver serves under a
    /// generation only in the job it was told it in; in one job the same grant is a violation.
    #[test]
    fn slots_are_held_per_job() {
        use SlotEventKind::Granted;
        let granted_a = || event_in("a", Granted, 1, 7, (100, 150));
        let granted_b = || event_in("b", Granted, 2, 8, (200, 250));
        let granted_a_again = || event_in("a", Granted, 2, 8, (200, 250));
        let serving_b = event_in("b", SlotEventKind::Serving, 1, 7, (300, 300));
        let cases: [(&str, Vec<SlotEvent>, bool); 3] = [
            ("another job's slot 0", vec![granted_a(), granted_b()], true),
            ("the same job's slot 0", vec![granted_a(), granted_a_again()], false),
            ("a generation told in another job", vec![granted_a(), serving_b], false),
        ];
        for (case, events, holds) in cases {
            assert_eq!(check(&events), holds, "{case}");
        }
    }
}
