//! Secrets by reference: an environment variable or a file, read when a definition is loaded.
//! Errors name the reference, never the value.

use std::io::Read;

use sluice_wire::SecretRef;

/// Largest secret file read. Secrets are short; the bound keeps a definition that names a
/// huge or endless file (a device, a log) from filling the server's memory.
pub const SECRET_FILE_BYTES_MAX: u64 = 64 * 1024;

/// Reads one secret.
pub fn resolve(reference: &SecretRef, field: &str) -> Result<String, String> {
    let value = match (&reference.env, &reference.file) {
        (Some(name), None) => std::env::var(name)
            .map_err(|_| format!("{field}: environment variable {name:?} is not set"))?,
        (None, Some(path)) => read_file(path)
            .map_err(|e| format!("{field}: cannot read secret file {path:?}: {e}"))?,
        _ => return Err(format!("{field}: give env or file, not both")),
    };
    let value = value.trim().to_owned();
    if value.is_empty() {
        return Err(format!("{field}: the secret is empty"));
    }
    Ok(value)
}

/// A regular file's text, at most [`SECRET_FILE_BYTES_MAX`] bytes. Anything else (a device, a
/// pipe, a directory) is refused before it is opened: reading one may never end.
fn read_file(path: &str) -> Result<String, String> {
    let metadata = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file".into());
    }
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|file| {
            file.take(SECRET_FILE_BYTES_MAX + 1)
                .read_to_string(&mut text)
        })
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > SECRET_FILE_BYTES_MAX {
        return Err(format!("larger than {SECRET_FILE_BYTES_MAX} bytes"));
    }
    Ok(text)
}

/// Reads a list of secrets (rotation: several may be active).
pub fn resolve_all(references: &[SecretRef], field: &str) -> Result<Vec<String>, String> {
    references
        .iter()
        .enumerate()
        .map(|(position, reference)| resolve(reference, &format!("{field}[{position}]")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_reference_and_never_the_value() {
        let file = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(file.path(), "  s3cr3t-value\n").unwrap();
        let from_file = SecretRef {
            env: None,
            file: Some(file.path().display().to_string()),
        };
        assert_eq!(resolve(&from_file, "secrets").unwrap(), "s3cr3t-value");
        let missing = SecretRef {
            env: Some("SLUICE_TEST_SURELY_UNSET_VARIABLE".into()),
            file: None,
        };
        let error = resolve(&missing, "verify.secrets[0]").unwrap_err();
        assert!(
            error.contains("SLUICE_TEST_SURELY_UNSET_VARIABLE"),
            "{error}"
        );
        let both = SecretRef {
            env: Some("A".into()),
            file: Some("b".into()),
        };
        assert!(resolve(&both, "x").is_err());
        std::fs::write(file.path(), "   \n").unwrap();
        assert!(resolve(&from_file, "x").unwrap_err().contains("empty"));
    }

    /// A secret file is read only up to its bound, and only when it is a regular file: naming
    /// a device such as an endless stream could otherwise fill memory or never return.
    #[test]
    fn secret_files_are_bounded_and_regular() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let reference = SecretRef {
            env: None,
            file: Some(file.path().display().to_string()),
        };
        std::fs::write(file.path(), "s".repeat(SECRET_FILE_BYTES_MAX as usize)).unwrap();
        assert!(resolve(&reference, "x").is_ok());
        std::fs::write(file.path(), "s".repeat(SECRET_FILE_BYTES_MAX as usize + 1)).unwrap();
        let error = resolve(&reference, "x").err().unwrap_or_default();
        assert!(
            error.contains("larger than"),
            "a secret over the bound: {error:?}"
        );
        let directory = tempfile::tempdir().unwrap();
        let not_a_file = SecretRef {
            env: None,
            file: Some(directory.path().display().to_string()),
        };
        let error = resolve(&not_a_file, "x").unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
    }
}
