"""MySQL/MariaDB API, the MEMORY tool's rendering for ``run_command``: numbered lines, file
views, listings and edit snippets (:mod:`dbmemory.tool.render`, :mod:`dbmemory.tool.edits`),
for :mod:`dbmemory.sqlgen.mysql.tool`; the same steps as the PostgreSQL functions of
:mod:`dbmemory.sqlgen.postgresql.tool_render`, on text positions instead of arrays."""

from __future__ import annotations

from dbmemory.core.paths import ROOT
from dbmemory.sqlgen.mysql.rules import P, q
from dbmemory.sqlgen.mysql.tool_text import TB, ch, eq, msg
from dbmemory.sqlgen.tool_text import Int, Text
from dbmemory.tool import messages as m
from dbmemory.tool.edits import MAX_SNIPPET_LINES, SNIPPET_CONTEXT_LINES
from dbmemory.tool.render import LINE_NUMBER_WIDTH, OUTPUT_LIMIT_CHARS

__all__ = ["RENDER"]

E = q(m.ERROR_MARKER)
PT = Text("p_path")
NL = ch(10)

_NUMBER = (f"IF(CHAR_LENGTH(CAST({{n}} AS CHAR)) >= {LINE_NUMBER_WIDTH}, CAST({{n}} AS CHAR),"
           f" LPAD(CAST({{n}} AS CHAR), {LINE_NUMBER_WIDTH}, ' '))")


def _numbered(n: str) -> str:
    """dbmemory.tool.render.number_lines of one line number ``n``: right-aligned, then a TAB."""
    return "CONCAT(" + _NUMBER.format(n=n) + f", {ch(9)})"


_LINE_COUNT = f"""CREATE FUNCTION {P}_line_count(p_text {TB}) RETURNS BIGINT
    DETERMINISTIC NO SQL SQL SECURITY DEFINER
    -- len(dbmemory.tool.render.split_lines(p_text))
    RETURN IF(CHAR_LENGTH(p_text) = 0, 0, CHAR_LENGTH(p_text) - CHAR_LENGTH(REPLACE(p_text, {NL}, ''))
              + IF(RIGHT(p_text, 1) = {NL}, 0, 1))"""

_NUMBERED = f"""CREATE FUNCTION {P}_numbered(p_text {TB}, p_first BIGINT, p_last BIGINT) RETURNS {TB}
    DETERMINISTIC NO SQL SQL SECURITY DEFINER
BEGIN
    -- dbmemory.tool.render.number_lines of lines p_first..p_last (1-based) of p_text, joined by LF
    DECLARE v_out {TB} DEFAULT '';
    DECLARE v_at BIGINT DEFAULT 1;
    DECLARE v_end BIGINT;
    DECLARE i BIGINT DEFAULT 1;
    WHILE i < p_first DO
        SET v_at = LOCATE({NL}, p_text, v_at) + 1;
        SET i = i + 1;
    END WHILE;
    WHILE i <= p_last DO
        SET v_end = LOCATE({NL}, p_text, v_at);
        IF v_end = 0 THEN
            SET v_end = CHAR_LENGTH(p_text) + 1;
        END IF;
        SET v_out = CONCAT(v_out, IF(i > p_first, {NL}, ''), {_numbered("i")},
                           SUBSTRING(p_text, v_at, v_end - v_at));
        SET v_at = v_end + 1;
        SET i = i + 1;
    END WHILE;
    RETURN v_out;
END"""

