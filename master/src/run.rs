//! `run`: one master replica. Opens the replicated log, serves the Raft and master services on
//! one port (with gRPC health and reflection), bootstraps the group, and does the leader's
//! duties until shutdown.

use crate::clock::SystemClock;
use crate::config::MasterConfig;
use crate::replica::Replica;
use crate::replicated_state::ReplicatedState;
use crate::service::MasterRpc;
use anyhow::Context as _;
use consensus::{ConsensusNode, Handoff};
use platform::metrics_http::{Endpoints, Extras, Ready, Render};
use platform::security::Security;
use platform::{GrpcHealth, PortLimits};
use proto::master::master_service_server::MasterServiceServer;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Runs a master on `listener` (already bound: tests bind port 0) until `shutdown` resolves.
pub async fn run(
    config: MasterConfig,
    listener: TcpListener,
    shutdown: impl Future<Output = ()>,
) -> anyhow::Result<()> {
    config.validate()?;
    crate::membership_duties::check_directory(&config)?;
    let mut node_config = config.node_config()?;
    let security = Security::load_for_server(&config.security)?;
    node_config.security = security.clone();
    // Bound before anything is opened, so a bad address fails with nothing to undo.
    let metrics_listener = platform::metrics_http::bind(config.metrics_listen).await?;
    let peer_listener = bind_peer_listen(&config).await?;
    if metrics_listener.is_some() {
        platform::telemetry::install(&[
            consensus::raft_metrics::describe,
            crate::metrics::describe,
        ]);
    }
    let state = ReplicatedState::admitting(config.feature_level);
    let node = ConsensusNode::open(node_config, state)
        .await
        .with_context(|| format!("open master {} in {}", config.id, config.data_dir.display()))?;
    let replica = Replica::start(node.clone(), &config, Arc::new(SystemClock))?;
    let stopped = replica.stopped();
    let raft_on_its_own_port = peer_listener.is_some();
    let health = crate::health::initial(raft_on_its_own_port).await;
    let listeners = (listener, peer_listener);
    let limits = &config.port_limits;
    let servers = Servers::spawn(
        listeners,
        &node,
        replica.service(),
        (&security, limits, &health),
        &stopped,
    )?;
    let health_keeper = crate::health::spawn_keeper(&node, health.clone(), stopped.clone());
    // No `id` field: a JSON log line carries the process's id already (`cli/src/logging.rs`).
    tracing::info!(
        listen = %config.listen,
        peer_listen = ?config.peer_listen,
        tls = security.tls().is_some(),
        token = security.token().is_some(),
        "master serving"
    );
    let metrics = match metrics_listener {
        Some(listener) => Some(serve_metrics(
            listener,
            (&config, &security),
            (node.clone(), health),
            stopped.clone(),
        )?),
        None => None,
    };
    node.bootstrap().await.context("bootstrap the master group")?;
    let removed = crate::membership_duties::start(&node, &config, &security)?;
    let core_stopped = until_stopped(&node, shutdown, removed, (&config, &security)).await;
    let serving = Serving { replica, servers, health_keeper, metrics };
    node.rpc_handler().end_streams();
    let served = serving.stop().await?;
    let stopped = node.shutdown().await.context("stop the Raft node");
    if let Some(reason) = core_stopped {
        // Exit with an error, so that whatever supervises this master restarts it on its
        // durable state (a StatefulSet, systemd, the harness).
        anyhow::bail!("master {}: {reason}", config.id);
    }
    stopped?;
    served.context("serve the master")
}

/// Waits for `shutdown` (then hands leadership off, if this node leads, and with
/// --leave-on-stop leaves the group), for the Raft core to stop, or for this master's removal
/// from the group (the reason of either).
async fn until_stopped(
    node: &ConsensusNode<ReplicatedState>,
    shutdown: impl Future<Output = ()>,
    removed: impl Future<Output = String>,
    (config, security): (&MasterConfig, &Security),
) -> Option<String> {
    let core_stopped = tokio::select! {
        () = shutdown => None,
        reason = node.core_stopped() => Some(format!("the Raft core stopped: {reason}")),
        why = removed => Some(format!("this master was removed from the group: {why}")),
    };
    match &core_stopped {
        None => {
            tracing::info!("master shutting down");
            hand_off(node).await;
            if config.leave_on_stop {
                crate::leaving::leave(node, &config.data_dir, security).await;
            }
        }
        Some(reason) => tracing::error!(%reason, "exiting"),
    }
    core_stopped
}

