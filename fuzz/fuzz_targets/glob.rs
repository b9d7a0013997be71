//! The glob matcher (KEYS, SCAN MATCH, PSUBSCRIBE, scripts) against the reference matcher
//! in this crate, on tiny inputs: the first byte splits the rest into pattern and string.
#![no_main]

use libfuzzer_sys::fuzz_target;
use palisade_fuzz::{check_reference, reference_matches};

/// Longest pattern and string tried: enough for every quirk, small enough for the reference.
const MAX: usize = 24;

fuzz_target!(|data: &[u8]| {
    static CHECKED: std::sync::Once = std::sync::Once::new();
    CHECKED.call_once(check_reference);
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let at = (split as usize).min(rest.len());
    let (pat, s) = rest.split_at(at);
    let (pat, s) = (&pat[..pat.len().min(MAX)], &s[..s.len().min(MAX)]);
    let want = reference_matches(pat, s);
    let got = palisade::state::pattern::matches(pat, s);
    assert_eq!(
        got,
        want,
        "pattern {:?} on {:?}",
        pat.escape_ascii().to_string(),
        s.escape_ascii().to_string()
    );
});
