use super::*;
#[test]
fn bundled_default_is_valid() {
    let c = load_str(BUNDLED_DEFAULT, Path::new("d.toml"));
    match c {
        Ok(c) => println!("{c:#?}"),
        Err(e) => panic!("{e}"),
    }
}
