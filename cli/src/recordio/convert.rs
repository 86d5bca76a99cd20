//! `recordio convert`: CSV (`csv_input.rs`, on the `csv` crate) or LibSVM text into RecordIO of
//! `Example` records. A malformed row (not a number, not finite, a CSV row whose column count
//! differs from the first row's, a label that is no class) is an error naming its file, line
//! and column, and no partial output is left behind: neither the RecordIO file nor, with text
//! labels, the class mapping written beside it.

use super::class_names::{classes_path, ClassNames};
use super::csv_input::{CsvExamples, CsvOptions, LabelColumn};
use super::{example_format, output_file::OutputFile};
use anyhow::Context as _;
use clap::{Args, ValueEnum};
use proto::example::Example;
use proto::Message as _;
use std::io::{BufRead, Write as _};
use std::path::PathBuf;
use storage::recordio::{Compressor, Writer, WriterOptions, DEFAULT_MAX_CHUNK_BYTES};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum TextFormat {
    /// Comma-separated values (RFC 4180 quoting, a UTF-8 BOM and CRLF accepted); the label is
    /// the last column unless --label-column says.
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
    /// CSV only: the column holding the label, by 1-based number or, with --header, by name
    /// (default: the last).
    #[arg(long)]
    label_column: Option<LabelColumn>,
    /// CSV only: the first row is a header naming the columns (errors then name them too).
    #[arg(long = "header", visible_alias = "skip-header")]
    header: bool,
    /// CSV only: labels are class names (any text), mapped to class ids 0, 1, 2, ... in order
    /// of first appearance; the mapping is written beside the output as `OUT.classes.json`
    /// (`{"classes": ["name of class 0", ...]}`).
    #[arg(long)]
    text_labels: bool,
    /// CSV only: text labels with the class ids of an earlier conversion's `OUT.classes.json`
    /// (for an evaluation split); a label not in it is an error. Implies --text-labels.
    #[arg(long)]
    classes_from: Option<PathBuf>,
    /// How each chunk's payload is compressed.
    #[arg(long, default_value_t = Compressor::None)]
    compressor: Compressor,
    /// Start a new chunk when the next record would take the uncompressed chunk past this size.
    #[arg(long, default_value_t = DEFAULT_MAX_CHUNK_BYTES)]
    max_chunk_bytes: usize,
}

pub(crate) fn run(args: &ConvertArgs) -> anyhow::Result<()> {
    check(args)?;
    let input = open_input(args)?;
    let mut output = OutputFile::create(&args.out)?;
    let options =
        WriterOptions { compressor: args.compressor, max_chunk_bytes: args.max_chunk_bytes };
    let mut writer = Writer::new(output.writer(), options);
    let mut write =
        |example: Example| writer.write_record(&example.encode_to_vec()).context("write a record");
    let input_name = args.input.display().to_string();
    let classes = match args.format {
        TextFormat::Csv => convert_csv(args, input, &input_name, &mut write)?,
        TextFormat::Libsvm => {
            convert_libsvm(input, &input_name, &mut write)?;
            None
        }
    };
    writer.finish().with_context(|| format!("finish {}", args.out.display()))?;
    if let Some(classes) = classes {
        let path = classes_path(&args.out);
        let mut mapping = OutputFile::create(&path)?;
        writeln!(mapping.writer(), "{}", classes.to_json())
            .with_context(|| format!("write {}", path.display()))?;
        mapping.commit()?;
    }
    output.commit()
}

fn check(args: &ConvertArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.max_chunk_bytes > 0, "--max-chunk-bytes must be at least 1");
    let csv_only = args.label_column.is_some()
        || args.header
        || args.text_labels
        || args.classes_from.is_some();
    if csv_only && matches!(args.format, TextFormat::Libsvm) {
        anyhow::bail!(
            "--label-column, --header, --text-labels and --classes-from apply to --from csv only"
        );
    }
    Ok(())
}

/// Converts CSV rows; with text labels, the class mapping they used.
fn convert_csv(
    args: &ConvertArgs,
    input: Box<dyn BufRead>,
    input_name: &str,
    write: &mut impl FnMut(Example) -> anyhow::Result<()>,
) -> anyhow::Result<Option<ClassNames>> {
    let classes = match (&args.classes_from, args.text_labels) {
        (Some(path), _) => Some(ClassNames::read(path)?),
        (None, true) => Some(ClassNames::default()),
        (None, false) => None,
    };
    let options =
        CsvOptions { header: args.header, label_column: args.label_column.clone(), classes };
    let mut examples = CsvExamples::new(input, input_name, options)?;
    while let Some(example) = examples.next_example()? {
        write(example)?;
    }
    Ok(examples.into_classes())
}

fn convert_libsvm(
    input: Box<dyn BufRead>,
    input_name: &str,
    write: &mut impl FnMut(Example) -> anyhow::Result<()>,
) -> anyhow::Result<()> {
    for (line_index, line) in input.lines().enumerate() {
        let line_number = line_index + 1;
        let line = line.with_context(|| format!("{input_name}:{line_number}: read"))?;
        if line.trim().is_empty() {
            continue;
        }
        let example = example_format::parse_libsvm_line(&line)
            .map_err(|reason| anyhow::anyhow!("{input_name}:{line_number}: {reason}"))?;
        write(example)?;
    }
    Ok(())
}

fn open_input(args: &ConvertArgs) -> anyhow::Result<Box<dyn BufRead>> {
    if args.input.as_os_str() == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let file = std::fs::File::open(&args.input)
        .with_context(|| format!("open {}", args.input.display()))?;
    Ok(Box::new(std::io::BufReader::new(file)))
}
