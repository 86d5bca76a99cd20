//! The master's clock is the platform's (`platform::clock`): the leader clock
//! (`leader_clock.rs`) and the lease tables read it; the simulation gives each master its own.

pub use platform::clock::{Clock, SystemClock, CLOCK_OFFSET_ENV};
