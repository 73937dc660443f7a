//! The kubectl-style JSONPath templates of `-o jsonpath=...`: text with `{...}` expressions,
//! as upstream stunnerctl takes them. An expression is a field path (`{.admin.name}`, also
//! without the leading dot or braces like upstream's relaxed form), with `[N]`, `[*]` and
//! `.*` steps; `{range PATH}...{end}` repeats its body for each match, relative to it, and
//! `{"\n"}` is literal text, as in kubectl.
//!
//! Printing: a string as is, anything else as JSON, several matches separated by spaces (as
//! kubectl does; upstream runs them together), nothing found as upstream's `<none>`.

use serde_json::Value;

/// Templates nest `{range}` at most this deep (a bound on what the parser holds).
const MAX_DEPTH: usize = 16;

#[derive(Debug, Clone, PartialEq)]
pub struct Template {
    nodes: Vec<Node>,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Text(String),
    Path(Vec<Step>),
    Range(Vec<Step>, Vec<Node>),
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    All,
}

impl Template {
    pub fn parse(raw: &str) -> Result<Template, String> {
        let invalid = |why: &str| format!("invalid jsonpath template {raw:?}: {why}");
        // Upstream's relaxed form: a bare path without braces.
        if !raw.contains('{') {
            return Ok(Template { nodes: vec![Node::Path(parse_path(raw).map_err(|e| invalid(&e))?)] });
        }
        let mut stack: Vec<(Option<Vec<Step>>, Vec<Node>)> = vec![(None, Vec::new())];
        let mut rest = raw;
        while !rest.is_empty() {
            let Some(open) = rest.find('{') else {
                push(&mut stack, Node::Text(rest.to_string()));
                break;
            };
            if open > 0 {
                push(&mut stack, Node::Text(rest[..open].to_string()));
            }
            let close = expression_end(&rest[open..]).ok_or_else(|| invalid("unclosed {"))? + open;
            let expr = rest[open + 1..close].trim();
            rest = &rest[close + 1..];
            if let Some(path) = expr.strip_prefix("range ") {
                if stack.len() > MAX_DEPTH {
                    return Err(invalid("ranges nested too deep"));
                }
                stack.push((Some(parse_path(path.trim()).map_err(|e| invalid(&e))?), Vec::new()));
            } else if expr == "end" {
                let (Some(path), body) = stack.pop().expect("the stack has its root") else {
                    return Err(invalid("{end} without {range}"));
                };
                push(&mut stack, Node::Range(path, body));
            } else if let Some(literal) = expr.strip_prefix('"') {
                let literal = literal.strip_suffix('"').ok_or_else(|| invalid("unterminated string"))?;
                push(&mut stack, Node::Text(unescape(literal)));
            } else {
                push(&mut stack, Node::Path(parse_path(expr).map_err(|e| invalid(&e))?));
            }
        }
        match stack.pop() {
            Some((None, nodes)) if stack.is_empty() => Ok(Template { nodes }),
            _ => Err(invalid("{range} without {end}")),
        }
    }

    /// The template applied to one document (no trailing newline).
    pub fn render(&self, root: &Value) -> String {
        let mut out = String::new();
        render(&self.nodes, root, &mut out);
        out
    }
}

fn push(stack: &mut [(Option<Vec<Step>>, Vec<Node>)], node: Node) {
    stack.last_mut().expect("the stack has its root").1.push(node);
}

/// The index of the `}` closing the expression `s` starts with, skipping quoted text.
fn expression_end(s: &str) -> Option<usize> {
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in s.char_indices().skip(1) {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            '}' if !quoted => return Some(i),
            _ => {}
        }
    }
    None
}

fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

