//! CSV rows into `Example`s, read with the `csv` crate: quoted fields (a comma, a doubled
//! quote or a line break inside quotes), a UTF-8 byte-order mark, LF or CRLF line ends, an
//! optional header row, spaces around fields trimmed, blank lines skipped. The label is one
//! column (by 1-based number, or by name when there is a header; the last by default), a
//! number, or with text labels a class name mapped to a class id ([`ClassNames`]). Every
//! other field is a finite number. Every error names the file, the line and the column (with
//! its header name when there is one).

use std::io::Read;
use std::str::FromStr;

use proto::example::Example;

use super::class_names::ClassNames;

/// Which column holds the label.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LabelColumn {
    /// 1-based.
    Number(usize),
    /// A header name.
    Name(String),
}

impl FromStr for LabelColumn {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text.parse::<usize>() {
            Ok(0) => Err("columns are numbered from 1".into()),
            Ok(number) => Ok(Self::Number(number)),
            Err(_) if text.is_empty() => Err("empty".into()),
            Err(_) => Ok(Self::Name(text.to_string())),
        }
    }
}

/// How the rows are read.
#[derive(Debug, Clone, Default)]
pub(crate) struct CsvOptions {
    /// The first row names the columns.
    pub(crate) header: bool,
    /// `None`: the last column.
    pub(crate) label_column: Option<LabelColumn>,
    /// Labels are class names (`Some`), or numbers (`None`).
    pub(crate) classes: Option<ClassNames>,
}

/// The examples of one CSV input, read one at a time.
pub(crate) struct CsvExamples<R: Read> {
    reader: csv::Reader<R>,
    input_name: String,
    headers: Option<csv::StringRecord>,
    label_column: Option<LabelColumn>,
    classes: Option<ClassNames>,
    /// The first row's column count, which every row must have.
    columns: Option<usize>,
    record: csv::StringRecord,
}

impl<R: Read> CsvExamples<R> {
    /// Reads the header at once when `options.header` says there is one.
    pub(crate) fn new(input: R, input_name: &str, options: CsvOptions) -> anyhow::Result<Self> {
        if matches!(options.label_column, Some(LabelColumn::Name(_))) && !options.header {
            anyhow::bail!("--label-column by name needs a header row (--header)");
        }
        let mut reader = csv::ReaderBuilder::new()
            .has_headers(options.header)
            .flexible(true)
            .trim(csv::Trim::All)
            .from_reader(input);
        let headers = match options.header {
            true => Some(reader.headers().map_err(|error| read_error(input_name, &error))?.clone()),
            false => None,
        };
        let examples = Self {
            reader,
            input_name: input_name.to_string(),
            columns: headers.as_ref().map(csv::StringRecord::len),
            headers,
            label_column: options.label_column,
            classes: options.classes,
            record: csv::StringRecord::new(),
        };
        examples.check_label_name()?;
        Ok(examples)
    }

    /// The next row's example, `None` at the end.
    pub(crate) fn next_example(&mut self) -> anyhow::Result<Option<Example>> {
        let more = self
            .reader
            .read_record(&mut self.record)
            .map_err(|error| read_error(&self.input_name, &error))?;
        if !more {
            return Ok(None);
        }
        let line = self.record.position().map_or(0, csv::Position::line);
        self.example()
            .map(Some)
            .map_err(|reason| anyhow::anyhow!("{}:{line}: {reason}", self.input_name))
    }

    /// The class names met so far (text labels only).
    pub(crate) fn into_classes(self) -> Option<ClassNames> {
        self.classes
    }

    fn example(&mut self) -> Result<Example, String> {
        let columns = self.record.len();
        let expected = *self.columns.get_or_insert(columns);
        if columns != expected {
            let column = columns.min(expected) + 1;
            return Err(format!(
                "{}: the line has {columns} columns, the first line has {expected}",
                self.column_name(column)
            ));
        }
        let label_index = self.label_index(columns)?;
        // Lent out while the fields are read, as reading a label may add a class.
        let record = std::mem::take(&mut self.record);
        let example = self.fields(&record, label_index);
        self.record = record;
        example
    }

