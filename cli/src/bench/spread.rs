//! `Spread`: the minimum, median and maximum of repeated measurements, as the benchmarks print
//! them (one run's figure hides how far runs move).

/// Minimum, median and maximum of a set of measurements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Spread {
    pub(crate) min: f64,
    pub(crate) median: f64,
    pub(crate) max: f64,
}

impl Spread {
    /// The spread of `values` (the median of an even count is the mean of the middle two);
    /// zeros for none.
    pub(crate) fn of(values: &[f64]) -> Self {
        let mut sorted = values.to_vec();
        sorted.sort_by(f64::total_cmp);
        let Some((&min, &max)) = sorted.first().zip(sorted.last()) else {
            return Self { min: 0.0, median: 0.0, max: 0.0 };
        };
        let middle = sorted.len() / 2;
        let median = match sorted.len() % 2 {
            1 => sorted[middle],
            _ => (sorted[middle - 1] + sorted[middle]) / 2.0,
        };
        Self { min, median, max }
    }

    /// "min / median / max" with `decimals` decimals.
    pub(crate) fn render(&self, decimals: usize) -> String {
        format!("{:.decimals$} / {:.decimals$} / {:.decimals$}", self.min, self.median, self.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_even_and_empty_counts() {
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Spread { min: 1.0, median: 2.0, max: 3.0 });
        assert_eq!(Spread::of(&[4.0, 1.0, 2.0, 3.0]).median, 2.5);
        assert_eq!(Spread::of(&[]), Spread { min: 0.0, median: 0.0, max: 0.0 });
        assert_eq!(Spread::of(&[1.0, 2.5, 3.0]).render(1), "1.0 / 2.5 / 3.0");
    }
}
