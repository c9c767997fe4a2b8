use std::path::{Path, PathBuf};

use crate::config::ConfigSource;
use crate::config::spec::Config;
use crate::convert::{Loaded, load};

fn pod(name: &str, cmd: &str) -> String {
    format!("[pods.{name}]\n[[pods.{name}.containers]]\nname = \"c\"\ncommand = [\"{cmd}\"]\n")
}

/// A config `vigil.toml` with `pod_dir = "pods.d"` and `pods`, in a fresh directory.
fn setup(pods: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let main = tmp.path().join("vigil.toml");
    std::fs::write(&main, format!("[supervisor]\npod_dir = \"pods.d\"\n{pods}")).unwrap();
    let dir = tmp.path().join("pods.d");
    std::fs::create_dir(&dir).unwrap();
    (tmp, main, dir)
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn loaded(main: &Path, previous: Option<&Config>) -> Loaded {
    load(&ConfigSource::File(main.to_path_buf()), previous).unwrap()
}

fn names(c: &Config) -> Vec<&str> {
    c.pods.iter().map(|p| p.name.as_str()).collect()
}

fn command_of<'a>(c: &'a Config, pod: &str) -> &'a str {
    let p = c.pods.iter().find(|p| p.name == pod).unwrap();
    &p.containers[0].command[0]
}

