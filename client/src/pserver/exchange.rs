//! `PServerClient::exchange`: a push and the pull after it, as `PushPull` requests: each pushes
//! some blocks of the gradient and pulls the same blocks back, so every block pulled holds the
//! push, and a model up to a few megabytes a slot pays one round trip a step, not a push's and
//! then a pull's. (Cutting a 1 MB model into requests of 256 KiB, so that one's update would
//! overlap another's transfer, measured slower: 35% of the single process against 46-52% for
//! the wide MLP of `bench trainer`, the requests' own costs outweighing the overlap.)

use std::sync::{Arc, Mutex, PoisonError};

use proto::pserver as pb;
use tokio::task::JoinSet;

use super::batches::{place, size_tensors};
use super::cache::Cache;
use super::error::PServerClientError;
use super::pserver_client::{check_tensors, join_all, slot_permits, CachedBlock, PServerClient};
use super::tensor_bytes::{shared_bytes, Tensors};
use crate::pserver::layout::JobLayout;
use crate::pserver::limits::REQUEST_PAYLOAD_BYTES_TARGET;
use crate::pserver::placement::{block_range, BlockId};

/// What an exchange did.
#[derive(Debug)]
pub struct Exchanged {
    /// The push's outcome (`Ok` when there was none).
    pub pushed: Result<(), PServerClientError>,
    /// The whole model as pulled after the push, which this client also keeps (to initialize
    /// an empty replacement from).
    pub pulled: Arc<Tensors>,
}

/// The tensors an exchange decodes into, shared by its slots' tasks: each request's blocks are
/// decoded as soon as it is answered, and the frames they came in freed.
type Target = Arc<Mutex<Tensors>>;

impl PServerClient {
    /// Pushes `gradients` (if any) and then pulls the whole model into `into` (its buffers are
    /// reused when they fit the layout). The pull failing fails the exchange; the push's own
    /// outcome is returned beside the pulled model (a push whose outcome is unknown is never
    /// sent again, and the pull is made anyway).
    pub async fn exchange(
        &self,
        layout: &JobLayout,
        gradients: Option<Arc<Tensors>>,
        mut into: Tensors,
    ) -> Result<Exchanged, PServerClientError> {
        if let Some(gradients) = &gradients {
            let borrowed: Vec<(&str, &[f32])> =
                gradients.iter().map(|(name, values)| (name.as_str(), values.as_slice())).collect();
            check_tensors(layout, &borrowed)?;
        }
        size_tensors(layout, &mut into);
        let target = Arc::new(Mutex::new(into));
        let mut tasks = JoinSet::new();
        let basis = self.inner.basis.get();
        for slot in 0..layout.slot_count {
            let permits = slot_permits();
            for (push, pull) in exchange_batches(layout, slot, gradients.as_ref()) {
                let (client, layout, target) = (self.clone(), layout.clone(), target.clone());
                let permits = permits.clone();
                tasks.spawn(async move {
                    let _permit = permits.acquire_owned().await.expect("never closed");
                    client.exchange_batch(slot, &layout, (push, basis, pull), &target).await
                });
            }
        }
        let mut pushed = Ok(());
        let mut restores = Vec::new();
        for (batch_pushed, model_restore) in join_all(tasks).await? {
            if let (Ok(()), Err(error)) = (&pushed, batch_pushed) {
                pushed = Err(error);
            }
            restores.push(model_restore);
        }
        self.inner.basis.pulled(restores);
        let target = Arc::try_unwrap(target).expect("the batches' tasks have ended");
        let pulled = Arc::new(target.into_inner().unwrap_or_else(PoisonError::into_inner));
        *self.cache() = Cache::Tensors(pulled.clone());
        Ok(Exchanged { pushed, pulled })
    }

    /// The whole model pulled into `into` (as [`PServerClient::exchange`] without a push).
    pub async fn pull_shared(
        &self,
        layout: &JobLayout,
        into: Tensors,
    ) -> Result<Arc<Tensors>, PServerClientError> {
        Ok(self.exchange(layout, None, into).await?.pulled)
    }

    /// One request: `push` (computed on values of model restore `basis`) applied, then `pull`
    /// decoded into `target` (a `PushPull`, or a pull when there is nothing to push). The
    /// push's outcome and the restore the pulled shard is of; an `Err` is the pull's failure.
    async fn exchange_batch(
        &self,
        slot: u32,
        layout: &JobLayout,
        (push, basis, pull): (Vec<pb::Block>, Option<u64>, Vec<BlockId>),
        target: &Target,
    ) -> Result<(Result<(), PServerClientError>, u64), PServerClientError> {
        let pushed = if push.is_empty() {
            Ok(())
        } else {
            match self.push_pull_batch(slot, layout, (push, basis), pull.clone()).await {
                Ok((blocks, restore)) => {
                    return place_into(target, layout, slot, &blocks).map(|()| (Ok(()), restore))
                }
                // Not applied, or not known to be: the pull goes alone.
                Err(error) => Err(error),
            }
        };
        let (_, blocks, restore) = self.pull_batch(slot, layout, pull).await?;
        place_into(target, layout, slot, &blocks).map(|()| (pushed, restore))
    }
}

/// `slot`'s blocks in requests of about `REQUEST_PAYLOAD_BYTES_TARGET`: each the
/// blocks to pull and, of those, the ones `gradients` has, to push first (views, no copy).
fn exchange_batches(
    layout: &JobLayout,
    slot: u32,
    gradients: Option<&Arc<Tensors>>,
) -> Vec<(Vec<pb::Block>, Vec<BlockId>)> {
    let mut batches: Vec<(Vec<pb::Block>, Vec<BlockId>)> = Vec::new();
    let mut size = 0;
    for (id, length) in layout.blocks_of_slot(slot) {
        if batches.is_empty() || size + length * 4 > REQUEST_PAYLOAD_BYTES_TARGET {
            batches.push((Vec::new(), Vec::new()));
            size = 0;
        }
        size += length * 4;
        let (push, pull) = batches.last_mut().expect("pushed above");
        let gradient = gradients.filter(|gradients| gradients.contains_key(&id.name));
        if let Some(gradients) = gradient {
            let elements = gradients[&id.name].len() as u64;
            let range = block_range(elements, layout.block_elements, id.index);
            let values = shared_bytes(gradients, &id.name, range);
            push.push(pb::Block { name: id.name.clone(), index: id.index, values });
        }
        pull.push(id);
    }
    batches
}

/// Decodes one request's pulled blocks into the exchange's tensors.
fn place_into(
    target: &Target,
    layout: &JobLayout,
    slot: u32,
    blocks: &[CachedBlock],
) -> Result<(), PServerClientError> {
    // Placing is plain copying: a panic cannot leave the map half-changed.
    let mut tensors = target.lock().unwrap_or_else(PoisonError::into_inner);
    for (id, values) in blocks {
        place(layout, &mut tensors, id, values)
            .map_err(|message| PServerClientError::Refused { slot, message })?;
    }
    Ok(())
}