/// What a running master stops when it winds down, in this order.
struct Serving {
    replica: Replica,
    servers: Servers,
    health_keeper: tokio::task::JoinHandle<()>,
    metrics: Option<MetricsTasks>,
}

impl Serving {
    /// Stops the leader's duties, drains the servers (their result, returned) and waits for
    /// every task; an error only when one of them panicked.
    async fn stop(self) -> anyhow::Result<anyhow::Result<()>> {
        self.replica.stop().await?;
        let served = self.servers.join(Duration::from_millis(DRAIN_MS_MAX)).await;
        self.health_keeper.await.context("the health keeper panicked")?;
        if let Some((metrics, recorder)) = self.metrics {
            metrics.await.context("the metrics server panicked")?;
            if let Some(recorder) = recorder {
                recorder.await.context("the dashboard's recorder panicked")?;
            }
        }
        Ok(served)
    }
}

/// How long a stopping leader may take to hand leadership to a caught-up follower: a few
/// heartbeats for the follower to catch up, a vote round, and slack for a loaded machine.
/// Past it the followers elect a leader on their own (an election timeout after the lease).
const HANDOFF_MS_MAX: u64 = 3_000;

/// After a handoff, how long a stopping master goes on answering (every call with a redirect
/// to the new leader) before its servers stop: a few heartbeats, so a busy client's next call
/// is sent on, while a stopping master still exits within about a second.
const REDIRECT_GRACE_MS: u64 = 300;

/// How long the servers may take to finish the calls in flight once told to stop. The
/// master's own streams end when it stops leading; a client that holds a call open past this
/// is cut off, so a stopping master exits in bounded time whatever its clients do.
const DRAIN_MS_MAX: u64 = 3_000;

/// Before a planned stop: a leader hands leadership to a caught-up follower, so the group has
/// its next leader within a vote round instead of a lease plus an election timeout; any node
/// stops acting as a leader (its writes and confirmations are refused from here on).
async fn hand_off(node: &ConsensusNode<ReplicatedState>) {
    let bound = Duration::from_millis(HANDOFF_MS_MAX);
    match node.hand_off_leadership(&node.grpc_handoff(), bound).await {
        // A group of one has nobody to hand off to: it stops at once.
        Handoff::NotLeader | Handoff::Alone => {}
        Handoff::Done { to, elapsed } => {
            tracing::info!(to, elapsed_ms = elapsed.as_millis() as u64, "handed leadership off");
            // Clients whose next call comes here are told where the new leader is, at once,
            // instead of finding a closed port and rediscovering after a backoff.
            tokio::time::sleep(Duration::from_millis(REDIRECT_GRACE_MS)).await;
        }
        Handoff::Failed { reason } => {
            tracing::warn!(%reason, "could not hand leadership off; the followers will elect");
        }
    }
}

/// With --peer-listen, its bound listener.
async fn bind_peer_listen(config: &MasterConfig) -> anyhow::Result<Option<TcpListener>> {
    let Some(addr) = config.peer_listen else { return Ok(None) };
    let listener =
        TcpListener::bind(addr).await.with_context(|| format!("bind --peer-listen {addr}"))?;
    Ok(Some(listener))
}

async fn wait_for_stop(mut stopped: watch::Receiver<bool>) {
    let _ = stopped.wait_for(|stop| *stop).await;
}

type ServerTask = tokio::task::JoinHandle<anyhow::Result<()>>;

/// The gRPC servers: the master service (and Raft's) on --listen, or Raft's alone on
/// --peer-listen when given.
struct Servers {
    main: ServerTask,
    peer: Option<ServerTask>,
}

