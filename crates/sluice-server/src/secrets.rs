//! Secrets by reference: an environment variable or a file, read when a definition is loaded.
//! Errors name the reference, never the value.

use sluice_core::wire::SecretRef;

/// Reads one secret.
pub fn resolve(reference: &SecretRef, field: &str) -> Result<String, String> {
    let value = match (&reference.env, &reference.file) {
        (Some(name), None) => std::env::var(name)
            .map_err(|_| format!("{field}: environment variable {name:?} is not set"))?,
        (None, Some(path)) => std::fs::read_to_string(path)
            .map_err(|e| format!("{field}: cannot read secret file {path:?}: {e}"))?,
        _ => return Err(format!("{field}: give env or file, not both")),
    };
    let value = value.trim().to_owned();
    if value.is_empty() {
        return Err(format!("{field}: the secret is empty"));
    }
    Ok(value)
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
}
