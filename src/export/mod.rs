//! Writers: bytes on disk from computed values. JSON ([`crate::json`]) in NeMo Gym's shapes
//! ([`nemo_gym`]), Parquet tables ([`parquet`]), the HTML report ([`report`]), all staged atomically ([`atomic`]).

pub mod atomic;
pub mod compare;
pub mod direct;
pub mod nemo_gym;
pub mod nemo_gym_compare;
pub mod parquet;
pub mod report;
pub mod table;
pub mod tasks;
