//! What the rules know about programs: the builtin compiler table, the
//! wrappers that run a compiler named in their arguments, and the option
//! tables the probe test reads. All data, all sorted, so lookups are binary
//! searches with no allocation and the tests can check the order.

/// One program that builds something when it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compiler {
    pub name: &'static str,
    /// Any `-word` suffix still names this tool (Triton ships `ptxas-blackwell`;
    /// CUDA tools get renamed freely). Otherwise only version suffixes count.
    pub any_suffix: bool,
    /// A lone `-v` without inputs prints the version and exits. False where
    /// `-v` means "verbose" and the tool still builds (ninja) or then reads
    /// stdin (as, cc1*, llc).
    pub bare_v_probe: bool,
}

const fn c(name: &'static str, any_suffix: bool, bare_v_probe: bool) -> Compiler {
    Compiler {
        name,
        any_suffix,
        bare_v_probe,
    }
}

/// Sorted by name (byte order); the test fails otherwise. Left out on purpose:
/// disassemblers and dumpers (nvdisasm, cuobjdump, objdump), `cpp`, `ar`, and
/// MSVC's `cl` (too generic a basename on Linux). `zig` is in: nearly every
/// zig invocation builds, and torch never runs it.
pub static COMPILERS: &[Compiler] = &[
    c("amdclang", false, true),
    c("amdclang++", false, true),
    c("as", false, false),
    c("c++", false, true),
    c("cc", false, true),
    c("cc1", false, false),
    c("cc1obj", false, false),
    c("cc1objplus", false, false),
    c("cc1plus", false, false),
    c("cicc", true, false),
    c("clang", false, true),
    c("clang++", false, true),
    c("clang-cl", false, false),
    c("clang-offload-bundler", false, false),
    c("clang-offload-packager", false, false),
    c("collect2", false, false),
    c("cudafe++", false, false),
    c("fatbinary", true, false),
    c("g++", false, true),
    c("gcc", false, true),
    c("gfortran", false, true),
    c("gold", false, true),
    c("hipcc", false, true),
    c("icc", false, true),
    c("icpc", false, true),
    c("icpx", false, true),
    c("icx", false, true),
    c("ld", false, true),
    c("ld.bfd", false, true),
    c("ld.gold", false, true),
    c("ld.lld", false, true),
    c("ld.mold", false, true),
    c("llc", false, false),
    c("lld", false, false),
    c("lld-link", false, false),
    c("lto-wrapper", false, false),
    c("lto1", false, false),
    c("mold", false, true),
    c("ninja", false, false),
    c("ninja-build", false, false),
    c("nvc", false, true),
    c("nvc++", false, true),
    c("nvcc", true, true),
    c("nvlink", true, false),
    c("ptxas", true, true),
    c("tcc", false, true),
    c("zig", false, false),
];

/// Programs that run the compiler named by their first non-option argument.
/// With an option first they are running their own command (`ccache -s`,
/// `ccache --version`): that compiles nothing and is classified Other.
pub static WRAPPERS: &[&str] = &["ccache", "distcc", "icecc", "sccache"];

/// The dynamic loader's options that take the next argument (glibc's rtld).
pub static LOADER_VALUE_OPTIONS: &[&str] = &[
    "--argv0",
    "--audit",
    "--glibc-hwcaps-mask",
    "--glibc-hwcaps-prefix",
    "--inhibit-rpath",
    "--library-path",
    "--preload",
];

/// The dynamic loader's options after which it runs no program.
pub static LOADER_INFO_OPTIONS: &[&str] = &[
    "--help",
    "--list",
    "--list-diagnostics",
    "--list-tunables",
    "--verify",
    "--version",
];

/// Arguments after which the tool prints information and exits without
/// building (when no input is given as well).
pub static PROBE_FLAGS: &[&str] = &[
    "-###",
    "--help",
    "--target-help",
    "--version",
    "-V",
    "-dumpfullversion",
    "-dumpmachine",
    "-dumpspecs",
    "-dumpversion",
    "-help",
    "-qversion",
    "-version",
];

/// Prefixes of probe arguments: `-print-file-name=libgcc.a`, `--print-multiarch`,
/// `--help=optimizers`.
pub static PROBE_PREFIXES: &[&str] = &["--help=", "--print-", "-print-"];

