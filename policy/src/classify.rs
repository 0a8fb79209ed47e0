//! Which executions are compilations, decided on argv bytes without
//! allocating (the caller may be a vfork child).

use alloc::boxed::Box;
use alloc::vec::Vec;

use crate::compilers::{self, Compiler, COMPILERS, WRAPPERS};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Not a compiler (or an allowed one): never gated, never journaled.
    Other,
    /// A compiler run that builds nothing: `--version`, `-dumpmachine`, ...
    Probe,
    Compile,
}

impl Kind {
    /// The journal's `kind` field.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Other => "other",
            Kind::Probe => "probe",
            Kind::Compile => "compile",
        }
    }
}

/// Wrappers wrapping wrappers (`ccache distcc g++`) are followed this deep.
const MAX_WRAPPER_DEPTH: usize = 4;

/// Version suffix words that still name the tool (mingw's `gcc-posix`).
const SUFFIX_WORDS: &[&[u8]] = &[b"posix", b"win32"];

/// The builtin table, plus extra names, minus allowed names, plus the strict flag.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    extra: Vec<Box<[u8]>>,
    allow: Vec<Box<[u8]>>,
    strict: bool,
}

impl Rules {
    /// The builtin table alone, not strict. `const`, so it can initialise a static.
    pub const fn builtin() -> Rules {
        Rules {
            extra: Vec::new(),
            allow: Vec::new(),
            strict: false,
        }
    }

    /// From the values of `PRECOMPILE_COMPILERS` and `PRECOMPILE_ALLOW`
    /// (colon-separated, empty components ignored) and `PRECOMPILE_STRICT`.
    /// Allocates: call once at startup, never on the exec path.
    pub fn from_env_values(compilers: Option<&str>, allow: Option<&str>, strict: bool) -> Rules {
        Rules {
            extra: split_names(compilers),
            allow: split_names(allow),
            strict,
        }
    }

    pub fn strict(&self) -> bool {
        self.strict
    }

    /// Classifies one execution. Must not allocate, lock or panic.
    ///
    /// `exe` is the path the exec was asked to run (a bare name for execvp),
    /// `resolved` the final target after symlinks if the caller resolved it,
    /// `argv` the arguments including `argv[0]`. Either `exe` or `resolved`
    /// naming a compiler (that is not allowed) makes it one.
    pub fn classify<'a, I>(&self, exe: &[u8], resolved: Option<&[u8]>, argv: I) -> Kind
    where
        I: Iterator<Item = &'a [u8]> + Clone,
    {
        // A wrapper's wrapped command is argv[k]; its own arguments follow it.
        // `rest` is always what follows the program being looked at.
        let mut rest = argv;
        rest.next();
        let (mut exe, mut resolved) = (exe, resolved);
        for _ in 0..=MAX_WRAPPER_DEPTH {
            let tool = self
                .tool(exe)
                .or_else(|| resolved.and_then(|r| self.tool(r)));
            if let Some(tool) = tool {
                return probe_or_compile(tool.bare_v_probe, rest);
            }
            let next = if is_loader(exe) || resolved.is_some_and(is_loader) {
                // `ld-linux-x86-64.so.2 [options] program args`: the program runs.
                match loader_program(&mut rest) {
                    Some(program) => program,
                    None => return Kind::Other,
                }
            } else if is_wrapper(exe) || resolved.is_some_and(is_wrapper) {
                match rest.next() {
                    Some(next) if !next.is_empty() && next[0] != b'-' => next,
                    // `ccache -s`, `ccache --version`, bare `ccache`: its own command.
                    _ => return Kind::Other,
                }
            } else {
                return Kind::Other;
            };
            (exe, resolved) = (next, None);
        }
        // Absurdly deep wrapping: refuse rather than guess.
        Kind::Compile
    }

