//! The processes `bench pserver` measures: one master and N pservers (real processes, logs
//! kept), and what it asks of them: push+pull rounds as trainers make them, and kill -9 of a
//! pserver followed by its replacement.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use client::pserver::layout::{JobLayout, ParamSpec, BLOCK_ELEMENTS_DEFAULT};
use client::pserver::{PServerClient, PServerClientOptions, Tensors};
use client::{ClientOptions, MasterClient};
use optimizer::{OptimizerConfig, OptimizerKind};

use super::table::Table;
use crate::process_group::{free_loopback_addrs, ProcessGroup};

/// The masters' pserver lease in the benchmark: a killed pserver's slot frees after this.
pub(crate) const LEASE_MS: &str = "1000";

/// One master and `count` pservers, with a client.
pub(crate) struct Cluster {
    processes: ProcessGroup,
    master: Arc<MasterClient>,
    master_addr: String,
    /// Each pserver process's address (process `i + 1`).
    pserver_addrs: Vec<String>,
    dir: PathBuf,
    count: u32,
    /// The pservers' `--checkpoint-interval-s`.
    checkpoint_interval_s: u64,
}

impl Cluster {
    /// Data under `root` (deleted with it), logs in `log_dir` (kept); the pservers checkpoint
    /// every `checkpoint_interval_s`.
    pub(crate) async fn start(
        root: &Path,
        count: u32,
        log_dir: &Path,
        checkpoint_interval_s: u64,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir_in(root)?.keep();
        let addrs = free_loopback_addrs(1 + count as usize)?;
        let master = vec![
            "master".into(),
            "--id".into(),
            "1".into(),
            "--listen".into(),
            addrs[0].clone(),
            "--peers".into(),
            format!("1={}", addrs[0]),
            "--data-dir".into(),
            dir.join("master").display().to_string(),
            "--pserver-lease-ms".into(),
            LEASE_MS.into(),
        ];
        let mut commands = vec![master];
        for addr in &addrs[1..] {
            commands.push(pserver_command(&addrs[0], addr, &dir, count, checkpoint_interval_s));
        }
        let processes = ProcessGroup::start(commands, log_dir)?;
        let master = Arc::new(MasterClient::new(&addrs[..1], ClientOptions::default())?);
        let pserver_addrs = addrs[1..].to_vec();
        let master_addr = addrs[0].clone();
        Ok(Self {
            processes,
            master,
            master_addr,
            pserver_addrs,
            dir,
            count,
            checkpoint_interval_s,
        })
    }

    fn client(&self) -> PServerClient {
        PServerClient::new(self.master.clone(), 1, PServerClientOptions::default())
    }

    /// Initializes a `params`-parameter model on the pservers (or finds it there); the client.
    pub(crate) async fn model(&self, params: u64) -> anyhow::Result<(PServerClient, JobLayout)> {
        let (client, layout) = (self.client(), layout(params, self.count));
        client.wait_for_slots(Some(Duration::from_secs(30))).await?;
        client.init_or_wait(&layout, &[("weight", &vec![0.5_f32; params as usize])]).await?;
        Ok((client, layout))
    }

    /// kill -9 of the pserver holding slot 0, then a replacement, `count` times each way:
    /// restarted on the same address (the master hands the slot straight back) or started on
    /// a new one (it waits for the dead one's lease); milliseconds until the replacement (a new
    /// generation) answers `Status` restored (`READY`) at the step of the newest checkpoint, for
    /// a `params`-parameter model. Asked of the pserver itself, not through a pull: a pull of a
    /// billion parameters would take seconds of its own and hold the model in this process
    /// twice more.
    pub(crate) async fn replacements(mut self, count: u32, params: u64) -> anyhow::Result<Table> {
        let mut table =
            Table::new(&["params", "replacement", "kill -9 to serving (ms)", "lease (ms)"]);
        anyhow::ensure!(
            !layout(params, self.count).blocks_of_slot(0).is_empty(),
            "--replacement-params {params} puts no block on slot 0, the one killed: give more"
        );
        let (client, layout) = self.model(params).await?;
        let gradient = vec![0.001_f32; params as usize];
        for round in 0..2 * count {
            client.push(&layout, &[("weight", &gradient)]).await?;
            let (process, before) = self.holder(0).await?;
            let step = self.wait_checkpointed(0).await?;
            let new_address = round % 2 == 1;
            if new_address {
                self.move_pserver(process)?;
            }
            self.processes.kill(process);
            let killed = Instant::now();
            self.processes.spawn(process)?;
            let restored = self.wait_serving(0, before).await?;
            let serving = killed.elapsed().as_millis();
            anyhow::ensure!(restored >= step, "restored at step {restored}, checkpointed {step}");
            let kind = if new_address { "new address" } else { "same address" };
            table.row(vec![params.to_string(), kind.into(), serving.to_string(), LEASE_MS.into()]);
        }
        Ok(table)
    }

