//! `PServerClient::exchange`: a push and the pull after it, slot by slot in parallel. A slot's
//! pull is sent once its push is answered, so the parameters pulled hold the push; where a
//! slot's push and pull each fit one request they travel as one (`PushPull`), so a small model
//! pays one round trip a step instead of two.

use std::collections::BTreeMap;
use std::sync::Arc;

use proto::pserver as pb;
use tokio::task::JoinSet;

use super::batches::{blocks_by_slot, ids_by_slot, place, size_tensors};
use super::error::PServerClientError;
use super::pserver_client::{check_tensors, join_all, slot_permits, CachedBlock, PServerClient};
use super::tensor_bytes::{shared_bytes, Tensors};
use crate::layout::JobLayout;
use crate::placement::BlockId;

/// What one slot's part of an exchange did.
struct SlotExchanged {
    slot: u32,
    pushed: Result<(), PServerClientError>,
    pulled: Vec<Vec<CachedBlock>>,
}

impl PServerClient {
    /// Pushes `gradients` (if any) and then pulls the whole model into `tensors`. The pull
    /// failing fails the exchange; the push's own outcome is returned inside (a push whose
    /// outcome is unknown is never sent again, and the pull is made anyway).
    pub async fn exchange(
        &self,
        layout: &JobLayout,
        gradients: Option<Arc<Tensors>>,
        tensors: &mut Tensors,
    ) -> Result<Result<(), PServerClientError>, PServerClientError> {
        let mut pushes = match &gradients {
            Some(gradients) => {
                let borrowed: Vec<(&str, &[f32])> = gradients
                    .iter()
                    .map(|(name, values)| (name.as_str(), values.as_slice()))
                    .collect();
                check_tensors(layout, &borrowed)?;
                let view = |name: &str, range, _: &[f32]| shared_bytes(gradients, name, range);
                blocks_by_slot(layout, &borrowed, view)
            }
            None => BTreeMap::new(),
        };
        let mut tasks = JoinSet::new();
        for (slot, pulls) in ids_by_slot(layout) {
            let (client, layout) = (self.clone(), layout.clone());
            let pushes = pushes.remove(&slot).unwrap_or_default();
            tasks.spawn(async move { client.exchange_slot(slot, &layout, pushes, pulls).await });
        }
        size_tensors(layout, tensors);
        let (mut pushed, mut cache) = (Ok(()), BTreeMap::new());
        for exchanged in join_all(tasks).await? {
            for (id, values) in exchanged.pulled.iter().flatten() {
                place(layout, tensors, id, values).map_err(|message| {
                    PServerClientError::Refused { slot: exchanged.slot, message }
                })?;
            }
            cache.insert(exchanged.slot, exchanged.pulled);
            if let (Ok(()), Err(error)) = (&pushed, exchanged.pushed) {
                pushed = Err(error);
            }
        }
        *self.cache() = cache;
        Ok(pushed)
    }

    /// One slot: its push batches, then its pull batches; as one `PushPull` when there is one
    /// of each. An `Err` is the pull's failure.
    async fn exchange_slot(
        &self,
        slot: u32,
        layout: &JobLayout,
        mut pushes: Vec<Vec<pb::Block>>,
        mut pulls: Vec<Vec<BlockId>>,
    ) -> Result<SlotExchanged, PServerClientError> {
        if pushes.len() == 1 && pulls.len() == 1 {
            let (push, pull) = (pushes.remove(0), pulls.remove(0));
            let pushed = match self.push_pull_batch(slot, layout, push, pull.clone()).await {
                Ok(blocks) => {
                    return Ok(SlotExchanged { slot, pushed: Ok(()), pulled: vec![blocks] })
                }
                // Not applied, or not known to be: the pull goes alone.
                Err(error) => Err(error),
            };
            let (_, blocks) = self.pull_batch(slot, layout, pull).await?;
            return Ok(SlotExchanged { slot, pushed, pulled: vec![blocks] });
        }
        let pushed = self.push_requests(layout, BTreeMap::from([(slot, pushes)])).await;
        let (mut tasks, permits) = (JoinSet::new(), slot_permits());
        for ids in pulls {
            let (client, layout, permits) = (self.clone(), layout.clone(), permits.clone());
            tasks.spawn(async move {
                let _permit = permits.acquire_owned().await.expect("never closed");
                client.pull_batch(slot, &layout, ids).await
            });
        }
        let pulled = join_all(tasks).await?.into_iter().map(|(_, blocks)| blocks).collect();
        Ok(SlotExchanged { slot, pushed, pulled })
    }
}
