//! `PServerClient`: how trainers reach the pservers. It follows the master's pserver table,
//! splits pushes and pulls by block, sends to every pserver in parallel, and when a pserver is
//! replaced waits for the new holder and goes on instead of failing.

mod batches;
mod cache;
mod calls;
mod error;
mod exchange;
mod init;
mod model_basis;
mod pserver_client;
mod routes;
mod tensor_bytes;
mod warning_pace;

pub use error::PServerClientError;
pub use exchange::Exchanged;
pub use pserver_client::{PServerClient, PServerClientOptions};
pub use tensor_bytes::Tensors;