    /// Waits (two minutes at most) until `slot`'s holder has a checkpoint of its current step
    /// recorded; that step.
    async fn wait_checkpointed(&self, slot: u32) -> anyhow::Result<u64> {
        for _ in 0..24_000 {
            let addr = self.slot_entry(slot).await?.map(|(addr, _)| addr);
            if let Some(addr) = addr {
                let reply = status_of(&addr).await?;
                if reply.checkpoint_step >= reply.step && reply.step > 0 {
                    return Ok(reply.step);
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        anyhow::bail!("slot {slot}'s checkpoint was never recorded")
    }

    /// Waits (two minutes at most) until a holder of `slot` other than generation `before`
    /// answers `Status` restored; the step it restored.
    async fn wait_serving(&self, slot: u32, before: u64) -> anyhow::Result<u64> {
        for _ in 0..24_000 {
            let entry = self.slot_entry(slot).await?;
            if let Some((addr, generation)) = entry.filter(|(_, generation)| *generation != before)
            {
                let ready = proto::pserver::ShardState::Ready as i32;
                match status_of(&addr).await {
                    Ok(reply) if reply.generation == generation && reply.state == ready => {
                        return Ok(reply.step)
                    }
                    _ => {}
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        anyhow::bail!("no replacement of slot {slot} ever served")
    }

    /// Gives pserver `process` a new address from its next start.
    fn move_pserver(&mut self, process: usize) -> anyhow::Result<()> {
        let addr = free_loopback_addrs(1)?.remove(0);
        let command = pserver_command(
            &self.master_addr,
            &addr,
            &self.dir,
            self.count,
            self.checkpoint_interval_s,
        );
        self.processes.set_args(process, command);
        self.pserver_addrs[process - 1] = addr;
        Ok(())
    }

    /// The process serving `slot` and its generation.
    async fn holder(&self, slot: u32) -> anyhow::Result<(usize, u64)> {
        let (addr, generation) = self.slot_entry(slot).await?.context("the slot is held")?;
        let process = self
            .pserver_addrs
            .iter()
            .position(|known| *known == addr)
            .context("a known pserver holds it")?;
        Ok((process + 1, generation))
    }

    /// The address and generation of `slot`'s holder in the master's table (`None`: vacant).
    async fn slot_entry(&self, slot: u32) -> anyhow::Result<Option<(String, u64)>> {
        let table = self.master.list_pservers().await?;
        let entry = table.pservers.iter().find(|entry| entry.slot == slot);
        Ok(entry.map(|entry| (entry.addr.clone(), entry.generation)))
    }
}

/// The `Status` of the pserver at `addr`, on a connection of its own.
async fn status_of(addr: &str) -> anyhow::Result<proto::pserver::StatusReply> {
    use proto::pserver::p_server_service_client::PServerServiceClient;
    let mut client = PServerServiceClient::connect(format!("http://{addr}")).await?;
    Ok(client.status(proto::pserver::StatusRequest {}).await?.into_inner())
}

/// Push+pull rounds of the model `client` initialized: GB/s of f32 payload both ways, over at
/// least `rounds` rounds and 1 s. Two rounds go first, untimed: they fault in the client's two
/// pull buffers and the pservers' first, which a trainer does once.
pub(crate) async fn throughput(
    client: &PServerClient,
    layout: &JobLayout,
    rounds: u32,
) -> anyhow::Result<f64> {
    let params: u64 = layout.params.iter().map(ParamSpec::elements).sum();
    let mut round = Round::new(client, layout, params);
    round.once().await?;
    round.once().await?;
    let started = Instant::now();
    let mut done = 0;
    while done < rounds || started.elapsed() < Duration::from_secs(1) {
        round.once().await?;
        done += 1;
    }
    Ok(2.0 * done as f64 * params as f64 * 4.0 / started.elapsed().as_secs_f64() / 1e9)
}

/// One push and one pull of the whole model, as a trainer makes them.
struct Round<'a> {
    client: &'a PServerClient,
    layout: &'a JobLayout,
    /// Shared, as a trainer hands its gradient over: each push sends views of it.
    gradient: Arc<Tensors>,
    /// Pulled as a trainer pulls, into shared tensors: the last pull (which the client keeps
    /// too) and the buffers of the one before, pulled into next.
    pulled: Option<Arc<Tensors>>,
    spare: Tensors,
}

impl<'a> Round<'a> {
    fn new(client: &'a PServerClient, layout: &'a JobLayout, params: u64) -> Self {
        let gradient = vec![0.001_f32; params as usize];
        let gradient = Arc::new(Tensors::from([("weight".to_string(), gradient)]));
        Self { client, layout, gradient, pulled: None, spare: Tensors::new() }
    }

    async fn once(&mut self) -> anyhow::Result<()> {
        let push_started = Instant::now();
        self.client.push_shared(self.layout, self.gradient.clone()).await?;
        let pull_started = Instant::now();
        let into = std::mem::take(&mut self.spare);
        let latest = self.client.pull_shared(self.layout, into).await?;
        if let Some(replaced) = self.pulled.replace(latest) {
            self.spare = Arc::try_unwrap(replaced).unwrap_or_default();
        }
        tracing::debug!(
            push_ms = (pull_started - push_started).as_millis() as u64,
            pull_ms = pull_started.elapsed().as_millis() as u64,
            "round"
        );
        Ok(())
    }
}

fn pserver_command(
    master: &str,
    addr: &str,
    dir: &Path,
    count: u32,
    checkpoint_interval_s: u64,
) -> Vec<String> {
    let args = [
        "pserver",
        "--masters",
        master,
        "--listen",
        addr,
        "--num-pservers",
        &count.to_string(),
        "--checkpoint-interval-s",
        &checkpoint_interval_s.to_string(),
        "--checkpoint-dir",
    ];
    let mut command: Vec<String> = args.iter().map(|arg| arg.to_string()).collect();
    command.push(dir.join("checkpoints").display().to_string());
    command
}

fn layout(params: u64, slot_count: u32) -> JobLayout {
    let optimizer = OptimizerConfig { learning_rate: 0.01, kind: OptimizerKind::Sgd };
    JobLayout {
        params: vec![ParamSpec { name: "weight".into(), shape: vec![params] }],
        block_elements: BLOCK_ELEMENTS_DEFAULT,
        slot_count,
        optimizer,
    }
}
