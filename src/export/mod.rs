//! Writers: bytes on disk from computed values. JSON ([`crate::json`]) in NeMo Gym's shapes
//! ([`nemo_gym`]), Parquet tables ([`parquet`]), the HTML report ([`report`]), all staged atomically ([`atomic`]).

pub mod atomic;
#[cfg(feature = "engine")]
pub mod compare;
pub mod dates;
pub mod direct;
#[cfg(feature = "engine")]
pub mod eval_compare;
#[cfg(feature = "engine")]
pub mod gate;
#[cfg(feature = "engine")]
pub mod lake;
#[cfg(feature = "engine")]
pub mod nemo_gym;
#[cfg(feature = "engine")]
pub mod parquet;
#[cfg(feature = "engine")]
pub mod report;
#[cfg(feature = "engine")]
pub mod table;
#[cfg(feature = "engine")]
pub mod tasks;
