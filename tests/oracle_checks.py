"""Checks of SQL compiled for Oracle 19c without a server: the text, reserved words (a regex list),
and sqlglot's parse (a smoke check). Shared by the Oracle compile tests."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa

from dbmemory.db import schema
from dbmemory.db.dialect.oracle import oracle19_dialect

MAX_IDENTIFIER = 30

CLOB_COLUMNS = frozenset(
    c.name
    for t in schema.metadata.tables.values()
    for c in t.columns
    if isinstance(c.type.dialect_impl(oracle19_dialect()), (sa.CLOB, sa.UnicodeText, sa.Text))
)

CLAUSE_END = r"(?=\bORDER BY\b|\bGROUP BY\b|\bHAVING\b|\bFETCH\b|\bFOR UPDATE\b|\bRETURNING\b|$)"

ORACLE_RESERVED_WORDS = frozenset(
    [
        "ACCESS",
        "ADD",
        "ALL",
        "ALTER",
        "AND",
        "ANY",
        "AS",
        "ASC",
        "AUDIT",
        "BETWEEN",
        "BY",
        "CHAR",
        "CHECK",
        "CLUSTER",
        "COLUMN",
        "COLUMN_VALUE",
        "COMMENT",
        "COMPRESS",
        "CONNECT",
        "CREATE",
        "CURRENT",
        "DATE",
        "DECIMAL",
        "DEFAULT",
        "DELETE",
        "DESC",
        "DISTINCT",
        "DROP",
        "ELSE",
        "EXCLUSIVE",
        "EXISTS",
        "FILE",
        "FLOAT",
        "FOR",
        "FROM",
        "GRANT",
        "GROUP",
        "HAVING",
        "IDENTIFIED",
        "IMMEDIATE",
        "IN",
        "INCREMENT",
        "INDEX",
        "INITIAL",
        "INSERT",
        "INTEGER",
        "INTERSECT",
        "INTO",
        "IS",
        "LEVEL",
        "LIKE",
        "LOCK",
        "LONG",
        "MAXEXTENTS",
        "MINUS",
        "MLSLABEL",
        "MODE",
        "MODIFY",
        "NESTED_TABLE_ID",
        "NOAUDIT",
        "NOCOMPRESS",
        "NOT",
        "NOWAIT",
        "NULL",
        "NUMBER",
        "OF",
        "OFFLINE",
        "ON",
        "ONLINE",
        "OPTION",
        "OR",
        "ORDER",
        "PCTFREE",
        "PRIOR",
        "PUBLIC",
        "RAW",
        "RENAME",
        "RESOURCE",
        "REVOKE",
        "ROW",
        "ROWID",
        "ROWNUM",
        "ROWS",
        "SELECT",
        "SESSION",
        "SET",
        "SHARE",
        "SIZE",
        "SMALLINT",
        "START",
        "SUCCESSFUL",
        "SYNONYM",
        "SYSDATE",
        "TABLE",
        "THEN",
        "TO",
        "TRIGGER",
        "UID",
        "UNION",
        "UNIQUE",
        "UPDATE",
        "USER",
        "VALIDATE",
        "VALUES",
        "VARCHAR",
        "VARCHAR2",
        "VIEW",
        "WHENEVER",
        "WHERE",
        "WITH",
    ]
)
"""Oracle SQL reserved words (V$RESERVED_WORDS with RESERVED = 'Y', 19c): never identifiers."""

PLSQL_RESERVED_WORDS = frozenset(
    [
        "AT",
        "BEGIN",
        "CASE",
        "CLUSTERS",
        "COLAUTH",
        "COLUMNS",
        "CRASH",
        "CURSOR",
        "DECLARE",
        "END",
        "EXCEPTION",
        "FETCH",
        "FUNCTION",
        "GOTO",
        "IF",
        "INDEXES",
        "OVERLAPS",
        "PROCEDURE",
        "SQL",
        "SUBTYPE",
        "TABAUTH",
        "TYPE",
        "VIEWS",
        "WHEN",
    ]
)
"""PL/SQL reserved words beyond the SQL ones: a column named so breaks the expiry procedure,
``%TYPE`` anchors and any customer PL/SQL that touches the tables."""

RISKY_KEYWORDS = frozenset(
    [
        "TIMESTAMP",
        "INTERVAL",
        "KEY",
        "NAME",
        "VALUE",
        "TEXT",
        "DATA",
        "CONTENT",
        "OWNER",
        "ACTION",
        "COUNT",
        "SEQUENCE",
        "LIMIT",
        "OFFSET",
        "RANGE",
        "ROLE",
        "SYSTIMESTAMP",
        "CURRENT_DATE",
        "CURRENT_TIMESTAMP",
        "LOCALTIMESTAMP",
        "PATH",
        "ID",
    ]
)
"""Keywords that are legal names but confuse tools, SQL*Plus scripts or APEX: avoided too."""

FORBIDDEN = ORACLE_RESERVED_WORDS | PLSQL_RESERVED_WORDS | RISKY_KEYWORDS


def compiled(statement: sa.sql.expression.Executable) -> str:
    compiled = statement.compile(
        dialect=oracle19_dialect(), compile_kwargs={"render_postcompile": True}
    )
    return str(compiled)


def regex_problems(sql: str) -> list[str]:
    problems: list[str] = []
    text = strip_literals(sql)
    if '"' in text:
        problems.append("quoted identifier (a reserved word SQLAlchemy had to quote)")
    # (NOT is excluded after an empty optional group, or "IS NOT NULL" would match by backtracking)
    if re.search(r"\bIS\s+(NOT\s+)?(?!NULL\b|JSON\b|NOT\b)[\w:]", text):
        problems.append("'IS 0'/'IS :bind' is invalid on Oracle: compare flags with == sa.false()")
    if re.search(r"\b(true|false)\b", text, flags=re.IGNORECASE):
        problems.append("boolean literal: Oracle 19c SQL has none")
    if re.search(r"\bLIMIT\b", text):
        problems.append("LIMIT is not Oracle syntax")
    for bind in re.findall(r":(\w+)", text):
        if bind.upper() in FORBIDDEN or len(bind) > MAX_IDENTIFIER:
            problems.append(f"bind name :{bind} (ORA-01745 for reserved words)")
    for table, column in re.findall(r"\b(\w+)\.(\w+)\b", text):
        for word in (table, column):
            if word.upper() in FORBIDDEN:
                problems.append(f"identifier {word}")
    for alias in re.findall(r"\bAS\s+(\w+)", text, flags=re.IGNORECASE):
        if alias.upper() in FORBIDDEN or len(alias) > MAX_IDENTIFIER:
            problems.append(f"alias {alias}")
    for clob in CLOB_COLUMNS:
        col = rf"(?:\w+\.)?{clob}\b"
        cmp_ops = r"(?:=|<>|!=|<=|>=|<|>|\bLIKE\b|\bIN\b|\bIS\b|\bBETWEEN\b)"
        for clause in re.findall(rf"\bWHERE\b(.*?){CLAUSE_END}", text, flags=re.S):
            if re.search(rf"\b{col}\s*{cmp_ops}|{cmp_ops}\s*{col}", clause):
                problems.append(f"{clob} (CLOB) compared in WHERE")
        for kw in ("ORDER BY", "GROUP BY", "HAVING", "DISTINCT", r"\bON\b"):
            for clause in re.findall(
                rf"{kw}(.*?)(?:\bWHERE\b|\bFETCH\b|\bFOR UPDATE\b|$)", text, flags=re.S
            ):
                if re.search(rf"\b{col}", clause):
                    problems.append(f"{clob} (CLOB) used in {kw}")
    return problems


def sqlglot_problems(sql: str) -> list[str]:
    sqlglot = pytest.importorskip("sqlglot")
    from sqlglot import exp

    try:
        tree = sqlglot.parse_one(sql, read="oracle")
    except sqlglot.errors.ParseError as exc:  # a smoke check: parse failures are reported
        return [f"sqlglot cannot parse it as Oracle SQL: {exc}"]

    def touches_clob(node: exp.Expression) -> bool:
        return any(c.name.lower() in CLOB_COLUMNS for c in node.find_all(exp.Column))

    problems: list[str] = []
    for kind in (exp.Where, exp.Order, exp.Group, exp.Having, exp.Join):
        for node in tree.find_all(kind):
            target = node.args.get("on") if kind is exp.Join else node
            if target is not None and touches_clob(target):
                problems.append(f"CLOB used in {kind.__name__.upper()}")
    comparisons = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Like, exp.In, exp.Is)
    assignments = set()
    for update in tree.find_all(exp.Update):
        assignments.update(id(e) for e in update.expressions)
    for node in tree.find_all(*comparisons):
        if id(node) not in assignments and touches_clob(node):
            problems.append(f"CLOB compared: {node.sql(dialect='oracle')}")
    for select in tree.find_all(exp.Select):
        if select.args.get("distinct") and any(touches_clob(e) for e in select.expressions):
            problems.append("DISTINCT over the CLOB")
    return problems


def strip_literals(sql: str) -> str:
    return re.sub(r"'(?:[^']|'')*'", "''", sql)
