//! `recordio write`: records from standard input, one per line (hex, or the raw line with
//! `--text`), into a new RecordIO file that appears only when every line was good.

use super::{hex, output_file::OutputFile};
use anyhow::Context as _;
use clap::Args;
use std::io::BufRead;
use std::path::PathBuf;
use storage::recordio::{Compressor, Writer, WriterOptions, DEFAULT_MAX_CHUNK_BYTES};

#[derive(Debug, Args)]
pub(crate) struct WriteArgs {
    /// The file to create (replaced atomically if it exists).
    #[arg(long)]
    out: PathBuf,
    /// How each chunk's payload is compressed.
    #[arg(long, default_value_t = Compressor::None)]
    compressor: Compressor,
    /// Start a new chunk when the next record would take the uncompressed chunk past this size.
    #[arg(long, default_value_t = DEFAULT_MAX_CHUNK_BYTES)]
    max_chunk_bytes: usize,
    /// Take each line's bytes as they are instead of decoding lowercase hex.
    #[arg(long)]
    text: bool,
}

pub(crate) fn run(args: &WriteArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.max_chunk_bytes > 0, "--max-chunk-bytes must be at least 1");
    let mut output = OutputFile::create(&args.out)?;
    let options =
        WriterOptions { compressor: args.compressor, max_chunk_bytes: args.max_chunk_bytes };
    let mut writer = Writer::new(output.writer(), options);
    let stdin = std::io::stdin().lock();
    for (line_index, line) in stdin.split(b'\n').enumerate() {
        let line_number = line_index + 1;
        let line = line.with_context(|| format!("read standard input line {line_number}"))?;
        let line = line.strip_suffix(b"\r").unwrap_or(&line);
        let record = if args.text { line.to_vec() } else { decode_line(line, line_number)? };
        writer.write_record(&record).with_context(|| format!("write record {line_number}"))?;
    }
    writer.finish().with_context(|| format!("finish {}", args.out.display()))?;
    output.commit()
}

fn decode_line(line: &[u8], line_number: usize) -> anyhow::Result<Vec<u8>> {
    let text = std::str::from_utf8(line)
        .map_err(|_| anyhow::anyhow!("standard input line {line_number}: not hex (not UTF-8)"))?;
    hex::decode(text.trim()).map_err(|reason| {
        anyhow::anyhow!("standard input line {line_number}: {reason} (use --text for raw lines)")
    })
}
