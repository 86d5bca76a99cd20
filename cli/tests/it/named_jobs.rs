//! Named jobs with real processes on one group of 3 masters: two jobs with different datasets
//! trained at once, each to its single-process accuracy, while a third is cancelled midway
//! (its trainer and pserver exit 0); and a progress checkpoint restored after every trainer
//! was killed, which redoes exactly the tasks done after it, then the finished job removed
//! after its retention.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use client::{ClientOptions, MasterClient};
use supervisor::ProcessGroup;

use crate::command::raftrain_ok;
use crate::master_group::MasterGroup;
use crate::pserver_processes::PServerProcesses;
use crate::task_consumer::{completions_reach, spawn_consumers, History};
use crate::training::{local_accuracy, synth, SOFTMAX};

/// One job's pservers and trainers, each process logging into the job's directory.
struct JobProcesses {
    name: String,
    pservers: PServerProcesses,
    trainers: ProcessGroup,
    trainer_args: Vec<String>,
}

impl JobProcesses {
    /// `pserver_count` pservers of job `name`; trainers get `trainer_args` after its name.
    fn start(
        group: &MasterGroup,
        dir: &Path,
        name: &str,
        pserver_count: u32,
        trainer_args: &[&str],
    ) -> Self {
        std::fs::create_dir_all(dir).expect("the job's directory");
        let mut pservers = PServerProcesses::new(&group.addrs, dir, pserver_count);
        for _ in 0..pserver_count {
            pservers.spawn_with(&["--job", name]);
        }
        let mut trainers = ProcessGroup::new(env!("CARGO_BIN_EXE_raftrain").into(), dir);
        trainers.set_log_filter("info");
        let mut args = vec!["trainer".to_string(), "--masters".into(), group.addrs.join(",")];
        args.extend(["--job".to_string(), name.to_string()]);
        args.extend(trainer_args.iter().map(|arg| arg.to_string()));
        Self { name: name.to_string(), pservers, trainers, trainer_args: args }
    }

    fn spawn_trainer(&mut self) -> usize {
        let index = self.trainers.len();
        let name = format!("{}-trainer-{index}", self.name);
        let mut args = self.trainer_args.clone();
        args.extend(["--name".to_string(), name.clone()]);
        self.trainers.add(&name, args).expect("start a trainer")
    }

    /// Waits for trainer `index` to exit; its exit code.
    fn trainer_exit(&mut self, index: usize, timeout: Duration) -> i32 {
        let status = self.trainers.wait_exit(index, timeout);
        let status =
            status.unwrap_or_else(|| panic!("trainer {index} still runs\n{}", self.logs()));
        status.code().unwrap_or(-1)
    }

    fn logs(&self) -> String {
        let trainers: String = (0..self.trainers.len())
            .map(|index| {
                let log =
                    std::fs::read_to_string(self.trainers.log_path(index)).unwrap_or_default();
                format!("--- {} trainer {index}\n{log}", self.name)
            })
            .collect();
        format!("{trainers}{}", self.pservers.logs())
    }
}

/// `raftrain job list --json` through the masters.
pub(crate) fn job_list(group: &MasterGroup) -> serde_json::Value {
    let masters = group.addrs.join(",");
    let listed = raftrain_ok(&["job", "list", "--masters", &masters, "--json"], b"");
    serde_json::from_str(listed.trim()).expect("job list --json")
}

fn state_of(list: &serde_json::Value, name: &str) -> Option<String> {
    let jobs = list["jobs"].as_array()?;
    let job = jobs.iter().find(|job| job["name"] == name)?;
    job["state"].as_str().map(str::to_string)
}

