//! The reference's quirks, kept.

use super::*;

fn ok(s: &str) -> Value {
    parse(s).unwrap_or_else(|e| panic!("{s:?}: {e}"))
}
fn bad(s: &str) {
    assert!(parse(s).is_err(), "{s:?} should not parse");
}

#[test]
fn the_reference_quirks() {
    bad("a = [1, \"x\"]");
    bad("a = [1, 1.0]");
    ok("a = [[1],[\"x\"]]");
    bad("\u{feff}a = 1");
    ok("a = {b = 1,}");
    bad("a = {b = 1,\n}");
    bad("a = {,}");
    ok("a = [1,]");
    bad("a = [,]");
    assert_eq!(
        ok("a = 9007199254740993").get("a"),
        Some(&Value::BigInt(9007199254740993))
    );
    assert_eq!(
        ok("a = 9007199254740991").get("a"),
        Some(&Value::Integer(9007199254740991.0))
    );
    assert_eq!(ok("a = 10.0").get("a"), Some(&Value::Float(10.0)));
    assert_eq!(ok("a = 1e2").get("a"), Some(&Value::Float(100.0)));
    ok("a.b=1\n[a]\nc=1");
    bad("[a]\nb=1\n[a]\nc=1");
    bad("a=1\na=2");
    bad("a = 1\rb=2");
    bad("a = 00");
    bad("a = 0_1");
    bad("a = 1__0");
    ok("a = 1_000");
    bad("a = [1.0, inf]");
    ok("a = [inf, nan]");
    ok("[[a]]\n[a.b]\nc=1");
    bad("a=[]\n[[a]]");
    bad("[a]\n[[a]]");
    ok("a = 1979-05-27 07:32:00");
    bad("a = 2021-13-45");
    bad("a = \"\\x41\"");
    bad("x = \"\u{1}\"");
    ok("x = 'a\tb'");
    bad("k = \"\"\"\"\"\"\"\" ");
    assert_eq!(
        ok("a = \"\"\"\nx\"\"\"").get("a"),
        Some(&Value::String("x".into()))
    );
    assert_eq!(
        ok("a = \"\"\"a\\\n   b\"\"\"").get("a"),
        Some(&Value::String("ab".into()))
    );
    ok("a = [\n1,\n# c\n2\n]");
    ok("\"a b\" = 1");
    bad("a = 1.");
    bad("= 1");
}
