//! Shards apply whole pushes or nothing, refuse bad blocks naming them, count non-finite
//! pushes, and the first initializer of a slot wins.

use std::time::{Duration, Instant};

use client::pserver::f32_bytes;
use client::pserver::layout::JobLayout;
use client::pserver::placement::BlockId;
use pserver::shard_cell::{InitAnswer, ShardCell, INIT_IDLE_MS_MAX};
use pserver::shard_error::ShardError;

use crate::support::{borrowed, layout, payloads, shard};

/// A change that spoils a push.
type Damage = dyn Fn(&mut Vec<(BlockId, Vec<u8>)>);

fn values(shard: &pserver::shard::Shard) -> Vec<(BlockId, Vec<f32>)> {
    shard.pull(&[]).expect("pull all")
}

#[test]
fn a_push_with_one_bad_block_changes_nothing() {
    let shard = shard(0);
    let before = values(&shard);
    let mut bad = payloads(0, 0.5);
    let cases: Vec<(Box<Damage>, &str)> = vec![
        (
            Box::new(|push| {
                let last = push.last_mut().expect("blocks");
                last.1 = f32_bytes::encode(&vec![f32::NAN; last.1.len() / 4])
            }),
            "not finite",
        ),
        (
            Box::new(|push| push.last_mut().expect("blocks").1.pop().map(drop).unwrap_or(())),
            "whole number",
        ),
        (
            Box::new(|push| push.last_mut().expect("blocks").1.extend_from_slice(&[0; 4])),
            "values, the block has",
        ),
        (
            Box::new(|push| push.push((BlockId { name: "nope".into(), index: 0 }, vec![0; 4]))),
            "not part of the job",
        ),
        (
            Box::new(|push| push.push((BlockId { name: "w".into(), index: 99 }, vec![0; 4]))),
            "not part of the job",
        ),
        (
            Box::new(|push| {
                let first = push[0].clone();
                push.push(first)
            }),
            "twice",
        ),
    ];
    for (damage, want) in cases {
        bad.clone_from(&payloads(0, 0.5));
        damage(&mut bad);
        let error = shard.push(&borrowed(&bad)).expect_err("refused").to_string();
        assert!(error.contains(want), "{error} lacks {want}");
        assert_eq!(values(&shard), before, "nothing applied after {want}");
    }
    assert_eq!(shard.nonfinite_refused(), 1, "the NaN push is counted");
    assert_eq!(shard.step(), 0);
}

#[test]
fn a_block_of_another_slot_is_refused_naming_its_slot() {
    let shard = shard(0);
    let theirs = payloads(1, 0.5);
    let error = shard.push(&borrowed(&theirs[..1])).expect_err("refused");
    assert!(matches!(error, ShardError::NotOwned { slot: 1, .. }), "{error}");
}

#[test]
fn a_good_push_applies_to_every_block_once() {
    let shard = shard(1);
    let push = payloads(1, 1.0);
    assert_eq!(shard.push(&borrowed(&push)).expect("applied"), 1);
    // Adam's first step moves every element by the learning rate against the gradient's sign.
    for (_, values) in values(&shard) {
        assert!(values.iter().all(|value| (value - 0.9).abs() < 1e-6), "{values:?}");
    }
}

#[test]
fn the_first_initializer_wins_and_a_silent_one_is_replaced() {
    let cell = ShardCell::empty(0, 2);
    let now = Instant::now();
    let mine = payloads(0, 2.0);
    assert_eq!(
        cell.init(7, layout(), &borrowed(&mine[..1]), now).expect("first"),
        InitAnswer::Accepted
    );
    assert_eq!(cell.init(8, layout(), &[], now).expect("second"), InitAnswer::ByAnother(layout()));
    assert!(matches!(cell.finish(8), Err(ShardError::NotInitializer { caller: 8, current: 7 })));
    let missing = cell.finish(7).expect_err("blocks missing").to_string();
    assert!(missing.contains("was never sent"), "{missing}");
    // The failed finish emptied the cell: trainer 7 starts over and completes.
    assert_eq!(cell.init(7, layout(), &borrowed(&mine), now).expect("again"), InitAnswer::Accepted);
    cell.finish(7).expect("finished");
    assert_eq!(cell.init(9, layout(), &[], now).expect("late"), InitAnswer::Initialized(layout()));

    let cell = ShardCell::empty(0, 2);
    cell.init(7, layout(), &[], now).expect("first");
    let later = now + Duration::from_millis(INIT_IDLE_MS_MAX);
    assert_eq!(
        cell.init(8, layout(), &borrowed(&mine), later).expect("takeover"),
        InitAnswer::Accepted
    );
    cell.finish(8).expect("the newcomer finishes");
    assert!(cell.ready().is_ok());
}

