//! The masters' dashboard in a real browser while a real job trains and its leader is killed:
//! three masters (each serving the page on its HTTP port), two pservers, two trainers (one
//! named with markup), softmax with evaluation after each pass. Headless chromium loads the
//! page of a master that is not the leader, several times along the run, and each look must
//! show no console message or uncaught exception, the follower saying it is one and naming
//! the leader, the progress, the hostile name as text, and accuracy points: more after the
//! job than before the kill, and the new leader on the timeline. The screenshot and every
//! process's log are kept under `target/tmp/dashboard-browser/`.

use std::path::PathBuf;
use std::time::Duration;

use crate::headless_browser::{HeadlessBrowser, Look};
use crate::training::synth;
use crate::training_job::TrainingJob;

/// A trainer name a careless page would turn into an element (and run its handler).
const HOSTILE_NAME: &str = "<img src=x onerror=alert(1)>\"&";
const HOSTILE_NAME_ESCAPED: &str = "&lt;img src=x onerror=alert(1)&gt;\"&amp;";
const PASSES: u32 = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_follows_a_job_through_a_leader_kill() {
    let dir = logs_dir();
    let mut browser = HeadlessBrowser::find(&dir);
    let (train, eval) = synth(&dir, "blobs", "8000", "2.5");
    let envs: Vec<(usize, &str, &str)> =
        (0..3).map(|index| (index, "RAFTRAIN_METRICS_LISTEN", "127.0.0.1:0")).collect();
    let passes = PASSES.to_string();
    let trainer_args = [
        ["--dataset", &train, "--eval-dataset", &eval, "--push-every", "1"].as_slice(),
        ["--model", "softmax", "--classes", "3", "--passes", &passes, "--batch-size", "32"]
            .as_slice(),
        ["--learning-rate", "0.05", "--optimizer", "sgd"].as_slice(),
    ]
    .concat();
    let mut job = TrainingJob::start_with_env(3, 2, &dir, (&[], &envs), &trainer_args);
    job.spawn_trainer_with(&["--name", HOSTILE_NAME]);
    job.spawn_trainer_with(&["--name", "plain"]);

    tracing::info!(
        "--- after the first evaluation, a follower's page shows the leader and the job"
    );
    let evaluated = wait_for_evaluations(&job, 1).await;
    let leader = job.masters.leader_index().await;
    let watched = (leader + 1) % 3;
    let url = format!("http://{}/", job.masters.metrics_addr(watched).await);
    // The watched master records what its replica applied once a second: a look or two may
    // come before it saw the evaluation.
    let before = look_until(&mut browser, &url, |look| {
        accuracy_points(look) >= evaluated.min(1) && leader_shown(look, leader as u64 + 1)
    });
    check_page(&before, leader as u64 + 1, &job, true);
    assert!(before.dom.contains(": follower, showing the view of leader"), "{}", before.dom);
    let points_before = accuracy_points(&before);

    tracing::info!("--- SIGKILL the leader; the watched page names the new one on its timeline");
    job.masters.kill(leader);
    let new_leader = wait_for_new_leader(&job, leader).await;
    let after_kill = look_until(&mut browser, &url, |look| {
        timeline_names(look, new_leader as u64 + 1) && leader_shown(look, new_leader as u64 + 1)
    });
    check_page(&after_kill, new_leader as u64 + 1, &job, true);

    tracing::info!("--- the job finishes: the accuracy chart gained a point per pass");
    job.wait_trainers(Duration::from_secs(240));
    let finished = look_until(&mut browser, &url, |look| {
        accuracy_points(look) >= PASSES as usize && look.dom.contains("finished")
    });
    check_page(&finished, new_leader as u64 + 1, &job, false);
    assert!(accuracy_points(&finished) > points_before, "{}", finished.dom);
    let console = browser.screenshot(&url, &dir.join("dashboard.png"));
    assert!(console.is_empty(), "console messages while taking the screenshot: {console:?}");
    keep_master_logs(&job, &dir);
    println!("dashboard screenshot and logs kept in {}", dir.display());
}

/// `target/tmp/dashboard-browser/`, emptied: the test's logs and the screenshot stay there.
fn logs_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("dashboard-browser");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create the test's log directory");
    dir
}

fn look(browser: &mut HeadlessBrowser, url: &str) -> Look {
    tokio::task::block_in_place(|| browser.dump_dom(url))
}

/// Looks again (each look polls the view a few times) until `wanted` holds, for about a minute.
fn look_until(browser: &mut HeadlessBrowser, url: &str, wanted: impl Fn(&Look) -> bool) -> Look {
    let mut last = look(browser, url);
    for _ in 0..12 {
        if wanted(&last) {
            return last;
        }
        std::thread::sleep(Duration::from_secs(2));
        last = look(browser, url);
    }
    assert!(wanted(&last), "the page never showed what was expected:\n{}", last.dom);
    last
}

/// What every look must show: no console message, no counted error, the leader, the job's
/// progress, and no trainer name as markup (while trainers run, the hostile one as text).
fn check_page(look: &Look, leader_id: u64, job: &TrainingJob, trainers_run: bool) {
    assert!(look.console.is_empty(), "console messages: {:?}\n{}", look.console, job.logs());
    assert!(!look.dom.contains("data-errors"), "the page counted errors:\n{}", look.dom);
    assert!(leader_shown(look, leader_id), "leader {leader_id} not shown:\n{}", look.dom);
    assert!(look.dom.contains("class=\"job-name\">job job<"), "no job shown:\n{}", look.dom);
    assert!(look.dom.contains("class=\"done-label\">done: "), "no progress:\n{}", look.dom);
    let named = look.dom.contains(HOSTILE_NAME_ESCAPED);
    assert!(named || !trainers_run, "the name is not shown as text:\n{}", look.dom);
    assert!(!look.dom.contains("<img"), "a trainer name became markup:\n{}", look.dom);
}

fn leader_shown(look: &Look, leader_id: u64) -> bool {
    look.dom.contains(&format!("<p id=\"leader\">leader: master {leader_id}, term "))
}

fn timeline_names(look: &Look, leader_id: u64) -> bool {
    look.dom.contains(&format!("master {leader_id} leads in term"))
}

fn accuracy_points(look: &Look) -> usize {
    look.dom.matches("class=\"accuracy-point\"").count()
}

/// Waits until `count` evaluations are recorded; the newest evaluated pass count.
async fn wait_for_evaluations(job: &TrainingJob, count: usize) -> usize {
    for _ in 0..2400 {
        let status = job.masters.client().status().await;
        if let Ok(Some(eval)) = status.map(|status| status.eval) {
            let evaluated = eval.pass as usize + 1;
            if evaluated >= count {
                return evaluated;
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no evaluation within two minutes\n{}", job.logs());
}

async fn wait_for_new_leader(job: &TrainingJob, old: usize) -> usize {
    for _ in 0..600 {
        let leader = job.masters.leader_index().await;
        if leader != old {
            return leader;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no new leader within 30 s\n{}", job.logs());
}

fn keep_master_logs(job: &TrainingJob, dir: &std::path::Path) {
    for index in 0..3 {
        let kept = dir.join(format!("master-{}.log", index + 1));
        let _ = std::fs::copy(job.masters.log_path(index), kept);
    }
}
