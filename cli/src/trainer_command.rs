//! `raftrain trainer`: one trainer, until the job finishes (exit 0) or SIGINT/SIGTERM (it stops
//! after its current task; the master gives unreported work to others). Its other exit
//! statuses are in `exit_code.rs`.

use anyhow::Context as _;
use clap::Args;
use trainer::TrainerConfig;

use crate::exit_code::Configuration;
use crate::runtime_args::RuntimeArgs;

#[derive(Debug, Args)]
pub(crate) struct TrainerArgs {
    #[command(flatten)]
    config: TrainerConfig,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl TrainerArgs {
    /// The trainer's `--name`, its name in the logs (when not given, the trainer makes one up
    /// at start, after logging began).
    pub(crate) fn id(&self) -> Option<String> {
        self.config.name.clone()
    }
}

pub(crate) fn run(args: TrainerArgs) -> anyhow::Result<()> {
    check_configuration(&args.config).context(Configuration)?;
    let runtime = args.runtime.build()?;
    // The signal handler is installed before the trainer starts.
    let shutdown = crate::shutdown::server_shutdown(&runtime);
    let config = args.config;
    let summary =
        crate::runtime_args::serve(&runtime, async move { trainer::run(config, shutdown).await })?;
    let eval = summary.last_eval.map_or_else(String::new, |eval| {
        let accuracy = eval
            .accuracy()
            .map_or_else(String::new, |accuracy| format!(", accuracy {accuracy:.4}"));
        format!("; last evaluation: loss {:.4}{accuracy} on {} examples", eval.loss, eval.examples)
    });
    let seconds = summary.training.as_secs_f64();
    let rate = summary.examples as f64 / seconds.max(1e-9);
    println!(
        "trained on {} examples in {} tasks ({} failed), {seconds:.2} s on tasks ({rate:.0} examples/s){eval}",
        summary.examples, summary.tasks_done, summary.tasks_failed
    );
    Ok(())
}

/// The checks a trainer's flags must pass before it starts, so that each fails with the
/// configuration status: the rules between flags, and the model's sizes (with one feature when
/// the count is left to the dataset, which the trainer reads only once started).
fn check_configuration(config: &TrainerConfig) -> anyhow::Result<()> {
    config.validate()?;
    config.model_config(config.features.unwrap_or(1))?;
    Ok(())
}
