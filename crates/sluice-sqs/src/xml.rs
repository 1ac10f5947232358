//! Writing the query protocol's XML by hand: escaping and the namespace every envelope carries.

/// The namespace of every query answer (docs/design/sqs-compat.md §1.3): fixed, whatever
/// `Version` the request named.
pub const NAMESPACE: &str = "http://queue.amazonaws.com/doc/2012-11-05/";

/// Appends `text` escaped for an XML text node. `\r` becomes `&#xD;` because an XML parser
/// turns a literal CR into LF, and the body would then no longer match its MD5 (§1.3).
pub fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
}

/// Appends `<name>text</name>`, the text escaped.
pub fn element(out: &mut String, name: &str, text: &str) {
    out.push('<');
    out.push_str(name);
    out.push('>');
    escape_into(out, text);
    out.push_str("</");
    out.push_str(name);
    out.push('>');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn carriage_returns_and_markup_are_escaped() {
        let mut out = String::new();
        element(&mut out, "Body", "{\r\n\"a\": '<&>'}");
        assert_eq!(
            out,
            "<Body>{&#xD;\n&quot;a&quot;: &apos;&lt;&amp;&gt;&apos;}</Body>"
        );
    }
}