    fn fields(
        &mut self,
        record: &csv::StringRecord,
        label_index: usize,
    ) -> Result<Example, String> {
        let mut example = Example::default();
        for (index, field) in record.iter().enumerate() {
            if index == label_index {
                example.label = self.label(field, index + 1)?;
            } else {
                example.dense.push(self.number(field, index + 1)?);
            }
        }
        Ok(example)
    }

    fn label(&mut self, field: &str, column: usize) -> Result<f32, String> {
        let Some(classes) = self.classes.as_mut() else { return self.number(field, column) };
        match classes.id_of(field) {
            Ok(id) => Ok(id as f32),
            Err(reason) => Err(format!("{}: {reason}", self.column_name(column))),
        }
    }

    fn number(&self, field: &str, column: usize) -> Result<f32, String> {
        match field.parse::<f32>() {
            Ok(value) if value.is_finite() => Ok(value),
            _ => Err(format!("{}: {field:?} is not a finite number", self.column_name(column))),
        }
    }

    /// The label's 0-based index in a row of `columns`.
    fn label_index(&self, columns: usize) -> Result<usize, String> {
        match &self.label_column {
            None => Ok(columns - 1),
            Some(LabelColumn::Number(number)) if *number <= columns => Ok(number - 1),
            Some(LabelColumn::Number(number)) => {
                Err(format!("label column {number} does not exist: the line has {columns} columns"))
            }
            Some(LabelColumn::Name(name)) => self.named_index(name).ok_or_else(|| {
                format!("label column {name:?} is not in the header") // checked at the start
            }),
        }
    }

    fn named_index(&self, name: &str) -> Option<usize> {
        self.headers.as_ref()?.iter().position(|header| header == name)
    }

    fn check_label_name(&self) -> anyhow::Result<()> {
        let Some(LabelColumn::Name(name)) = &self.label_column else { return Ok(()) };
        anyhow::ensure!(
            self.named_index(name).is_some(),
            "{}:1: label column {name:?} is not in the header",
            self.input_name
        );
        Ok(())
    }

    /// "column N", with the header's name for it when there is one.
    fn column_name(&self, column: usize) -> String {
        match self.headers.as_ref().and_then(|headers| headers.get(column - 1)) {
            Some(name) => format!("column {column} ({name:?})"),
            None => format!("column {column}"),
        }
    }
}

