//! Reading a spec file (TOML) into a [`Spec`], with errors that name the file, the line and
//! the column, and what is wrong.
//!
//! The serde structs below mirror the file; every value that a later check can refuse is kept
//! with its span (`toml::Spanned`), so that a message points at it.

use super::model::{Count, KeyDist, Op, OpKind, Spec, TableDef, TxnDef};
use crate::engine::{Columns, ALL_COLUMNS};
use crate::storage::index::IndexKind;
use serde::Deserialize;
use std::ops::Range;
use toml::Spanned;

/// A spec file that cannot be used: where and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError {
    /// The file, as given.
    pub file: String,
    /// 1-based line and column of what is wrong (1:1 when it is the file as a whole).
    pub line: usize,
    /// See `line`.
    pub column: usize,
    /// What is wrong.
    pub message: String,
}

impl std::fmt::Display for SpecError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}: {}", self.file, self.line, self.column, self.message)
    }
}

impl std::error::Error for SpecError {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSpec {
    name: Option<Spanned<String>>,
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    table: Vec<Spanned<RawTable>>,
    #[serde(default)]
    txn: Vec<Spanned<RawTxn>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTable {
    name: Spanned<String>,
    rows: Spanned<u64>,
    row_bytes: Option<Spanned<u64>>,
    columns: Option<Spanned<Vec<Spanned<RawColumn>>>>,
    index: Option<Spanned<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawColumn {
    name: Spanned<String>,
    bytes: Spanned<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTxn {
    name: Spanned<String>,
    weight: Spanned<u32>,
    read_only: Option<Spanned<bool>>,
    think_us: Option<Spanned<u64>>,
    abort: Option<Spanned<f64>>,
    pieces: Option<Spanned<Vec<Spanned<PieceList>>>>,
    #[serde(default)]
    op: Vec<Spanned<RawOp>>,
}

/// One piece: the indices of its operations.
type PieceList = Vec<Spanned<usize>>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawOp {
    read: Option<Spanned<String>>,
    read_for_update: Option<Spanned<String>>,
    update: Option<Spanned<String>>,
    write: Option<Spanned<String>>,
    insert: Option<Spanned<String>>,
    delete: Option<Spanned<String>>,
    scan: Option<Spanned<String>>,
    increment: Option<Spanned<String>>,
    key: Option<Spanned<toml::Value>>,
    count: Option<Spanned<toml::Value>>,
    distinct: Option<Spanned<bool>>,
    columns: Option<Spanned<Vec<Spanned<String>>>>,
    column: Option<Spanned<String>>,
    by: Option<Spanned<i64>>,
    length: Option<Spanned<toml::Value>>,
}

/// Reads the spec in `text`; `file` names it in messages, and its stem names the workload when
/// the file gives no `name`.
pub fn parse(file: &str, text: &str) -> Result<Spec, SpecError> {
    let at = |span: Range<usize>, message: String| {
        let (line, column) = line_column(text, span.start);
        SpecError { file: file.to_string(), line, column, message }
    };
    let raw: RawSpec = toml::from_str(text)
        .map_err(|e| at(e.span().unwrap_or(0..0), e.message().trim_end().replace('\n', "; ")))?;
    let whole = 0..0;
    let name = match &raw.name {
        Some(n) if n.get_ref().trim().is_empty() => {
            return Err(at(n.span(), "name is empty".into()));
        }
        Some(n) => n.get_ref().clone(),
        None => std::path::Path::new(file)
            .file_stem()
            .map_or_else(|| "spec".into(), |s| s.to_string_lossy().into_owned()),
    };
    if raw.table.is_empty() {
        return Err(at(whole.clone(), "no [[table]]: a spec declares at least one table".into()));
    }
    let mut tables: Vec<TableDef> = Vec::new();
    for t in &raw.table {
        let t = t.get_ref();
        let tname = t.name.get_ref();
        if tables.iter().any(|u| &u.name == tname) {
            return Err(at(t.name.span(), format!("table `{tname}` is declared twice")));
        }
        let rows = *t.rows.get_ref();
        if rows == 0 || rows > super::model::MAX_ROWS {
            return Err(at(
                t.rows.span(),
                format!("rows {rows} is out of range (1 to {})", super::model::MAX_ROWS),
            ));
        }
        let columns = match (&t.row_bytes, &t.columns) {
            (Some(_), Some(c)) => {
                return Err(at(c.span(), "give `row_bytes` or `columns`, not both".into()));
            }
            (None, None) => {
                return Err(at(
                    t.name.span(),
                    format!("table `{tname}` needs `row_bytes` or `columns`"),
                ));
            }
            (Some(b), None) => vec![("row".to_string(), *b.get_ref())],
            (None, Some(cols)) => {
                if cols.get_ref().is_empty() || cols.get_ref().len() > 64 {
                    return Err(at(cols.span(), "a table has 1 to 64 columns".into()));
                }
                let mut out: Vec<(String, u64)> = Vec::new();
                for c in cols.get_ref() {
                    let c = c.get_ref();
                    if out.iter().any(|o| &o.0 == c.name.get_ref()) {
                        return Err(at(
                            c.name.span(),
                            format!("column `{}` is declared twice", c.name.get_ref()),
                        ));
                    }
                    if *c.bytes.get_ref() == 0 {
                        return Err(at(c.bytes.span(), "a column has at least 1 byte".into()));
                    }
                    out.push((c.name.get_ref().clone(), *c.bytes.get_ref()));
                }
                out
            }
        };
        let bytes: u64 = columns.iter().map(|c| c.1).sum();
        if bytes == 0 || bytes > super::model::MAX_ROW_BYTES {
            let span = t.row_bytes.as_ref().map_or(t.name.span(), |b| b.span());
            return Err(at(
                span,
                format!(
                    "rows of {bytes} bytes are out of range (1 to {})",
                    super::model::MAX_ROW_BYTES
                ),
            ));
        }
        let index = match t.index.as_ref().map(|i| (i.get_ref().as_str(), i.span())) {
            None | Some(("ordered", _)) => IndexKind::Ordered,
            Some(("hash", _)) => IndexKind::Hash,
            Some(("dense", _)) => IndexKind::Dense,
            Some((other, span)) => {
                return Err(at(
                    span,
                    format!("unknown index `{other}` (one of ordered, hash, dense)"),
                ));
            }
        };
        tables.push(TableDef { name: tname.clone(), rows, columns, index });
    }
    if raw.txn.is_empty() {
        return Err(at(whole, "no [[txn]]: a spec declares at least one transaction type".into()));
    }
    let mut txns: Vec<TxnDef> = Vec::new();
    for t in &raw.txn {
        let span = t.span();
        let t = t.get_ref();
        let tname = t.name.get_ref();
        if txns.iter().any(|u| &u.name == tname) {
            return Err(at(t.name.span(), format!("transaction `{tname}` is declared twice")));
        }
        if t.op.is_empty() {
            return Err(at(span, format!("transaction `{tname}` has no [[txn.op]]")));
        }
        let mut ops: Vec<Op> = Vec::new();
        for (j, o) in t.op.iter().enumerate() {
            let op = op(&tables, j, o.get_ref(), o.span())
                .map_err(|(s, m)| at(s, format!("transaction `{tname}`, op {j}: {m}")))?;
            ops.push(op);
        }
        let writes = ops.iter().any(|o| o.kind.writes());
        let read_only = match &t.read_only {
            Some(r) if *r.get_ref() == writes => {
                return Err(at(
                    r.span(),
                    if writes {
                        format!("transaction `{tname}` says read_only = true but writes")
                    } else {
                        format!("transaction `{tname}` says read_only = false but only reads")
                    },
                ));
            }
            _ => !writes,
        };
        let abort = t.abort.as_ref().map_or(0.0, |a| *a.get_ref());
        if let Some(a) = &t.abort {
            if !(0.0..=1.0).contains(&abort) {
                return Err(at(a.span(), format!("abort {abort} is out of range (0 to 1)")));
            }
        }
        let pieces = match &t.pieces {
            None => std::iter::once(0..ops.len()).collect(),
            Some(p) => {
                let mut out = Vec::new();
                let mut next = 0;
                for piece in p.get_ref() {
                    let list = piece.get_ref();
                    if list.is_empty() {
                        return Err(at(piece.span(), "an empty piece".into()));
                    }
                    for i in list {
                        if *i.get_ref() != next {
                            return Err(at(
                                i.span(),
                                format!(
                                    "pieces list the {} operations once each, in order: \
                                     expected {next} here",
                                    ops.len()
                                ),
                            ));
                        }
                        next += 1;
                    }
                    out.push(out.last().map_or(0, |r: &Range<usize>| r.end)..next);
                }
                if next != ops.len() {
                    return Err(at(
                        p.span(),
                        format!(
                            "pieces cover operations 0 to {} of 0 to {}",
                            next.saturating_sub(1),
                            ops.len() - 1
                        ),
                    ));
                }
                out
            }
        };
        txns.push(TxnDef {
            name: tname.clone(),
            weight: *t.weight.get_ref(),
            read_only,
            think_us: t.think_us.as_ref().map_or(0, |t| *t.get_ref()),
            abort,
            ops,
            pieces,
        });
    }
    let total: u64 = txns.iter().map(|t| u64::from(t.weight)).sum();
    if total != 100 {
        return Err(at(
            raw.txn[0].get_ref().weight.span(),
            format!("the transaction weights sum to {total}; they are percentages and sum to 100"),
        ));
    }
    let spec = Spec { name, tables, txns };
    // Everything `validate` checks was checked above with a position; a failure here is a gap
    // between the two, reported at the file rather than lost.
    spec.validate().map_err(|m| at(0..0, m))?;
    Ok(spec)
}

type OpError = (Range<usize>, String);

fn op(tables: &[TableDef], index: usize, o: &RawOp, span: Range<usize>) -> Result<Op, OpError> {
    let kinds = [
        (OpKind::Read, &o.read),
        (OpKind::ReadForUpdate, &o.read_for_update),
        (OpKind::Update, &o.update),
        (OpKind::Write, &o.write),
        (OpKind::Insert, &o.insert),
        (OpKind::Delete, &o.delete),
        (OpKind::Scan, &o.scan),
        (OpKind::Increment, &o.increment),
    ];
    let given: Vec<_> = kinds.iter().filter_map(|(k, t)| t.as_ref().map(|t| (*k, t))).collect();
    let (kind, tname) = match given.as_slice() {
        [one] => *one,
        [] => {
            return Err((
                span,
                "names no operation: give one of read, read_for_update, update, write, insert, \
                 delete, scan, increment = \"TABLE\""
                    .into(),
            ))
        }
        [_, second, ..] => {
            return Err((second.1.span(), "names two operations; give one per [[txn.op]]".into()))
        }
    };
    let table = tables.iter().position(|t| &t.name == tname.get_ref()).ok_or_else(|| {
        let names: Vec<&str> = tables.iter().map(|t| t.name.as_str()).collect();
        (
            tname.span(),
            format!("unknown table `{}` (tables: {})", tname.get_ref(), names.join(", ")),
        )
    })?;
    let def = &tables[table];
    let column = |c: &Spanned<String>| {
        def.columns.iter().position(|d| &d.0 == c.get_ref()).ok_or_else(|| {
            let names: Vec<&str> = def.columns.iter().map(|d| d.0.as_str()).collect();
            (
                c.span(),
                format!(
                    "table `{}` has no column `{}` (columns: {})",
                    def.name,
                    c.get_ref(),
                    names.join(", ")
                ),
            )
        })
    };
    let refuse = |field: &str, s: Range<usize>| -> OpError {
        (s, format!("`{field}` does not apply to {}", kind.name()))
    };
    let columns: Columns = match &o.columns {
        Some(c) if !matches!(kind, OpKind::Read | OpKind::Update) => {
            return Err(refuse("columns", c.span()))
        }
        Some(c) if c.get_ref().is_empty() => {
            return Err((
                c.span(),
                "an empty column list (leave `columns` out for every column)".into(),
            ))
        }
        Some(c) => {
            let mut mask = 0;
            for name in c.get_ref() {
                mask |= 1u64 << column(name)?;
            }
            mask
        }
        None => ALL_COLUMNS,
    };
    let increment = match (kind, &o.column, &o.by) {
        (OpKind::Increment, Some(c), by) => {
            let col = column(c)?;
            if def.columns[col].1 != 8 {
                return Err((
                    c.span(),
                    format!(
                        "increment needs an 8-byte column; `{}` has {} bytes",
                        c.get_ref(),
                        def.columns[col].1
                    ),
                ));
            }
            Some((col, by.as_ref().map_or(1, |b| *b.get_ref())))
        }
        (OpKind::Increment, None, _) => {
            return Err((tname.span(), "increment needs `column` (an 8-byte column)".into()))
        }
        (_, Some(c), _) => return Err(refuse("column", c.span())),
        (_, None, Some(b)) => return Err(refuse("by", b.span())),
        (_, None, None) => None,
    };
    let length = match (&o.length, kind) {
        (Some(l), OpKind::Scan) => count(l)?,
        (Some(l), _) => return Err(refuse("length", l.span())),
        (None, OpKind::Scan) => {
            return Err((tname.span(), "scan needs `length` (keys the range covers)".into()))
        }
        (None, _) => Count::fixed(1),
    };
    if kind == OpKind::Scan && def.index == IndexKind::Hash {
        return Err((
            tname.span(),
            format!(
                "table `{}` has a hash index, which cannot scan (use ordered or dense)",
                def.name
            ),
        ));
    }
    let keys = match &o.key {
        None if kind == OpKind::Insert => KeyDist::Next,
        None => KeyDist::Uniform,
        Some(k) => key(k, kind, index)?,
    };
    let count = match &o.count {
        Some(c) => match c.get_ref().as_table().and_then(|t| t.get("like")) {
            Some(v) => match v.as_integer() {
                Some(n) if n >= 0 && (n as usize) < index => Some(Count::like(n as usize)),
                _ => {
                    return Err((
                        c.span(),
                        format!(
                            "like = {v}: not an earlier operation of this transaction (0 to {})",
                            index as i64 - 1
                        ),
                    ))
                }
            },
            None => Some(count(c)?),
        },
        None => None,
    };
    let distinct = o.distinct.as_ref().is_some_and(|d| *d.get_ref());
    let op = Op { kind, table, keys, count, distinct, columns, increment, length };
    Ok(op)
}

fn count(v: &Spanned<toml::Value>) -> Result<Count, OpError> {
    let bad = || {
        (
            v.span(),
            format!(
                "expected a count (a positive integer, [least, most], or {{ like = OP }}) up to {}",
                super::model::MAX_COUNT
            ),
        )
    };
    let int = |x: &toml::Value| {
        x.as_integer()
            .filter(|&n| n >= 1 && n <= i64::from(super::model::MAX_COUNT))
            .map(|n| n as u32)
    };
    match v.get_ref() {
        toml::Value::Array(a) if a.len() == 2 => {
            let (lo, hi) = (int(&a[0]).ok_or_else(bad)?, int(&a[1]).ok_or_else(bad)?);
            if lo > hi {
                return Err((v.span(), format!("[{lo}, {hi}]: the least comes first")));
            }
            Ok(Count::range(lo, hi))
        }
        x => int(x).map(Count::fixed).ok_or_else(bad),
    }
}

fn key(k: &Spanned<toml::Value>, kind: OpKind, index: usize) -> Result<KeyDist, OpError> {
    let span = k.span();
    let err = |m: String| (span.clone(), m);
    let forms = "\"uniform\", \"sequential\", \"latest\", \"next\", { zipf = THETA }, \
                 { latest = THETA }, { hot = { keys = PCT, accesses = PCT } }, { same = OP }, \
                 { parent = OP, fanout = N }, { child = OP, fanout = N }";
    let theta = |v: &toml::Value| -> Result<f64, OpError> {
        let t = v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
        match t {
            Some(t) if (0.0..=0.999).contains(&t) => Ok(t),
            _ => Err(err(format!("theta {v} is out of range (0 to 0.999)"))),
        }
    };
    let op_ref = |v: &toml::Value| -> Result<usize, OpError> {
        match v.as_integer() {
            Some(n) if n >= 0 && (n as usize) < index => Ok(n as usize),
            _ if index == 0 => Err(err(format!("{v} is not an earlier operation (op 0 has none)"))),
            _ => Err(err(format!(
                "{v} is not an earlier operation of this transaction (0 to {})",
                index as i64 - 1
            ))),
        }
    };
    let fanout = |t: &toml::Table| -> Result<u64, OpError> {
        match t.get("fanout").and_then(|f| f.as_integer()) {
            Some(f) if f >= 1 => Ok(f as u64),
            _ => Err(err("needs `fanout`, a positive integer".into())),
        }
    };
    let dist = match k.get_ref() {
        toml::Value::String(s) => match s.as_str() {
            "uniform" => KeyDist::Uniform,
            "sequential" => KeyDist::Sequential,
            "latest" => KeyDist::Latest(0.99),
            "next" => KeyDist::Next,
            other => {
                return Err(err(format!("unknown key distribution `{other}` (one of {forms})")))
            }
        },
        toml::Value::Table(t) if t.len() == 1 || t.contains_key("fanout") => {
            let only = |name: &str, allowed: &[&str]| -> Result<(), OpError> {
                match t.keys().find(|k| !allowed.contains(&k.as_str())) {
                    Some(extra) => Err(err(format!("`{extra}` does not go with `{name}`"))),
                    None => Ok(()),
                }
            };
            if let Some(v) = t.get("zipf") {
                only("zipf", &["zipf"])?;
                KeyDist::Zipf(theta(v)?)
            } else if let Some(v) = t.get("latest") {
                only("latest", &["latest"])?;
                KeyDist::Latest(theta(v)?)
            } else if let Some(v) = t.get("hot") {
                only("hot", &["hot"])?;
                let pct = |name: &str| {
                    v.get(name)
                        .and_then(|x| x.as_float().or_else(|| x.as_integer().map(|i| i as f64)))
                };
                match (pct("keys"), pct("accesses")) {
                    (Some(keys), Some(accesses))
                        if keys > 0.0 && keys < 100.0 && (0.0..=100.0).contains(&accesses) =>
                    {
                        KeyDist::Hot { keys, accesses }
                    }
                    (Some(keys), Some(accesses)) => {
                        return Err(err(format!(
                            "hot keys {keys} % and accesses {accesses} % are out of range (keys \
                             above 0 and below 100, accesses 0 to 100)"
                        )))
                    }
                    _ => return Err(err("hot needs { keys = PCT, accesses = PCT }".into())),
                }
            } else if let Some(v) = t.get("same") {
                only("same", &["same"])?;
                KeyDist::Same(op_ref(v)?)
            } else if let Some(v) = t.get("parent") {
                only("parent", &["parent", "fanout"])?;
                KeyDist::Parent(op_ref(v)?, fanout(t)?)
            } else if let Some(v) = t.get("child") {
                only("child", &["child", "fanout"])?;
                KeyDist::Child(op_ref(v)?, fanout(t)?)
            } else {
                return Err(err(format!("unknown key distribution (one of {forms})")));
            }
        }
        _ => return Err(err(format!("unknown key distribution (one of {forms})"))),
    };
    if dist == KeyDist::Next && kind != OpKind::Insert {
        return Err(err("key \"next\" (the insert counter) is for inserts".into()));
    }
    Ok(dist)
}

/// The 1-based line and column (in characters) of byte `at` of `text`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..text.floor_char_boundary_compat(at)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// `str::floor_char_boundary` is not stable on the toolchain txlab supports.
trait FloorCharBoundary {
    fn floor_char_boundary_compat(&self, at: usize) -> usize;
}

impl FloorCharBoundary for str {
    fn floor_char_boundary_compat(&self, mut at: usize) -> usize {
        while at > 0 && !self.is_char_boundary(at) {
            at -= 1;
        }
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TABLE: &str = "[[table]]\nname = \"t\"\nrows = 100\ncolumns = [{ name = \"n\", bytes = 8 }, { name = \"s\", bytes = 4 }]\n";

    fn txn(ops: &str) -> String {
        format!("{TABLE}\n[[txn]]\nname = \"x\"\nweight = 100\n{ops}")
    }

    /// The message for `text`, which must be refused.
    fn refused(text: &str) -> String {
        parse("w.toml", text).expect_err("refused").to_string()
    }

    #[test]
    fn a_full_spec_parses_into_its_model() {
        let text = txn(
            "pieces = [[0], [1, 2]]\nabort = 0.25\nthink_us = 3\n\
             [[txn.op]]\nread = \"t\"\nkey = { zipf = 0.5 }\ncount = [2, 4]\ncolumns = [\"s\"]\n\
             [[txn.op]]\nupdate = \"t\"\nkey = { same = 0 }\ncolumns = [\"n\"]\n\
             [[txn.op]]\nincrement = \"t\"\nkey = { child = 1, fanout = 3 }\ncolumn = \"n\"\nby = -2\n",
        );
        let spec = parse("dir/w.toml", &text).unwrap();
        assert_eq!(spec.name, "w");
        assert_eq!(spec.tables[0].columns, vec![("n".into(), 8), ("s".into(), 4)]);
        let t = &spec.txns[0];
        assert_eq!((t.weight, t.read_only, t.think_us, t.abort), (100, false, 3, 0.25));
        assert_eq!(t.pieces, vec![0..1, 1..3]);
        assert_eq!(t.ops[0].keys, KeyDist::Zipf(0.5));
        assert_eq!(t.ops[0].count, Some(Count::range(2, 4)));
        assert_eq!(t.ops[0].columns, 0b10);
        assert_eq!(t.ops[1].keys, KeyDist::Same(0));
        assert_eq!(t.ops[2].keys, KeyDist::Child(1, 3));
        assert_eq!(t.ops[2].increment, Some((0, -2)));
        let templates = spec.templates();
        assert_eq!(templates[0].name, "x");
        assert_eq!(templates[0].pieces.len(), 2);
        assert_eq!(templates[0].pieces[1].accesses.len(), 2, "{:?}", templates[0].pieces[1]);
    }

    #[test]
    fn every_error_names_the_line_the_column_and_what_is_wrong() {
        let cases: Vec<(String, &str)> = vec![
            ("name = 3".into(), "w.toml:1:8: invalid type: integer `3`, expected a string"),
            ("[[table]]\nname = \"t\"\nrows = 1\nrow_bytes = 4\nwat = 1\n".into(), "w.toml:5:1: unknown field `wat`"),
            (TABLE.into(), "w.toml:1:1: no [[txn]]: a spec declares at least one transaction type"),
            ("[[txn]]\nname = \"x\"\nweight = 100\n".into(), "w.toml:1:1: no [[table]]: a spec declares at least one table"),
            (format!("{TABLE}{TABLE}"), "w.toml:6:8: table `t` is declared twice"),
            ("[[table]]\nname = \"t\"\nrows = 0\nrow_bytes = 4\n".into(), "w.toml:3:8: rows 0 is out of range (1 to 68719476736)"),
            ("[[table]]\nname = \"t\"\nrows = 5\n".into(), "w.toml:2:8: table `t` needs `row_bytes` or `columns`"),
            ("[[table]]\nname = \"t\"\nrows = 5\nrow_bytes = 4\nindex = \"btree\"\n".into(), "w.toml:5:9: unknown index `btree` (one of ordered, hash, dense)"),
            (txn("[[txn.op]]\nread = \"nope\"\n"), "w.toml:10:8: transaction `x`, op 0: unknown table `nope` (tables: t)"),
            (txn("[[txn.op]]\nread = \"t\"\ncolumns = [\"q\"]\n"), "w.toml:11:12: transaction `x`, op 0: table `t` has no column `q` (columns: n, s)"),
            (txn("[[txn.op]]\nread = \"t\"\nkey = { zipf = 1.5 }\n"), "w.toml:11:7: transaction `x`, op 0: theta 1.5 is out of range (0 to 0.999)"),
            (txn("[[txn.op]]\nread = \"t\"\nkey = { same = 0 }\n"), "w.toml:11:7: transaction `x`, op 0: 0 is not an earlier operation (op 0 has none)"),
            (txn("[[txn.op]]\nread = \"t\"\n[[txn.op]]\nread = \"t\"\nkey = { same = 3 }\n"), "w.toml:13:7: transaction `x`, op 1: 3 is not an earlier operation of this transaction (0 to 0)"),
            (txn("[[txn.op]]\nread = \"t\"\nkey = { hot = { keys = 0, accesses = 90 } }\n"), "w.toml:11:7: transaction `x`, op 0: hot keys 0 % and accesses 90 % are out of range (keys above 0 and below 100, accesses 0 to 100)"),
            (txn("[[txn.op]]\nread = \"t\"\nkey = \"gaussian\"\n"), "w.toml:11:7: transaction `x`, op 0: unknown key distribution `gaussian` (one of"),
            (txn("[[txn.op]]\nread = \"t\"\nkey = \"next\"\n"), "w.toml:11:7: transaction `x`, op 0: key \"next\" (the insert counter) is for inserts"),
            (txn("[[txn.op]]\nread = \"t\"\nupdate = \"t\"\n"), "w.toml:11:10: transaction `x`, op 0: names two operations; give one per [[txn.op]]"),
            (txn("[[txn.op]]\ncount = 2\n"), "w.toml:9:1: transaction `x`, op 0: names no operation"),
            (txn("[[txn.op]]\nread = \"t\"\ncount = 0\n"), "w.toml:11:9: transaction `x`, op 0: expected a count"),
            (txn("[[txn.op]]\nread = \"t\"\ncount = [4, 2]\n"), "w.toml:11:9: transaction `x`, op 0: [4, 2]: the least comes first"),
            (txn("[[txn.op]]\nincrement = \"t\"\ncolumn = \"s\"\n"), "w.toml:11:10: transaction `x`, op 0: increment needs an 8-byte column; `s` has 4 bytes"),
            (txn("[[txn.op]]\nscan = \"t\"\n"), "w.toml:10:8: transaction `x`, op 0: scan needs `length` (keys the range covers)"),
            (txn("[[txn.op]]\nread = \"t\"\nlength = 3\n"), "w.toml:11:10: transaction `x`, op 0: `length` does not apply to read"),
            (txn("read_only = true\n[[txn.op]]\nupdate = \"t\"\n"), "w.toml:9:13: transaction `x` says read_only = true but writes"),
            (txn("abort = 2.0\n[[txn.op]]\nread = \"t\"\n"), "w.toml:9:9: abort 2 is out of range (0 to 1)"),
            (txn("pieces = [[1], [0]]\n[[txn.op]]\nread = \"t\"\n[[txn.op]]\nread = \"t\"\n"), "w.toml:9:12: pieces list the 2 operations once each, in order: expected 0 here"),
            (txn("pieces = [[0]]\n[[txn.op]]\nread = \"t\"\n[[txn.op]]\nread = \"t\"\n"), "w.toml:9:10: pieces cover operations 0 to 0 of 0 to 1"),
            (txn("[[txn.op]]\nread = \"t\"\n").replace("weight = 100", "weight = 60"), "w.toml:8:10: the transaction weights sum to 60; they are percentages and sum to 100"),
        ];
        let mut wrong = Vec::new();
        for (text, want) in cases {
            let got = refused(&text);
            if !got.starts_with(want) || got.contains('\n') {
                wrong.push(format!("got:  {got}\nwant: {want}\nfor:\n{text}"));
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n\n"));
    }

    #[test]
    fn a_hash_table_cannot_be_scanned() {
        let text = "[[table]]\nname = \"h\"\nrows = 9\nrow_bytes = 8\nindex = \"hash\"\n\
                    [[txn]]\nname = \"s\"\nweight = 100\n[[txn.op]]\nscan = \"h\"\nlength = 4\n";
        assert_eq!(
            refused(text),
            "w.toml:10:8: transaction `s`, op 0: table `h` has a hash index, which cannot scan \
             (use ordered or dense)"
        );
    }

    #[test]
    fn line_and_column_count_characters() {
        assert_eq!(line_column("ab\ncdé\nf", 0), (1, 1));
        assert_eq!(line_column("ab\ncdé\nf", 3), (2, 1));
        assert_eq!(line_column("ab\ncdé\nf", 8), (3, 1));
        assert_eq!(line_column("ab\ncdé\nf", 6), (2, 3), "inside é: its start");
    }
}