#[test]
fn an_init_that_cannot_be_served_is_refused() {
    let cell = ShardCell::empty(0, 3);
    let error =
        cell.init(1, layout(), &[], Instant::now()).expect_err("slot counts differ").to_string();
    assert!(error.contains("--num-pservers"), "{error}");
    let cell = ShardCell::empty(0, 2);
    let nan = vec![(payloads(0, 1.0)[0].0.clone(), f32_bytes::encode(&[f32::INFINITY; 4]))];
    assert!(cell.init(1, layout(), &borrowed(&nan), Instant::now()).is_err());
    assert!(matches!(cell.ready(), Err(ShardError::NotReady)), "pushes before init are refused");
}

/// Blocks as an `InitParams` carries them.
type Payloads = Vec<(BlockId, Vec<u8>)>;

/// A refused `InitParams` (a non-finite value, a block of another slot, an unknown block,
/// a layout over the block limits) leaves the cell as it was: an empty cell stays empty and
/// the next initializer is accepted at once, and a dead initializer's offer is not taken
/// over by a refused newcomer.
#[test]
fn a_refused_init_changes_nothing() {
    let now = Instant::now();
    let first = payloads(0, 1.0)[0].0.clone();
    let other_slot = payloads(1, 1.0)[0].0.clone();
    let unknown = BlockId { name: "nope".into(), index: 0 };
    let mut huge = layout();
    huge.params =
        vec![client::pserver::layout::ParamSpec { name: "w".into(), shape: vec![1 << 30] }];
    huge.block_elements = 1;
    let refusals: Vec<(JobLayout, Payloads)> = vec![
        (layout(), vec![(first, f32_bytes::encode(&[f32::NAN; 4]))]),
        (layout(), vec![(other_slot, f32_bytes::encode(&[1.0; 4]))]),
        (layout(), vec![(unknown, f32_bytes::encode(&[1.0; 4]))]),
        (huge, Vec::new()),
    ];
    for (offered, blocks) in &refusals {
        let cell = ShardCell::empty(0, 2);
        assert!(cell.init(666, offered.clone(), &borrowed(blocks), now).is_err());
        let (described, _, initializing) = cell.describe();
        assert!(described.is_none() && !initializing, "a refused init moved the shard");
        assert_eq!(cell.init(7, layout(), &[], now).expect("genuine"), InitAnswer::Accepted);

        let cell = ShardCell::empty(0, 2);
        cell.init(7, layout(), &[], now).expect("first");
        let later = now + Duration::from_millis(INIT_IDLE_MS_MAX);
        assert!(cell.init(666, offered.clone(), &borrowed(blocks), later).is_err());
        assert!(matches!(cell.finish(666), Err(ShardError::NotInitializer { current: 7, .. })));
    }
}

/// Finite gradients can still overflow: with SGD at rate 1, pushes of -3e38 drive a parameter
/// past f32::MAX. The push that would leave any value infinite is refused whole and counted;
/// what was served before stays, finite.
#[test]
fn a_push_whose_result_would_overflow_is_refused_whole() {
    use optimizer::{OptimizerConfig, OptimizerKind};
    let optimizer = OptimizerConfig { learning_rate: 1.0, kind: OptimizerKind::Sgd };
    let layout = JobLayout { optimizer, ..layout() };
    let blocks = layout
        .blocks_of_slot(0)
        .into_iter()
        .map(|(id, length)| {
            (id, pserver::block_state::BlockState::fresh(vec![1.0; length], &optimizer))
        })
        .collect();
    let shard = pserver::shard::Shard::new(layout.clone(), 0, 0, blocks).expect("a shard");
    let mut push = payloads(0, 0.0);
    let last = push.last_mut().expect("blocks");
    last.1 = f32_bytes::encode(&vec![-3e38; last.1.len() / 4]);
    assert!(shard.push(&borrowed(&push)).is_ok(), "1 + 3e38 is finite");
    let before = values(&shard);
    let error = shard.push(&borrowed(&push)).expect_err("6e38 overflows f32");
    assert!(matches!(error, ShardError::NotFiniteResult { .. }), "{error}");
    assert_eq!(values(&shard), before, "nothing of the refused push was applied");
    assert!(before.iter().all(|(_, block)| block.iter().all(|value| value.is_finite())));
    assert_eq!((shard.nonfinite_refused(), shard.step()), (1, 1));
}
