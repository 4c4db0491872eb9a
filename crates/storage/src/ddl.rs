//! A small DDL: tablespaces, tables, indexes, and (parsed, for the next issue) regions.
//!
//! ```text
//! script  := stmt (';' stmt)* [';']
//! stmt    := CREATE TABLESPACE name [options]
//!          | CREATE TABLE name '(' column (',' column)* ')' [TABLESPACE name]
//!          | CREATE [UNIQUE] INDEX name ON table '(' col (',' col)* ')' [TABLESPACE name]
//!          | CREATE REGION name [options]
//! options := '(' option (',' option)* ')'
//! option  := word ['='] value          value: word, number, size (128K), percentage (10%)
//! column  := name type                 type: INT | INTEGER | BIGINT | MONEY | DATE
//!                                            | CHAR '(' n ')' | VARCHAR '(' n ')'
//! ```
//! Keywords are case-insensitive. Every error carries the line and column of the offending token.
//!
//! Invariants: 1. `parse` never panics, whatever the input; 2. an error's position points into
//! the input (or just past its end).

use crate::error::{Error, Result};
use crate::tuple::{ColType, Column};

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Statement {
    CreateTablespace {
        name: String,
        options: Vec<(String, String)>,
    },
    CreateTable {
        name: String,
        columns: Vec<Column>,
        tablespace: Option<String>,
    },
    CreateIndex {
        name: String,
        table: String,
        columns: Vec<String>,
        unique: bool,
        tablespace: Option<String>,
    },
    /// Accepted by the parser; the engine refuses it until NoFTL regions exist (issue 5).
    CreateRegion {
        name: String,
        options: Vec<(String, String)>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Tok {
    Word(String),
    Num(String),
    Sym(char),
    End,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
    col: usize,
}

fn lex(src: &str) -> Result<Vec<Token>> {
    let mut out = Vec::new();
    let (mut line, mut col) = (1usize, 1usize);
    let chars: Vec<char> = src.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let (l0, c0) = (line, col);
        if c == '\n' {
            line += 1;
            col = 1;
            i += 1;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            col += 1;
            continue;
        }
        if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c.is_ascii_alphabetic() || c == '_' {
            let s: String = chars[i..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == '_')
                .collect();
            i += s.chars().count();
            col += s.chars().count();
            out.push(Token {
                tok: Tok::Word(s),
                line: l0,
                col: c0,
            });
        } else if c.is_ascii_digit() {
            let s: String = chars[i..]
                .iter()
                .take_while(|c| c.is_ascii_alphanumeric() || **c == '.' || **c == '%')
                .collect();
            i += s.chars().count();
            col += s.chars().count();
            out.push(Token {
                tok: Tok::Num(s),
                line: l0,
                col: c0,
            });
        } else if "(),;=".contains(c) {
            out.push(Token {
                tok: Tok::Sym(c),
                line: l0,
                col: c0,
            });
            i += 1;
            col += 1;
        } else {
            return Err(Error::Ddl {
                line: l0,
                column: c0,
                message: format!("unexpected character '{c}'"),
            });
        }
    }
    out.push(Token {
        tok: Tok::End,
        line,
        col,
    });
    Ok(out)
}

struct P {
    toks: Vec<Token>,
    at: usize,
}

impl P {
    fn peek(&self) -> &Token {
        &self.toks[self.at.min(self.toks.len() - 1)]
    }
    fn err<T>(&self, msg: impl Into<String>) -> Result<T> {
        let t = self.peek();
        let found = match &t.tok {
            Tok::Word(w) => format!("'{w}'"),
            Tok::Num(n) => format!("'{n}'"),
            Tok::Sym(c) => format!("'{c}'"),
            Tok::End => "the end of input".into(),
        };
        Err(Error::Ddl {
            line: t.line,
            column: t.col,
            message: format!("{}, found {found}", msg.into()),
        })
    }
    fn bump(&mut self) -> Token {
        let t = self.peek().clone();
        if self.at < self.toks.len() - 1 {
            self.at += 1;
        }
        t
    }
    fn is_kw(&self, kw: &str) -> bool {
        matches!(&self.peek().tok, Tok::Word(w) if w.eq_ignore_ascii_case(kw))
    }
    fn kw(&mut self, kw: &str) -> Result<()> {
        if self.is_kw(kw) {
            self.bump();
            Ok(())
        } else {
            self.err(format!("expected {kw}"))
        }
    }
    fn sym(&mut self, c: char) -> Result<()> {
        if self.peek().tok == Tok::Sym(c) {
            self.bump();
            Ok(())
        } else {
            self.err(format!("expected '{c}'"))
        }
    }
    fn is_sym(&self, c: char) -> bool {
        self.peek().tok == Tok::Sym(c)
    }
    fn ident(&mut self, what: &str) -> Result<String> {
        match &self.peek().tok {
            Tok::Word(w) => {
                let w = w.clone();
                self.bump();
                Ok(w)
            }
            _ => self.err(format!("expected {what}")),
        }
    }
    fn number(&mut self, what: &str) -> Result<u16> {
        match &self.peek().tok {
            Tok::Num(n) => match n.parse::<u16>() {
                Ok(v) if v > 0 => {
                    self.bump();
                    Ok(v)
                }
                _ => self.err(format!("expected {what} (1 to 65535)")),
            },
            _ => self.err(format!("expected {what}")),
        }
    }
    fn options(&mut self) -> Result<Vec<(String, String)>> {
        self.options_checked(|_, _| Ok(()))
    }
    /// Options whose values `check` vets, so that a bad value is reported at its position.
    fn options_checked(
        &mut self,
        check: fn(&str, &str) -> std::result::Result<(), String>,
    ) -> Result<Vec<(String, String)>> {
        let mut out = Vec::new();
        if !self.is_sym('(') {
            return Ok(out);
        }
        self.bump();
        loop {
            let mut key = self.ident("an option name")?;
            // "EXTENT SIZE 128K" as in the IPA seed: a two-word option name.
            while let Tok::Word(w) = &self.peek().tok {
                key = format!("{key}_{w}");
                self.bump();
            }
            if self.is_sym('=') {
                self.bump();
            }
            let v = match &self.peek().tok {
                Tok::Word(w) | Tok::Num(w) => w.clone(),
                _ => return self.err(format!("expected a value for option {key}")),
            };
            let key = key.to_ascii_uppercase();
            if let Err(m) = check(&key, &v) {
                return self.err(m);
            }
            self.bump();
            out.push((key, v));
            if self.is_sym(',') {
                self.bump();
                continue;
            }
            self.sym(')')?;
            return Ok(out);
        }
    }
    fn col_type(&mut self) -> Result<ColType> {
        let t = self.ident("a column type")?;
        Ok(match t.to_ascii_uppercase().as_str() {
            "INT" | "INTEGER" => ColType::Int,
            "BIGINT" => ColType::BigInt,
            "MONEY" => ColType::Money,
            "DATE" => ColType::Date,
            "CHAR" | "VARCHAR" => {
                self.sym('(')?;
                let n = self.number("a length")?;
                self.sym(')')?;
                if t.eq_ignore_ascii_case("CHAR") {
                    ColType::Char(n)
                } else {
                    ColType::Varchar(n)
                }
            }
            _ => {
                self.at -= 1;
                return self
                    .err("expected a column type (INT, BIGINT, MONEY, DATE, CHAR(n), VARCHAR(n))");
            }
        })
    }
    fn opt_tablespace(&mut self) -> Result<Option<String>> {
        if self.is_kw("TABLESPACE") {
            self.bump();
            return Ok(Some(self.ident("a tablespace name")?));
        }
        Ok(None)
    }
    fn statement(&mut self) -> Result<Statement> {
        self.kw("CREATE")?;
        if self.is_kw("TABLESPACE") {
            self.bump();
            let name = self.ident("a tablespace name")?;
            return Ok(Statement::CreateTablespace {
                name,
                options: self.options()?,
            });
        }
        if self.is_kw("REGION") {
            self.bump();
            let name = self.ident("a region name")?;
            return Ok(Statement::CreateRegion {
                name,
                options: self.options_checked(crate::region::check_option)?,
            });
        }
        if self.is_kw("TABLE") {
            self.bump();
            let name = self.ident("a table name")?;
            self.sym('(')?;
            let mut columns = Vec::new();
            loop {
                let cname = self.ident("a column name")?;
                let ty = self.col_type()?;
                columns.push(Column { name: cname, ty });
                if self.is_sym(',') {
                    self.bump();
                    continue;
                }
                self.sym(')')?;
                break;
            }
            return Ok(Statement::CreateTable {
                name,
                columns,
                tablespace: self.opt_tablespace()?,
            });
        }
        let unique = self.is_kw("UNIQUE");
        if unique {
            self.bump();
        }
        if self.is_kw("INDEX") {
            self.bump();
            let name = self.ident("an index name")?;
            self.kw("ON")?;
            let table = self.ident("a table name")?;
            self.sym('(')?;
            let mut columns = vec![self.ident("a column name")?];
            while self.is_sym(',') {
                self.bump();
                columns.push(self.ident("a column name")?);
            }
            self.sym(')')?;
            return Ok(Statement::CreateIndex {
                name,
                table,
                columns,
                unique,
                tablespace: self.opt_tablespace()?,
            });
        }
        self.err("expected TABLESPACE, TABLE, [UNIQUE] INDEX or REGION after CREATE")
    }
}

/// Parses a script of statements.
pub fn parse(src: &str) -> Result<Vec<Statement>> {
    let mut p = P {
        toks: lex(src)?,
        at: 0,
    };
    let mut out = Vec::new();
    loop {
        while p.is_sym(';') {
            p.bump();
        }
        if p.peek().tok == Tok::End {
            return Ok(out);
        }
        out.push(p.statement()?);
        if !(p.is_sym(';') || p.peek().tok == Tok::End) {
            return p.err("expected ';' or the end of input");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_statements_and_regions() {
        let s = parse(
            "CREATE REGION rg_hot (MAX_SIZE=2G, MAX_CHIPS=4, GC=greedy, OP=10%);\n\
             create tablespace ts (REGION=rg_hot, EXTENT SIZE 128K);\n\
             CREATE TABLE t (id INT, name VARCHAR(20), bal MONEY, d DATE, c CHAR(3)) TABLESPACE ts;\n\
             CREATE UNIQUE INDEX t_pk ON t (id, name)",
        )
        .unwrap();
        assert_eq!(s.len(), 4);
        assert!(
            matches!(&s[1], Statement::CreateTablespace { options, .. } if options[1] == ("EXTENT_SIZE".into(), "128K".into()))
        );
        assert!(
            matches!(&s[2], Statement::CreateTable { columns, tablespace: Some(ts), .. } if columns.len() == 5 && ts == "ts")
        );
        assert!(
            matches!(&s[3], Statement::CreateIndex { unique: true, columns, .. } if columns.len() == 2)
        );
    }

    #[test]
    fn errors_carry_positions() {
        let e = parse("CREATE TABLE t (id INT,\n  x FLOAT)").unwrap_err();
        assert!(
            matches!(
                e,
                Error::Ddl {
                    line: 2,
                    column: 5,
                    ..
                }
            ),
            "{e}"
        );
        let e = parse("CREATE TABLE t (id VARCHAR(0))").unwrap_err();
        assert!(
            matches!(
                e,
                Error::Ddl {
                    line: 1,
                    column: 28,
                    ..
                }
            ),
            "{e}"
        );
        let e = parse("CREATE INDEX i ON t id").unwrap_err();
        assert!(matches!(e, Error::Ddl { column: 21, .. }), "{e}");
        assert!(parse("DROP TABLE x").is_err());
        assert!(parse("CREATE TABLE t (a INT) garbage").is_err());
        assert!(parse("CREATE TABLE t (a INT $)").is_err());
        let e = parse("CREATE REGION r (MAX_CHIPS=4,\n  GC=lru)").unwrap_err();
        assert!(
            matches!(
                e,
                Error::Ddl {
                    line: 2,
                    column: 6,
                    ..
                }
            ),
            "{e}"
        );
        let e = parse("CREATE REGION r (MAX_CHIPS=4, COLOUR=red)").unwrap_err();
        assert!(
            matches!(
                e,
                Error::Ddl {
                    line: 1,
                    column: 38,
                    ..
                }
            ),
            "{e}"
        );
        assert!(parse("CREATE REGION r (MAX_SIZE=2G, MAX_CHIPS=4, MAX_CHANNELS=2, GC=greedy, OP=10%, IPA_MODE=pSLC)").is_ok());
    }

    #[test]
    fn never_panics_on_prefixes_of_valid_input() {
        let src =
            "CREATE UNIQUE INDEX i ON t (a, b) TABLESPACE ts; CREATE TABLE t (a CHAR(4), b INT);";
        for i in 0..src.len() {
            let _ = parse(&src[..i]);
        }
    }
}
