//! The pservers' client side and wire contract: `PServerClient` (how trainers reach the
//! pservers: it follows the masters' pserver table, splits pushes and pulls by block, sends to
//! every slot in parallel, and when a pserver is replaced waits for the new holder and goes on
//! instead of failing), and what both ends of the data plane must agree on: the job layout and
//! block placement, the message limits, the f32 payload codecs, the layout's protobuf form,
//! the data plane's messages and paths, and the refusal kinds clients act on. The `pserver`
//! crate is the server only and builds on these; a trainer links none of it.

pub mod conversions;
pub mod data_plane;
pub mod f32_bytes;
pub mod layout;
pub mod limits;
pub mod payload;
pub mod placement;
pub mod refusal;

mod batches;
mod cache;
mod calls;
mod error;
mod exchange;
mod failure;
mod init;
mod model_basis;
mod pserver_client;
mod routes;
mod served_layout;
mod tensor_bytes;
mod warning_pace;

pub use error::PServerClientError;
pub use exchange::Exchanged;
pub use model_basis::ModelBasis;
pub use pserver_client::{PServerClient, PServerClientOptions};
pub use tensor_bytes::Tensors;
