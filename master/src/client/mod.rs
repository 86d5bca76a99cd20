//! `MasterClient` and what it needs: options with named limits, leader discovery, errors.

mod discovery;
mod error;
mod master_client;
mod options;

pub use error::ClientError;
pub use master_client::{MasterClient, ServiceClient, LEADER_METADATA_KEY};
pub use options::ClientOptions;
