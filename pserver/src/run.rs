//! `run`: one pserver. Claims a slot through the master, keeps its lease, restores the slot's
//! checkpoint if it has one, serves the shard (with gRPC health and reflection), checkpoints
//! every interval, and stops serving the moment the lease is lost (returning an error, so the
//! process exits non-zero).

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use client::{ClientOptions, MasterClient, SlotLease};
use platform::security::Security;
use platform::{GrpcHealth, HandedIncoming, PortLimits};
use proto::pserver::p_server_service_server::PServerServiceServer;
use storage::checkpoint::CheckpointDir;
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::checkpointer::{Checkpointer, ReloadAbandoned};
use crate::clock::SystemClock;
use crate::config::PServerConfig;
use crate::data_plane::server::DataPlaneServer;
use crate::held_slot::{FenceError, HeldSlot};
use crate::limits::FRAME_BYTES_MAX;
use crate::metrics::SlotMetrics;
use crate::restore::restore;
use crate::service::PServerRpc;
use crate::shard_cell::ShardCell;
use crate::slot_keeper;
use crate::standby::Standby;

/// The pserver service's full name, as health and reflection know it: SERVING while this
/// process holds its slot under a confirmed lease and has restored the shard.
pub const PSERVER_SERVICE: &str =
    <PServerServiceServer<PServerRpc> as tonic::server::NamedService>::NAME;

/// How often the serving loop looks at the lease.
const LEASE_CHECK_MS: u64 = 20;
/// The deadline of one attempt of a call to the masters (the client's default is 2 s). A
/// pserver's calls are small (heartbeats, claims, checkpoint records), and every rediscovery
/// waits this long for a master that does not answer: with a paused leader, an attempt to it
/// and the rediscovery after it must both fit in the new leader's first lease (as short as
/// 2 s), or the new leader frees a slot whose holder is alive.
const MASTER_RPC_TIMEOUT_MS: u64 = 500;
/// At shutdown, how long the last checkpoint (write, record through the masters, prune) may
/// take: the masters may be gone, and a stop must end in bounded time.
const LAST_CHECKPOINT_MS_MAX: u64 = 5_000;
/// At shutdown, how long giving the slot back may take.
const RELEASE_MS_MAX: u64 = 2_000;
/// At shutdown, how long the server may take to finish the calls in flight before they are
/// cut off.
const DRAIN_MS_MAX: u64 = 3_000;

/// Runs a pserver on `listener` (already bound: tests bind port 0) until `shutdown` resolves or
/// the slot is lost (an error).
pub async fn run(
    config: PServerConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    config.validate()?;
    let security = Security::load_for_server(&config.security)?;
    let addr = advertised(&config, &listener)?;
    // Bound before anything is claimed, so a bad address fails with nothing to undo.
    let metrics_listener = platform::metrics_http::bind(config.metrics_listen).await?;
    if metrics_listener.is_some() {
        platform::telemetry::install(&[crate::metrics::describe]);
    }
    // The root is opened (made if missing) before anything is claimed, so a bad
    // --checkpoint-dir fails with nothing to undo; the job's own directory comes with the
    // claim, which names the job's incarnation.
    let root = absolute(&config.checkpoint_dir)?;
    CheckpointDir::open(&root)
        .with_context(|| format!("open --checkpoint-dir {}", root.display()))?;
    let options = ClientOptions {
        security: security.clone(),
        rpc_timeout: Duration::from_millis(MASTER_RPC_TIMEOUT_MS),
        job: config.job.clone(),
        ..ClientOptions::default()
    };
    let master = Arc::new(MasterClient::new(&config.masters, options)?);
    // Metrics, readiness and gRPC health are served from the start: a standby, or a pserver
    // waiting for its job, is alive (probes answer) but not ready.
    let health = GrpcHealth::default();
    let slot_metrics = Arc::new(std::sync::OnceLock::new());
    // The port answers from the start too: as a standby until the slot is served. One accept
    // loop feeds both servers, so a connection the standby accepted but did not take when it
    // stopped goes to the slot's server instead of being closed.
    let incoming = HandedIncoming::new(listener, &config.port_limits);
    let standby =
        Standby::start(incoming.clone(), (&security, &config.port_limits, &health)).await?;
    let (metrics_stop, metrics_stopped) = watch::channel(false);
    let metrics = metrics_listener.map(|listener| {
        platform::metrics_http::spawn_with_health(
            listener,
            config.port_limits.clone(),
            crate::metrics::endpoints_from_start(slot_metrics.clone()),
            Some(health.clone()),
            metrics_stopped,
        )
    });
    let served = claim_and_serve(
        &config,
        (incoming, standby),
        (root, addr),
        master,
        (&health, &slot_metrics),
        shutdown,
    )
    .await;
    let _ = metrics_stop.send(true);
    if let Some(metrics) = metrics {
        metrics.await.context("the metrics server panicked")?;
    }
    served
}

