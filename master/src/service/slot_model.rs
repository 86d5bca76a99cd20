//! The model half of progress checkpoints as pservers hear it: what a heartbeat reply asks of
//! a slot's holder (`SlotAsks` in the state), in the reply's fields.

use proto::master as pb;

use client::checkpoint_to_proto;
use client::SlotAsks;

/// The heartbeat reply of a holder of its slot, with what the state asks of it.
pub(crate) fn heartbeat_reply(asks: SlotAsks) -> pb::PServerHeartbeatReply {
    let (reload_restore, reload_from) = match asks.reload {
        Some(reload) => (reload.restore, Some(checkpoint_to_proto(&reload.from))),
        None => (0, None),
    };
    pb::PServerHeartbeatReply {
        holds_slot: true,
        job_ended: false,
        checkpoint_for_progress: asks.tag_for.unwrap_or(0),
        reload_restore,
        reload_from,
        tags_from: asks.tags_from,
    }
}
