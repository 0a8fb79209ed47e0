//! `precompile sign --key KEY (DIR | ARTIFACT CACHE)`: an OpenSSF model signing
//! signature over a directory of pairs or one pair (see artifact::signature).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use artifact::signature::{self, PrivateKey};

use crate::args::{is_help, usage};

const HELP: &str = "usage: precompile sign --key KEY.pem DIR
       precompile sign --key KEY.pem ARTIFACT CACHE

Signs with an ECDSA P-256 private key (PEM; make one with
`openssl ecparam -name prime256v1 -genkey -noout -out key.pem` and give
serving hosts `openssl ec -in key.pem -pubout -out pub.pem`), in the OpenSSF
model signing format (a Sigstore bundle, key method):

  DIR              every file under DIR (a `--capture DIR` store: index and
                   pairs), into DIR/model.sig; `model_signing verify key DIR
                   --signature DIR/model.sig --public_key pub.pem` reads it
  ARTIFACT CACHE   one pair, into ARTIFACT.sig

A process with PRECOMPILE_TRUST set loads a pair only when its own signature,
or else its directory's, was made by a trusted key over exactly its bytes.
";

pub fn main(args: Vec<OsString>) -> anyhow::Result<ExitCode> {
    let mut key = None;
    let mut paths: Vec<PathBuf> = Vec::new();
    let mut it = args.into_iter();
    while let Some(a) = it.next() {
        if is_help(&a) {
            print!("{HELP}");
            return Ok(ExitCode::SUCCESS);
        } else if a == "--key" {
            key = Some(PathBuf::from(
                it.next().ok_or_else(|| usage("sign: --key needs a file"))?,
            ));
        } else if a.to_string_lossy().starts_with('-') {
            return Err(usage(format!(
                "sign: unknown option {}",
                a.to_string_lossy()
            )));
        } else {
            paths.push(a.into());
        }
    }
    let key_path =
        key.ok_or_else(|| usage("sign: --key KEY.pem is required (see precompile sign --help)"))?;
    let pem = std::fs::read_to_string(&key_path)
        .with_context(|| format!("cannot read {}", key_path.display()))?;
    let key =
        PrivateKey::from_pem(&pem).with_context(|| format!("sign: {}", key_path.display()))?;
    let (out, text) = match paths.as_slice() {
        [dir] if dir.is_dir() => {
            let text = signature::sign_dir(&key, dir).context("sign")?;
            (dir.join(signature::DIR_SIGNATURE), text)
        }
        [artifact, cache] => {
            let read = |p: &PathBuf| {
                std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))
            };
            let text = signature::sign_pair(&key, artifact, &read(artifact)?, cache, &read(cache)?)
                .context("sign")?;
            (signature::files::pair_signature_path(artifact), text)
        }
        [one] => {
            return Err(usage(format!(
                "sign: {} is not a directory; to sign one pair name both files: ARTIFACT CACHE",
                one.display()
            )))
        }
        _ => {
            return Err(usage(
                "sign: name a directory, or a pair's ARTIFACT and CACHE",
            ))
        }
    };
    artifact::write_atomic(&out, text.as_bytes())
        .with_context(|| format!("cannot write {}", out.display()))?;
    println!("signed: {}", out.display());
    Ok(ExitCode::SUCCESS)
}
