//! The `palisade` binary: configuration, tracing, start the node, wait for a signal (SIGHUP
//! reloads the TLS certificates; SIGINT and SIGTERM stop), shut down. If Raft stops by itself
//! (a storage error, a bad snapshot), the process exits at once with status 70 (fail-stop).

use palisade::config::{Config, Settings};
use palisade::server::Server;
use tokio::signal::unix::{signal, SignalKind};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::EnvFilter;

/// jemalloc: the keyspace is millions of small allocations (keys, values, B-tree nodes), and
/// glibc's allocator kept about a third more resident memory for them (docs/performance.md).
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main`: a background thread hands freed pages back to the
/// kernel after about a second (default ten), and with `MADV_DONTNEED` rather than the lazy
/// `MADV_FREE`, whose pages stay in RSS until the kernel is short of memory. Freed pages
/// that linger are most of the difference between a node that took its locks live and one
/// that restarted (docs/performance.md). `_RJEM_MALLOC_CONF` in the environment overrides.
#[allow(non_upper_case_globals)]
#[export_name = "_rjem_malloc_conf"]
pub static malloc_conf: Option<&'static std::ffi::c_char> = Some(
    // SAFETY: a pointer to the first byte of a static, NUL-terminated string.
    unsafe { &*c"background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0".as_ptr() },
);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let config = Config::from_settings(Settings::from_command_line()?)?;
    let filter = EnvFilter::try_new(filter_spec(&config.log_level))
        .unwrap_or_else(|_| EnvFilter::new("info,openraft=warn"));
    // Behind a reload layer, so that CONFIG SET loglevel can change it.
    let (filter, reload) = tracing_subscriber::reload::Layer::new(filter);
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::registry()
        .with(filter)
        .with(
            tracing_subscriber::fmt::layer()
                .with_ansi(ansi)
                .with_writer(std::io::stderr),
        )
        .init();
    let server = Server::start(config).await?;
    server.set_log_hook(Box::new(move |redis_level| {
        let level = palisade::cmd::config::palisade_log_level(redis_level);
        let filter = EnvFilter::try_new(filter_spec(level)).map_err(|e| e.to_string())?;
        reload.reload(filter).map_err(|e| e.to_string())
    }));
    let mut hangup = signal(SignalKind::hangup())?;
    let stop_signal = wait_for_signal();
    tokio::pin!(stop_signal);
    loop {
        tokio::select! {
            r = &mut stop_signal => break r?,
            _ = server.shutdown_requested() => break,
            why = server.raft_stopped() => fail_stop(&why),
            // As Redis's operators expect of a TLS server: SIGHUP rereads the certificates.
            _ = hangup.recv() => server.reload_tls(),
        }
    }
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(())
}

/// The exit status of a node that stopped because its Raft did (fail-stop).
const FAIL_STOP_STATUS: i32 = 70;

/// Ends the process at once: Raft has stopped, so this node can neither commit nor apply and
/// must not serve on as a zombie. No orderly shutdown, which would wait for Raft and for
/// storage calls that may never return; what is on disk is what a kill -9 would leave.
fn fail_stop(why: &str) -> ! {
    tracing::error!(
        reason = why,
        status = FAIL_STOP_STATUS,
        "FATAL: raft stopped; this node cannot commit or apply and exits (fail-stop)"
    );
    eprintln!("palisade: fatal: raft stopped: {why}");
    std::process::exit(FAIL_STOP_STATUS)
}

/// The tracing filter for `--log-level`: a bare level keeps openraft's chatty per-election
/// logs at warn; a full filter is used as is.
fn filter_spec(log_level: &str) -> String {
    if log_level.contains('=') {
        log_level.to_string()
    } else {
        format!("{log_level},openraft=warn")
    }
}

async fn wait_for_signal() -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    Ok(())
}