    /// The compiler `path` names, unless it is allowed.
    fn tool(&self, path: &[u8]) -> Option<Compiler> {
        let base = basename(path);
        if base.is_empty() || self.allow.iter().any(|a| **a == *base) {
            return None;
        }
        let allowed = |name: &[u8]| self.allow.iter().any(|a| **a == *name);
        let builtin = COMPILERS.iter().copied().find(|t| {
            names_tool(base, t.name.as_bytes(), t.any_suffix) && !allowed(t.name.as_bytes())
        });
        builtin.or_else(|| {
            // Extra names get the conservative defaults: version suffixes only,
            // and `-v` is not assumed to be a probe.
            self.extra
                .iter()
                .find(|name| names_tool(base, name, false) && !allowed(name))
                .map(|_| Compiler {
                    name: "",
                    any_suffix: false,
                    bare_v_probe: false,
                })
        })
    }
}

fn split_names(value: Option<&str>) -> Vec<Box<[u8]>> {
    value
        .unwrap_or("")
        .split(':')
        .filter(|s| !s.is_empty())
        .map(|s| s.as_bytes().into())
        .collect()
}

fn basename(path: &[u8]) -> &[u8] {
    match path.iter().rposition(|&b| b == b'/') {
        Some(slash) => &path[slash + 1..],
        None => path,
    }
}

fn is_wrapper(path: &[u8]) -> bool {
    compilers::contains(WRAPPERS, basename(path))
}

/// The dynamic loader run as a program: `ld-linux-x86-64.so.2`, `ld-linux.so.2`,
/// `ld64.so.2`, `ld-musl-x86_64.so.1`, `ld.so`, `ld-2.36.so`.
pub fn is_loader(path: &[u8]) -> bool {
    let base = basename(path);
    let Some(tail) = base
        .strip_prefix(b"ld-")
        .or_else(|| base.strip_prefix(b"ld64."))
        .or_else(|| base.strip_prefix(b"ld."))
    else {
        return false;
    };
    tail.starts_with(b"so") || tail.windows(4).any(|w| w == b".so.") || tail.ends_with(b".so")
}

/// The program a loader command line runs, past the loader's own options
/// (glibc's rtld: those in [`compilers::LOADER_VALUE_OPTIONS`] take the next
/// argument); `None` when it runs none (`--list`, `--verify`, `--help`, no program).
/// `rest` starts after the loader's own argv[0] and is left at the program's
/// first argument.
pub fn loader_program<'a, I: Iterator<Item = &'a [u8]>>(rest: &mut I) -> Option<&'a [u8]> {
    loop {
        let arg = rest.next()?;
        if !arg.starts_with(b"--") {
            return (!arg.is_empty()).then_some(arg);
        }
        if compilers::contains(compilers::LOADER_VALUE_OPTIONS, arg) {
            rest.next()?;
        } else if compilers::contains(compilers::LOADER_INFO_OPTIONS, arg) {
            return None;
        }
        // any other `--flag` (or `--flag=value`) stands alone
    }
}

/// Does `base` name tool `name`, allowing a target-triple prefix
/// (`x86_64-linux-gnu-`) and a version suffix (`-12`, `-12.2`, `12`)?
fn names_tool(base: &[u8], name: &[u8], any_suffix: bool) -> bool {
    let mut start = 0;
    loop {
        if start == 0 || is_triple(&base[..start - 1]) {
            if let Some(tail) = base[start..].strip_prefix(name) {
                if suffix_ok(tail, any_suffix) {
                    return true;
                }
            }
        }
        match base[start..].iter().position(|&b| b == b'-') {
            Some(dash) => start += dash + 1,
            None => return false,
        }
    }
}

/// At least two `-`-separated components of letters, digits, `_` or `.`,
/// starting with a letter: `arm-linux-gnueabihf`, `x86_64-w64-mingw32`. One
/// component is not enough, or `llvm-as` and `foo-ld` would count.
fn is_triple(prefix: &[u8]) -> bool {
    let word = |w: &[u8]| {
        !w.is_empty()
            && w.iter()
                .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.')
    };
    prefix.first().is_some_and(u8::is_ascii_alphabetic)
        && prefix.split(|&b| b == b'-').count() >= 2
        && prefix.split(|&b| b == b'-').all(word)
}

