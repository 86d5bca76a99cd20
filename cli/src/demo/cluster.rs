//! `DemoCluster`: the demo's masters (each serving its dashboard on a port of its own) and, per
//! job, its pservers and trainers as child processes on free loopback ports, each logging to
//! `<work>/logs/<name>.log`.

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
    /// Each master's HTTP port (`--metrics-listen`), where its dashboard is.
    pub dashboard_addrs: Vec<String>,
    pub job_count: usize,
    pub pserver_count: usize,
    pub trainer_count: usize,
}

/// What one job's trainers train.
pub struct Job {
    pub name: String,
    pub train: String,
    pub eval: String,
    pub model: String,
    pub classes: u32,
    pub passes: u32,
}

impl DemoCluster {
    pub fn start(
        work: &Path,
        pserver_count: usize,
        trainer_count: usize,
        jobs: &[Job],
        security: &SecurityFiles,
    ) -> anyhow::Result<Self> {
        let logs = work.join("logs");
        std::fs::create_dir_all(&logs).context("create the logs directory")?;
        let addrs = free_loopback_addrs(2 * MASTER_COUNT + pserver_count * jobs.len())?;
        let (master_addrs, rest) = addrs.split_at(MASTER_COUNT);
        let (dashboard_addrs, pserver_addrs) = rest.split_at(MASTER_COUNT);
        let peers: Vec<String> = master_addrs
            .iter()
            .enumerate()
            .map(|(index, addr)| format!("{}={addr}", index + 1))
            .collect();
        let mut commands = Vec::new();
        for (index, addrs) in master_addrs.iter().zip(dashboard_addrs).enumerate() {
            commands.push(master(index, addrs, &peers.join(","), work));
        }
        let mut names: Vec<String> =
            (0..MASTER_COUNT).map(|n| format!("master-{}", n + 1)).collect();
        for (job, addrs) in jobs.iter().zip(pserver_addrs.chunks(pserver_count)) {
            let dir = work.join(&job.name);
            for (index, addr) in addrs.iter().enumerate() {
                commands.push(pserver(addr, master_addrs, (pserver_count, &job.name), &dir));
                names.push(format!("{}-pserver-{index}", job.name));
            }
            for index in 0..trainer_count {
                commands.push(trainer(index, master_addrs, job, &dir));
                names.push(format!("{}-trainer-{index}", job.name));
            }
        }
        for command in &mut commands {
            command.extend(security.to_args());
        }
        let processes = ProcessGroup::start_named(commands, names, &logs)?;
        let (master_addrs, dashboard_addrs) = (master_addrs.to_vec(), dashboard_addrs.to_vec());
        let job_count = jobs.len();
        Ok(Self {
            processes,
            master_addrs,
            dashboard_addrs,
            job_count,
            pserver_count,
            trainer_count,
        })
    }

    pub fn master_process(&self, index: usize) -> usize {
        index
    }

    /// The processes of job `job`: its pservers, then its trainers.
    fn job_base(&self, job: usize) -> usize {
        MASTER_COUNT + job * (self.pserver_count + self.trainer_count)
    }

    pub fn pserver_process(&self, job: usize, index: usize) -> usize {
        self.job_base(job) + index
    }

    pub fn trainer_process(&self, job: usize, index: usize) -> usize {
        self.job_base(job) + self.pserver_count + index
    }

    /// Whether every trainer of every job has exited successfully (its job is over).
    pub fn trainers_done(&mut self) -> anyhow::Result<bool> {
        let mut done = true;
        let trainers = (0..self.job_count)
            .flat_map(|job| (0..self.trainer_count).map(move |index| (job, index)));
        for (job, index) in trainers.collect::<Vec<_>>() {
            let process = self.trainer_process(job, index);
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

fn master(
    index: usize,
    (addr, dashboard): (&String, &String),
    peers: &str,
    work: &Path,
) -> Vec<String> {
    let data = work.join(format!("master-{}", index + 1)).display().to_string();
    let id = (index + 1).to_string();
    strings(&[
        "master",
        "--id",
        &id,
        "--listen",
        addr,
        "--metrics-listen",
        dashboard,
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

fn pserver(addr: &str, masters: &[String], (count, job): (usize, &str), dir: &Path) -> Vec<String> {
    let checkpoints = dir.join("checkpoints").display().to_string();
    strings(&[
        "pserver",
        "--masters",
        &masters.join(","),
        "--job",
        job,
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

fn trainer(index: usize, masters: &[String], job: &Job, dir: &Path) -> Vec<String> {
    let model_out = dir.join(format!("model-{index}.safetensors")).display().to_string();
    let (classes, passes) = (job.classes.to_string(), job.passes.to_string());
    strings(&[
        "trainer",
        "--masters",
        &masters.join(","),
        "--job",
        &job.name,
        "--dataset",
        &job.train,
        "--eval-dataset",
        &job.eval,
        "--model",
        &job.model,
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
        &format!("{}-trainer-{index}", job.name),
        "--worker-threads",
        "1",
    ])
}
