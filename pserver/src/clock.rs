//! The pserver's clock is the platform's (`platform::clock`): the slot lease (`held_slot.rs`)
//! is judged only on the clock it was granted with, and the simulation gives each pserver
//! process a clock of its own, so the production slot keeper holds its slot on a drifting clock.

pub use platform::clock::{Clock, SystemClock};
