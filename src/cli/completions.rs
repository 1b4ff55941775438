//! `rollstat completions SHELL`: the shell's completion script for every command and
//! flag, printed on stdout.

use clap::{Args as ClapArgs, CommandFactory};

use crate::error::{Error, Result};

#[derive(ClapArgs, Debug, Clone)]
pub struct Args {
    /// The shell: bash, zsh, fish, elvish or powershell. Install, for example, with
    /// `rollstat completions bash > ~/.local/share/bash-completion/completions/rollstat`.
    #[arg(value_name = "SHELL")]
    pub shell: clap_complete::Shell,
}

pub fn run(a: Args) -> Result<()> {
    let mut cmd = super::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "rollstat", &mut out);
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(&out).and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        // A reader that went away (`| head`) ends the run quietly.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Error::write(std::path::Path::new("stdout"), e)),
    }
}