const POD_YAML: &str = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: kube\nspec:\n  \
                        containers:\n  - name: c\n    image: busybox\n    command: [\"sleep\", \"60\"]\n";

#[test]
#[cfg(feature = "kubernetes")]
fn toml_files_and_pod_manifests_in_the_directory_are_pods_beside_the_config() {
    let (_t, main, dir) = setup(&pod("base", "true"));
    let a = write(
        &dir,
        "a.toml",
        &format!("{}{}", pod("a1", "x"), pod("a2", "y")),
    );
    let k = write(&dir, "k.yaml", POD_YAML);
    write(&dir, ".a.toml.swp", "garbage");
    write(&dir, "a.toml~", "garbage");
    write(&dir, "README", "garbage");
    let l = loaded(&main, None);
    assert!(l.refused.is_empty(), "{}", l.refused);
    assert_eq!(names(&l.config), ["a1", "a2", "base", "kube"]);
    let files: Vec<(&Path, Vec<&str>)> = l
        .config
        .pod_files
        .iter()
        .map(|f| {
            (
                f.path.as_path(),
                f.pods.iter().map(String::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        files,
        [(a.as_path(), vec!["a1", "a2"]), (k.as_path(), vec!["kube"])]
    );
}

#[test]
fn a_bad_file_is_refused_located_in_it_and_the_others_still_load() {
    let (_t, main, dir) = setup(&pod("base", "true"));
    write(&dir, "a.toml", &pod("a", "x"));
    let bad = write(
        &dir,
        "b.toml",
        &format!("{}restart_policy = \"Sometimes\"\n", pod("b", "y")),
    );
    write(&dir, "c.toml", &pod("c", "z"));
    let l = loaded(&main, None);
    assert_eq!(names(&l.config), ["a", "base", "c"]);
    let text = l.refused.to_string();
    assert!(
        text.starts_with(&format!(
            "{}:5:18: pods.b.containers[0].restart_policy",
            bad.display()
        )),
        "{text}"
    );
    // `vigil check` and `convert --to` see the refusal as an error.
    let err = crate::convert::load_source(&ConfigSource::File(main.clone())).unwrap_err();
    assert!(
        err.to_string().contains(&bad.display().to_string()),
        "{err}"
    );
}

#[test]
fn a_name_in_two_files_is_refused_naming_both_and_the_first_keeps_it() {
    let (_t, main, dir) = setup(&pod("base", "true"));
    let a = write(&dir, "a.toml", &pod("web", "first"));
    let b = write(
        &dir,
        "b.toml",
        &format!("{}{}", pod("web", "second"), pod("b", "x")),
    );
    let l = loaded(&main, None);
    assert_eq!(names(&l.config), ["base", "web"]);
    assert_eq!(command_of(&l.config, "web"), "first");
    let text = l.refused.to_string();
    assert!(text.contains(&b.display().to_string()), "{text}");
    assert!(text.contains(&a.display().to_string()), "{text}");
    assert!(text.contains("pod \"web\" is also defined in"), "{text}");
}

#[test]
fn a_name_the_config_defines_is_refused_naming_the_config_file() {
    let (_t, main, dir) = setup(&pod("web", "config"));
    let a = write(&dir, "a.toml", &pod("web", "file"));
    let l = loaded(&main, None);
    assert_eq!(command_of(&l.config, "web"), "config");
    let text = l.refused.to_string();
    assert!(text.starts_with(&a.display().to_string()), "{text}");
    assert!(text.contains(&format!("{}:3:1", main.display())), "{text}");
}

#[test]
fn what_runs_keeps_its_name_against_a_file_that_comes_later() {
    let (_t, main, dir) = setup("");
    write(&dir, "m.toml", &pod("web", "running"));
    let before = loaded(&main, None).config;
    // A new file, first in lexical order, defines the same name.
    let newcomer = write(&dir, "a.toml", &pod("web", "new"));
    let l = loaded(&main, Some(&before));
    assert_eq!(command_of(&l.config, "web"), "running");
    assert!(
        l.refused
            .to_string()
            .starts_with(&newcomer.display().to_string())
    );
}

#[test]
fn a_file_that_breaks_keeps_its_pods_as_they_ran_and_a_deleted_one_loses_them() {
    let (_t, main, dir) = setup("");
    let a = write(&dir, "a.toml", &pod("a", "one"));
    let b = write(&dir, "b.toml", &pod("b", "one"));
    let before = loaded(&main, None).config;
    write(&dir, "a.toml", "[pods.a\n");
    std::fs::remove_file(&b).unwrap();
    let l = loaded(&main, Some(&before));
    assert_eq!(names(&l.config), ["a"]);
    assert_eq!(command_of(&l.config, "a"), "one");
    let text = l.refused.to_string();
    assert!(text.contains(&format!("{}:1:", a.display())), "{text}");
    assert!(text.contains("keep running as they were (a)"), "{text}");
}

#[test]
fn a_file_with_other_tables_than_pods_is_refused_located() {
    let (_t, main, dir) = setup("");
    let a = write(
        &dir,
        "a.toml",
        &format!("{}[supervisor]\nlog_forward = false\n", pod("a", "x")),
    );
    let l = loaded(&main, None);
    assert!(l.config.pods.is_empty());
    let text = l.refused.to_string();
    assert!(
        text.starts_with(&format!("{}:5:1: supervisor:", a.display())),
        "{text}"
    );
}

#[test]
fn a_file_too_large_and_the_files_beyond_the_cap_are_refused() {
    let (_t, main, dir) = setup("");
    let big = write(
        &dir,
        "big.toml",
        &format!(
            "{}# {}\n",
            pod("big", "x"),
            "x".repeat(super::MAX_FILE_BYTES as usize)
        ),
    );
    for i in 0..super::MAX_FILES {
        write(
            &dir,
            &format!("p{i:03}.toml"),
            &pod(&format!("p{i:03}"), "x"),
        );
    }
    let l = loaded(&main, None);
    let text = l.refused.to_string();
    assert!(text.contains(&format!("{}: ", big.display())), "{text}");
    assert!(text.contains("at most 262144 bytes"), "{text}");
    // big.toml is first: p000 … p126 are read, p127 is beyond the cap.
    assert_eq!(l.config.pods.len(), super::MAX_FILES - 1);
    assert!(
        text.contains(&format!(
            "{}: a pod_dir holds at most {} files",
            dir.join("p127.toml").display(),
            super::MAX_FILES
        )),
        "{text}"
    );
}

#[test]
fn a_missing_directory_is_an_error_and_gives_no_pods() {
    let (_t, main, dir) = setup(&pod("base", "true"));
    std::fs::remove_dir(&dir).unwrap();
    let l = loaded(&main, None);
    assert_eq!(names(&l.config), ["base"]);
    assert!(
        l.refused
            .to_string()
            .starts_with(&dir.display().to_string())
    );
}

#[test]
fn a_pod_in_a_file_may_use_the_configs_variables_and_depend_on_its_pods() {
    let (_t, main, dir) = setup(&pod("db", "true"));
    std::fs::write(main.with_file_name(".env"), "APP=/bin/app\n").unwrap();
    write(
        &dir,
        "a.toml",
        "[pods.app]\ndepends_on = { db = \"started\" }\n[[pods.app.containers]]\nname = \"c\"\ncommand = \
         [\"${APP}\"]\n",
    );
    let l = loaded(&main, None);
    assert!(l.refused.is_empty(), "{}", l.refused);
    assert_eq!(command_of(&l.config, "app"), "/bin/app");
}

#[test]
fn a_symbolic_link_in_the_directory_is_refused_named_and_not_followed() {
    let (t, main, dir) = setup(&pod("base", "true"));
    write(&dir, "a.toml", &pod("a", "x"));
    let target = write(t.path(), "elsewhere.toml", &pod("l", "x"));
    let link = dir.join("l.toml");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let l = loaded(&main, None);
    assert_eq!(names(&l.config), ["a", "base"]);
    let message = l.refused.to_string();
    assert!(
        message.starts_with(&format!("{}: ", link.display())),
        "{message}"
    );
    assert!(message.contains("symbolic link"), "{message}");
}

#[test]
fn a_file_whose_name_or_text_is_not_utf8_is_refused_named() {
    use std::os::unix::ffi::OsStrExt;
    let (_t, main, dir) = setup(&pod("base", "true"));
    write(&dir, "a.toml", &pod("a", "x"));
    let odd = dir.join(std::ffi::OsStr::from_bytes(b"caf\xe9.toml"));
    std::fs::write(&odd, pod("odd", "x")).unwrap();
    let latin = dir.join("latin.toml");
    std::fs::write(&latin, b"[pods.latin]\n# caf\xe9\n").unwrap();
    let l = loaded(&main, None);
    assert_eq!(names(&l.config), ["a", "base"]);
    let messages: Vec<String> = l.refused.iter().map(|e| e.to_string()).collect();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(
        messages.contains(&format!(
            "{}: its name is not UTF-8 text: not read",
            odd.display()
        )),
        "{messages:?}"
    );
    assert!(
        messages.contains(&format!("{}: not UTF-8 text", latin.display())),
        "{messages:?}"
    );
}

/// `cargo test --no-default-features --lib pod_dir`.
#[test]
#[cfg(not(feature = "kubernetes"))]
fn without_the_kubernetes_feature_a_manifest_is_refused_saying_why() {
    let (_t, main, dir) = setup(&pod("base", "true"));
    write(&dir, "a.toml", &pod("a", "x"));
    let k = write(&dir, "k.yaml", POD_YAML);
    let l = loaded(&main, None);
    assert_eq!(names(&l.config), ["a", "base"]);
    assert_eq!(
        l.refused.to_string(),
        format!(
            "{}: this vigil was built without the `kubernetes` feature: it cannot read \
             manifests",
            k.display()
        )
    );
}