_RENDER_FILE = f"""CREATE FUNCTION {P}_render_file(p_path {TB}, p_text {TB}, p_range BOOLEAN,
                                      p_start DECIMAL(65, 0), p_end DECIMAL(65, 0)) RETURNS {TB}
    DETERMINISTIC NO SQL SQL SECURITY DEFINER
BEGIN
    -- dbmemory.tool.render.render_file (OUTPUT_LIMIT_CHARS {OUTPUT_LIMIT_CHARS}); an error text for a bad view_range
    DECLARE v_header {TB} DEFAULT {msg(m.view_file_header, PT)};
    DECLARE v_count BIGINT DEFAULT {P}_line_count(p_text);
    DECLARE v_first BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_clamped BOOLEAN DEFAULT FALSE;
    DECLARE v_out {TB};
    DECLARE v_line1 {TB};
    DECLARE v_note {TB};
    DECLARE v_budget BIGINT;
    DECLARE v_used BIGINT;
    DECLARE v_kept BIGINT DEFAULT 0;
    DECLARE v_kept_chars BIGINT DEFAULT 0;
    DECLARE v_room BIGINT;
    DECLARE v_at BIGINT DEFAULT 1;
    DECLARE v_end BIGINT;
    DECLARE v_open BOOLEAN DEFAULT TRUE;
    DECLARE v_body {TB} DEFAULT '';
    DECLARE v_shown {TB};
    DECLARE i BIGINT DEFAULT 1;
    IF NOT p_range THEN
        IF v_count = 0 THEN
            RETURN CONCAT(v_header, {NL}, {msg(m.empty_file_note, PT)});
        END IF;
        SET v_first = 1;
        SET v_last = v_count;
    ELSE
        IF v_count = 0 THEN
            RETURN CONCAT({E}, {msg(m.view_range_on_empty_file, PT, Int("p_start"), Int("p_end"))});
        END IF;
        IF p_start < 1 OR p_start > v_count OR (p_end <> -1 AND p_end < p_start) THEN
            RETURN CONCAT({E}, IF(v_count = 1,
                {msg(m.view_range_out_of_range, PT, Int("p_start"), Int("p_end"), 1)},
                {msg(m.view_range_out_of_range, PT, Int("p_start"), Int("p_end"), Int("v_count"))}));
        END IF;
        SET v_first = p_start;
        SET v_last = IF(p_end = -1 OR p_end > v_count, v_count, p_end);
        SET v_clamped = p_end > v_count;
    END IF;
    -- dbmemory.tool.render._clip_numbered: the whole lines that fit the budget, counted as they are built
    SET v_note = {msg(m.file_output_clipped, OUTPUT_LIMIT_CHARS, Int("v_count"), Int("v_count"), Int("v_count"))};
    SET v_budget = {OUTPUT_LIMIT_CHARS} - CHAR_LENGTH(v_note) - 1;
    SET v_used = CHAR_LENGTH(v_header);
    WHILE i < v_first DO
        SET v_at = LOCATE({NL}, p_text, v_at) + 1;
        SET i = i + 1;
    END WHILE;
    WHILE i <= v_last DO
        SET v_end = LOCATE({NL}, p_text, v_at);
        IF v_end = 0 THEN
            SET v_end = CHAR_LENGTH(p_text) + 1;
        END IF;
        SET v_shown = CONCAT({_numbered("i")}, SUBSTRING(p_text, v_at, v_end - v_at));
        IF i = v_first THEN
            SET v_line1 = v_shown;
        END IF;
        IF v_open AND v_used + 1 + CHAR_LENGTH(v_shown) <= v_budget THEN
            SET v_used = v_used + 1 + CHAR_LENGTH(v_shown);
            SET v_kept = v_kept + 1;
        ELSE
            IF v_open THEN
                SET v_kept_chars = CHAR_LENGTH(v_body);
            END IF;
            SET v_open = FALSE;
        END IF;
        SET v_body = CONCAT(v_body, IF(i > v_first, {NL}, ''), v_shown);
        SET v_at = v_end + 1;
        SET i = i + 1;
    END WHILE;
    IF v_open THEN
        SET v_kept_chars = CHAR_LENGTH(v_body);
    END IF;
    SET v_out = CONCAT(v_header, {NL}, v_body);
    IF v_clamped THEN
        SET v_out = CONCAT(v_out, {NL}, {msg(m.view_range_clamped_note, Int("p_end"), Int("v_first"), Int("v_last"))});
    END IF;
    IF CHAR_LENGTH(v_out) <= {OUTPUT_LIMIT_CHARS} THEN
        RETURN v_out;
    END IF;
    IF v_kept = 0 THEN
        SET v_last = GREATEST(CHAR_LENGTH(v_line1) - {LINE_NUMBER_WIDTH} - 1, 0);
        SET v_note = IF(v_first < v_count,
            {msg(m.line_clipped, OUTPUT_LIMIT_CHARS, Int("v_first"), Int("v_last"), 10**12)},
            {msg(m.line_clipped, OUTPUT_LIMIT_CHARS, Int("v_first"), Int("v_last"), 0)});
        SET v_room = GREATEST({OUTPUT_LIMIT_CHARS} - CHAR_LENGTH(v_header) - CHAR_LENGTH(v_note) - 2, 0);
        RETURN CONCAT(v_header, {NL}, LEFT(v_line1, v_room), {NL}, v_note);
    END IF;
    SET v_last = v_first + v_kept - 1;
    RETURN CONCAT(v_header, {NL}, LEFT(v_body, v_kept_chars), {NL},
        {msg(m.file_output_clipped, OUTPUT_LIMIT_CHARS, Int("v_first"), Int("v_last"), Int("v_count"))});
END"""

