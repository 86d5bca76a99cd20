//! The rendezvous keys (`workload/rendezvous.rs`), judged in real-time order (history
//! indices: an event recorded before another happened before it).
//!
//! - Adds (`rendezvous-adds`): every read of the counter lies between the adds acknowledged
//!   before the read's invocation and the adds invoked, and not refused, before its
//!   completion; the final read (after the clients stopped and the faults healed) holds at
//!   least every acknowledged add and at most those plus the unknown ones: an add is counted
//!   exactly once, however often it was retried.
//! - Compare-by-version (`rendezvous-compare-version`): no two acknowledged successful writes
//!   name the same base version (a version is never current twice); a success returns its
//!   own value at a version above its base; no success names a base older than a version of
//!   the key seen before its invocation (a stale version accepted); nothing ever sees a value
//!   whose write was refused, or a value no write invoked before asked for.
//! - Versions (`rendezvous-versions`): the versions of one key seen (reads, and the writes'
//!   own answers) never go back in real-time order.

use std::collections::{BTreeMap, BTreeSet};

use crate::checker::{completed, Completed, Violation};
use crate::history::{KeyEntry, Op, OpKind, Operation, Value};

const ADDS: &str = "rendezvous-adds";
const COMPARE: &str = "rendezvous-compare-version";
const VERSIONS: &str = "rendezvous-versions";
/// Each property reports at most this many violations (and how many more there were).
const REPORTED_MAX: usize = 20;

/// One key's version as one answered operation saw it.
#[derive(Clone, Copy, Debug)]
struct Seen {
    invoke: usize,
    complete: usize,
    version: u64,
}

