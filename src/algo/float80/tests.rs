use super::*;

fn incr(a: &str, b: &str) -> Option<String> {
    Some(format(add(parse(a.as_bytes())?, parse(b.as_bytes())?)?))
}

/// Values checked against redis-server 7.0.15 (Debian, x86-64).
#[test]
fn matches_redis_long_double_output() {
    assert_eq!(incr("0", "0.1").as_deref(), Some("0.1"));
    assert_eq!(incr("10.50", "0.1").as_deref(), Some("10.6"));
    assert_eq!(incr("5.0e3", "2.0e2").as_deref(), Some("5200"));
    assert_eq!(incr("0", "1e20").as_deref(), Some("100000000000000000000"));
    assert_eq!(incr("3", "-3").as_deref(), Some("0"));
    assert_eq!(incr("0", "-0.5").as_deref(), Some("-0.5"));
    assert_eq!(incr("0", "0x1p-3").as_deref(), Some("0.125"));
    assert_eq!(incr("0", "1e-30").as_deref(), Some("0"));
    assert_eq!(incr("0", "inf"), None);
    assert_eq!(parse(b"abc"), None);
    assert_eq!(parse(b" 1"), None);
    assert_eq!(parse(b"1e"), None);
    assert_eq!(parse(b"nan"), None);
    assert_eq!(parse(b"1e5000"), None);
    assert_eq!(parse(b"1e-5000"), None);
    assert!(parse(b"1e-4940").is_some(), "a subnormal is accepted");
    assert!(parse(b"+.5").is_some());
    assert!(parse(b"0x.8p1").is_some());
}

/// The longest inputs Redis accepts parse exactly (apply runs them on every replica;
/// their cost belongs in a benchmark, not in a timed test).
#[test]
fn long_inputs_parse_exactly() {
    let tiny = format!("0.{}1e-4900", "0".repeat(5000));
    assert_eq!(parse(tiny.as_bytes()), None, "below the smallest subnormal");
    let long = format!("1.{}", "7".repeat(5100));
    assert_eq!(
        format(parse(long.as_bytes()).unwrap()),
        "1.77777777777777778"
    );
    let small = format!("{}e-5000", "9".repeat(5000));
    assert!(parse(small.as_bytes()).is_some());
}

#[test]
fn division_is_exact() {
    let n = Big::pow10(40);
    let (q, r) = n.div_rem(&Big::from_u64(7));
    assert_eq!(q.to_decimal(), "1428571428571428571428571428571428571428");
    assert_eq!(r.to_decimal(), "4");
    let (q, r) = Big::from_u64(5).div_rem(&Big::from_u64(9));
    assert!(q.is_zero());
    assert_eq!(r.to_decimal(), "5");
}

#[test]
fn repeated_tenths_accumulate_like_long_double() {
    let mut v = parse(b"0").unwrap();
    let tenth = parse(b"0.1").unwrap();
    for _ in 0..10 {
        v = add(v, tenth).unwrap();
    }
    assert_eq!(format(v), "1");
}