/// `.a.b[0].c[*]`, `a.b`, `$.a`, `.a['b.c']`, `.*`.
fn parse_path(raw: &str) -> Result<Vec<Step>, String> {
    let mut s = raw.strip_prefix('$').unwrap_or(raw);
    let mut steps = Vec::new();
    if s.is_empty() || s == "." || s == "@" {
        return Ok(steps);
    }
    if !s.starts_with(['.', '[']) {
        // Relaxed: `a.b` is `.a.b`.
        let end = s.find(['.', '[']).unwrap_or(s.len());
        steps.push(field(&s[..end])?);
        s = &s[end..];
    }
    while !s.is_empty() {
        if let Some(after) = s.strip_prefix("..") {
            return Err(format!("recursive descent (..) is not supported: {after:?}"));
        } else if let Some(after) = s.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            steps.push(field(&after[..end])?);
            s = &after[end..];
        } else if let Some(after) = s.strip_prefix('[') {
            let end = after.find(']').ok_or("unclosed [")?;
            let inner = after[..end].trim();
            steps.push(match inner {
                "*" => Step::All,
                _ if inner.len() >= 2 && (inner.starts_with('\'') || inner.starts_with('"')) => {
                    Step::Field(inner[1..inner.len() - 1].to_string())
                }
                _ => Step::Index(inner.parse().map_err(|_| format!("unsupported subscript [{inner}]"))?),
            });
            s = &after[end + 1..];
        } else {
            return Err(format!("unexpected {s:?}"));
        }
    }
    Ok(steps)
}

fn field(name: &str) -> Result<Step, String> {
    match name {
        "" => Err("empty field name".into()),
        "*" => Ok(Step::All),
        _ if name.contains([' ', '(', ')', '?', '@']) => Err(format!("unsupported expression {name:?}")),
        _ => Ok(Step::Field(name.to_string())),
    }
}

fn select<'a>(root: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut current = vec![root];
    for step in steps {
        current = current
            .into_iter()
            .flat_map(|v| -> Vec<&Value> {
                match (step, v) {
                    (Step::Field(name), Value::Object(m)) => m.get(name).into_iter().collect(),
                    (Step::Index(i), Value::Array(a)) => {
                        let i = if *i < 0 { a.len() as i64 + i } else { *i };
                        usize::try_from(i).ok().and_then(|i| a.get(i)).into_iter().collect()
                    }
                    (Step::All, Value::Array(a)) => a.iter().collect(),
                    (Step::All, Value::Object(m)) => m.values().collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
    }
    current
}

fn render(nodes: &[Node], root: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(t) => out.push_str(t),
            Node::Path(steps) => {
                let found = select(root, steps);
                if found.is_empty() {
                    out.push_str("<none>");
                }
                let texts: Vec<String> = found.into_iter().map(show).collect();
                out.push_str(&texts.join(" "));
            }
            Node::Range(steps, body) => {
                for item in select(root, steps) {
                    render(body, item, out);
                }
            }
        }
    }
}

fn show(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc() -> Value {
        json!({"admin": {"name": "ns/gw", "loglevel": "all:INFO"},
               "listeners": [{"name": "a", "port": 1}, {"name": "b", "port": 2}],
               "auth": {"credentials": {"user.name": "u"}}})
    }

    fn render(t: &str) -> String {
        Template::parse(t).unwrap().render(&doc())
    }

    #[test]
    fn fields_indexes_and_wildcards() {
        assert_eq!(render("{.admin.name}"), "ns/gw");
        assert_eq!(render("admin.name"), "ns/gw", "upstream's relaxed form");
        assert_eq!(render("{admin.loglevel}"), "all:INFO");
        assert_eq!(render("{.listeners[*].name}"), "a b");
        assert_eq!(render("{.listeners[1].port}"), "2");
        assert_eq!(render("{.listeners[-1].name}"), "b");
        assert_eq!(render("{.auth.credentials['user.name']}"), "u");
        assert_eq!(render("{.listeners[0]}"), r#"{"name":"a","port":1}"#);
        assert_eq!(render("name={.admin.name} x={.nope}"), "name=ns/gw x=<none>");
    }

    #[test]
    fn ranges_and_literals() {
        assert_eq!(render(r#"{range .listeners[*]}{.name}:{.port}{"\n"}{end}"#), "a:1\nb:2\n");
        assert_eq!(render(r#"{range .listeners[*]}[{.name}]{end}"#), "[a][b]");
        assert_eq!(render(r#"{"a}b"}"#), "a}b");
    }

    #[test]
    fn refuses_what_it_does_not_support() {
        for bad in ["{.a", "{range .a}x", "x{end}", "{..a}", "{.a[?(@.x)]}", "{.a[x]}", r#"{"abc}"#] {
            assert!(Template::parse(bad).is_err(), "{bad}");
        }
    }
}
