//! `History`: what one master has watched of the group over time, which no single read of the
//! state holds: each job's tasks per second, its evaluations pass by pass (the state keeps only
//! the newest), and a timeline of leader changes and pserver slot replacements. Pure: it is fed
//! [`Observation`]s with the time they were taken, and every collection is bounded.

use std::collections::{BTreeMap, VecDeque};

/// Tasks-per-second samples kept per job: five minutes at one a second.
pub(crate) const RATE_SAMPLES_MAX: usize = 300;
/// Evaluations kept per job (the newest passes).
pub(crate) const EVALS_MAX: usize = 256;
/// Timeline events kept for the group (the newest).
pub(crate) const TIMELINE_EVENTS_MAX: usize = 256;

/// What one look at the local replica saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Observation {
    pub leader_id: Option<u64>,
    pub term: u64,
    /// Every job, by id.
    pub jobs: BTreeMap<u64, JobObservation>,
}

/// One job as the applied state shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct JobObservation {
    pub name: String,
    pub pass: u32,
    /// Tasks in a pass.
    pub task_count: u64,
    /// Tasks of the running pass that are done or failed.
    pub finished: u64,
    /// The newest evaluation: (pass, loss, accuracy).
    pub eval: Option<(u32, f32, f32)>,
    /// Each held slot's generation, by slot index.
    pub slots: BTreeMap<u32, u64>,
}

/// One tasks-per-second sample.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct RateSample {
    pub at_ms: u64,
    pub tasks_per_second: f64,
}

/// One evaluation, as first seen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct EvalPoint {
    pub pass: u32,
    pub loss: f32,
    pub accuracy: f32,
}

/// Something that happened to the group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A leader (or none) was first seen in a term.
    Leader { leader_id: Option<u64>, term: u64 },
    /// A job's slot went to a new generation (`from` is `None` for its first holder).
    SlotHolder { job: String, slot: u32, from: Option<u64>, to: u64 },
}

/// An event and when this master saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct TimelineEntry {
    pub at_ms: u64,
    pub event: Event,
}

/// A job's own history.
#[derive(Clone, Debug, Default)]
pub(crate) struct JobHistory {
    pub rates: VecDeque<RateSample>,
    pub evals: VecDeque<EvalPoint>,
    last: Option<(u64, JobObservation)>,
}

/// Everything watched so far.
#[derive(Clone, Debug, Default)]
pub(crate) struct History {
    pub jobs: BTreeMap<u64, JobHistory>,
    pub timeline: VecDeque<TimelineEntry>,
    /// The leader and term last seen, and since when.
    pub leader: Option<(Option<u64>, u64, u64)>,
}

impl History {
    /// Takes in what was seen at `now_ms`: a job gone from the state loses its history.
    pub(crate) fn observe(&mut self, now_ms: u64, seen: &Observation) {
        self.observe_leader(now_ms, seen.leader_id, seen.term);
        self.jobs.retain(|id, _| seen.jobs.contains_key(id));
        for (id, job) in &seen.jobs {
            let history = self.jobs.entry(*id).or_default();
            let replaced = history.observe(now_ms, job);
            for event in replaced {
                push_bounded(
                    &mut self.timeline,
                    TimelineEntry { at_ms: now_ms, event },
                    TIMELINE_EVENTS_MAX,
                );
            }
        }
    }

    /// Takes in each job's newest evaluation, by job id, between two observations: the state
    /// keeps only the newest, and passes may end faster than observations come.
    pub(crate) fn observe_evals(&mut self, evals: &BTreeMap<u64, (u32, f32, f32)>) {
        for (id, eval) in evals {
            self.jobs.entry(*id).or_default().add_eval(*eval);
        }
    }

    /// The leader known now and since when this master has seen it: `(leader, term, since)`.
    pub(crate) fn leader_since(&self) -> Option<(Option<u64>, u64, u64)> {
        self.leader
    }

    fn observe_leader(&mut self, now_ms: u64, leader_id: Option<u64>, term: u64) {
        let changed = match self.leader {
            None => true,
            Some((known, known_term, _)) => known != leader_id || known_term != term,
        };
        if !changed {
            return;
        }
        self.leader = Some((leader_id, term, now_ms));
        let event = Event::Leader { leader_id, term };
        push_bounded(
            &mut self.timeline,
            TimelineEntry { at_ms: now_ms, event },
            TIMELINE_EVENTS_MAX,
        );
    }
}

impl JobHistory {
    /// The job's name, as last seen.
    pub(crate) fn name(&self) -> Option<&str> {
        self.last.as_ref().map(|(_, job)| job.name.as_str())
    }

    /// Records a rate sample and a new evaluation; returns the slot replacements seen.
    fn observe(&mut self, now_ms: u64, job: &JobObservation) -> Vec<Event> {
        let mut events = Vec::new();
        if let Some((at_ms, last)) = &self.last {
            let elapsed_ms = now_ms.saturating_sub(*at_ms);
            if elapsed_ms > 0 {
                let tasks = finished_between(last, job) as f64;
                let tasks_per_second = tasks * 1_000.0 / elapsed_ms as f64;
                let sample = RateSample { at_ms: now_ms, tasks_per_second };
                push_bounded(&mut self.rates, sample, RATE_SAMPLES_MAX);
            }
            events = replacements(last, job);
        }
        if let Some(eval) = job.eval {
            self.add_eval(eval);
        }
        self.last = Some((now_ms, job.clone()));
        events
    }