/// The job's status (`status --job NAME --json`).
fn job_status(group: &MasterGroup, name: &str) -> serde_json::Value {
    let masters = group.addrs.join(",");
    let shown = raftrain_ok(&["status", "--masters", &masters, "--job", name, "--json"], b"");
    serde_json::from_str(shown.trim()).expect("status --json")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_jobs_train_at_once_while_a_third_is_cancelled() {
    let dir = tempfile::tempdir().expect("temp");
    let root = dir.path();
    let group =
        MasterGroup::start(3, &["--pserver-lease-ms", "2000", "--trainer-lease-ms", "3000"]);
    let masters = group.addrs.join(",");
    let (train_a, eval_a) = synth(&root.join("a"), "blobs", "3000", "2.5");
    let (train_b, eval_b) = synth(&root.join("b"), "blobs", "2000", "1.5");
    let (train_c, _) = synth(&root.join("c"), "blobs", "2000", "2.0");

    tracing::info!("--- submit a with flags, b from a TOML spec, c with many passes");
    let submit = |args: &[&str]| {
        let mut all = vec!["job", "submit", "--masters", &masters];
        all.extend(args);
        raftrain_ok(&all, b"")
    };
    submit(&["--name", "a", "--dataset", &train_a, "--passes", "3"]);
    let spec = root.join("b.toml");
    std::fs::write(&spec, format!("name = \"b\"\ndataset = [\"{train_b}\"]\npasses = 3\n"))
        .expect("write the spec");
    submit(&["--spec", &spec.display().to_string()]);
    submit(&["--name", "c", "--dataset", &train_c, "--passes", "50"]);
    let listed = job_list(&group);
    for name in ["a", "b", "c"] {
        assert_eq!(state_of(&listed, name).as_deref(), Some("running"), "{listed}");
    }

    let mut jobs: Vec<JobProcesses> = [("a", &train_a, &eval_a), ("b", &train_b, &eval_b)]
        .into_iter()
        .map(|(name, train, eval)| {
            let mut args = vec!["--dataset", train.as_str(), "--eval-dataset", eval.as_str()];
            args.extend(SOFTMAX);
            JobProcesses::start(&group, &root.join(name), name, 1, &args)
        })
        .collect();
    // SOFTMAX's flags with 50 passes: c is still training when it is cancelled.
    let mut c_args = vec!["--dataset", train_c.as_str()];
    c_args.extend(SOFTMAX);
    let passes = c_args.iter().position(|arg| *arg == "--passes").expect("a pass count");
    c_args[passes + 1] = "50";
    let mut cancelled = JobProcesses::start(&group, &root.join("c"), "c", 1, &c_args);
    for job in &mut jobs {
        job.spawn_trainer();
        job.spawn_trainer();
    }
    cancelled.spawn_trainer();
    cancelled.spawn_trainer();

    tracing::info!("--- cancel c once it trains, one of its trainers stopped (SIGSTOP) meanwhile");
    let c_done = || job_status(&group, "c")["done"].as_u64().is_some_and(|done| done >= 2);
    wait_until(Duration::from_secs(90), c_done, || cancelled.logs() + &group.logs());
    let (stop, resume) = (nix::sys::signal::Signal::SIGSTOP, nix::sys::signal::Signal::SIGCONT);
    cancelled.trainers.signal(1, stop).expect("stop a trainer");
    raftrain_ok(&["job", "cancel", "c", "--masters", &masters], b"");
    assert_eq!(cancelled.trainer_exit(0, Duration::from_secs(30)), 0, "{}", cancelled.logs());
    let pserver_exit = cancelled.pservers.wait_exit(0, Duration::from_secs(30));
    assert_eq!(pserver_exit, Some(0), "{}", cancelled.logs());
    // Resumed after its pserver left, mid-push most likely: it learns of the cancel from its
    // heartbeat and exits 0, rather than waiting for that pserver without limit.
    cancelled.trainers.signal(1, resume).expect("resume the trainer");
    assert_eq!(cancelled.trainer_exit(1, Duration::from_secs(30)), 0, "{}", cancelled.logs());
    assert_eq!(state_of(&job_list(&group), "c").as_deref(), Some("cancelled"));

    tracing::info!("--- a and b finish, each as well as one process on its data");
    for (job, (train, eval)) in jobs.iter_mut().zip([(&train_a, &eval_a), (&train_b, &eval_b)]) {
        for index in 0..2 {
            assert_eq!(job.trainer_exit(index, Duration::from_secs(240)), 0, "{}", job.logs());
        }
        let status = job_status(&group, &job.name);
        assert_eq!(status["job"], job.name.as_str());
        assert_eq!(status["job_finished"], true, "{status}");
        let recorded = status["eval"]["accuracy"].as_f64().expect("an evaluation");
        let local = local_accuracy(train, eval);
        assert!(
            (recorded - local).abs() <= 0.02,
            "job {}: distributed {recorded} vs local {local}\n{}",
            job.name,
            job.logs()
        );
    }
    let listed = job_list(&group);
    assert_eq!(state_of(&listed, "a").as_deref(), Some("finished"), "{listed}");
    assert_eq!(state_of(&listed, "b").as_deref(), Some("finished"), "{listed}");
    let cancel = raftrain_ok(&["job", "cancel", "a", "--masters", &masters], b"");
    assert!(cancel.contains("had already finished: nothing was cancelled"), "{cancel}");
    assert_eq!(state_of(&job_list(&group), "a").as_deref(), Some("finished"));
    let summary = raftrain_ok(&["status", "--masters", &masters], b"");
    assert!(["a", "b", "c"].iter().all(|name| summary.contains(name)), "{summary}");
}

/// A client of the group's job `name`, for the in-process trainers.
pub(crate) fn client_of(group: &MasterGroup, name: &str) -> MasterClient {
    let options = ClientOptions {
        call_deadline: Some(Duration::from_secs(60)),
        job: name.to_string(),
        ..ClientOptions::default()
    };
    MasterClient::new(&group.addrs, options).expect("valid master addresses")
}

/// The tasks completed in `pass` from `history`, in order.
pub(crate) fn completed_in(history: &Arc<Mutex<History>>, pass: u32) -> Vec<u64> {
    let history = history.lock().expect("history lock");
    history.completions.iter().filter(|(done_pass, ..)| *done_pass == pass).map(|c| c.1).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_progress_checkpoint_redoes_exactly_what_came_after_it() {
    let group = MasterGroup::start(3, &["--job-retention-secs", "1"]);
    let masters = group.addrs.join(",");
    let submit = ["job", "submit", "--masters", &masters, "--name", "r", "--index", "40"];
    let incomplete = crate::command::raftrain(&submit, b"");
    let refused = &incomplete.stderr;
    assert!(!incomplete.success && refused.contains("--shard-size"), "{refused}");
    let mut args = submit.to_vec();
    args.extend(["--shard-size", "1", "--passes", "3"]);
    raftrain_ok(&args, b"");

    tracing::info!("--- one trainer finishes pass 0 and part of pass 1, then stops cleanly");
    let history = Arc::new(Mutex::new(History::default()));
    train_until(&client_of(&group, "r"), &history, 50).await;
    let done_at_checkpoint = completed_in(&history, 1);
    let taken = raftrain_ok(&["job", "checkpoint", "r", "--masters", &masters, "--json"], b"");
    let taken: serde_json::Value = serde_json::from_str(taken.trim()).expect("json");
    assert_eq!(taken["pass"], 1, "{taken}");
    assert_eq!(taken["done"].as_u64(), Some(done_at_checkpoint.len() as u64), "{taken}");
    let id = taken["checkpoint"].as_u64().expect("an id").to_string();

    tracing::info!("--- more work after the checkpoint, then every trainer is killed");
    let work = Duration::from_millis(5);
    let trainers = spawn_consumers(2, "u", work, &history, || client_of(&group, "r"));
    completions_reach(&history, 75, || group.logs()).await;
    trainers.iter().for_each(|trainer| trainer.abort());
    let before_restore = history.lock().expect("history lock").completions.len();

    tracing::info!("--- restore, and new trainers finish the job");
    let restored =
        raftrain_ok(&["job", "restore", "r", "--checkpoint", &id, "--masters", &masters], b"");
    let todo = 40 - done_at_checkpoint.len();
    assert!(restored.contains(&format!("pass 2, {todo} tasks to do")), "{restored}");
    let after = Arc::new(Mutex::new(History::default()));
    let trainers = spawn_consumers(2, "v", work, &after, || client_of(&group, "r"));
    for trainer in trainers {
        trainer.await.expect("a trainer ran to the end");
    }
    let mut redone = completed_in(&after, 1);
    redone.sort_unstable();
    let expected: Vec<u64> = (0..40).filter(|task| !done_at_checkpoint.contains(task)).collect();
    assert_eq!(redone, expected, "pass 1 redoes exactly what was not done at the checkpoint");
    let mut last = completed_in(&after, 2);
    last.sort_unstable();
    assert_eq!(last, (0..40).collect::<Vec<u64>>(), "pass 2 runs whole, each task once");
    assert!(before_restore > 50, "work was done after the checkpoint and thrown away");

    tracing::info!("--- the finished job is removed after its retention (1 s)");
    let removed = || state_of(&job_list(&group), "r").is_none();
    wait_until(Duration::from_secs(30), removed, || group.logs());
}

/// One trainer that takes and finishes tasks until `history` holds `count` completions, every
/// report answered before it stops.
pub(crate) async fn train_until(
    client: &MasterClient,
    history: &Arc<Mutex<History>>,
    count: usize,
) {
    use crate::task_consumer::{finish, register, take_task};
    let mut trainer = register(client, "steady").await;
    let mut pass = 0;
    while history.lock().expect("history lock").completions.len() < count {
        let task = match client.get_task(trainer, pass).await.expect("get a task") {
            client::TaskOutcome::Task(task) => task,
            client::TaskOutcome::PassBefore { current } => {
                pass = current;
                take_task(client, trainer, pass).await
            }
            // It sends no heartbeats: a slow run outlives its lease.
            client::TaskOutcome::UnknownTrainer => {
                trainer = register(client, "steady").await;
                continue;
            }
            other => panic!("a task was expected, got {other:?}"),
        };
        assert!(finish(client, task.task_id, task.epoch).await, "the only trainer's report counts");
        history.lock().expect("history lock").completions.push((
            task.pass,
            task.task_id,
            task.epoch,
        ));
    }
}

/// Polls `done` every 200 ms until it holds; panics after `timeout`, with `logs()`.
pub(crate) fn wait_until(
    timeout: Duration,
    mut done: impl FnMut() -> bool,
    logs: impl Fn() -> String,
) {
    let deadline = std::time::Instant::now() + timeout;
    while !done() {
        assert!(std::time::Instant::now() < deadline, "not within {timeout:?}\n{}", logs());
        std::thread::sleep(Duration::from_millis(200));
    }
}
