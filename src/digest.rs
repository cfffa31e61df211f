//! Content hashing: the one place that turns bytes into the lowercase-hex SHA-256 strings used in
//! records, receipts and certificates.

use sha2::{Digest, Sha256};

/// SHA-256 of `bytes` as 64 lowercase hex characters.
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    to_hex(&Sha256::digest(bytes.as_ref()))
}

/// Lowercase hex of arbitrary bytes.
pub fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0x0f)] as char);
    }
    out
}

/// Whether `text` is 64 lowercase hex characters (the shape of [`sha256_hex`]).
pub fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors() {
        assert_eq!(
            sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn hex_shape() {
        assert!(is_sha256_hex(&sha256_hex("x")));
        assert!(!is_sha256_hex(&sha256_hex("x").to_uppercase()));
        assert!(!is_sha256_hex("abc"));
    }
}