pub fn check(ops: &[Op]) -> Vec<Violation> {
    let pairs = completed(ops);
    let mut violations = capped(ADDS, check_adds(ops, &pairs));
    violations.extend(capped(COMPARE, check_compare_version(ops, &pairs)));
    let mut versions = Vec::new();
    for key in [Key::Counter, Key::State] {
        versions.extend(versions_never_go_back(&Sightings::new(seen(&pairs, key))));
    }
    violations.extend(capped(VERSIONS, versions));
    violations
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Key {
    Counter,
    State,
}

/// The counter reads against the adds around them.
fn check_adds(ops: &[Op], pairs: &[Completed<'_>]) -> Vec<Violation> {
    let is_add = |pair: &&Completed<'_>| pair.invoke.f == Operation::RendezvousAdd;
    let ended = |kind: OpKind| pairs.iter().filter(is_add).filter(move |p| p.kind() == kind);
    let refused: BTreeSet<usize> = ended(OpKind::Fail).map(|p| p.invoke.index).collect();
    let mut acked: Vec<usize> = ended(OpKind::Ok).map(|p| p.complete.index).collect();
    acked.sort_unstable();
    let asked: Vec<usize> = ops
        .iter()
        .filter(|op| op.f == Operation::RendezvousAdd && op.kind == OpKind::Invoke)
        .filter(|op| !refused.contains(&op.index))
        .map(|op| op.index)
        .collect();
    let last_add = ops.iter().filter(|op| op.f == Operation::RendezvousAdd).map(|op| op.index);
    let last_add = last_add.max();
    let reads: Vec<(&Completed<'_>, &KeyEntry)> = pairs
        .iter()
        .filter_map(|pair| match (pair.kind(), &pair.complete.value) {
            (OpKind::Ok, Value::RdzvKeys { counter, .. }) => Some((pair, counter)),
            _ => None,
        })
        .collect();
    let final_read =
        reads.iter().rev().find(|(pair, _)| last_add.is_some_and(|last| pair.invoke.index > last));
    let mut violations = Vec::new();
    if let (Some(last), None) = (last_add, final_read) {
        let message = "no read of the counter after the last add".to_string();
        violations.push(Violation::new(ADDS, message, vec![last]));
    }
    let before = |sorted: &[usize], index: usize| sorted.partition_point(|at| *at < index) as i64;
    for (pair, counter) in &reads {
        let ops = vec![pair.complete.index];
        let Some(count) = counter_value(counter) else {
            let message = format!("the counter holds {:?}, not a count", counter.value);
            violations.push(Violation::new(ADDS, message, ops));
            continue;
        };
        let is_final =
            final_read.is_some_and(|(last, _)| last.complete.index == pair.complete.index);
        let (low, high) = match is_final {
            true => (acked.len() as i64, asked.len() as i64),
            false => (before(&acked, pair.invoke.index), before(&asked, pair.complete.index)),
        };
        if count < low || count > high {
            let which = if is_final { "the final read" } else { "a read" };
            let message = format!(
                "{which} of the counter found {count}, outside {low}..={high} (adds acknowledged before it ..= adds asked and not refused before its end)"
            );
            violations.push(Violation::new(ADDS, message, ops));
        }
    }
    violations
}

/// The counter's count (0 when absent), or `None` when it holds no decimal integer.
fn counter_value(entry: &KeyEntry) -> Option<i64> {
    match entry.version {
        0 => Some(0),
        _ => entry.value.parse().ok(),
    }
}

/// The compare-by-version writes against each other and against what was seen.
fn check_compare_version(ops: &[Op], pairs: &[Completed<'_>]) -> Vec<Violation> {
    let mut violations = Vec::new();
    // Every write asked for, by value: its invocation.
    let asked: BTreeMap<&str, usize> = ops
        .iter()
        .filter(|op| op.kind == OpKind::Invoke)
        .filter_map(|op| match &op.f {
            Operation::RendezvousCompareVersion { write, .. } => Some((write.as_str(), op.index)),
            _ => None,
        })
        .collect();
    let mut by_base: BTreeMap<u64, usize> = BTreeMap::new();
    let mut refused: BTreeMap<&str, usize> = BTreeMap::new();
    let state_seen = Sightings::new(seen(pairs, Key::State));
    for pair in pairs.iter().filter(|pair| pair.kind() == OpKind::Ok) {
        let (
            Operation::RendezvousCompareVersion { base, write, .. },
            Value::RdzvWritten { set, state },
        ) = (&pair.invoke.f, &pair.complete.value)
        else {
            continue;
        };
        let op = pair.complete.index;
        if !set {
            refused.insert(write.as_str(), op);
            continue;
        }
        if let Some(first) = by_base.insert(*base, op) {
            let message =
                format!("two writes succeeded at base version {base}: it was current twice");
            violations.push(Violation::new(COMPARE, message, vec![first, op]));
        }
        if state.version <= *base || state.value != *write {
            let message = format!(
                "a write at base {base} succeeded as {:?} at version {}, not its own value above its base",
                state.value, state.version
            );
            violations.push(Violation::new(COMPARE, message, vec![op]));
        }
        if let Some(newer) = state_seen.newest_before(pair.invoke.index).filter(|s| s.1 > *base) {
            let message = format!(
                "a write at base {base} succeeded although version {} was seen before it began (a stale version accepted)",
                newer.1
            );
            violations.push(Violation::new(COMPARE, message, vec![newer.0, op]));
        }
    }
    for (pair, state) in pairs.iter().filter_map(|pair| state_of(pair).map(|s| (pair, s))) {
        if state.version == 0 {
            continue;
        }
        let op = pair.complete.index;
        if let Some(write) = refused.get(state.value.as_str()) {
            let message = format!("{:?} was seen although its write was refused", state.value);
            violations.push(Violation::new(COMPARE, message, vec![*write, op]));
        } else if asked.get(state.value.as_str()).is_none_or(|at| *at >= op) {
            let message = format!("{:?} was seen but no write asked for it before", state.value);
            violations.push(Violation::new(COMPARE, message, vec![op]));
        }
    }
    violations
}

/// The state key's entry an answered operation returned.
fn state_of<'a>(pair: &'a Completed<'_>) -> Option<&'a KeyEntry> {
    match (pair.kind(), &pair.complete.value) {
        (OpKind::Ok, Value::RdzvKeys { state, .. } | Value::RdzvWritten { state, .. }) => {
            Some(state)
        }
        _ => None,
    }
}

/// Every version of `key` an answered operation saw, sorted by completion.
fn seen(pairs: &[Completed<'_>], key: Key) -> Vec<Seen> {
    let mut seen: Vec<Seen> = pairs
        .iter()
        .filter(|pair| pair.kind() == OpKind::Ok)
        .filter_map(|pair| {
            let version = match (&pair.complete.value, key) {
                (Value::RdzvKeys { counter, .. }, Key::Counter) => counter.version,
                (Value::RdzvAdded { version, .. }, Key::Counter) => *version,
                (Value::RdzvKeys { state, .. } | Value::RdzvWritten { state, .. }, Key::State) => {
                    state.version
                }
                _ => return None,
            };
            Some(Seen { invoke: pair.invoke.index, complete: pair.complete.index, version })
        })
        .collect();
    seen.sort_by_key(|seen| seen.complete);
    seen
}

/// The sightings sorted by completion, with the running newest: for each, the newest version
/// seen by it or an operation completed before it, as (that operation, the version).
struct Sightings {
    seen: Vec<Seen>,
    newest: Vec<(usize, u64)>,
}

impl Sightings {
    fn new(seen: Vec<Seen>) -> Self {
        let mut newest: Vec<(usize, u64)> = Vec::with_capacity(seen.len());
        for sighting in &seen {
            let best = newest.last().copied().filter(|best| best.1 >= sighting.version);
            newest.push(best.unwrap_or((sighting.complete, sighting.version)));
        }
        Self { seen, newest }
    }

    /// The newest version seen by an operation completed before `index`.
    fn newest_before(&self, index: usize) -> Option<(usize, u64)> {
        let count = self.seen.partition_point(|seen| seen.complete < index);
        count.checked_sub(1).map(|last| self.newest[last])
    }
}

/// Each sighting against the newest version seen by an operation that completed before it
/// began.
fn versions_never_go_back(sightings: &Sightings) -> Vec<Violation> {
    let mut violations = Vec::new();
    for sighting in &sightings.seen {
        let Some((op, version)) = sightings.newest_before(sighting.invoke) else { continue };
        if version > sighting.version {
            let message = format!(
                "a key's version went back from {version} to {} in real-time order",
                sighting.version
            );
            violations.push(Violation::new(VERSIONS, message, vec![op, sighting.complete]));
        }
    }
    violations
}

/// At most [`REPORTED_MAX`] of `violations`, and a note of how many more.
fn capped(checker: &str, mut violations: Vec<Violation>) -> Vec<Violation> {
    if violations.len() > REPORTED_MAX {
        let more = violations.len() - REPORTED_MAX;
        violations.truncate(REPORTED_MAX);
        violations.push(Violation::new(checker, format!("and {more} more"), Vec::new()));
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::test_history::Builder;

    fn entry(value: &str, version: u64) -> KeyEntry {
        KeyEntry { value: value.to_string(), version }
    }

    fn add(builder: Builder, times: (u64, u64), process: u64, kind: OpKind, count: i64) -> Builder {
        let value = match kind {
            OpKind::Ok => Value::RdzvAdded { count, version: count as u64 * 10 },
            _ => Value::None,
        };
        builder.call(times, process, Operation::RendezvousAdd, kind, value)
    }

    fn read(builder: Builder, times: (u64, u64), counter: KeyEntry, state: KeyEntry) -> Builder {
        let value = Value::RdzvKeys { counter, state };
        builder.call(times, 90, Operation::RendezvousRead, OpKind::Ok, value)
    }

    /// A compare-by-version of `write` at `base`, answered with `set` and the key after it.
    fn write(
        builder: Builder,
        times: (u64, u64),
        (process, base, write): (u64, u64, &str),
        set: bool,
        state: KeyEntry,
    ) -> Builder {
        let f = Operation::RendezvousCompareVersion { base, write: write.into(), stale: false };
        builder.call(times, process, f, OpKind::Ok, Value::RdzvWritten { set, state })
    }

    fn found(builder: Builder) -> Vec<Violation> {
        check(&builder.ops)
    }

    /// Adds acknowledged, refused and unknown; two clients racing on the state key, one
    /// refused; reads that see it all in order; the final read within its bounds.
    fn valid() -> Builder {
        let history = add(Builder::default(), (0, 5), 1, OpKind::Ok, 1);
        let history = add(history, (6, 9), 1, OpKind::Fail, 0);
        let history = read(history, (10, 11), entry("1", 10), KeyEntry::default());
        let history = write(history, (12, 20), (2, 0, "p2-s1"), true, entry("p2-s1", 11));
        let history = write(history, (13, 21), (3, 0, "p3-s1"), false, entry("p2-s1", 11));
        let history = add(history, (22, 30), 1, OpKind::Info, 0);
        let history = read(history, (23, 24), entry("1", 10), entry("p2-s1", 11));
        let history = write(history, (25, 26), (2, 11, "p2-s2"), true, entry("p2-s2", 13));
        read(history, (40, 41), entry("2", 12), entry("p2-s2", 13))
    }

    #[test]
    fn a_history_that_keeps_every_promise_passes() {
        assert_eq!(found(valid()), Vec::new());
    }

    #[test]
    fn an_acknowledged_add_lost_by_the_final_read_is_caught() {
        let history = add(Builder::default(), (0, 5), 1, OpKind::Ok, 1);
        let history = add(history, (6, 9), 1, OpKind::Ok, 2);
        let found = found(read(history, (10, 11), entry("1", 10), KeyEntry::default()));
        let lost = |v: &Violation| v.checker == ADDS && v.message.contains("the final read");
        assert!(found.iter().any(lost), "{found:?}");
    }

    #[test]
    fn an_add_counted_twice_is_caught_by_the_final_read() {
        let history = add(Builder::default(), (0, 5), 1, OpKind::Ok, 1);
        let history = add(history, (6, 9), 2, OpKind::Info, 0);
        let found = found(read(history, (10, 11), entry("3", 30), KeyEntry::default()));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].message.contains("outside 1..=2"), "{found:?}");
    }

    #[test]
    fn a_read_missing_an_add_acknowledged_before_it_is_caught() {
        let history = add(Builder::default(), (0, 5), 1, OpKind::Ok, 1);
        let history = read(history, (6, 7), KeyEntry::default(), KeyEntry::default());
        let history = read(history, (8, 9), entry("1", 10), KeyEntry::default());
        let found = found(history);
        assert!(found.iter().any(|v| v.checker == ADDS && v.ops == vec![3]), "{found:?}");
    }

    #[test]
    fn a_read_counting_an_add_not_yet_asked_is_caught() {
        let history = read(Builder::default(), (0, 1), entry("1", 10), KeyEntry::default());
        let history = add(history, (2, 5), 1, OpKind::Ok, 1);
        let history = read(history, (6, 7), entry("1", 10), KeyEntry::default());
        let found = found(history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].checker.as_str(), found[0].ops.clone()), (ADDS, vec![1]));
    }

    #[test]
    fn adds_never_read_afterwards_are_a_finding() {
        let found = found(add(Builder::default(), (0, 5), 1, OpKind::Ok, 1));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].message.contains("no read of the counter"), "{found:?}");
    }

    #[test]
    fn two_successes_at_one_base_version_are_caught() {
        // Two racing writes at base 0, both invoked before either answered.
        let f = |process: u64| Operation::RendezvousCompareVersion {
            base: 0,
            write: format!("p{process}-s1"),
            stale: false,
        };
        let answer = |process: u64, version| Value::RdzvWritten {
            set: true,
            state: entry(&format!("p{process}-s1"), version),
        };
        let history = Builder::default()
            .op(0, 2, OpKind::Invoke, f(2), Value::None)
            .op(1, 3, OpKind::Invoke, f(3), Value::None)
            .op(2, 2, OpKind::Ok, f(2), answer(2, 1))
            .op(3, 3, OpKind::Ok, f(3), answer(3, 2));
        let found = found(history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!((found[0].checker.as_str(), found[0].ops.clone()), (COMPARE, vec![2, 3]));
    }

    #[test]
    fn a_success_not_above_its_base_is_caught() {
        let history = write(Builder::default(), (0, 5), (2, 4, "p2-s1"), true, entry("p2-s1", 4));
        let found = found(history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].message.contains("not its own value above its base"), "{found:?}");
    }

    #[test]
    fn a_stale_version_accepted_is_caught() {
        let history = write(Builder::default(), (0, 1), (2, 0, "p2-s1"), true, entry("p2-s1", 5));
        let history = write(history, (2, 3), (3, 4, "p3-s1"), true, entry("p3-s1", 6));
        let found = found(history);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].message.contains("stale version accepted"), "{found:?}");
        assert_eq!(found[0].ops, vec![1, 3]);
    }

    #[test]
    fn a_refused_write_seen_by_a_read_is_caught() {
        let history = write(Builder::default(), (0, 5), (2, 0, "p2-s1"), false, entry("x", 1));
        let history = read(history, (6, 7), KeyEntry::default(), entry("p2-s1", 3));
        let found = found(history);
        assert!(found.iter().any(|v| v.message.contains("its write was refused")), "{found:?}");
        assert!(found.iter().all(|v| v.checker == COMPARE), "{found:?}");
    }

    #[test]
    fn a_value_nobody_wrote_is_caught() {
        let found = found(read(Builder::default(), (0, 1), KeyEntry::default(), entry("p9", 3)));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].message.contains("no write asked for it"), "{found:?}");
    }

    #[test]
    fn a_version_going_back_is_caught() {
        let history = write(Builder::default(), (0, 1), (2, 0, "p2-s1"), true, entry("p2-s1", 4));
        let history = write(history, (2, 3), (2, 4, "p2-s2"), true, entry("p2-s2", 7));
        let history = read(history, (4, 5), KeyEntry::default(), entry("p2-s1", 4));
        let found = found(history);
        let going_back: Vec<_> = found.iter().filter(|v| v.checker == VERSIONS).collect();
        assert_eq!(going_back.len(), 1, "{found:?}");
        assert_eq!(going_back[0].ops, vec![3, 5]);
    }

    #[test]
    fn violations_beyond_the_cap_are_counted_not_listed() {
        let mut history = Builder::default();
        for index in 0..30 {
            history = read(history, (index * 2, index * 2 + 1), KeyEntry::default(), entry("?", 1));
        }
        let found = found(history);
        assert_eq!(found.len(), REPORTED_MAX + 1, "{found:?}");
        assert_eq!(found[REPORTED_MAX].message, "and 10 more");
    }
}