/// A pserver given no `--job` claimed the group's only job's slot: its later calls name that job,
/// so that a second job submitted meanwhile does not make them ambiguous (they were refused,
/// "name one", and the slot was lost). Unbound when the list fails: the calls then name no job,
/// as before.
async fn bind_to_claimed_job(master: &MasterClient, job_id: u64) {
    if !master.job().is_empty() {
        return;
    }
    match master.list_jobs().await {
        Ok(list) => match list.jobs.iter().find(|job| job.job_id == job_id) {
            Some(job) => master.bind_job(&job.job),
            None => tracing::warn!(job_id, "the claimed job is not listed; calls name no job"),
        },
        Err(error) => tracing::warn!(%error, job_id, "could not name the claimed job"),
    }
}

/// Claims a slot (waiting while all are held or the job is not submitted yet, `standby`
/// answering meanwhile), then keeps it and serves it until shutdown or a lost lease.
async fn claim_and_serve(
    config: &PServerConfig,
    (incoming, standby): (HandedIncoming, Standby),
    (root, addr): (std::path::PathBuf, String),
    master: Arc<MasterClient>,
    (health, slot_metrics): (&GrpcHealth, &Arc<std::sync::OnceLock<SlotMetrics>>),
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let (stop, mut stopped) = watch::channel(false);
    tokio::pin!(shutdown);
    let claimed = tokio::select! {
        claimed = slot_keeper::claim(&*master, Arc::new(SystemClock), &addr, config.num_pservers, &mut stopped) => claimed?,
        () = &mut shutdown => None,
    };
    let Some((held, lease)) = claimed else {
        standby.stop().await;
        return Ok(());
    };
    tracing::info!(slot = held.slot(), generation = held.generation(), job_id = lease.job_id, %addr, "pserver slot claimed");
    bind_to_claimed_job(&master, lease.job_id).await;
    let job_dir = crate::job_dir::job_checkpoint_dir(&root, lease.job_id, &config.job);
    let dir = CheckpointDir::open(&job_dir)
        .with_context(|| format!("open the job's checkpoint directory {}", job_dir.display()));
    let dir = match dir {
        Ok(dir) => dir,
        Err(error) => {
            // Nothing was served: the slot goes back at once rather than after its lease.
            let _ = master.release_slot(&lease).await;
            return Err(error);
        }
    };
    let keeper = tokio::spawn(slot_keeper::keep(
        master.clone(),
        held.clone(),
        lease.clone(),
        addr.clone(),
        stopped.clone(),
    ));
    let served = serve_slot(
        config,
        (incoming, standby),
        (dir, master, held.clone(), lease),
        (health, slot_metrics),
        stopped,
        shutdown,
    )
    .await;
    let _ = stop.send(true);
    keeper.await.context("the heartbeat loop panicked")?;
    served
}

/// Restores (`standby` answering meanwhile), serves and checkpoints until shutdown or a lost
/// lease; the metrics show the slot from its restore on.
async fn serve_slot(
    config: &PServerConfig,
    (incoming, standby): (HandedIncoming, Standby),
    (dir, master, held, lease): (CheckpointDir, Arc<MasterClient>, Arc<HeldSlot>, SlotLease),
    (health, slot_metrics): (&GrpcHealth, &Arc<std::sync::OnceLock<SlotMetrics>>),
    stopped: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    let recorded_step =
        Arc::new(AtomicU64::new(lease.checkpoint.as_ref().map_or(0, |meta| meta.step)));
    let cell = Arc::new(restored_cell(&held, &lease, config.num_pservers, &dir).await?);
    let rpc = PServerRpc::new(cell.clone(), held.clone(), recorded_step.clone());
    let service = DataPlaneServer::new(rpc);
    let (server_stop, server_stopped) = watch::channel(false);
    // Restored: the service is SERVING while the lease holds (`watch_lease` keeps it current).
    health.set(PSERVER_SERVICE, held.check().is_ok()).await;
    let shown = SlotMetrics {
        held: held.clone(),
        cell: cell.clone(),
        recorded_step: recorded_step.clone(),
    };
    let _ = slot_metrics.set(shown);
    standby.stop().await;
    let server = tokio::spawn(serve(
        incoming,
        service,
        (master.security().clone(), config.port_limits.clone(), health.clone()),
        server_stopped,
    ));
    let checkpointer = Checkpointer::new(dir, master, held.clone(), lease, cell, recorded_step);
    let interval = config.checkpoint_interval();
    let outcome = watch_lease(&held, health, checkpointer, interval, stopped, shutdown).await;
    health.set(PSERVER_SERVICE, false).await;
    let _ = server_stop.send(true);
    let drain = Duration::from_millis(DRAIN_MS_MAX);
    let abort = server.abort_handle();
    match tokio::time::timeout(drain, server).await {
        Ok(served) => served.context("the pserver server panicked")??,
        Err(_elapsed) => {
            tracing::warn!(bound_ms = DRAIN_MS_MAX, "calls still open; cutting them off");
            abort.abort();
        }
    }
    outcome
}

