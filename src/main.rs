//! The `rollstat` binary: parse flags, run the command, map the result to an exit code
//! (0 success, 1 our own failure, 2 bad input or usage). Warnings go to stderr and do
//! not change the exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    match rollstat::cli::main() {
        Ok(()) => {
            rollstat::trace::mark("done");
            ExitCode::SUCCESS
        }
        Err(e) => {
            if let rollstat::Error::Io { source, .. } = &e {
                if source.kind() == std::io::ErrorKind::BrokenPipe {
                    return ExitCode::SUCCESS;
                }
            }
            eprintln!("rollstat: error: {e}");
            ExitCode::from(if e.is_bad_input() { 2 } else { 1 })
        }
    }
}
