//! Integration tests of the trainer crate: saved models (safetensors, read back here and by
//! Python), task data checked against the master's record, and the local baseline.

mod safetensors;
mod task_data;