/// Checkpoints every `interval` and returns when shutdown comes (after a last checkpoint) or
/// the lease is lost (an error).
async fn watch_lease(
    held: &HeldSlot,
    health: &GrpcHealth,
    mut checkpointer: Checkpointer,
    interval: Duration,
    mut stopped: watch::Receiver<bool>,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    tokio::pin!(shutdown);
    let mut next_checkpoint = tokio::time::Instant::now() + interval;
    let mut serving = held.check().is_ok();
    loop {
        let asked = tokio::select! {
            () = &mut shutdown => break,
            _ = stopped.wait_for(|stop| *stop) => break,
            () = held.wait_asked() => true,
            _ = tokio::time::sleep(Duration::from_millis(LEASE_CHECK_MS)) => false,
        };
        let checked = held.check();
        if let Err(error @ FenceError::LeaseLost { .. }) = checked {
            return Err(error.into());
        }
        if serving != checked.is_ok() {
            serving = checked.is_ok();
            health.set(PSERVER_SERVICE, serving).await;
        }
        if held.is_job_ended() {
            tracing::info!(slot = held.slot(), "the job ended (cancelled or removed)");
            break;
        }
        checkpointer.note_step();
        if asked {
            follow_asks(held, &mut checkpointer).await?;
        }
        if tokio::time::Instant::now() >= next_checkpoint {
            checkpoint(&mut checkpointer).await?;
            next_checkpoint = tokio::time::Instant::now() + interval;
        }
    }
    if held.is_job_ended() {
        // A cancelled or removed job records nothing more: its model is no longer wanted.
        tracing::info!(
            slot = held.slot(),
            "pserver shutting down; its job ended, no last checkpoint"
        );
        return Ok(());
    }
    if held.check().is_ok() {
        hand_over(held, &mut checkpointer).await;
    }
    Ok(())
}

/// A planned shutdown: refuses new requests (trainers wait for the next holder), waits for
/// the writes in flight, writes a last checkpoint holding every acknowledged push, and gives
/// the slot back so a standby claims it at once instead of after the lease. Each step is
/// bounded (the masters may be gone); the slot is given back even without the last checkpoint:
/// a standby then restores the newest recorded one now rather than after the lease.
async fn hand_over(held: &HeldSlot, checkpointer: &mut Checkpointer) {
    let last_checkpoint = async {
        held.leave().await;
        tracing::info!(slot = held.slot(), "pserver shutting down; writing a last checkpoint");
        checkpoint(checkpointer).await
    };
    let bound = Duration::from_millis(LAST_CHECKPOINT_MS_MAX);
    match tokio::time::timeout(bound, last_checkpoint).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => {
            // The slot went to another holder meanwhile: nothing to give back.
            tracing::warn!(error = format!("{error:#}"), "the last checkpoint failed");
            return;
        }
        Err(_elapsed) => {
            // The file may be written but not recorded: a replacement restores the newest
            // recorded one.
            tracing::warn!(bound_ms = LAST_CHECKPOINT_MS_MAX, "the last checkpoint did not finish");
        }
    }
    give_back(held, checkpointer).await;
}