_HIDDEN = "(LEFT({c}, 1) = '.' OR {eq})"


def _hidden(col: str) -> str:
    return _HIDDEN.format(c=col, eq=eq(col, "'node_modules'"))


_RENDER_LISTING = f"""CREATE FUNCTION {P}_render_listing(p_store_id BIGINT, p_path {TB}) RETURNS {TB}
    READS SQL DATA SQL SECURITY DEFINER
BEGIN
    -- dbmemory.tool.render.listing_of_rows: two levels, hidden names ('.*', node_modules) left out
    -- with everything below them but counted in the totals, sizes by format_size, clipped at
    -- {OUTPUT_LIMIT_CHARS} characters after a whole entry, saying how many files no shown line
    -- accounts for (a file line its file, a second-level directory line every file under it)
    DECLARE v_prefix {TB} DEFAULT CONCAT(p_path, '/');
    DECLARE v_total BIGINT;
    DECLARE v_head {TB};
    DECLARE v_line {TB};
    DECLARE v_n BIGINT;
    DECLARE v_files BIGINT;
    DECLARE v_listed BIGINT DEFAULT 0;
    DECLARE v_kept BIGINT DEFAULT 0;
    DECLARE v_text {TB};
    DECLARE v_note {TB};
    DECLARE v_entries BIGINT DEFAULT 0;
    DECLARE v_all BIGINT;
    DECLARE v_budget BIGINT;
    DECLARE v_cut BIGINT;
    DECLARE v_done BOOLEAN DEFAULT FALSE;
    DECLARE c_lines CURSOR FOR
        WITH f AS (
            SELECT CAST(SUBSTRING(x.file_path, CHAR_LENGTH(v_prefix) + 1) AS CHAR CHARACTER SET utf8mb4) COLLATE utf8mb4_bin AS rel,
                   x.char_count AS chars
              FROM dbm_files x
             WHERE x.store_id = p_store_id
               AND ({eq("p_path", f"'{ROOT}'")} OR {eq("SUBSTRING(x.file_path, 1, CHAR_LENGTH(v_prefix))", "v_prefix")})
        ), one AS (
            SELECT SUBSTRING_INDEX(rel, '/', 1) AS name, LOCATE('/', rel) > 0 AS is_dir, rel, chars FROM f
        ), top AS (
            SELECT name, is_dir, SUM(chars) AS chars, COUNT(*) AS n FROM one
             WHERE NOT {_hidden("name")}
             GROUP BY CAST(name AS BINARY), is_dir
        ), two AS (
            SELECT o.name AS parent,
                   SUBSTRING_INDEX(SUBSTRING(o.rel, CHAR_LENGTH(o.name) + 2), '/', 1) AS name,
                   LOCATE('/', SUBSTRING(o.rel, CHAR_LENGTH(o.name) + 2)) > 0 AS is_dir, o.chars
              FROM one o WHERE o.is_dir AND NOT {_hidden("o.name")}
        ), sub AS (
            SELECT parent, name, is_dir, SUM(chars) AS chars, COUNT(*) AS n FROM two
             WHERE NOT {_hidden("name")}
             GROUP BY CAST(parent AS BINARY), CAST(name AS BINARY), is_dir
        ), entries AS (
            SELECT t.name AS k1, '' AS k2, CONCAT({P}_format_size(t.chars), {ch(9)}, v_prefix, t.name,
                       IF(t.is_dir, '/', '')) AS line, IF(t.is_dir, 0, t.n) AS n
              FROM top t
            UNION ALL
            SELECT s.parent, s.name, CONCAT({P}_format_size(s.chars), {ch(9)}, v_prefix, s.parent, '/', s.name,
                       IF(s.is_dir, '/', '')), s.n
              FROM sub s
        )
        SELECT line, n FROM entries ORDER BY CAST(k1 AS BINARY), CAST(k2 AS BINARY);
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET v_done = TRUE;
    SELECT COALESCE(SUM(x.char_count), 0), COUNT(*) INTO v_total, v_files FROM dbm_files x
     WHERE x.store_id = p_store_id
       AND ({eq("p_path", f"'{ROOT}'")} OR {eq("SUBSTRING(x.file_path, 1, CHAR_LENGTH(v_prefix))", "v_prefix")});
    SET v_head = CONCAT({msg(m.view_directory_header, PT)}, {NL}, {P}_format_size(v_total), {ch(9)}, p_path);
    -- the longest note the numbers allow (at most two lines per file), so the cut is known
    -- before the lines are read: the entries kept are the whole lines within the budget
    SET v_all = LEAST(2 * v_files, {OUTPUT_LIMIT_CHARS});
    SET v_note = {msg(m.listing_clipped, OUTPUT_LIMIT_CHARS, Int("v_all"), Int("v_files"), Int("v_files"))};
    SET v_budget = GREATEST({OUTPUT_LIMIT_CHARS} - CHAR_LENGTH(v_note) - 1, 0);
    SET v_text = v_head;
    SET v_cut = CHAR_LENGTH(v_head);
    OPEN c_lines;
    read_lines: LOOP
        FETCH c_lines INTO v_line, v_n;
        IF v_done THEN
            LEAVE read_lines;
        END IF;
        SET v_text = CONCAT(v_text, {NL}, v_line);
        SET v_entries = v_entries + 1;
        IF v_cut = CHAR_LENGTH(v_text) - CHAR_LENGTH(v_line) - 1 AND CHAR_LENGTH(v_text) <= v_budget THEN
            SET v_cut = CHAR_LENGTH(v_text);
            SET v_kept = v_entries;
            SET v_listed = v_listed + v_n;
        END IF;
    END LOOP;
    CLOSE c_lines;
    IF CHAR_LENGTH(v_text) <= {OUTPUT_LIMIT_CHARS} THEN
        RETURN v_text;
    END IF;
    SET v_files = v_files - v_listed;
    SET v_all = v_files + v_listed;
    RETURN CONCAT(LEFT(v_text, v_cut), {NL},
                  {msg(m.listing_clipped, OUTPUT_LIMIT_CHARS, Int("v_kept"), Int("v_files"), Int("v_all"))});
END"""

