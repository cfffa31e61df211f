//! The `svc` command: a thin front end over the library. Parses arguments, resolves settings,
//! calls the library and renders the result. Exit codes: 0 ok; 1 the command ran but a check
//! failed (invalid records, budget, regression); 2 usage or runtime error.

mod cli;

use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    match cli::run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("svc: error: {error}");
            for cause in error.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            ExitCode::from(2)
        }
    }
}
