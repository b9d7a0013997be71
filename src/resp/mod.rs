//! The only code that touches bytes: the request parser, the reply encoder and argument cursors.

pub mod args;
pub mod frame;
pub mod nesting;
pub mod parse;

pub use args::Args;
pub use frame::{Protocol, Reply};
pub use parse::{parse_request, Limits, ProtocolError};
