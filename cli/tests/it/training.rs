//! End-to-end training with real processes: 3 masters, 2 pservers and 3 trainers train softmax
//! regression on synthetic blobs to within 2 points of a single-process run over the same data
//! (run in the same test), the saved model evaluates to the same accuracy, linear regression
//! recovers the known weights, and the job finishes within the same bound while a trainer is
//! killed, a new one joins and the master leader is killed. CSV from outside trains too.

use std::time::Duration;

use trainer::evaluation::evaluate_dataset;
use trainer::local::{load_batches, train_locally};
use trainer::model::{ModelConfig, ModelKind};

use crate::command::raftrain_ok;
use crate::training_job::TrainingJob;

pub(crate) const SOFTMAX: [&str; 12] = [
    "--model",
    "softmax",
    "--classes",
    "3",
    "--passes",
    "3",
    "--batch-size",
    "32",
    "--learning-rate",
    "0.05",
    "--optimizer",
    "sgd",
];

pub(crate) fn synth(
    dir: &std::path::Path,
    kind: &str,
    examples: &str,
    noise: &str,
) -> (String, String) {
    let out = dir.join("data");
    raftrain_ok(
        &[
            "recordio",
            "synth",
            "--kind",
            kind,
            "--examples",
            examples,
            "--features",
            "8",
            "--classes",
            "3",
            "--noise",
            noise,
            "--seed",
            "4",
            "--out",
            &out.display().to_string(),
        ],
        b"",
    );
    (
        out.join("train.recordio").display().to_string(),
        out.join("eval.recordio").display().to_string(),
    )
}

/// The accuracy of the same model trained in one process over the same data.
pub(crate) fn local_accuracy(train: &str, eval: &str) -> f64 {
    let model = ModelConfig { kind: ModelKind::Softmax, features: 8, classes: 3, hidden: 64 };
    let optimizer =
        optimizer::OptimizerConfig { learning_rate: 0.05, kind: optimizer::OptimizerKind::Sgd };
    let batches = load_batches(&model, &[train.to_string()], 32).expect("data");
    let run = train_locally(&model, &optimizer, &batches, 3, 1).expect("train");
    evaluate_dataset(&model, &run.params, &[eval.to_string()])
        .expect("eval")
        .accuracy()
        .expect("a classifier")
}

/// The accuracy `raftrain eval --json` reports for a saved model.
fn saved_accuracy(job: &TrainingJob, index: usize, eval: &str) -> f64 {
    let model = job.model_path(index).display().to_string();
    let output = raftrain_ok(
        &["eval", "--model", &model, "--dataset", eval, "--model-kind", "softmax", "--json"],
        b"",
    );
    let json: serde_json::Value = serde_json::from_str(output.trim()).expect("json");
    json["accuracy"].as_f64().expect("accuracy")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn softmax_on_blobs_trains_as_well_as_one_process() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, eval) = synth(dir.path(), "blobs", "3000", "2.5");
    let mut args = vec!["--dataset", &train, "--eval-dataset", &eval];
    args.extend(SOFTMAX);
    let mut job = TrainingJob::start(3, 2, dir.path(), &args);
    for _ in 0..3 {
        job.spawn_trainer();
    }
    job.wait_trainers(Duration::from_secs(120));
    let status = job.masters.status().await;
    let recorded = status.eval.expect("an evaluation was recorded");
    let local = local_accuracy(&train, &eval);
    tracing::info!(distributed = recorded.accuracy, local, "--- accuracy");
    assert!(local > 0.7 && local < 0.995, "the data is neither trivial nor hopeless: {local}");
    assert!(
        (f64::from(recorded.accuracy) - local).abs() <= 0.02,
        "distributed {} vs local {local}\n{}",
        recorded.accuracy,
        job.logs()
    );
    // The pservers checkpoint every second: status shows each slot's newest record.
    let masters = job.masters.addrs.join(",");
    let checkpointed = |json: &serde_json::Value| {
        let pservers = json["pservers"].as_array().cloned().unwrap_or_default();
        pservers.len() == 2
            && pservers
                .iter()
                .all(|pserver| pserver["checkpoint_step"].as_u64().is_some_and(|step| step > 0))
    };
    let mut json = serde_json::Value::Null;
    for _ in 0..50 {
        json =
            serde_json::from_str(&raftrain_ok(&["status", "--masters", &masters, "--json"], b""))
                .expect("json");
        if checkpointed(&json) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(checkpointed(&json), "{json}");
    assert!(
        json["dispatched"].as_u64() >= Some(8 * 3),
        "every task of every pass was dispatched: {json}"
    );
    assert!(json["trainers"][0]["last_heartbeat_ms_ago"].as_u64().is_some(), "{json}");
    let reported: u64 = json["trainers"]
        .as_array()
        .expect("trainers")
        .iter()
        .filter_map(|trainer| trainer["tasks_done"].as_u64())
        .sum();
    assert!(reported > 0, "trainers report their finished tasks in heartbeats: {json}");
    let saved = saved_accuracy(&job, 0, &eval);
    assert!(
        (saved - f64::from(recorded.accuracy)).abs() < 1e-4,
        "saved model {saved} vs recorded {}",
        recorded.accuracy
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn linear_regression_recovers_the_known_weights() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, eval) = synth(dir.path(), "linear", "4000", "0.1");
    let args = [
        "--dataset",
        &train,
        "--eval-dataset",
        &eval,
        "--model",
        "linear",
        "--passes",
        "3",
        "--batch-size",
        "16",
        "--learning-rate",
        "0.05",
    ];
    let mut job = TrainingJob::start(1, 2, dir.path(), &args);
    job.spawn_trainer();
    job.spawn_trainer();
    job.wait_trainers(Duration::from_secs(120));
    let truth: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("data/truth.json")).expect("truth"))
            .expect("json");
    let params = trainer::safetensors::read_safetensors(&job.model_path(0)).expect("saved").params;
    let weights = &params["linear.weight"];
    for (index, want) in truth["weights"].as_array().expect("weights").iter().enumerate() {
        let want = want.as_f64().expect("number") as f32;
        assert!(
            (weights[index] - want).abs() < 0.05,
            "weight {index}: {} vs {want}",
            weights[index]
        );
    }
    let bias = truth["bias"].as_f64().expect("bias") as f32;
    assert!(
        (params["linear.bias"][0] - bias).abs() < 0.05,
        "bias {} vs {bias}",
        params["linear.bias"][0]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_survives_a_killed_trainer_a_newcomer_and_a_killed_leader() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, eval) = synth(dir.path(), "blobs", "3000", "2.5");
    let mut args = vec!["--dataset", &train, "--eval-dataset", &eval, "--push-every", "1"];
    args.extend(SOFTMAX);
    let mut job = TrainingJob::start(3, 2, dir.path(), &args);
    for _ in 0..3 {
        job.spawn_trainer();
    }
    tracing::info!("--- kill a trainer mid-pass; a new one joins");
    wait_for_done(&job, 5).await;
    job.kill_trainer(0);
    job.spawn_trainer();
    tracing::info!("--- kill the master leader");
    wait_for_done(&job, 15).await;
    let leader = job.masters.leader_index().await;
    job.masters.kill(leader);
    job.wait_trainers(Duration::from_secs(180));
    job.masters.spawn(leader);
    let status = job.masters.status().await;
    assert!(status.job_finished, "every pass finished");
    let recorded = status.eval.expect("an evaluation was recorded");
    let local = local_accuracy(&train, &eval);
    assert!(
        (f64::from(recorded.accuracy) - local).abs() <= 0.02,
        "distributed {} vs local {local}\n{}",
        recorded.accuracy,
        job.logs()
    );
}

