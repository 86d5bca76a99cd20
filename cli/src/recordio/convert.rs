//! `recordio convert`: CSV or LibSVM text into RecordIO of `Example` records. A malformed line
//! (not a number, not finite, a CSV row whose column count differs from the first row's) is
//! an error naming its file, line and column, and no partial output is left behind.

use super::{example_format, output_file::OutputFile};
use anyhow::Context as _;
use clap::{Args, ValueEnum};
use proto::Message as _;
use std::io::BufRead;
use std::path::PathBuf;
use storage::recordio::{Compressor, Writer, WriterOptions, DEFAULT_MAX_CHUNK_BYTES};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TextFormat {
    /// Comma-separated numbers; the label is the last column unless --label-column says.
    Csv,
    /// `label index:value ...` with strictly ascending indices.
    Libsvm,
}

#[derive(Debug, Args)]
pub(crate) struct ConvertArgs {
    /// The input text format.
    #[arg(long = "from", value_enum)]
    format: TextFormat,
    /// The input file, or `-` for standard input.
    input: PathBuf,
    /// The RecordIO file to create (replaced atomically if it exists).
    #[arg(long)]
    out: PathBuf,
    /// CSV only: the 1-based column holding the label (default: the last).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    label_column: Option<u32>,
    /// CSV only: skip the first line (a header).
    #[arg(long)]
    skip_header: bool,
    /// How each chunk's payload is compressed.
    #[arg(long, default_value_t = Compressor::None)]
    compressor: Compressor,
    /// Start a new chunk when the next record would take the uncompressed chunk past this size.
    #[arg(long, default_value_t = DEFAULT_MAX_CHUNK_BYTES)]
    max_chunk_bytes: usize,
}

pub(crate) fn run(args: &ConvertArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.max_chunk_bytes > 0, "--max-chunk-bytes must be at least 1");
    let input = open_input(args)?;
    let mut output = OutputFile::create(&args.out)?;
    let options =
        WriterOptions { compressor: args.compressor, max_chunk_bytes: args.max_chunk_bytes };
    let mut writer = Writer::new(output.writer(), options);
    let input_name = args.input.display().to_string();
    let skip = usize::from(args.skip_header);
    let mut csv_columns = None;
    for (line_index, line) in input.lines().enumerate().skip(skip) {
        let line_number = line_index + 1;
        let line = line.with_context(|| format!("{input_name}:{line_number}: read"))?;
        if line.trim().is_empty() {
            continue;
        }
        let example = parse(args, &line)
            .and_then(|example| same_shape(args, &mut csv_columns, example))
            .map_err(|reason| anyhow::anyhow!("{input_name}:{line_number}: {reason}"))?;
        writer.write_record(&example.encode_to_vec()).context("write a record")?;
    }
    writer.finish().with_context(|| format!("finish {}", args.out.display()))?;
    output.commit()
}

fn parse(args: &ConvertArgs, line: &str) -> Result<proto::example::Example, String> {
    match args.format {
        TextFormat::Csv => {
            let label_column = args.label_column.map(|column| column as usize - 1);
            example_format::parse_csv_line(line, label_column)
        }
        TextFormat::Libsvm => example_format::parse_libsvm_line(line),
    }
}

/// CSV rows must all have the first row's column count: a ragged row is a broken export
/// (a missing or extra field), and converting it would shift features silently. The error
/// names the first column that is missing or extra.
fn same_shape(
    args: &ConvertArgs,
    csv_columns: &mut Option<usize>,
    example: proto::example::Example,
) -> Result<proto::example::Example, String> {
    if !matches!(args.format, TextFormat::Csv) {
        return Ok(example);
    }
    let columns = example.dense.len() + 1;
    let expected = *csv_columns.get_or_insert(columns);
    if columns != expected {
        return Err(format!(
            "column {}: the line has {columns} columns, the first line has {expected}",
            columns.min(expected) + 1
        ));
    }
    Ok(example)
}

fn open_input(args: &ConvertArgs) -> anyhow::Result<Box<dyn BufRead>> {
    if args.label_column.is_some() && matches!(args.format, TextFormat::Libsvm) {
        anyhow::bail!("--label-column applies to --from csv only (LibSVM puts the label first)");
    }
    if args.input.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file = std::fs::File::open(&args.input)
        .with_context(|| format!("open {}", args.input.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}
