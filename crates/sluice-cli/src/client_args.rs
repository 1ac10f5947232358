//! The flags every client command shares: where the server is (`--url`), how to print
//! (`--json`) and the token for a server with access control on (`--token`, `--token-file`).
//!
//! The token is a [`Secret`]: its `Debug` does not show it, `--help` does not show the value
//! of `SLUICE_TOKEN` (`hide_env_values`), and no error message contains it.

use std::path::{Path, PathBuf};

use clap::ArgMatches;
use clap::parser::ValueSource;
use sluice_client::Client;

use crate::failure::usage;

/// Flags of the client commands. They are global, so they work before or after the
/// subcommand (`sluice --url U queue list`, `sluice queue list --url U`); `serve` hides them.
#[derive(Debug, Clone, clap::Args)]
pub struct ClientArgs {
    /// Server URL for client commands.
    #[arg(long, global = true, env = "SLUICE_URL", default_value = sluice_client::DEFAULT_URL)]
    pub url: String,
    /// Print the server's JSON answers instead of tables, and errors as JSON on stderr:
    /// {"error": {"code": ..., "message": ...}}.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub token: TokenArgs,
}

/// The token flags, apart from `--url` and `--json` for `bench`, which has those of its own.
#[derive(Debug, Clone, clap::Args)]
pub struct TokenArgs {
    /// Token for a server with access control on, sent as `Authorization: Bearer`. Never
    /// printed; prefer SLUICE_TOKEN or --token-file over the command line, which other users
    /// of the machine can see.
    #[arg(
        long,
        global = true,
        env = "SLUICE_TOKEN",
        hide_env_values = true,
        value_name = "TOKEN",
        value_parser = Secret::parse
    )]
    pub token: Option<Secret>,
    /// Read the token from this file (surrounding whitespace and the trailing newline are
    /// ignored).
    #[arg(long, global = true, env = "SLUICE_TOKEN_FILE", value_name = "FILE")]
    pub token_file: Option<PathBuf>,
}

/// The ids of the [`ClientArgs`] flags, for the commands that do not take them.
pub const CLIENT_ARG_IDS: [&str; 4] = ["url", "json", "token", "token_file"];

/// The ids of the [`TokenArgs`] flags.
pub const TOKEN_ARG_IDS: [&str; 2] = ["token", "token_file"];

impl ClientArgs {
    /// A client for `--url`, with the token from `--token`, `--token-file`, SLUICE_TOKEN or
    /// SLUICE_TOKEN_FILE. `matches` tells where each value came from: a flag on the command
    /// line wins over an environment variable; two sources of the same rank are refused.
    pub fn client(&self, matches: &ArgMatches) -> anyhow::Result<Client> {
        let token = self.token.resolve(matches)?;
        let builder = Client::builder(&self.url);
        let client = match token {
            Some(token) => builder.token(token.0),
            None => builder,
        }
        .build()?;
        Ok(client)
    }
}

impl TokenArgs {
    fn resolve(&self, matches: &ArgMatches) -> anyhow::Result<Option<Secret>> {
        // An empty SLUICE_TOKEN counts as unset, as an empty variable usually does.
        let token = self.token.clone().filter(|token| !token.0.is_empty());
        let file = self
            .token_file
            .as_deref()
            .filter(|path| !path.as_os_str().is_empty());
        let on_command_line = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
        match (token, file) {
            (Some(token), None) => Ok(Some(token)),
            (None, Some(file)) => read_token_file(file).map(Some),
            (None, None) => Ok(None),
            (Some(token), Some(file)) => {
                match (on_command_line("token"), on_command_line("token_file")) {
                    (true, false) => Ok(Some(token)),
                    (false, true) => read_token_file(file).map(Some),
                    _ => Err(usage(
                        "a token is given twice: use --token (or SLUICE_TOKEN) or --token-file \
                         (or SLUICE_TOKEN_FILE), not both",
                    )),
                }
            }
        }
    }
}

/// Reads a token file: the token with surrounding whitespace (the trailing newline of
/// `echo token > file`) removed. Errors name the file, never its content.
fn read_token_file(path: &Path) -> anyhow::Result<Secret> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        usage(format!(
            "cannot read the token file {}: {error}",
            path.display()
        ))
    })?;
    let token = text.trim();
    if token.is_empty() {
        return Err(usage(format!("the token file {} is empty", path.display())));
    }
    Ok(Secret(token.to_owned()))
}

/// A value that must not be printed: `Debug` shows `Secret(hidden)`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(pub String);

impl Secret {
    /// Clap's value parser: any text (an unusable token is refused when the client is built,
    /// with a message that does not contain it).
    fn parse(text: &str) -> Result<Self, std::convert::Infallible> {
        Ok(Self(text.to_owned()))
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(hidden)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_not_shown_by_debug() {
        let args = ClientArgs {
            url: "http://h:1".into(),
            json: false,
            token: TokenArgs {
                token: Some(Secret("tok-0123456789abcdef".into())),
                token_file: None,
            },
        };
        let debug = format!("{args:?}");
        assert!(!debug.contains("tok-0123456789abcdef"), "{debug}");
        assert!(debug.contains("Secret(hidden)"), "{debug}");
    }

    #[test]
    fn a_token_file_loses_its_trailing_newline_and_must_not_be_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("token");
        std::fs::write(&path, "tok-0123456789abcdef\r\n").unwrap();
        assert_eq!(read_token_file(&path).unwrap().0, "tok-0123456789abcdef");
        std::fs::write(&path, "\n").unwrap();
        let error = read_token_file(&path).unwrap_err().to_string();
        assert!(error.contains("is empty"), "{error}");
        let error = read_token_file(&dir.path().join("absent"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("cannot read the token file"), "{error}");
    }
}
