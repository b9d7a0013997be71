//! The `palisade-bench` binary: parses the command line and runs the library.

use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    palisade_bench::run(palisade_bench::Args::parse()).await
}
