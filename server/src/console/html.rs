//! A small HTML builder: element and attribute names are `&'static str` (the code's own),
//! everything else is escaped on the way in, so no name, status message or config value a
//! manifest or a client controls can become markup.

use std::fmt::Write as _;

/// An HTML document or fragment under construction.
#[derive(Debug, Default)]
pub struct Html(String);

impl Html {
    pub fn new() -> Self {
        Html(String::with_capacity(4096))
    }

    /// `<tag attr="value" ...>`, each value escaped.
    pub fn open(&mut self, tag: &'static str, attrs: &[(&'static str, &str)]) -> &mut Self {
        self.0.push('<');
        self.0.push_str(tag);
        for (name, value) in attrs {
            self.0.push(' ');
            self.0.push_str(name);
            self.0.push_str("=\"");
            escape_into(&mut self.0, value);
            self.0.push('"');
        }
        self.0.push('>');
        self
    }

    pub fn close(&mut self, tag: &'static str) -> &mut Self {
        self.0.push_str("</");
        self.0.push_str(tag);
        self.0.push('>');
        self
    }

    /// Escaped text.
    pub fn text(&mut self, text: &str) -> &mut Self {
        escape_into(&mut self.0, text);
        self
    }

    /// Any displayable value (a number, a version), escaped.
    pub fn display(&mut self, value: impl std::fmt::Display) -> &mut Self {
        let mut s = String::new();
        let _ = write!(s, "{value}");
        self.text(&s)
    }

    /// `<tag attrs>text</tag>`.
    pub fn element(&mut self, tag: &'static str, attrs: &[(&'static str, &str)], text: &str) -> &mut Self {
        self.open(tag, attrs).text(text).close(tag)
    }

    /// An element with no content and no end tag (`<meta>`, `<link>`, an SVG `<rect/>`).
    pub fn void(&mut self, tag: &'static str, attrs: &[(&'static str, &str)]) -> &mut Self {
        self.open(tag, attrs);
        self
    }

    /// Markup the code itself wrote (a doctype, an embedded asset's tag): never a value.
    pub fn markup(&mut self, markup: &'static str) -> &mut Self {
        self.0.push_str(markup);
        self
    }

    /// Another fragment, built (and so escaped) by its own builder.
    pub fn append(&mut self, fragment: Html) -> &mut Self {
        self.0.push_str(&fragment.0);
        self
    }

    pub fn into_string(self) -> String {
        self.0
    }
}

fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attribute_values_are_escaped() {
        let mut h = Html::new();
        h.open("a", &[("href", "/ui/gateways/x\"><script>")]).text("<b>&'").close("a");
        assert_eq!(h.into_string(), "<a href=\"/ui/gateways/x&quot;&gt;&lt;script&gt;\">&lt;b&gt;&amp;&#39;</a>");
    }

    #[test]
    fn elements_nest() {
        let mut h = Html::new();
        h.open("ul", &[]).element("li", &[("class", "ok")], "one").element("li", &[], "two").close("ul");
        h.display(42);
        assert_eq!(h.into_string(), "<ul><li class=\"ok\">one</li><li>two</li></ul>42");
    }
}