_SNIPPET = f"""CREATE FUNCTION {P}_snippet(p_path {TB}, p_text {TB}, p_first BIGINT, p_last BIGINT) RETURNS {TB}
    DETERMINISTIC NO SQL SQL SECURITY DEFINER
BEGIN
    -- dbmemory.tool.edits._snippet ({SNIPPET_CONTEXT_LINES} lines of context, at most {MAX_SNIPPET_LINES} lines)
    DECLARE v_count BIGINT DEFAULT {P}_line_count(p_text);
    DECLARE v_first BIGINT;
    DECLARE v_last BIGINT;
    DECLARE v_start BIGINT;
    DECLARE v_stop BIGINT;
    DECLARE v_end BIGINT;
    DECLARE v_out {TB};
    IF v_count = 0 THEN
        RETURN {msg(m.file_edited_now_empty, PT)};
    END IF;
    SET v_first = LEAST(p_first, v_count - 1);
    SET v_last = LEAST(GREATEST(p_last, v_first), v_count - 1);
    SET v_start = GREATEST(0, v_first - {SNIPPET_CONTEXT_LINES});
    SET v_stop = LEAST(v_count, v_last + {SNIPPET_CONTEXT_LINES} + 1);
    IF v_stop - v_start > {MAX_SNIPPET_LINES} THEN
        SET v_stop = v_start + {MAX_SNIPPET_LINES};
        SET v_end = LEAST(v_count, v_last + {SNIPPET_CONTEXT_LINES} + 1);
        SET v_stop = v_stop + 1;
    END IF;
    SET v_out = CONCAT({msg(m.file_edited, PT)}, {NL},
        {P}_numbered(p_text, v_start + 1, LEAST(v_stop, v_start + {MAX_SNIPPET_LINES})));
    IF v_end IS NOT NULL THEN
        SET v_out = CONCAT(v_out, {NL}, {msg(m.snippet_clipped, PT, Int("v_stop"), Int("v_end"))});
    END IF;
    RETURN v_out;
END"""

RENDER: list[tuple[str, str, str]] = [
    ("FUNCTION", f"{P}_line_count", _LINE_COUNT),
    ("FUNCTION", f"{P}_numbered", _NUMBERED),
    ("FUNCTION", f"{P}_render_file", _RENDER_FILE),
    ("FUNCTION", f"{P}_render_listing", _RENDER_LISTING),
    ("FUNCTION", f"{P}_snippet", _SNIPPET),
]
"""``(kind, name, body)`` of the rendering functions, in creation order."""