    /// Keeps `(pass, loss, accuracy)` if its pass is newer than the newest kept.
    fn add_eval(&mut self, (pass, loss, accuracy): (u32, f32, f32)) {
        if self.evals.back().is_none_or(|newest| newest.pass < pass) {
            push_bounded(&mut self.evals, EvalPoint { pass, loss, accuracy }, EVALS_MAX);
        }
    }
}

/// Tasks finished from `before` to `after`: within one pass the growth of the finished count;
/// across passes the rest of the old pass plus what the new one finished (a restore, which may
/// move the pass back, counts as nothing).
fn finished_between(before: &JobObservation, after: &JobObservation) -> u64 {
    match after.pass.cmp(&before.pass) {
        std::cmp::Ordering::Equal => after.finished.saturating_sub(before.finished),
        std::cmp::Ordering::Greater => {
            let passes_between = u64::from(after.pass - before.pass - 1);
            let rest = before.task_count.saturating_sub(before.finished);
            rest + passes_between.saturating_mul(after.task_count) + after.finished
        }
        std::cmp::Ordering::Less => 0,
    }
}

/// Slots whose generation changed from `before` to `after`.
fn replacements(before: &JobObservation, after: &JobObservation) -> Vec<Event> {
    after
        .slots
        .iter()
        .filter_map(|(slot, generation)| {
            let from = before.slots.get(slot).copied();
            (from != Some(*generation)).then(|| Event::SlotHolder {
                job: after.name.clone(),
                slot: *slot,
                from,
                to: *generation,
            })
        })
        .collect()
}

/// Appends `item`, dropping the oldest entries beyond `bound`.
fn push_bounded<T>(ring: &mut VecDeque<T>, item: T, bound: usize) {
    while ring.len() >= bound {
        ring.pop_front();
    }
    ring.push_back(item);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(pass: u32, finished: u64, slots: &[(u32, u64)]) -> JobObservation {
        JobObservation {
            name: "j".into(),
            pass,
            task_count: 10,
            finished,
            eval: pass.checked_sub(1).map(|done| (done, 1.0, 0.5)),
            slots: slots.iter().copied().collect(),
        }
    }

    fn seen(leader_id: Option<u64>, term: u64, one: JobObservation) -> Observation {
        Observation { leader_id, term, jobs: BTreeMap::from([(1, one)]) }
    }

    /// Rates count tasks across a pass boundary, evaluations are kept once per pass (also
    /// those seen between observations), and a leader change or a slot's new generation lands
    /// on the timeline once.
    #[test]
    fn rates_evals_and_timeline_follow_the_observations() {
        let mut history = History::default();
        history.observe(0, &seen(Some(1), 2, job(0, 4, &[(0, 5)])));
        history.observe(1_000, &seen(Some(1), 2, job(0, 8, &[(0, 5)])));
        history.observe(2_000, &seen(Some(1), 2, job(1, 3, &[(0, 5)])));
        history.observe(4_000, &seen(Some(3), 3, job(1, 3, &[(0, 9)])));
        let rates: Vec<f64> =
            history.jobs[&1].rates.iter().map(|sample| sample.tasks_per_second).collect();
        assert_eq!(rates, vec![4.0, 5.0, 0.0]);
        history.observe_evals(&BTreeMap::from([(1, (1, 0.5, 0.75))]));
        history.observe_evals(&BTreeMap::from([(1, (0, 0.5, 0.75))]));
        let passes: Vec<u32> = history.jobs[&1].evals.iter().map(|eval| eval.pass).collect();
        assert_eq!(passes, vec![0, 1]);
        let events: Vec<&Event> = history.timeline.iter().map(|entry| &entry.event).collect();
        let replaced = Event::SlotHolder { job: "j".into(), slot: 0, from: Some(5), to: 9 };
        assert_eq!(
            events,
            vec![
                &Event::Leader { leader_id: Some(1), term: 2 },
                &Event::Leader { leader_id: Some(3), term: 3 },
                &replaced,
            ]
        );
        assert_eq!(history.leader_since(), Some((Some(3), 3, 4_000)));
    }

    /// Every ring stays within its bound however long the master watches, and a job gone from
    /// the state takes its history with it.
    #[test]
    fn rings_are_bounded() {
        let mut history = History::default();
        let samples = (RATE_SAMPLES_MAX + TIMELINE_EVENTS_MAX + EVALS_MAX) as u64 * 2;
        for step in 0..samples {
            let pass = step as u32;
            history.observe(step * 1_000, &seen(Some(step % 3), step, job(pass, 1, &[(0, step)])));
        }
        let job_history = &history.jobs[&1];
        assert_eq!(job_history.rates.len(), RATE_SAMPLES_MAX);
        assert_eq!(job_history.evals.len(), EVALS_MAX);
        assert_eq!(history.timeline.len(), TIMELINE_EVENTS_MAX);
        history.observe(samples * 1_000, &Observation::default());
        assert!(history.jobs.is_empty());
    }
}
