//! (skeleton)
/// Client commands: returns the exit code.
pub fn main(cmd: crate::cli::Cmd) -> i32 {
    let _ = cmd;
    todo!()
}