/// Releases the slot through the masters, within `RELEASE_MS_MAX`; a release that fails
/// leaves the slot to its lease.
async fn give_back(held: &HeldSlot, checkpointer: &Checkpointer) {
    let released =
        tokio::time::timeout(Duration::from_millis(RELEASE_MS_MAX), checkpointer.release());
    match released.await {
        Ok(Ok(true)) => tracing::info!(slot = held.slot(), "slot released for the next holder"),
        Ok(Ok(false)) => tracing::info!(slot = held.slot(), "the slot was no longer held"),
        Ok(Err(error)) => tracing::warn!(
            slot = held.slot(),
            error = format!("{error:#}"),
            "could not release the slot; a standby takes it when the lease runs out"
        ),
        Err(_) => tracing::warn!(
            slot = held.slot(),
            bound_ms = RELEASE_MS_MAX,
            "the release was not answered; a standby takes the slot when the lease runs out"
        ),
    }
}

/// Does what a heartbeat asked; a failure that leaves the slot held is logged, and the next
/// heartbeat asks again. A holder that gave up reloading for a restore gives its slot back
/// (the restore waits no more for it) and stops with the reason.
async fn follow_asks(held: &HeldSlot, checkpointer: &mut Checkpointer) -> anyhow::Result<()> {
    match checkpointer.follow_asks().await {
        Ok(()) => Ok(()),
        Err(error) if error.downcast_ref::<ReloadAbandoned>().is_some() => {
            tracing::error!(error = format!("{error:#}"), "giving the slot up");
            give_back(held, checkpointer).await;
            Err(error)
        }
        Err(error) if checkpointer.holds_slot() => {
            tracing::warn!(
                error = format!("{error:#}"),
                "doing what the masters asked failed; retrying when they ask again"
            );
            Ok(())
        }
        Err(error) => Err(error),
    }
}

/// One checkpoint round; a failure that leaves the slot held is logged and retried next time.
async fn checkpoint(checkpointer: &mut Checkpointer) -> anyhow::Result<()> {
    match checkpointer.round().await {
        Ok(round) => tracing::debug!(?round, "checkpoint round"),
        Err(error) if checkpointer.holds_slot() => tracing::warn!(
            error = format!("{error:#}"),
            "checkpoint failed; retrying at the next interval"
        ),
        Err(error) => return Err(error),
    }
    Ok(())
}

/// The slot's shard: restored from its recorded checkpoint, or empty for an initializer.
async fn restored_cell(
    held: &HeldSlot,
    lease: &SlotLease,
    slot_count: u32,
    dir: &CheckpointDir,
) -> anyhow::Result<ShardCell> {
    let Some(meta) = lease.checkpoint.clone() else {
        tracing::info!(
            slot = held.slot(),
            "no checkpoint recorded for this slot; waiting for a trainer to initialize it"
        );
        return Ok(ShardCell::empty(held.slot(), slot_count).of_model_restore(lease.model_restore));
    };
    let (slot, dir) = (held.slot(), dir.clone());
    let (shard, path) = tokio::task::spawn_blocking(move || restore(slot, slot_count, &meta, &dir))
        .await
        .context("the restore panicked")??;
    tracing::info!(slot, path = %path.display(), step = shard.step(), "shard restored from its checkpoint");
    Ok(ShardCell::restored(slot, shard.of_model_restore(lease.model_restore)))
}

/// Serves the shard's service, with health and reflection beside it, until `stopped`.
async fn serve(
    incoming: HandedIncoming,
    service: DataPlaneServer,
    (security, limits, health): (Security, PortLimits, GrpcHealth),
    mut stopped: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let mut builder = platform::server_builder(&security, &limits)?.max_frame_size(FRAME_BYTES_MAX);
    let services = [PSERVER_SERVICE];
    platform::conventional_router(&mut builder, &health, &services, proto::FILE_DESCRIPTOR_SET)?
        .add_service(service)
        .serve_with_incoming_shutdown(incoming, async move {
            let _ = stopped.wait_for(|stop| *stop).await;
        })
        .await
        .context("serve the pserver")
}

/// The address registered with the master: `--advertise`, or the bound listener's.
fn advertised(config: &PServerConfig, listener: &TcpListener) -> anyhow::Result<String> {
    if let Some(addr) = &config.advertise {
        return Ok(addr.clone());
    }
    let bound = listener.local_addr().context("read the bound --listen address")?;
    anyhow::ensure!(
        !bound.ip().is_unspecified(),
        "--listen {bound} is a wildcard address: pass --advertise with the address trainers reach"
    );
    Ok(bound.to_string())
}

/// Checkpoint paths are recorded in the master for a replacement to open: make them absolute.
fn absolute(dir: &std::path::Path) -> anyhow::Result<std::path::PathBuf> {
    if dir.is_absolute() {
        return Ok(dir.to_path_buf());
    }
    Ok(std::env::current_dir().context("read the current directory")?.join(dir))
}
