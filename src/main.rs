//! The `rollstat` binary: parse flags, run the command, map the result to an exit code
//! (0 success, 1 our own failure, 2 bad input or usage; `gate` exits 3 on FAIL and 4 on
//! INCONCLUSIVE). Warnings go to stderr and do not change the exit code.

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(rollstat::cli::entry(std::env::args_os()))
}
