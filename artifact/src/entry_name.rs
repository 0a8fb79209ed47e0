//! Entry names: the only part of a cache that becomes a file system path.
//!
//! A cache may come from anywhere, so its names are treated as hostile: each must
//! stay inside the extraction directory on its own (no absolute path, no `..`), and
//! the set of names must be writable as files (no duplicates, no name that is both a
//! file and another entry's directory). Names are checked by `encode` and `decode`
//! alike, so a cache that passes `decode` can be extracted name by name.

use std::collections::BTreeSet;

use crate::Error;

/// Longest name accepted, in bytes: Linux's `PATH_MAX`, so that the name plus a
/// short extraction directory still fits in one path.
pub const MAX_NAME_BYTES: usize = 4096;

/// Longest `/`-separated component accepted, in bytes: `NAME_MAX` on the common
/// Linux file systems.
pub const MAX_COMPONENT_BYTES: usize = 255;

fn bad(name: &str, why: &'static str) -> Error {
    Error::BadEntryName {
        name: name.to_owned(),
        why,
    }
}

/// Checks one entry name: non-empty, relative, `/`-separated, no `.`/`..`/empty
/// component, no backslash (a separator elsewhere), no NUL, no control character
/// (they garble `inspect` output and terminal logs), at most [`MAX_NAME_BYTES`] in
/// all and [`MAX_COMPONENT_BYTES`] a component.
pub fn validate_entry_name(name: &str) -> Result<(), Error> {
    if name.is_empty() {
        return Err(bad(name, "the name is empty"));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(bad(name, "the name is longer than 4096 bytes"));
    }
    if name.starts_with('/') {
        return Err(bad(name, "the name is an absolute path"));
    }
    if name.contains('\\') {
        return Err(bad(name, "the name contains a backslash"));
    }
    if name.contains('\0') {
        return Err(bad(name, "the name contains a NUL byte"));
    }
    if name.chars().any(char::is_control) {
        return Err(bad(name, "the name contains a control character"));
    }
    for component in name.split('/') {
        match component {
            "" => {
                return Err(bad(
                    name,
                    "the name has an empty component (a trailing or doubled '/')",
                ))
            }
            "." => return Err(bad(name, "the name has a '.' component")),
            ".." => return Err(bad(name, "the name has a '..' component")),
            c if c.len() > MAX_COMPONENT_BYTES => {
                return Err(bad(
                    name,
                    "a component of the name is longer than 255 bytes",
                ))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks every name and then the set: no name twice, and no name that is also a
/// directory of another (`a` and `a/b` cannot both be written).
pub fn validate_entry_names<'a>(names: impl IntoIterator<Item = &'a str>) -> Result<(), Error> {
    let mut seen = BTreeSet::new();
    for name in names {
        validate_entry_name(name)?;
        if !seen.insert(name) {
            return Err(bad(name, "the name appears twice in the cache"));
        }
    }
    for name in &seen {
        // Every proper '/'-prefix of a name is a directory it needs.
        for (i, _) in name.match_indices('/') {
            let dir = &name[..i];
            if seen.contains(dir) {
                return Err(bad(
                    dir,
                    "the name is both a file and the directory of another entry",
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn why(name: &str) -> &'static str {
        match validate_entry_name(name) {
            Err(Error::BadEntryName { why, .. }) => why,
            other => panic!("expected BadEntryName for {name:?}, got {other:?}"),
        }
    }

    #[test]
    fn accepts_relative_nested_names() {
        for name in [
            "a",
            "kernels/ab/cd.so",
            "triton/abc/kernel.cubin",
            ".hidden",
            "..dots..",
            "a.b/c..d/...",
            "ünïcödé/名前",
        ] {
            validate_entry_name(name).unwrap_or_else(|e| panic!("{name:?}: {e}"));
        }
    }

    #[test]
    fn rejects_empty_name() {
        assert_eq!(why(""), "the name is empty");
    }

    #[test]
    fn rejects_absolute_path() {
        assert_eq!(why("/etc/passwd"), "the name is an absolute path");
        assert_eq!(why("/"), "the name is an absolute path");
    }

    #[test]
    fn rejects_dot_dot_anywhere() {
        for name in ["..", "../x", "a/../b", "a/.."] {
            assert_eq!(why(name), "the name has a '..' component", "{name:?}");
        }
    }

    #[test]
    fn rejects_dot_component() {
        for name in [".", "./x", "a/./b", "a/."] {
            assert_eq!(why(name), "the name has a '.' component", "{name:?}");
        }
    }

    #[test]
    fn rejects_empty_components() {
        for name in ["a//b", "a/", "a/b/"] {
            assert!(why(name).contains("empty component"), "{name:?}");
        }
    }

    #[test]
    fn rejects_backslash() {
        assert_eq!(why("a\\b"), "the name contains a backslash");
        assert_eq!(why("..\\x"), "the name contains a backslash");
    }

    #[test]
    fn rejects_nul() {
        assert_eq!(why("a\0b"), "the name contains a NUL byte");
    }

    #[test]
    fn rejects_control_characters() {
        assert_eq!(why("a\nb"), "the name contains a control character");
        assert_eq!(why("a\u{7f}"), "the name contains a control character");
    }

    #[test]
    fn component_length_limit_is_255_bytes() {
        let ok = "x".repeat(255);
        validate_entry_name(&ok).unwrap();
        validate_entry_name(&format!("d/{ok}")).unwrap();
        assert!(why(&"x".repeat(256)).contains("longer than 255"));
        assert!(why(&format!("d/{}/f", "é".repeat(128))).contains("longer than 255"));
    }

    #[test]
    fn total_length_limit_is_4096_bytes() {
        let component = "x".repeat(200);
        let long = vec![component; 21].join("/"); // 21*200 + 20 = 4220 bytes
        assert!(why(&long).contains("longer than 4096"));
        let fits = vec!["x".repeat(200); 20].join("/"); // 4019 bytes
        validate_entry_name(&fits).unwrap();
    }

    #[test]
    fn rejects_duplicate_names() {
        let err = validate_entry_names(["a/b", "c", "a/b"]).unwrap_err();
        assert!(
            matches!(&err, Error::BadEntryName { name, why } if name == "a/b" && why.contains("twice")),
            "{err:?}"
        );
    }

    #[test]
    fn rejects_name_that_is_also_a_directory() {
        for names in [["a", "a/b"], ["a/b/c", "a/b"]] {
            let err = validate_entry_names(names).unwrap_err();
            assert!(
                matches!(&err, Error::BadEntryName { why, .. } if why.contains("both a file and the directory")),
                "{names:?}: {err:?}"
            );
        }
    }

    #[test]
    fn accepts_siblings_sharing_a_prefix() {
        validate_entry_names(["a", "ab", "a.b/c", "abc/d", "x/a", "x/ab"]).unwrap();
    }

    #[test]
    fn set_check_validates_each_name() {
        assert!(matches!(
            validate_entry_names(["ok", "../bad"]),
            Err(Error::BadEntryName { .. })
        ));
    }
}
