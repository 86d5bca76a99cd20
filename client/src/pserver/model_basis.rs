//! `ModelBasis`: which model restore the values this client last pulled come from, so that
//! its next push names it and a pserver whose shard a restore replaced since refuses it. A
//! pull across several slots may meet some reloaded and some not yet: the pull's basis is the
//! lowest restore any slot answered, so a gradient computed on a half-replaced model is
//! refused by every slot that holds the restored one.

use std::sync::{Mutex, PoisonError};

/// The model restore of the last whole pull (`None` before any).
#[derive(Debug, Default)]
pub struct ModelBasis(Mutex<Option<u64>>);

impl ModelBasis {
    /// What a push computed now is computed on.
    pub fn get(&self) -> Option<u64> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A whole pull was answered with `restores` (one per request): the lowest is the basis.
    pub fn pulled(&self, restores: impl IntoIterator<Item = u64>) {
        if let Some(lowest) = restores.into_iter().min() {
            *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Some(lowest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_basis_is_the_lowest_restore_of_the_last_whole_pull() {
        let basis = ModelBasis::default();
        assert_eq!(basis.get(), None, "nothing pulled");
        basis.pulled([2, 1, 2]);
        assert_eq!(basis.get(), Some(1), "one slot had not reloaded");
        basis.pulled([]);
        assert_eq!(basis.get(), Some(1), "an empty pull changes nothing");
        basis.pulled([2, 2]);
        assert_eq!(basis.get(), Some(2));
    }
}