/// A read error of the csv crate (I/O, or a field that is not UTF-8) with the file and line.
fn read_error(input_name: &str, error: &csv::Error) -> anyhow::Error {
    let line = error.position().map_or(0, csv::Position::line);
    let reason = match error.kind() {
        csv::ErrorKind::Utf8 { err, .. } => {
            format!("column {}: not UTF-8 text", err.field() + 1)
        }
        _ => error.to_string(),
    };
    anyhow::anyhow!("{input_name}:{line}: {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples (or the first error) of `text` read with `options`.
    fn read(text: &[u8], options: CsvOptions) -> Result<Vec<Example>, String> {
        let mut examples = CsvExamples::new(text, "in.csv", options).map_err(|e| e.to_string())?;
        let mut read = Vec::new();
        while let Some(example) = examples.next_example().map_err(|error| error.to_string())? {
            read.push(example);
        }
        Ok(read)
    }

    fn dense(values: &[f32], label: f32) -> Example {
        Example { dense: values.to_vec(), label, ..Example::default() }
    }

    fn with_header() -> CsvOptions {
        CsvOptions { header: true, ..CsvOptions::default() }
    }

    /// Quoting, a byte-order mark, CRLF, spaces, blank lines and headers read as CSV means them;
    /// the label column is chosen by number or name.
    #[test]
    fn rows_become_examples() {
        let check = |text: &[u8], options: CsvOptions, expected: &[Example]| {
            assert_eq!(
                read(text, options),
                Ok(expected.to_vec()),
                "{}",
                String::from_utf8_lossy(text)
            );
        };
        check(b"1,2,3\n", CsvOptions::default(), &[dense(&[1.0, 2.0], 3.0)]);
        check(
            b" 1 , 2.5 ,-3e1\n\n4,5,6",
            CsvOptions::default(),
            &[dense(&[1.0, 2.5], -30.0), dense(&[4.0, 5.0], 6.0)],
        );
        check(
            b"\"1\",\"2\",\"3\"\r\n4,5,6\r\n",
            CsvOptions::default(),
            &[dense(&[1.0, 2.0], 3.0), dense(&[4.0, 5.0], 6.0)],
        );
        check(b"\xEF\xBB\xBFx,y\n1,2\n", with_header(), &[dense(&[1.0], 2.0)]);
        let by_number =
            CsvOptions { label_column: Some(LabelColumn::Number(1)), ..CsvOptions::default() };
        check(b"7,2,3\n", by_number, &[dense(&[2.0, 3.0], 7.0)]);
        let by_name =
            CsvOptions { label_column: Some(LabelColumn::Name("y".into())), ..with_header() };
        check(b"\xEF\xBB\xBFy,x\r\n1,2\r\n", by_name, &[dense(&[2.0], 1.0)]);
    }

    /// Text labels become class ids in order of appearance, quoted names with commas included.
    #[test]
    fn text_labels_become_class_ids() {
        let options = CsvOptions { classes: Some(ClassNames::default()), ..with_header() };
        let text = b"x,kind\n1,cat\n2,\"dog, large\"\n3,cat\n";
        let mut examples = CsvExamples::new(&text[..], "in.csv", options).unwrap();
        let mut labels = Vec::new();
        while let Some(example) = examples.next_example().unwrap() {
            labels.push(example.label);
        }
        assert_eq!(labels, [0.0, 1.0, 0.0]);
        let classes = examples.into_classes().unwrap();
        assert_eq!(classes.to_json(), r#"{"classes":["cat","dog, large"]}"#);
    }

    /// Each error names the file, the line and the column, with its header name if any.
    #[test]
    fn errors_name_file_line_and_column() {
        let check = |text: &[u8], options: CsvOptions, expected: &str| {
            let error = read(text, options).expect_err("refused");
            assert_eq!(error, expected, "{}", String::from_utf8_lossy(text));
        };
        check(
            b"1,x,3\n",
            CsvOptions::default(),
            "in.csv:1: column 2: \"x\" is not a finite number",
        );
        check(
            b"a,b,c\n1,2,3\n4,,6\n",
            with_header(),
            "in.csv:3: column 2 (\"b\"): \"\" is not a finite number",
        );
        check(
            b"1,2\n\"3\",NaN\n",
            CsvOptions::default(),
            "in.csv:2: column 2: \"NaN\" is not a finite number",
        );
        check(
            b"1,2,3\n4,5\n",
            CsvOptions::default(),
            "in.csv:2: column 3: the line has 2 columns, the first line has 3",
        );
        let labels =
            || CsvOptions { classes: Some(ClassNames::default()), ..CsvOptions::default() };
        check(
            b"1,\"big\ncat\"\nx,dog\n",
            labels(),
            "in.csv:3: column 1: \"x\" is not a finite number",
        );
        let too_far =
            CsvOptions { label_column: Some(LabelColumn::Number(5)), ..CsvOptions::default() };
        check(b"1,2\n", too_far, "in.csv:1: label column 5 does not exist: the line has 2 columns");
        let unknown =
            CsvOptions { label_column: Some(LabelColumn::Name("z".into())), ..with_header() };
        check(b"x,y\n1,2\n", unknown, "in.csv:1: label column \"z\" is not in the header");
        check(b"1,\xff\xfe\n", CsvOptions::default(), "in.csv:1: column 2: not UTF-8 text");
        check(
            b"1,cat\n2,\n",
            labels(),
            "in.csv:2: column 2: a label must be 1 to 1024 bytes: \"\"",
        );
    }
}
