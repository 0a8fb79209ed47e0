//! Paths inside entries: the kernel manifest (`kernel_manifest` entry) names
//! the entry each frozen kernel library is loaded from. A loader joins that
//! name to its extraction directory, so it is held to the rule entry names
//! are held to, and must name an entry of this very cache: a manifest can
//! never point a loader at a file the cache did not carry.

use crate::entry_name::validate_entry_name;
use crate::header::Entry;
use crate::Error;

/// The entry kind of the kernel manifest.
pub const KERNEL_MANIFEST: &str = "kernel_manifest";

/// Checks every path a kernel manifest among `entries` names.
pub fn check_paths(entries: &[Entry]) -> Result<(), Error> {
    for manifest in entries.iter().filter(|e| e.kind == KERNEL_MANIFEST) {
        let json: serde_json::Value = serde_json::from_slice(&manifest.data).map_err(|e| {
            Error::corrupt(format!(
                "the kernel manifest {:?} is not JSON ({e})",
                manifest.name
            ))
        })?;
        let libraries = json
            .get("cpp")
            .and_then(|c| c.as_array())
            .map_or(&[][..], Vec::as_slice);
        for lib in libraries {
            let Some(path) = lib.get("entry").and_then(|p| p.as_str()) else {
                return Err(Error::corrupt(format!(
                    "the kernel manifest {:?} lists a library without an entry name",
                    manifest.name
                )));
            };
            validate_entry_name(path)?;
            if !entries
                .iter()
                .any(|e| e.name == path && e.kind != KERNEL_MANIFEST)
            {
                return Err(Error::corrupt(format!(
                    "the kernel manifest {:?} names {path:?}, which is not an entry of this cache",
                    manifest.name
                )));
            }
        }
    }
    Ok(())
}
