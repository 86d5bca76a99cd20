//! A plain-text table for benchmark output: a header row, aligned columns, Markdown-compatible
//! so a run can be pasted into BENCHMARKS.md as it is.

pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    pub(crate) fn new(header: &[&str]) -> Self {
        Self { header: header.iter().map(|cell| cell.to_string()).collect(), rows: Vec::new() }
    }

    pub(crate) fn row(&mut self, cells: Vec<String>) {
        assert_eq!(cells.len(), self.header.len(), "a row has one cell per column");
        self.rows.push(cells);
    }

    pub(crate) fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|column| {
                let cells = self.rows.iter().map(|row| row[column].len());
                cells.chain([self.header[column].len()]).max().unwrap_or(0)
            })
            .collect();
        let line = |cells: &[String]| {
            let padded: Vec<String> =
                cells.iter().zip(&widths).map(|(cell, width)| format!("{cell:>width$}")).collect();
            format!("| {} |\n", padded.join(" | "))
        };
        let rule: Vec<String> = widths.iter().map(|width| "-".repeat(*width)).collect();
        let mut out = line(&self.header) + &line(&rule);
        for row in &self.rows {
            out += &line(row);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Columns are right-aligned to the widest cell and rendered as a Markdown table.
    #[test]
    fn renders_aligned_markdown() {
        let mut table = Table::new(&["name", "n"]);
        table.row(vec!["a".into(), "100".into()]);
        assert_eq!(table.render(), "| name |   n |\n| ---- | --- |\n|    a | 100 |\n");
    }
}
