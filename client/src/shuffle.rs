//! Seeded shuffling, computed alike by every master replica and every consumer: the order a
//! shuffled job's tasks are handed out in each pass, and the order of the samples within one
//! task. Pure functions of (seed, pass, task): no randomness, no clock, no state, so the masters
//! replay the same order after a failover or a restore, and every process, DataLoader worker
//! and start method reads a task's samples in the same order.
//!
//! The mixing function is splitmix64's finalizer (Steele, Lea, Flood, "Fast splittable
//! pseudorandom number generators", 2014), a bijection of `u64`: a task's rank in a pass is
//! the finalizer of the pass's seed xor the task id, so two tasks never share a rank and
//! sorting by rank is a permutation that needs no memory beyond the queue itself. The samples
//! of a task are permuted by Fisher-Yates over a splitmix64 stream.

/// splitmix64's increment (the golden ratio in 64-bit fixed point).
const GOLDEN_GAMMA: u64 = 0x9e37_79b9_7f4a_7c15;
/// Keeps the pass seeds and the sample seeds apart, so a task's sample order is not its rank.
const SAMPLE_DOMAIN: u64 = 0x5a4d_504c_4553_0001;
/// The most samples one task's order is computed for: the order is a `Vec` of this many
/// indices at most (128 MiB). A task larger than this is refused, never shuffled partly.
pub const SHUFFLED_SAMPLES_MAX: u64 = 1 << 24;

/// splitmix64's output function: a bijection of `u64` that mixes every bit into every other.
pub fn mix(value: u64) -> u64 {
    let mut z = value.wrapping_add(GOLDEN_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The seed of pass `pass` of a job shuffled with `seed`: every pass has its own order.
pub fn pass_seed(seed: u64, pass: u32) -> u64 {
    mix(seed ^ mix(u64::from(pass)))
}

/// Where `task_id` comes in pass `pass` of a job shuffled with `seed`: the masters hand a
/// pass's tasks out by increasing rank. Distinct tasks have distinct ranks in a pass.
pub fn task_rank(seed: u64, pass: u32, task_id: u64) -> u64 {
    mix(pass_seed(seed, pass) ^ task_id)
}

/// The order in which a consumer reads the `count` samples of task `task_id` in pass `pass`
/// of a job shuffled with `seed`: a permutation of `0..count` (offsets into the task).
pub fn sample_order(
    seed: u64,
    pass: u32,
    task_id: u64,
    count: u64,
) -> Result<Vec<u64>, TooManySamples> {
    if count > SHUFFLED_SAMPLES_MAX {
        return Err(TooManySamples { count });
    }
    let mut order: Vec<u64> = (0..count).collect();
    let mut state = mix(pass_seed(seed, pass) ^ mix(task_id ^ SAMPLE_DOMAIN));
    // Fisher-Yates from the end: position `last` swaps with one drawn from `0..=last`.
    for last in (1..order.len()).rev() {
        state = state.wrapping_add(GOLDEN_GAMMA);
        let bound = last as u64 + 1;
        // Lemire's multiply-shift: a draw below `bound` from 64 random bits.
        let drawn = ((u128::from(mix(state)) * u128::from(bound)) >> 64) as usize;
        order.swap(last, drawn);
    }
    Ok(order)
}

/// A task too large to compute a sample order for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("a task of {count} samples is too large to shuffle (at most {SHUFFLED_SAMPLES_MAX})")]
pub struct TooManySamples {
    pub count: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sorting by rank is a permutation, the same for the same (seed, pass), another for
    /// another pass or seed.
    #[test]
    fn ranks_order_a_pass() {
        let order = |seed, pass| {
            let mut tasks: Vec<u64> = (0..100).collect();
            tasks.sort_by_key(|task_id| task_rank(seed, pass, *task_id));
            tasks
        };
        let first = order(7, 0);
        let mut sorted = first.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>(), "a permutation");
        assert_ne!(first, sorted, "shuffled");
        assert_eq!(order(7, 0), first, "the same for the same seed and pass");
        assert_ne!(order(7, 1), first, "another pass, another order");
        assert_ne!(order(8, 0), first, "another seed, another order");
    }

    /// A task's sample order is a permutation of its offsets, fixed by (seed, pass, task).
    #[test]
    fn sample_orders_are_permutations() {
        for count in [0, 1, 2, 17, 1000] {
            let order = sample_order(3, 1, 5, count).expect("small");
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, (0..count).collect::<Vec<_>>(), "{count} samples");
            assert_eq!(sample_order(3, 1, 5, count), Ok(order.clone()));
        }
        let order = |seed, pass, task| sample_order(seed, pass, task, 1000).expect("small");
        assert_ne!(order(3, 1, 5), order(3, 2, 5), "another pass");
        assert_ne!(order(3, 1, 5), order(3, 1, 6), "another task");
        assert_ne!(order(3, 1, 5), order(4, 1, 5), "another seed");
        assert_eq!(
            sample_order(0, 0, 0, SHUFFLED_SAMPLES_MAX + 1),
            Err(TooManySamples { count: SHUFFLED_SAMPLES_MAX + 1 })
        );
    }

    /// The values are fixed: Python and Rust consumers, and masters of every build, must
    /// compute the same orders (splitmix64's first output for seed 0 is its published value).
    #[test]
    fn values_are_stable() {
        assert_eq!(mix(0), 0xe220_a839_7b1d_cdaf);
        assert_eq!(sample_order(1, 0, 0, 8), Ok(vec![1, 3, 5, 7, 4, 2, 0, 6]));
        let mut tasks: Vec<u64> = (0..6).collect();
        tasks.sort_by_key(|task_id| task_rank(1, 0, *task_id));
        assert_eq!(tasks, [3, 0, 1, 5, 2, 4]);
    }
}
