//! Where cgroup v2 lives on this host and where vigil sits in it.
//!
//! Owns the parsing of `/proc/self/mountinfo` (proc(5): `id parent major:minor root mount_point
//! options [optional…] - fstype source super_options`) and `/proc/self/cgroup` (the `0::<path>`
//! line is the cgroup v2 membership, cgroup(7)). Everything here is a pure function of the file
//! text so tests run on strings; the caller reads the files. It must not create or write any
//! cgroup.

use std::path::{Path, PathBuf};

pub const PROC_SELF_MOUNTINFO: &str = "/proc/self/mountinfo";
pub const PROC_SELF_CGROUP: &str = "/proc/self/cgroup";

/// One line of mountinfo, only the fields vigil needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountEntry {
    /// Root of the mount inside its file system (for cgroup2 under a cgroup namespace created
    /// after the mount, this is not `/`).
    pub root: String,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub super_options: String,
}

/// Undoes mountinfo's octal escapes of space, tab, newline and backslash (`\040` …), which the
/// kernel applies to paths (fs/proc_namespace.c, `mangle`).
pub fn unescape_octal(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4]
                .iter()
                .all(|b| (b'0'..=b'7').contains(b))
        {
            let v = (bytes[i + 1] - b'0') as u32 * 64
                + (bytes[i + 2] - b'0') as u32 * 8
                + (bytes[i + 3] - b'0') as u32;
            if let Ok(b) = u8::try_from(v) {
                out.push(b);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Parses mountinfo text; malformed lines are skipped.
pub fn parse_mountinfo(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(' ').collect();
            let sep = fields.iter().position(|f| *f == "-")?;
            if sep < 6 || fields.len() < sep + 4 {
                return None;
            }
            Some(MountEntry {
                root: unescape_octal(fields[3]),
                mount_point: PathBuf::from(unescape_octal(fields[4])),
                fstype: fields[sep + 1].to_string(),
                super_options: fields[sep + 3].to_string(),
            })
        })
        .collect()
}

/// The first cgroup2 mount (pure v2: `/sys/fs/cgroup`; hybrid: `/sys/fs/cgroup/unified`).
pub fn find_cgroup2(entries: &[MountEntry]) -> Option<&MountEntry> {
    entries.iter().find(|e| e.fstype == "cgroup2")
}

/// If `controller` is bound to a cgroup v1 hierarchy, that hierarchy's mount point. A v1
/// mount names its controllers in the super options (`rw,memory`, `rw,cpu,cpuacct`).
pub fn v1_mount_of(entries: &[MountEntry], controller: &str) -> Option<PathBuf> {
    entries
        .iter()
        .filter(|e| e.fstype == "cgroup")
        .find(|e| e.super_options.split(',').any(|o| o == controller))
        .map(|e| e.mount_point.clone())
}

/// The cgroup v2 path from `/proc/self/cgroup` text (`0::/system.slice/vigil.service` →
/// `/system.slice/vigil.service`). `None` if there is no v2 line (v1-only host).
pub fn parse_own_cgroup(text: &str) -> Option<String> {
    text.lines().find_map(|l| {
        let p = l.strip_prefix("0::")?;
        // A cgroup removed under us is shown with a " (deleted)" suffix (kernel/cgroup/cgroup.c).
        Some(p.strip_suffix(" (deleted)").unwrap_or(p).to_string())
    })
}

/// Where the cgroup `own` (as listed in /proc/self/cgroup) is in the file system, given the
/// cgroup2 mount: `mount_point` + (`own` relative to the mount's root). `None` if `own` is
/// outside what this mount shows.
pub fn cgroup_dir(mount: &MountEntry, own: &str) -> Option<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rel = own.strip_prefix(root)?;
    if !(rel.is_empty() || rel.starts_with('/')) {
        return None;
    }
    let rel = rel.trim_start_matches('/');
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    Some(if rel.is_empty() {
        mount.mount_point.clone()
    } else {
        mount.mount_point.join(rel)
    })
}

/// Whether `own` is the root of what the mount shows (VM, container with cgroupns, bare host).
pub fn is_hierarchy_root(mount: &MountEntry, own: &str) -> bool {
    cgroup_dir(mount, own).as_deref() == Some(mount.mount_point.as_path())
}

