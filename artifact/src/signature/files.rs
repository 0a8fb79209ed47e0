//! Where signatures live and which names they give the files of a pair:
//!
//! - a pair's own signature is `<artifact>.sig` (`precompile sign ARTIFACT CACHE`,
//!   or a capture with a signing key); its files are named relative to the
//!   artifact's directory;
//! - a directory's signature is `DIR/model.sig` (`precompile sign DIR`, the file
//!   the model signing tools write and read by default); every regular file under
//!   DIR is named by its '/'-separated path relative to DIR.
//!
//! A pair is verified against its own signature when it has one, else against
//! its directory's. The trust policy is a list of public key files and
//! directories of them.

use std::path::{Component, Path, PathBuf};

use super::{bundle, statement::Manifest, PrivateKey, SignatureError, TrustedKey, Verified};

/// The signature file of a signed directory.
pub const DIR_SIGNATURE: &str = "model.sig";

/// `<artifact>.sig`.
pub fn pair_signature_path(artifact: &Path) -> PathBuf {
    let mut s = artifact.as_os_str().to_owned();
    s.push(".sig");
    PathBuf::from(s)
}

fn io(what: &str, path: &Path, e: std::io::Error) -> SignatureError {
    SignatureError::Io(format!("cannot {what} {}: {e}", path.display()))
}

/// `path` relative to `base`, lexically (both made absolute first).
fn relative(path: &Path, base: &Path) -> Result<String, SignatureError> {
    let abs = |p: &Path| std::path::absolute(p).map_err(|e| io("resolve", p, e));
    let (path, base) = (abs(path)?, abs(base)?);
    let (p, b): (Vec<Component>, Vec<Component>) =
        (path.components().collect(), base.components().collect());
    let common = p.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let mut parts: Vec<String> = vec!["..".into(); b.len() - common];
    parts.extend(
        p[common..]
            .iter()
            .map(|c| c.as_os_str().to_string_lossy().into_owned()),
    );
    Ok(parts.join("/"))
}

fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// The manifest of a pair held in memory, named relative to `base`.
fn pair_manifest(
    base: &Path,
    artifact: &Path,
    code: &[u8],
    cache: &Path,
    cache_bytes: &[u8],
) -> Result<Manifest, SignatureError> {
    let name = std::path::absolute(base)
        .ok()
        .and_then(|b| b.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    let mut m = Manifest::new(&name);
    m.add(&relative(artifact, base)?, code);
    m.add(&relative(cache, base)?, cache_bytes);
    Ok(m)
}

/// The text of `<artifact>.sig` for a pair (the bytes given are what is signed).
pub fn sign_pair(
    key: &PrivateKey,
    artifact: &Path,
    code: &[u8],
    cache: &Path,
    cache_bytes: &[u8],
) -> Result<String, SignatureError> {
    let base = parent(artifact);
    let mut m = pair_manifest(base, artifact, code, cache, cache_bytes)?;
    m.ignore_paths
        .push(relative(&pair_signature_path(artifact), base)?);
    Ok(bundle::sign(key, &m))
}

/// The text of `DIR/model.sig`: every regular file under `dir` but the
/// signature itself; a symlink or special file is refused (the model signing
/// tools refuse them too).
pub fn sign_dir(key: &PrivateKey, dir: &Path) -> Result<String, SignatureError> {
    let name = std::path::absolute(dir)
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()));
    let mut m = Manifest::new(&name.unwrap_or_default());
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).map_err(|e| io("list", &d, e))? {
            let path = entry.map_err(|e| io("list", &d, e))?.path();
            let kind = std::fs::symlink_metadata(&path)
                .map_err(|e| io("stat", &path, e))?
                .file_type();
            let rel = relative(&path, dir)?;
            if kind.is_dir() {
                stack.push(path);
            } else if rel == DIR_SIGNATURE {
                continue;
            } else if kind.is_file() {
                m.add(
                    &rel,
                    &std::fs::read(&path).map_err(|e| io("read", &path, e))?,
                );
            } else {
                return Err(SignatureError::Io(format!(
                    "{} is a symlink or special file; a signed directory holds regular files only",
                    path.display()
                )));
            }
        }
    }
    m.ignore_paths.push(DIR_SIGNATURE.into());
    Ok(bundle::sign(key, &m))
}

/// Verifies a pair, by the bytes a loader read, against its signature: its own,
/// else its directory's. Returns the signature file and the key that made it.
pub fn verify_pair(
    trusted: &[TrustedKey],
    artifact: &Path,
    code: &[u8],
    cache: &Path,
    cache_bytes: &[u8],
) -> Result<(PathBuf, Verified), SignatureError> {
    let base = parent(artifact);
    let own = pair_signature_path(artifact);
    let sig = if own.is_file() {
        own
    } else {
        base.join(DIR_SIGNATURE)
    };
    let bytes = match std::fs::read(&sig) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(SignatureError::Unsigned(format!(
                "the pair is unsigned (no {} and no {})",
                pair_signature_path(artifact).display(),
                sig.display()
            )))
        }
        Err(e) => return Err(io("read", &sig, e)),
    };
    let verified = bundle::verify(&bytes, trusted)?;
    for (path, data) in [(artifact, code), (cache, cache_bytes)] {
        verified.manifest.check_file(&relative(path, base)?, data)?;
    }
    Ok((sig, verified))
}

/// The trust policy: ':'-separated public key files (SPKI PEM) and directories,
/// of which every `*.pem` and `*.pub` file is a key. Holding no key is an error.
pub fn trust_policy(spec: &str) -> Result<Vec<TrustedKey>, SignatureError> {
    let mut keys = Vec::new();
    for item in spec.split(':').filter(|s| !s.is_empty()) {
        let path = Path::new(item);
        let files: Vec<PathBuf> = if path.is_dir() {
            let mut f: Vec<PathBuf> = std::fs::read_dir(path)
                .map_err(|e| io("list", path, e))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|x| x == "pem" || x == "pub"))
                .collect();
            f.sort();
            f
        } else {
            vec![path.to_path_buf()]
        };
        for f in files {
            let pem = std::fs::read_to_string(&f).map_err(|e| io("read the trusted key", &f, e))?;
            keys.push(TrustedKey::from_pem(&pem, &f.display().to_string())?);
        }
    }
    if keys.is_empty() {
        return Err(SignatureError::BadKey(format!(
            "the trust policy {spec:?} holds no public key (list PEM files or directories of *.pem, ':'-separated)"
        )));
    }
    Ok(keys)
}
