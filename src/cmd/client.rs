//! `CLIENT SETNAME|GETNAME|ID|SETINFO|INFO|LIST|HELP`.

use bytes::Bytes;

use super::connection::{invalid_client_name, valid_client_name, ConnCmd};
use super::registry::{Spec, NO_KEYS};
use super::Request;
use crate::resp::{Args, Reply};

/// This file's rows of the command table.
pub static COMMANDS: &[Spec] = &[Spec::new("client", -2, &["sentinel"], NO_KEYS, parse).docs(
    "Subcommands that inspect or name the current connection",
    "2.4.0",
    "connection",
)];

/// A parsed CLIENT subcommand.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientCmd {
    /// CLIENT SETNAME (empty clears).
    SetName(Bytes),
    /// CLIENT GETNAME.
    GetName,
    /// CLIENT ID.
    Id,
    /// CLIENT SETINFO LIB-NAME|LIB-VER value.
    SetInfo {
        /// True for LIB-NAME, false for LIB-VER.
        lib_name: bool,
        /// The value.
        value: Bytes,
    },
    /// CLIENT INFO.
    Info,
    /// CLIENT LIST.
    List,
}

fn arity(sub: &str) -> Reply {
    Reply::err(format!(
        "ERR wrong number of arguments for 'client|{sub}' command"
    ))
}

/// Parses CLIENT.
pub fn parse(args: &mut Args) -> Result<Request, Reply> {
    let raw = args.arg()?;
    let sub = String::from_utf8_lossy(&raw).to_lowercase();
    let n = args.remaining();
    let cmd = match (sub.as_str(), n) {
        ("setname", 1) => {
            let name = args.arg()?;
            if !valid_client_name(&name) {
                return Err(invalid_client_name());
            }
            ClientCmd::SetName(name)
        }
        ("getname", 0) => ClientCmd::GetName,
        ("id", 0) => ClientCmd::Id,
        ("info", 0) => ClientCmd::Info,
        ("list", _) => ClientCmd::List,
        ("setinfo", 2) => {
            let attr = args.next_keyword()?;
            let value = args.arg()?;
            let lib_name = match attr.as_str() {
                "LIB-NAME" => true,
                "LIB-VER" => false,
                _ => {
                    return Err(Reply::err(format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(&value)
                    )))
                }
            };
            if !valid_client_name(&value) {
                return Err(Reply::err(format!(
                    "ERR {} cannot contain spaces, newlines or special characters.",
                    attr
                )));
            }
            ClientCmd::SetInfo { lib_name, value }
        }
        ("help", 0) => {
            let lines = [
                "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "GETNAME",
                "ID",
                "INFO",
                "LIST",
                "SETINFO <LIB-NAME|LIB-VER> <value>",
                "SETNAME <name>",
                "HELP",
            ];
            return Ok(Request::Conn(ConnCmd::Command(Reply::Array(
                lines.iter().map(|l| Reply::Simple((*l).into())).collect(),
            ))));
        }
        ("setname" | "getname" | "id" | "info" | "setinfo" | "help", _) => return Err(arity(&sub)),
        _ => {
            return Err(Reply::err(format!(
                "ERR unknown subcommand '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(&raw)
            )))
        }
    };
    Ok(Request::Conn(ConnCmd::Client(cmd)))
}
