//! The trainer joins the training on the pservers: waits for every pserver slot to be held,
//! initializes the pservers with its parameters (or waits for the first trainer to), pulls the
//! model; `layout` is the job's parameters as the pservers lay them out.

use std::sync::Arc;

use anyhow::Context as _;
use client::pserver::layout::{JobLayout, ParamSpec};
use client::pserver::{PServerClient, PServerClientOptions};
use client::{MasterClient, Session};

use crate::config::TrainerConfig;
use crate::model::{ModelConfig, Params};
use crate::progress::Progress;
use crate::step::Stepper;

/// Joins the training: waits for every pserver slot, initializes the pservers (or waits for
/// the first trainer to), pulls the model.
pub(super) async fn join(
    config: &TrainerConfig,
    model: ModelConfig,
    master: &Arc<MasterClient>,
    session: &Session,
    progress: &Progress,
) -> anyhow::Result<Stepper> {
    let options =
        PServerClientOptions { replace_wait: config.pserver_wait(), ..Default::default() };
    let pservers = PServerClient::new(master.clone(), session.id(), options);
    let _ = progress.metrics.pservers.set(pservers.clone());
    tracing::info!("waiting for every pserver slot to be held");
    let table =
        pservers.wait_for_slots(config.pserver_wait()).await.context("wait for the pservers")?;
    tracing::info!(pservers = table.desired, "pservers ready");
    let layout = layout(config, &model, table.desired);
    let initial = model.init(config.seed);
    pservers.init_or_wait(&layout, &tensors(&initial)).await.context("initialize the pservers")?;
    let mut stepper = Stepper::new(model, layout, pservers, config);
    stepper.pull().await?;
    Ok(stepper)
}

fn layout(config: &TrainerConfig, model: &ModelConfig, slot_count: u32) -> JobLayout {
    let params = model
        .param_shapes()
        .into_iter()
        .map(|(name, shape)| ParamSpec {
            name,
            shape: shape.iter().map(|&dim| dim as u64).collect(),
        })
        .collect();
    JobLayout {
        params,
        block_elements: config.block_elements,
        slot_count,
        optimizer: config.optimizer(),
    }
}

pub(crate) fn tensors(params: &Params) -> Vec<(&str, &[f32])> {
    params.iter().map(|(name, values)| (name.as_str(), values.as_slice())).collect()
}
