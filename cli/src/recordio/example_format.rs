//! Text forms of `raftrain.example.v1.Example`: parsing LibSVM lines into examples (CSV has
//! its own reader, `csv_input.rs`), and printing a stored example as one JSON object.

use proto::example::Example;
use proto::Message as _;

/// Parses one LibSVM line: `label index:value index:value ...`, indices strictly ascending,
/// the label and every value finite. The error names the 1-based column (whitespace-separated
/// field: the label is column 1, feature `k` is column `k + 1`).
pub(crate) fn parse_libsvm_line(line: &str) -> Result<Example, String> {
    let mut tokens = line.split_whitespace();
    let label_text = tokens.next().ok_or("empty line")?;
    let label = parse_number(label_text, 1)?;
    let mut example = Example { label, ..Example::default() };
    for (token_index, token) in tokens.enumerate() {
        let feature = token_index + 1;
        let column = feature + 1;
        let (index_text, value_text) = token.split_once(':').ok_or_else(|| {
            format!("column {column} (feature {feature}): {token:?} is not index:value")
        })?;
        let index = index_text.parse::<u32>().map_err(|_| {
            format!(
                "column {column} (feature {feature}): index {index_text:?} is not a whole number"
            )
        })?;
        let value = parse_number(value_text, column)?;
        if example.sparse_index.last().is_some_and(|&previous| index <= previous) {
            return Err(format!(
                "column {column} (feature {feature}): index {index} is not above the one before"
            ));
        }
        example.sparse_index.push(index);
        example.sparse_value.push(value);
    }
    Ok(example)
}

fn parse_number(field: &str, column: usize) -> Result<f32, String> {
    match field.parse::<f32>() {
        Ok(value) if value.is_finite() => Ok(value),
        _ => Err(format!("column {column}: {field:?} is not a finite number")),
    }
}

/// Decodes a stored record and prints it as one JSON object.
pub(crate) fn to_json_line(record: &[u8]) -> anyhow::Result<String> {
    let example = Example::decode(record)
        .map_err(|error| anyhow::anyhow!("not a raftrain.example.v1.Example: {error}"))?;
    let json = serde_json::json!({
        "label": shortest(example.label),
        "dense": example.dense.iter().copied().map(shortest).collect::<Vec<f64>>(),
        "sparse_index": example.sparse_index,
        "sparse_value": example.sparse_value.iter().copied().map(shortest).collect::<Vec<f64>>(),
    });
    Ok(json.to_string())
}

/// The f64 that prints as the f32 does (JSON numbers are f64: 0.1f32 would print as
/// 0.10000000149011612).
fn shortest(value: f32) -> f64 {
    value.to_string().parse().unwrap_or(f64::from(value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dense(values: &[f32], label: f32) -> Example {
        Example { dense: values.to_vec(), label, ..Example::default() }
    }

    /// LibSVM lines become sparse examples; bad tokens and unordered indices are named.
    #[test]
    fn libsvm_lines() {
        let sparse = |label, pairs: &[(u32, f32)]| Example {
            label,
            sparse_index: pairs.iter().map(|pair| pair.0).collect(),
            sparse_value: pairs.iter().map(|pair| pair.1).collect(),
            ..Example::default()
        };
        let check = |line: &str, expected: Result<Example, &str>| {
            assert_eq!(parse_libsvm_line(line), expected.map_err(str::to_string), "{line}");
        };
        check("1 3:0.5 10:2", Ok(sparse(1.0, &[(3, 0.5), (10, 2.0)])));
        check("-1", Ok(sparse(-1.0, &[])));
        check("", Err("empty line"));
        check("a 1:2", Err("column 1: \"a\" is not a finite number"));
        check("inf 1:2", Err("column 1: \"inf\" is not a finite number"));
        check("1 3", Err("column 2 (feature 1): \"3\" is not index:value"));
        check("1 x:2", Err("column 2 (feature 1): index \"x\" is not a whole number"));
        check("1 2:y", Err("column 2: \"y\" is not a finite number"));
        check("1 2:1 3:nan", Err("column 3: \"nan\" is not a finite number"));
        check("1 2:-inf", Err("column 2: \"-inf\" is not a finite number"));
        check("1 2:1e39", Err("column 2: \"1e39\" is not a finite number"));
        check("1 5:1 5:2", Err("column 3 (feature 2): index 5 is not above the one before"));
    }

    /// A stored example prints as JSON; bytes that are not an Example are an error.
    #[test]
    fn json_lines() {
        let record = dense(&[1.5, -2.1009], 0.1).encode_to_vec();
        let line = to_json_line(&record).unwrap();
        assert_eq!(
            line,
            r#"{"dense":[1.5,-2.1009],"label":0.1,"sparse_index":[],"sparse_value":[]}"#
        );
        assert!(to_json_line(&[0xff, 0xff, 0xff]).is_err());
    }
}