/// Options whose value is the next argument, across gcc, clang, cc1, ld,
/// collect2, nvcc, cicc, ptxas and ninja. An entry here hides the next
/// argument from the input test, so an option is listed only where it takes a
/// separate value for every tool that accepts it (`-C`, `-t`, `-w`, `-h` are
/// flags for some and are left out): a missing entry errs toward Compile.
pub static SEPARATE_VALUE_OPTIONS: &[&str] = &[
    "--compiler-bindir",
    "--compiler-options",
    "--cudart",
    "--def-load-cache",
    "--define-macro",
    "--dependency-output",
    "--dynamic-linker",
    "--entry",
    "--force-load-cache",
    "--gen_c_file_name",
    "--gen_device_file_name",
    "--generate-code",
    "--gpu-architecture",
    "--gpu-code",
    "--gpu-name",
    "--include-path",
    "--include_file_name",
    "--library",
    "--library-path",
    "--linker-options",
    "--machine",
    "--maxrregcount",
    "--module_id_file_name",
    "--nvlink-options",
    "--opt-level",
    "--options-file",
    "--orig_src_file_name",
    "--orig_src_path_name",
    "--output-directory",
    "--output-file",
    "--param",
    "--pre-include",
    "--ptxas-options",
    "--relocatable-device-code",
    "--std",
    "--stub_file_name",
    "--sysroot",
    "--system-include",
    "--threads",
    "--undefine-macro",
    "-A",
    "-B",
    "-D",
    "-F",
    "-I",
    "-L",
    "-MF",
    "-MJ",
    "-MQ",
    "-MT",
    "-Map",
    "-R",
    "-T",
    "-U",
    "-Xarchive",
    "-Xassembler",
    "-Xclang",
    "-Xcompiler",
    "-Xcuda-fatbinary",
    "-Xcuda-ptxas",
    "-Xfatbin",
    "-Xlinker",
    "-Xnvlink",
    "-Xoffload-linker",
    "-Xopenmp-target",
    "-Xpreprocessor",
    "-Xptxas",
    "-arch",
    "-aux-info",
    "-auxbase",
    "-auxbase-strip",
    "-ccbin",
    "-code",
    "-cudart",
    "-cxx-isystem",
    "-dumpbase",
    "-dumpbase-ext",
    "-dumpdir",
    "-dynamic-linker",
    "-e",
    "-f",
    "-framework",
    "-gencode",
    "-iframework",
    "-imacros",
    "-imultiarch",
    "-imultilib",
    "-include",
    "-internal-externc-isystem",
    "-internal-isystem",
    "-iprefix",
    "-iquote",
    "-isysroot",
    "-isystem",
    "-ivfsoverlay",
    "-iwithprefix",
    "-iwithprefixbefore",
    "-j",
    "-k",
    "-l",
    "-m",
    "-main-file-name",
    "-maxrregcount",
    "-mllvm",
    "-o",
    "-odir",
    "-optf",
    "-plugin",
    "-plugin-opt",
    "-rdc",
    "-resource-dir",
    "-rpath",
    "-rpath-link",
    "-soname",
    "-std",
    "-target",
    "-triple",
    "-u",
    "-wrapper",
    "-x",
    "-z",
];

/// Exact lookup in one of the sorted string tables; no allocation.
pub fn contains(table: &[&str], item: &[u8]) -> bool {
    table
        .binary_search_by(|probe| probe.as_bytes().cmp(item))
        .is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_strictly_sorted<'a>(what: &str, names: impl Iterator<Item = &'a str>) {
        let names: Vec<&str> = names.collect();
        for pair in names.windows(2) {
            assert!(
                pair[0].as_bytes() < pair[1].as_bytes(),
                "{what}: {:?} must come before {:?} (unsorted or duplicate)",
                pair[1],
                pair[0]
            );
        }
    }

    #[test]
    fn compiler_table_is_sorted_without_duplicates() {
        assert_strictly_sorted("COMPILERS", COMPILERS.iter().map(|c| c.name));
    }

    #[test]
    fn option_tables_are_sorted_without_duplicates() {
        assert_strictly_sorted("WRAPPERS", WRAPPERS.iter().copied());
        assert_strictly_sorted("LOADER_VALUE_OPTIONS", LOADER_VALUE_OPTIONS.iter().copied());
        assert_strictly_sorted("LOADER_INFO_OPTIONS", LOADER_INFO_OPTIONS.iter().copied());
        assert_strictly_sorted("PROBE_FLAGS", PROBE_FLAGS.iter().copied());
        assert_strictly_sorted("PROBE_PREFIXES", PROBE_PREFIXES.iter().copied());
        assert_strictly_sorted(
            "SEPARATE_VALUE_OPTIONS",
            SEPARATE_VALUE_OPTIONS.iter().copied(),
        );
    }

    #[test]
    fn names_are_plain_basenames() {
        for name in COMPILERS
            .iter()
            .map(|c| c.name)
            .chain(WRAPPERS.iter().copied())
        {
            assert!(
                !name.is_empty() && !name.contains('/') && !name.contains(':'),
                "{name:?}"
            );
        }
    }

    #[test]
    fn probe_flags_never_take_a_value() {
        for flag in PROBE_FLAGS {
            assert!(!contains(SEPARATE_VALUE_OPTIONS, flag.as_bytes()), "{flag}");
        }
    }

    #[test]
    fn contains_is_exact() {
        assert!(contains(SEPARATE_VALUE_OPTIONS, b"-o"));
        assert!(!contains(SEPARATE_VALUE_OPTIONS, b"-ofoo"));
        assert!(!contains(SEPARATE_VALUE_OPTIONS, b"-v"));
    }
}