/// Waits until the master counts `done` finished tasks in all.
pub(crate) async fn wait_for_done(job: &TrainingJob, done: u64) {
    for _ in 0..1200 {
        let status = job.masters.client().status().await;
        let finished = |status: &client::JobStatus| {
            let per_pass = status.todo + status.pending + status.done + status.failed;
            status.done + u64::from(status.pass) * per_pass
        };
        if status.is_ok_and(|status| finished(&status) >= done) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the job never reached {done} finished tasks\n{}", job.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn csv_from_outside_converts_and_trains() {
    let dir = tempfile::tempdir().expect("temp");
    let data = dir.path().join("blobs.recordio").display().to_string();
    let csv = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/blobs.csv");
    raftrain_ok(
        &[
            "recordio",
            "convert",
            "--from",
            "csv",
            "--skip-header",
            csv,
            "--out",
            &data,
            "--max-chunk-bytes",
            "512",
        ],
        b"",
    );
    let args = [
        "--dataset",
        &data,
        "--eval-dataset",
        &data,
        "--model",
        "softmax",
        "--classes",
        "3",
        "--passes",
        "5",
        "--batch-size",
        "8",
        "--learning-rate",
        "0.1",
    ];
    let mut job = TrainingJob::start(1, 1, dir.path(), &args);
    job.spawn_trainer();
    let output = job.wait_trainers(Duration::from_secs(120)).remove(0);
    let status = job.masters.status().await;
    let accuracy = status.eval.expect("recorded").accuracy;
    assert!(accuracy > 0.9, "accuracy {accuracy} on three separated blobs\n{output}");
}

/// A learning rate that makes the model diverge yields gradients that are infinite or NaN, or
/// finite but overflowing a parameter: the trainer drops the first with a warning, the
/// pservers refuse the second and the trainer drops them too, and the job still finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_diverging_model_does_not_stop_the_job() {
    let dir = tempfile::tempdir().expect("temp");
    let (train, _) = synth(dir.path(), "linear", "2000", "0.1");
    let args =
        ["--dataset", &train, "--model", "linear", "--passes", "2", "--learning-rate", "1000"];
    let mut job = TrainingJob::start(1, 1, dir.path(), &args);
    job.spawn_trainer();
    job.wait_trainers(Duration::from_secs(120));
    let logs = job.logs();
    let diverged = logs.contains("holds NaN or an infinity") || logs.contains("would overflow");
    assert!(diverged, "the model did diverge\n{logs}");
    assert!(job.masters.status().await.job_finished);
}
