//! The compilers (and dynamic loaders) this host has, so that a renamed copy
//! is recognised by what it is, not by its name.
//!
//! At start: the programs on `PATH`, in GCC's libexec directories and in
//! /usr/local/cuda whose names the rules call compilers (cc1plus, as, ld,
//! cicc, ptxas, ... live there), and the dynamic loaders, indexed by (device, inode) and by size; a `stat` each,
//! nothing read. At an exec: the same inode is that program (a hard link);
//! a file of the same size is compared byte for byte with each candidate.
//! Only a match is cached (per device, inode, size, mtime, ctime): a cached
//! "not a compiler" could outlive a rewrite within one timestamp tick. A copy that differs by one byte, or of a
//! compiler this host does not have, is not recognised (README, Limits).

use std::collections::HashMap;
use std::ffi::OsStr;
use std::fs::File;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};

use policy::classify::is_loader;
use policy::{Kind, Rules};

use super::target::Opened;

/// Where GCC keeps its internal programs, `<root>/<triple>/<version>/`.
const GCC_LIBEXEC_ROOTS: &[&str] = &["/usr/lib/gcc", "/usr/libexec/gcc", "/usr/lib64/gcc"];
/// CUDA's tools, often not on PATH (nvcc finds cicc and ptxas itself).
const CUDA_DIRS: &[&str] = &["/usr/local/cuda/bin", "/usr/local/cuda/nvvm/bin"];
/// Where the dynamic loaders are.
const LOADER_DIRS: &[&str] = &[
    "/lib64",
    "/lib",
    "/usr/lib64",
    "/usr/lib",
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
];

type CacheKey = (u64, u64, u64, i64, i64, i64, i64);

#[derive(Default)]
pub struct Known {
    /// The path each was found under (its name says what it is).
    files: Vec<PathBuf>,
    by_inode: HashMap<(u64, u64), usize>,
    by_size: HashMap<u64, Vec<usize>>,
    matched: HashMap<CacheKey, usize>,
}

impl Known {
    /// The host's compilers under `rules`, with `path_var` the command's PATH.
    pub fn scan(rules: &Rules, path_var: Option<&OsStr>) -> Known {
        let mut k = Known::default();
        let is_compiler = |name: &[u8]| {
            let argv = [name, b"x.c".as_slice()];
            rules.classify(name, None, argv.iter().copied()) == Kind::Compile
        };
        let mut dirs: Vec<PathBuf> = path_var
            .map(|p| std::env::split_paths(p).collect())
            .unwrap_or_default();
        for root in GCC_LIBEXEC_ROOTS {
            for triple in subdirs(Path::new(root)) {
                dirs.extend(subdirs(&triple));
            }
        }
        dirs.extend(CUDA_DIRS.iter().map(PathBuf::from));
        for dir in &dirs {
            k.add_matching(dir, &is_compiler);
        }
        for dir in LOADER_DIRS {
            k.add_matching(Path::new(dir), &|name: &[u8]| is_loader(name));
        }
        k
    }

    fn add_matching(&mut self, dir: &Path, wanted: &dyn Fn(&[u8]) -> bool) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            if wanted(entry.file_name().as_bytes()) {
                self.add(entry.path());
            }
        }
    }

    fn add(&mut self, path: PathBuf) {
        let Ok(meta) = std::fs::metadata(&path) else {
            return;
        };
        if !meta.is_file() || self.by_inode.contains_key(&(meta.dev(), meta.ino())) {
            return;
        }
        let i = self.files.len();
        self.files.push(path);
        self.by_inode.insert((meta.dev(), meta.ino()), i);
        self.by_size.entry(meta.size()).or_default().push(i);
    }

    /// The host program `file` is (the same inode, or the same bytes).
    pub fn identify(&mut self, file: &Opened) -> Option<&Path> {
        let m = &file.meta;
        if let Some(&i) = self.by_inode.get(&(m.dev(), m.ino())) {
            return Some(&self.files[i]);
        }
        let candidates = self.by_size.get(&m.size())?;
        let key = (
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime(),
            m.mtime_nsec(),
            m.ctime(),
            m.ctime_nsec(),
        );
        let found = match self.matched.get(&key) {
            Some(&i) => Some(i),
            None => {
                let found = candidates
                    .iter()
                    .copied()
                    .find(|&i| same_bytes(&file.file, &self.files[i]));
                if let Some(i) = found {
                    self.matched.insert(key, i);
                }
                found
            }
        };
        found.map(|i| self.files[i].as_path())
    }
}

fn subdirs(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `file` holds exactly the bytes of `known` (sizes already equal).
fn same_bytes(file: &File, known: &Path) -> bool {
    let Ok(mut other) = File::open(known) else {
        return false;
    };
    const CHUNK: usize = 1 << 18;
    let (mut a, mut b) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
    let mut at = 0u64;
    loop {
        let n = match file.read_at(&mut a, at) {
            Ok(n) => n,
            Err(_) => return false,
        };
        if n == 0 {
            // both at their end: `other` must be too
            return other.read(&mut b[..1]).is_ok_and(|m| m == 0);
        }
        if other.read_exact(&mut b[..n]).is_err() || a[..n] != b[..n] {
            return false;
        }
        at += n as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::OpenOptionsExt;

    fn opened(path: &Path) -> Opened {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
            .unwrap();
        let meta = file.metadata().unwrap();
        Opened {
            file,
            real: path.to_path_buf(),
            meta,
        }
    }

    #[test]
    fn a_copy_is_known_by_its_bytes_and_a_changed_one_is_not() {
        let dir = std::env::temp_dir().join(format!("precompile-known-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("bin")).unwrap();
        std::fs::write(dir.join("bin/g++"), b"pretend compiler bytes").unwrap();
        std::fs::write(dir.join("bin/notes"), b"pretend compiler bytez").unwrap();
        let mut k = Known::scan(&Rules::builtin(), Some(dir.join("bin").as_os_str()));
        assert!(
            k.files.iter().any(|p| p.ends_with("bin/g++")),
            "{:?}",
            k.files
        );
        assert!(!k.files.iter().any(|p| p.ends_with("notes")));

        let copy = dir.join("innocent");
        std::fs::copy(dir.join("bin/g++"), &copy).unwrap();
        assert!(k.identify(&opened(&copy)).unwrap().ends_with("bin/g++"));
        let link = dir.join("hardlink");
        std::fs::hard_link(dir.join("bin/g++"), &link).unwrap();
        assert!(k.identify(&opened(&link)).unwrap().ends_with("bin/g++"));
        // same size, one byte different
        assert!(k.identify(&opened(&dir.join("bin/notes"))).is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
