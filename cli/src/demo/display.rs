//! What the demo shows while it runs: for each job, a bar per pass (done of the pass's tasks,
//! with pending and todo), examples/s, the latest evaluation, the leader and term; and every
//! fault as a line. Jobs trained at once are shown side by side, one block of bars each.

use std::time::Instant;

use client::JobStatus;
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct Display {
    bars: MultiProgress,
    passes: Vec<ProgressBar>,
    started: Instant,
    examples_per_task: f64,
}

impl Display {
    /// The one set of bars every job of the demo draws into.
    pub fn bars() -> MultiProgress {
        MultiProgress::with_draw_target(ProgressDrawTarget::stderr())
    }

    /// The bars of one job (`label` before each, empty when the demo trains one job).
    pub fn new(
        bars: &MultiProgress,
        label: &str,
        passes: u32,
        (tasks_per_pass, examples_per_task): (u64, f64),
    ) -> Self {
        let template =
            format!("{label}pass {{prefix:>2}} [{{bar:30}}] {{pos:>4}}/{{len}} tasks {{msg}}");
        let style = ProgressStyle::with_template(&template)
            .expect("a valid template")
            .progress_chars("=> ");
        let passes = (0..passes)
            .map(|pass| {
                let bar = bars.add(ProgressBar::new(tasks_per_pass));
                bar.set_style(style.clone());
                bar.set_prefix((pass + 1).to_string());
                bar
            })
            .collect();
        Self { bars: bars.clone(), passes, started: Instant::now(), examples_per_task }
    }

    /// Prints a line above the bars (or plainly, when stderr is not a terminal).
    pub fn announce(&self, line: &str) {
        if self.bars.is_hidden() {
            println!("{line}");
        } else {
            let _ = self.bars.println(line);
        }
    }

    pub fn update(&self, status: &JobStatus, finished_tasks: u64) {
        let per_pass = status.todo + status.pending + status.done + status.failed;
        let rate = finished_tasks as f64 * self.examples_per_task
            / self.started.elapsed().as_secs_f64().max(1e-3);
        let (leader, term) = (status.group.leader_id.unwrap_or(0), status.group.term);
        let eval = status.eval.as_ref().map_or_else(String::new, |eval| {
            format!(" | eval loss {:.3} acc {:.3}", eval.loss, eval.accuracy)
        });
        for (pass, bar) in self.passes.iter().enumerate() {
            let pass = pass as u32;
            let position = match pass.cmp(&status.pass) {
                std::cmp::Ordering::Less => per_pass,
                std::cmp::Ordering::Equal if !status.job_finished => status.done + status.failed,
                std::cmp::Ordering::Equal => per_pass,
                std::cmp::Ordering::Greater => 0,
            };
            bar.set_length(per_pass.max(1));
            bar.set_position(position);
            if pass == status.pass && !status.job_finished {
                bar.set_message(format!(
                    "({} pending, {} todo) {rate:.0} ex/s | leader {leader} term {term}{eval}",
                    status.pending, status.todo
                ));
            } else if position == per_pass {
                bar.set_message(String::new());
            }
        }
    }

    pub fn finish(&self) {
        for bar in &self.passes {
            bar.finish();
        }
    }
}