impl Servers {
    fn spawn(
        (listener, peer_listener): (TcpListener, Option<TcpListener>),
        node: &ConsensusNode<ReplicatedState>,
        master_service: MasterServiceServer<MasterRpc>,
        (security, limits, health): (&Security, &PortLimits, &GrpcHealth),
        stopped: &watch::Receiver<bool>,
    ) -> anyhow::Result<Self> {
        let mut builder = platform::server_builder(security, limits)?;
        let services = crate::health::client_port_services(peer_listener.is_some());
        let router = platform::conventional_router(
            &mut builder,
            health,
            &services,
            proto::FILE_DESCRIPTOR_SET,
        )?;
        let (router, peer) = match peer_listener {
            Some(peer_listener) => {
                let shutdown = wait_for_stop(stopped.clone());
                let peers = consensus::serve(peer_listener, node.clone(), limits.clone(), shutdown);
                (router.add_service(master_service), Some(tokio::spawn(peers)))
            }
            None => (router.add_service(node.raft_service()).add_service(master_service), None),
        };
        let shutdown = wait_for_stop(stopped.clone());
        let incoming = platform::incoming(listener, limits);
        let main = tokio::spawn(async move {
            router.serve_with_incoming_shutdown(incoming, shutdown).await?;
            Ok(())
        });
        Ok(Self { main, peer })
    }

    /// Waits for both to stop, at most `bound` (then cuts off the calls still open); the first
    /// error.
    async fn join(self, bound: Duration) -> anyhow::Result<()> {
        let (main_abort, peer_abort) =
            (self.main.abort_handle(), self.peer.as_ref().map(|peer| peer.abort_handle()));
        let joined = tokio::time::timeout(bound, async move {
            let main = self.main.await.context("the server task panicked")?;
            if let Some(peer) = self.peer {
                peer.await.context("the Raft server panicked")?.context("serve Raft peers")?;
            }
            main
        });
        match joined.await {
            Ok(result) => result,
            Err(_elapsed) => {
                tracing::warn!(
                    bound_ms = bound.as_millis() as u64,
                    "calls still open; cutting them off"
                );
                main_abort.abort();
                if let Some(peer_abort) = peer_abort {
                    peer_abort.abort();
                }
                Ok(())
            }
        }
    }
}

/// The metrics server's task and, with the dashboard, its recorder's.
type MetricsTasks = (tokio::task::JoinHandle<()>, Option<tokio::task::JoinHandle<()>>);

/// Serves the master's metrics on the `--metrics-listen` listener until `stopped` turns true;
/// ready while the node knows a leader; `health` answers `grpc.health.v1` there too, and
/// unless `--no-dashboard` the dashboard is served at `/`.
fn serve_metrics(
    listener: TcpListener,
    (config, security): (&MasterConfig, &Security),
    (node, health): (ConsensusNode<ReplicatedState>, GrpcHealth),
    stopped: tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<MetricsTasks> {
    let (rendered, asked) = (node.clone(), node.clone());
    let render: Render = Arc::new(move || crate::metrics::render(&rendered));
    let ready: Ready = Arc::new(move || match asked.cluster_info().leader_id {
        None => Err("no leader known".to_string()),
        Some(_) => Ok(()),
    });
    let endpoints = Endpoints { render, ready };
    let (routes, recorder) = match config.no_dashboard {
        true => (None, None),
        false => {
            // The seeds, or with --join the masters it joins through: members come later.
            let seeds: Vec<String> = match &config.join {
                Some(join) => join.clone(),
                None => config.seed_peers()?.into_values().collect(),
            };
            let (routes, recorder) =
                crate::dashboard::start(node, &seeds, security.clone(), stopped.clone())?;
            (Some(routes), Some(recorder))
        }
    };
    let tls = security.tls().and_then(platform::security::Tls::https_config);
    let extras = Extras { health: Some(health), routes, tls };
    let limits = config.port_limits.clone();
    let server =
        platform::metrics_http::spawn_with_extras(listener, limits, endpoints, extras, stopped);
    Ok((server, recorder))
}