fn is_version(word: &[u8]) -> bool {
    word.first().is_some_and(u8::is_ascii_digit)
        && word.iter().all(|&b| b.is_ascii_digit() || b == b'.')
}

/// What may follow the tool name: nothing, a glued version (`gcc12`), or
/// `-` and version components (`-12`, `-12.2-posix`); for `any_suffix`
/// tools any `-word` (`ptxas-blackwell`). `gcc-ar`, `clang-format` and
/// `ldd` fail here.
fn suffix_ok(tail: &[u8], any_suffix: bool) -> bool {
    match tail.split_first() {
        None => true,
        Some((b'-', words)) if !words.is_empty() => {
            any_suffix
                || words
                    .split(|&b| b == b'-')
                    .all(|w| is_version(w) || SUFFIX_WORDS.contains(&w))
        }
        Some(_) => is_version(tail),
    }
}

fn is_probe_flag(arg: &[u8]) -> bool {
    compilers::contains(compilers::PROBE_FLAGS, arg)
        || compilers::PROBE_PREFIXES
            .iter()
            .any(|p| arg.starts_with(p.as_bytes()))
}

/// A compiler run is a probe when it asks only for information: a probe flag
/// (or a lone `-v` where that exits) and no input. An input is any
/// non-option argument that is not an option's separate value, a lone `-`
/// (stdin), anything after `--`, and `@file` response files.
fn probe_or_compile<'a>(bare_v_probe: bool, args: impl Iterator<Item = &'a [u8]>) -> Kind {
    let (mut probe, mut value_next, mut options_done) = (false, false, false);
    for arg in args {
        if value_next {
            value_next = false;
        } else if options_done || arg == b"-" || arg.first() != Some(&b'-') {
            return Kind::Compile;
        } else if arg == b"--" {
            options_done = true;
        } else if is_probe_flag(arg) || (bare_v_probe && arg == b"-v") {
            probe = true;
        } else if compilers::contains(compilers::SEPARATE_VALUE_OPTIONS, arg) {
            value_next = true;
        }
    }
    if probe {
        Kind::Probe
    } else {
        Kind::Compile
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind_with(rules: &Rules, exe: &str, resolved: Option<&str>, argv: &str) -> Kind {
        let args: Vec<&[u8]> = argv
            .split(' ')
            .filter(|a| !a.is_empty())
            .map(str::as_bytes)
            .collect();
        rules.classify(
            exe.as_bytes(),
            resolved.map(str::as_bytes),
            args.iter().copied(),
        )
    }

    /// `argv` is space-separated; argv[0]'s path is also the exe.
    fn kind(argv: &str) -> Kind {
        let exe = argv.split(' ').next().unwrap();
        kind_with(&Rules::builtin(), exe, None, argv)
    }

    #[test]
    fn plain_compiles() {
        for argv in [
            "gcc -c a.c -o a.o",
            "/usr/bin/g++ -O2 a.cpp",
            "cc1plus -quiet -imultiarch x86_64-linux-gnu a.cpp -o a.s",
            "nvcc -arch sm_90 k.cu",
            "ld -o a.out a.o",
            "ninja",
            "ninja -C build",
            "clang-offload-bundler -type=o -targets=host -input=a.o -output=b.o",
            "fatbinary --create=x.fatbin -64 --image=profile=sm_90,file=x.cubin",
        ] {
            assert_eq!(kind(argv), Kind::Compile, "{argv}");
        }
    }

    #[test]
    fn verbose_with_input_compiles_and_alone_probes() {
        assert_eq!(kind("g++ -v foo.c"), Kind::Compile);
        assert_eq!(kind("g++ -v"), Kind::Probe);
    }

    #[test]
    fn stdin_and_dev_null_are_inputs() {
        assert_eq!(kind("g++ -E -"), Kind::Compile);
        assert_eq!(kind("g++ -E -x c++ /dev/null"), Kind::Compile);
        assert_eq!(kind("g++ -dumpversion -"), Kind::Compile);
    }

    #[test]
    fn version_probes() {
        for argv in [
            "gcc --version",
            "gcc -dumpversion",
            "gcc -dumpfullversion -dumpversion",
            "cc -dumpmachine",
            "gcc -print-file-name=libgcc.a",
            "gcc -print-search-dirs",
            "gcc -print-prog-name=cc1plus -v",
            "clang++-16 -print-resource-dir",
            "clang --print-multiarch",
            "gcc --help=optimizers",
            "ptxas --version",
            "ptxas-blackwell --version",
            "ninja --version",
            "nvcc --version",
            "nvcc -V",
            "as --version",
            "ld -v",
            "gcc -x c++ -E --version",
            "gcc -o out --version",
        ] {
            assert_eq!(kind(argv), Kind::Probe, "{argv}");
        }
    }

    #[test]
    fn option_values_are_not_inputs_but_everything_else_is() {
        assert_eq!(kind("gcc -I /usr/include -D FOO --version"), Kind::Probe);
        assert_eq!(kind("gcc --version a.c"), Kind::Compile);
        assert_eq!(kind("gcc --version @args.rsp"), Kind::Compile);
        assert_eq!(kind("gcc --version -- -weird-file.c"), Kind::Compile);
        assert_eq!(kind("gcc --version -Ifoo"), Kind::Probe);
    }

    #[test]
    fn verbose_is_not_a_probe_where_the_tool_still_builds() {
        assert_eq!(kind("ninja -v"), Kind::Compile);
        assert_eq!(kind("as -v"), Kind::Compile);
        assert_eq!(kind("cc1plus -v"), Kind::Compile);
    }

    #[test]
    fn no_arguments_is_a_compile() {
        assert_eq!(kind("gcc"), Kind::Compile);
    }

    #[test]
    fn ptxas_variants_compile() {
        assert_eq!(
            kind("ptxas-blackwell -arch sm_90 x.ptx -o x.cubin"),
            Kind::Compile
        );
        assert_eq!(
            kind("/opt/triton/backends/nvidia/bin/ptxas-blackwell -arch sm_90 x.ptx"),
            Kind::Compile
        );
        assert_eq!(
            kind("cicc-12.4 -arch compute_90 x.ii -o x.ptx"),
            Kind::Compile
        );
    }

    #[test]
    fn version_suffixes_and_target_prefixes() {
        for argv in [
            "/usr/bin/x86_64-linux-gnu-g++-12 -c a.cpp",
            "aarch64-linux-gnu-gcc -c a.c",
            "x86_64-w64-mingw32-gcc -c a.c",
            "x86_64-w64-mingw32-g++-posix -c a.c",
            "gcc-12 a.c",
            "gcc-12.2 a.c",
            "gcc12 a.c",
            "clang++-16 a.cpp",
            "./bin/ld.lld-16 a.o",
            "x86_64-linux-gnu-ld.bfd a.o",
            "riscv64-unknown-linux-gnu-as a.s",
            "x86_64-conda-linux-gnu-cc a.c",
        ] {
            assert_eq!(kind(argv), Kind::Compile, "{argv}");
        }
    }

    #[test]
    fn lookalike_names_are_other() {
        for argv in [
            "ldd /bin/sh",
            "ldconfig",
            "ldconfig -p",
            "bash -c g++",
            "sh -c gcc",
            "python3 -c pass",
            "gas x.s",
            "ccache-swig x",
            "c++filt _Z1fv",
            "gcc-ar rcs a.a a.o",
            "x86_64-linux-gnu-gcc-nm-12 a.o",
            "clang-format a.cpp",
            "llvm-as a.ll",
            "nvdisasm x.cubin",
            "ld.so --list /bin/sh",
            "/lib64/ld-linux-x86-64.so.2 /bin/true",
            "pkg-config --cflags x",
            "/usr/bin/",
            "git status",
        ] {
            assert_eq!(kind(argv), Kind::Other, "{argv}");
        }
    }

    #[test]
    fn resolved_symlink_target_counts() {
        let rules = Rules::builtin();
        assert_eq!(
            kind_with(
                &rules,
                "/usr/local/bin/mycxx",
                Some("/usr/bin/g++-12"),
                "mycxx -c a.cpp"
            ),
            Kind::Compile
        );
        assert_eq!(
            kind_with(
                &rules,
                "/usr/bin/c++",
                Some("/usr/bin/g++-12"),
                "c++ -c a.cpp"
            ),
            Kind::Compile
        );
        assert_eq!(
            kind_with(
                &rules,
                "/usr/bin/python3",
                Some("/usr/bin/python3.12"),
                "python3"
            ),
            Kind::Other
        );
    }

    #[test]
    fn wrappers_classify_the_wrapped_command() {
        assert_eq!(kind("ccache g++ -c a.c"), Kind::Compile);
        assert_eq!(
            kind("/usr/bin/sccache /usr/bin/nvcc -c k.cu"),
            Kind::Compile
        );
        assert_eq!(kind("distcc gcc --version"), Kind::Probe);
        assert_eq!(kind("ccache distcc g++ -c a.c"), Kind::Compile);
        assert_eq!(kind("icecc clang++-16 -c a.cpp"), Kind::Compile);
    }

    #[test]
    fn the_dynamic_loader_runs_the_program_it_is_given() {
        // `ld.so <program> args` runs the program: a compiler run through it is one
        let cc1plus = "/usr/libexec/gcc/x86_64-linux-gnu/12/cc1plus";
        assert_eq!(
            kind(&format!(
                "/lib64/ld-linux-x86-64.so.2 {cc1plus} -quiet t.cpp -o e.s"
            )),
            Kind::Compile
        );
        assert_eq!(
            kind("/lib/ld-linux-aarch64.so.1 /usr/bin/as t.s -o t.o"),
            Kind::Compile
        );
        assert_eq!(
            kind("ld.so --library-path /x --argv0 cc /usr/bin/g++ -c a.c"),
            Kind::Compile
        );
        assert_eq!(
            kind("ld-2.36.so --inhibit-cache /usr/bin/gcc --version"),
            Kind::Probe
        );
        assert_eq!(
            kind("/lib/ld-musl-x86_64.so.1 /usr/bin/ld a.o"),
            Kind::Compile
        );
        // the loader's own commands, and other programs run through it
        assert_eq!(
            kind("/lib64/ld-linux-x86-64.so.2 --list /usr/bin/g++"),
            Kind::Other
        );
        assert_eq!(
            kind("/lib64/ld-linux-x86-64.so.2 --verify /usr/bin/as"),
            Kind::Other
        );
        assert_eq!(kind("/lib64/ld-linux-x86-64.so.2"), Kind::Other);
        assert_eq!(
            kind("/lib64/ld-linux-x86-64.so.2 /usr/bin/python3 x.py"),
            Kind::Other
        );
        // the linker is not the loader
        assert_eq!(kind("ld -o a a.o"), Kind::Compile);
        assert_eq!(kind("ldconfig -p"), Kind::Other);
    }

    #[test]
    fn wrappers_own_commands_are_other() {
        assert_eq!(kind("ccache --version"), Kind::Other);
        assert_eq!(kind("ccache -s"), Kind::Other);
        assert_eq!(kind("ccache"), Kind::Other);
        assert_eq!(kind("ccache python3 x.py"), Kind::Other);
    }

    #[test]
    fn wrapper_reached_through_a_symlink() {
        // /usr/lib/ccache/g++ -> /usr/bin/ccache: the name alone says compiler.
        let rules = Rules::builtin();
        assert_eq!(
            kind_with(
                &rules,
                "/usr/lib/ccache/g++",
                Some("/usr/bin/ccache"),
                "g++ -c a.c"
            ),
            Kind::Compile
        );
        assert_eq!(
            kind_with(
                &rules,
                "/usr/lib/ccache/g++",
                Some("/usr/bin/ccache"),
                "g++ --version"
            ),
            Kind::Probe
        );
    }

    #[test]
    fn allowed_names_are_other() {
        let rules = Rules::from_env_values(None, Some("ninja"), false);
        assert_eq!(kind_with(&rules, "ninja", None, "ninja"), Kind::Other);
        assert_eq!(
            kind_with(&rules, "/usr/bin/ninja-1.11", None, "ninja-1.11"),
            Kind::Other
        );
        assert_eq!(kind_with(&rules, "g++", None, "g++ -c a.c"), Kind::Compile);
        let exact = Rules::from_env_values(None, Some("::g++-12:"), false);
        assert_eq!(kind_with(&exact, "g++-12", None, "g++-12 a.c"), Kind::Other);
        assert_eq!(
            kind_with(&exact, "g++-13", None, "g++-13 a.c"),
            Kind::Compile
        );
    }

    #[test]
    fn allowed_name_with_a_compiler_symlink_target_is_still_a_compiler() {
        let rules = Rules::from_env_values(None, Some("c++"), false);
        assert_eq!(
            kind_with(&rules, "/usr/bin/c++", None, "c++ a.c"),
            Kind::Other
        );
        assert_eq!(
            kind_with(&rules, "/usr/bin/c++", Some("/usr/bin/g++-12"), "c++ a.c"),
            Kind::Compile
        );
    }

    #[test]
    fn extra_names_match_with_suffixes() {
        let rules = Rules::from_env_values(Some("mycc::other-cc"), None, false);
        assert_eq!(
            kind_with(&rules, "mycc-3", None, "mycc-3 x.c"),
            Kind::Compile
        );
        assert_eq!(
            kind_with(&rules, "/opt/bin/mycc", None, "mycc --version"),
            Kind::Probe
        );
        assert_eq!(kind_with(&rules, "mycc", None, "mycc -v"), Kind::Compile);
        assert_eq!(
            kind_with(&rules, "other-cc", None, "other-cc x.c"),
            Kind::Compile
        );
        assert_eq!(kind_with(&rules, "myccx", None, "myccx x.c"), Kind::Other);
        assert_eq!(
            kind_with(&Rules::builtin(), "mycc-3", None, "mycc-3 x.c"),
            Kind::Other
        );
    }

    #[test]
    fn extra_name_can_be_allowed_again() {
        let rules = Rules::from_env_values(Some("mycc"), Some("mycc"), false);
        assert_eq!(kind_with(&rules, "mycc", None, "mycc x.c"), Kind::Other);
    }

    #[test]
    fn strict_flag_is_kept() {
        assert!(!Rules::builtin().strict());
        assert!(Rules::from_env_values(None, None, true).strict());
    }

    #[test]
    fn non_utf8_names_and_arguments_are_fine() {
        let argv: [&[u8]; 3] = [b"g\xff++", b"-c", b"\xfe.c"];
        assert_eq!(
            Rules::builtin().classify(argv[0], None, argv.iter().copied()),
            Kind::Other
        );
        let argv: [&[u8]; 2] = [b"gcc", b"\xfe.c"];
        assert_eq!(
            Rules::builtin().classify(b"gcc", None, argv.iter().copied()),
            Kind::Compile
        );
    }

    #[test]
    fn empty_argv_is_judged_by_name() {
        assert_eq!(
            Rules::builtin().classify(b"gcc", None, core::iter::empty()),
            Kind::Compile
        );
        assert_eq!(
            Rules::builtin().classify(b"ccache", None, core::iter::empty()),
            Kind::Other
        );
    }

    #[test]
    fn kind_strings() {
        assert_eq!(Kind::Other.as_str(), "other");
        assert_eq!(Kind::Probe.as_str(), "probe");
        assert_eq!(Kind::Compile.as_str(), "compile");
    }
}
