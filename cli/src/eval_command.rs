//! `raftrain eval`: scores a saved model (safetensors from `trainer --model-out`) on a dataset,
//! without a cluster.

use std::path::PathBuf;

use clap::Args;
use trainer::evaluation::evaluate_dataset;
use trainer::model::ModelKind;
use trainer::saved_model;

#[derive(Debug, Args)]
pub(crate) struct EvalArgs {
    /// The saved model (its kind and sizes are read from the file).
    #[arg(long)]
    model: PathBuf,
    /// RecordIO files or globs to evaluate on, comma-separated.
    #[arg(long, value_delimiter = ',', required = true)]
    dataset: Vec<String>,
    /// Check that the file holds this kind of model (linear, logistic, softmax, mlp).
    #[arg(long, value_parser = clap::value_parser!(ModelKind))]
    model_kind: Option<ModelKind>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(args: &EvalArgs) -> anyhow::Result<()> {
    let (config, params) = saved_model::load(&args.model)?;
    if let Some(kind) = args.model_kind {
        anyhow::ensure!(
            kind == config.kind,
            "--model-kind {} but {} holds a {} model",
            kind.name(),
            args.model.display(),
            config.kind.name()
        );
    }
    let evaluation = evaluate_dataset(&config, &params, &args.dataset)?;
    if args.json {
        let json = serde_json::json!({"model": config.kind.name(), "examples": evaluation.examples, "loss": evaluation.loss, "accuracy": evaluation.accuracy()});
        println!("{json}");
    } else {
        let accuracy = evaluation
            .accuracy()
            .map_or_else(String::new, |accuracy| format!("  accuracy {accuracy:.4}"));
        println!(
            "{} model on {} examples: loss {:.6}{accuracy}",
            config.kind.name(),
            evaluation.examples,
            evaluation.loss
        );
    }
    Ok(())
}
