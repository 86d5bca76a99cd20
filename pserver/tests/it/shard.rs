//! Shards apply whole pushes or nothing, refuse bad blocks naming them, count non-finite
//! pushes, and the first initializer of a slot wins.

use std::time::{Duration, Instant};

use pserver::f32_bytes;
use pserver::placement::BlockId;
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
