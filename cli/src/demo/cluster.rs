//! `DemoCluster`: the demo's masters, pservers and trainers as child processes on free loopback
//! ports, each logging to `<work>/logs/<role>-<n>.log`.

use std::path::Path;

use anyhow::Context as _;
use platform::security::SecurityFiles;

use crate::process_group::{free_loopback_addrs, ProcessGroup};

/// Masters in the demo's group.
pub const MASTER_COUNT: usize = 3;

/// Which process of the group is which.
pub struct DemoCluster {
    pub processes: ProcessGroup,
    pub master_addrs: Vec<String>,
    pub pserver_count: usize,
    pub trainer_count: usize,
}

/// What the trainers train.
pub struct Job<'a> {
    pub train: &'a str,
    pub eval: &'a str,
    pub model: &'a str,
    pub classes: u32,
    pub passes: u32,
}

impl DemoCluster {
    pub fn start(
        work: &Path,
        pserver_count: usize,
        trainer_count: usize,
        job: &Job<'_>,
        security: &SecurityFiles,
    ) -> anyhow::Result<Self> {
        let logs = work.join("logs");
        std::fs::create_dir_all(&logs).context("create the logs directory")?;
        let addrs = free_loopback_addrs(MASTER_COUNT + pserver_count)?;
        let (master_addrs, pserver_addrs) = addrs.split_at(MASTER_COUNT);
        let peers: Vec<String> = master_addrs
            .iter()
            .enumerate()
            .map(|(index, addr)| format!("{}={addr}", index + 1))
            .collect();
        let mut commands = Vec::new();
        for (index, addr) in master_addrs.iter().enumerate() {
            commands.push(master(index, addr, &peers.join(","), work));
        }
        for addr in pserver_addrs {
            commands.push(pserver(addr, master_addrs, pserver_count, work));
        }
        for index in 0..trainer_count {
            commands.push(trainer(index, master_addrs, job, work));
        }
        for command in &mut commands {
            command.extend(security.to_args());
        }
        let names = (0..MASTER_COUNT)
            .map(|n| format!("master-{}", n + 1))
            .chain((0..pserver_count).map(|n| format!("pserver-{n}")))
            .chain((0..trainer_count).map(|n| format!("trainer-{n}")));
        let processes = ProcessGroup::start_named(commands, names.collect(), &logs)?;
        Ok(Self { processes, master_addrs: master_addrs.to_vec(), pserver_count, trainer_count })
    }

    pub fn master_process(&self, index: usize) -> usize {
        index
    }

    pub fn pserver_process(&self, index: usize) -> usize {
        MASTER_COUNT + index
    }

    pub fn trainer_process(&self, index: usize) -> usize {
        MASTER_COUNT + self.pserver_count + index
    }

    /// Whether every trainer has exited successfully (the job is over for them).
    pub fn trainers_done(&mut self) -> anyhow::Result<bool> {
        let mut done = true;
        for index in 0..self.trainer_count {
            let process = self.trainer_process(index);
            match self.processes.exit_status(process)? {
                Some(status) if !status.success() => anyhow::bail!(
                    "trainer {index} failed ({status}); see {}",
                    self.processes.log_path(process).display()
                ),
                Some(_) => {}
                None => done = false,
            }
        }
        Ok(done)
    }
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|arg| arg.to_string()).collect()
}

fn master(index: usize, addr: &str, peers: &str, work: &Path) -> Vec<String> {
    let data = work.join(format!("master-{}", index + 1)).display().to_string();
    let id = (index + 1).to_string();
    strings(&[
        "master",
        "--id",
        &id,
        "--listen",
        addr,
        "--peers",
        peers,
        "--data-dir",
        &data,
        "--trainer-lease-ms",
        "2000",
        "--task-timeout-min-ms",
        "5000",
        "--worker-threads",
        "1",
    ])
}

fn pserver(addr: &str, masters: &[String], count: usize, work: &Path) -> Vec<String> {
    let checkpoints = work.join("checkpoints").display().to_string();
    strings(&[
        "pserver",
        "--masters",
        &masters.join(","),
        "--listen",
        addr,
        "--checkpoint-dir",
        &checkpoints,
        "--num-pservers",
        &count.to_string(),
        "--checkpoint-interval-s",
        "2",
        "--worker-threads",
        "1",
    ])
}

fn trainer(index: usize, masters: &[String], job: &Job<'_>, work: &Path) -> Vec<String> {
    let model_out = work.join(format!("model-{index}.safetensors")).display().to_string();
    let (classes, passes) = (job.classes.to_string(), job.passes.to_string());
    strings(&[
        "trainer",
        "--masters",
        &masters.join(","),
        "--dataset",
        job.train,
        "--eval-dataset",
        job.eval,
        "--model",
        job.model,
        "--classes",
        &classes,
        "--passes",
        &passes,
        "--batch-size",
        "32",
        "--learning-rate",
        "0.05",
        "--model-out",
        &model_out,
        "--name",
        &format!("trainer-{index}"),
        "--worker-threads",
        "1",
    ])
}