/// Whether `path` is `mount` or below it (lexically).
pub fn is_under(path: &Path, mount: &Path) -> bool {
    path.starts_with(mount)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PURE_V2: &str = "\
22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
25 23 0:22 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 cgroup2 rw,nsdelegate,memory_recursiveprot
";

    const HYBRID: &str = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";

    const NONE: &str = "\
22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
23 1 0:22 / /sys rw,nosuid shared:2 - sysfs sysfs rw
";

    #[test]
    fn pure_v2_mount_is_found() {
        let e = parse_mountinfo(PURE_V2);
        let m = find_cgroup2(&e).unwrap();
        assert_eq!(m.mount_point, Path::new("/sys/fs/cgroup"));
        assert_eq!(m.root, "/");
        assert_eq!(v1_mount_of(&e, "memory"), None);
    }

    #[test]
    fn hybrid_v2_mount_is_unified_and_v1_bindings_are_seen() {
        let e = parse_mountinfo(HYBRID);
        let m = find_cgroup2(&e).unwrap();
        assert_eq!(m.mount_point, Path::new("/sys/fs/cgroup/unified"));
        assert_eq!(
            v1_mount_of(&e, "memory").as_deref(),
            Some(Path::new("/sys/fs/cgroup/memory"))
        );
        assert_eq!(
            v1_mount_of(&e, "cpu").as_deref(),
            Some(Path::new("/sys/fs/cgroup/cpu"))
        );
        assert_eq!(v1_mount_of(&e, "io"), None);
        // `name=systemd` is not a controller called "systemd".
        assert_eq!(v1_mount_of(&e, "systemd"), None);
    }

    #[test]
    fn no_cgroup2_mount_gives_none() {
        assert!(find_cgroup2(&parse_mountinfo(NONE)).is_none());
        assert!(find_cgroup2(&parse_mountinfo("")).is_none());
    }

    #[test]
    fn escaped_spaces_in_mount_points_are_unescaped() {
        let text = "50 23 0:40 / /mnt/my\\040cgroups\\134x rw - cgroup2 none rw\n";
        let e = parse_mountinfo(text);
        assert_eq!(
            find_cgroup2(&e).unwrap().mount_point,
            Path::new("/mnt/my cgroups\\x")
        );
        assert_eq!(unescape_octal("a\\011b\\012c"), "a\tb\nc");
        assert_eq!(unescape_octal("trailing\\04"), "trailing\\04");
    }

    #[test]
    fn malformed_mountinfo_lines_are_skipped() {
        let text = "garbage\n1 2 3 - cgroup2\n41 31 0:38 / /u rw - cgroup2 cgroup2 rw\n";
        let e = parse_mountinfo(text);
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].mount_point, Path::new("/u"));
    }

    #[test]
    fn own_cgroup_is_read_from_the_v2_line() {
        assert_eq!(
            parse_own_cgroup("0::/system.slice/vigil.service\n").as_deref(),
            Some("/system.slice/vigil.service")
        );
        let hybrid = "9:name=systemd:/\n4:memory:/some/where\n1:cpu:/\n0::/\n";
        assert_eq!(parse_own_cgroup(hybrid).as_deref(), Some("/"));
        assert_eq!(parse_own_cgroup("4:memory:/x\n"), None);
        assert_eq!(
            parse_own_cgroup("0::/a/b (deleted)\n").as_deref(),
            Some("/a/b")
        );
    }

    #[test]
    fn own_cgroup_dir_joins_mount_and_path() {
        let e = parse_mountinfo(PURE_V2);
        let m = find_cgroup2(&e).unwrap();
        assert_eq!(
            cgroup_dir(m, "/system.slice/vigil.service").unwrap(),
            Path::new("/sys/fs/cgroup/system.slice/vigil.service")
        );
        assert!(is_hierarchy_root(m, "/"));
        assert!(!is_hierarchy_root(m, "/system.slice/vigil.service"));
        assert_eq!(cgroup_dir(m, "/a/../../etc"), None);
    }

    #[test]
    fn own_cgroup_dir_respects_a_non_root_mount_root() {
        let text = "60 1 0:30 /kubepods/pod1 /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let e = parse_mountinfo(text);
        let m = find_cgroup2(&e).unwrap();
        assert_eq!(
            cgroup_dir(m, "/kubepods/pod1/app").unwrap(),
            Path::new("/sys/fs/cgroup/app")
        );
        assert!(is_hierarchy_root(m, "/kubepods/pod1"));
        assert_eq!(cgroup_dir(m, "/kubepods/pod10"), None);
        assert_eq!(cgroup_dir(m, "/other"), None);
    }
}
