"""PostgreSQL API, the MEMORY tool's rendering for ``run_command``: numbered lines, file views,
listings and edit snippets (:mod:`dbmemory.tool.render`, :mod:`dbmemory.tool.edits`), for
:mod:`dbmemory.sqlgen.postgresql.tool`."""

from __future__ import annotations

from dbmemory.core.paths import ROOT
from dbmemory.sqlgen.postgresql.rules import S, T, q
from dbmemory.sqlgen.postgresql.tool_text import msg
from dbmemory.sqlgen.tool_text import Int, Text
from dbmemory.tool import messages as m
from dbmemory.tool.edits import MAX_SNIPPET_LINES, SNIPPET_CONTEXT_LINES
from dbmemory.tool.render import LINE_NUMBER_WIDTH, OUTPUT_LIMIT_CHARS

__all__ = ["RENDER"]

E = q(m.ERROR_MARKER)
P = Text("p_path")

RENDER = f"""CREATE OR REPLACE FUNCTION {S}._numbered(p_lines text[], p_first integer) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.tool.render.number_lines: the number right-aligned in {LINE_NUMBER_WIDTH} columns, a TAB
    SELECT coalesce(array_agg(CASE WHEN length((p_first + n - 1)::text) >= {LINE_NUMBER_WIDTH}
                                   THEN (p_first + n - 1)::text
                                   ELSE lpad((p_first + n - 1)::text, {LINE_NUMBER_WIDTH}) END
                              || chr(9) || l ORDER BY n), '{{}}')
      FROM unnest(p_lines) WITH ORDINALITY u(l, n)
$f$;

CREATE OR REPLACE FUNCTION {S}._split_lines(p_text text) RETURNS text[]
LANGUAGE sql IMMUTABLE AS $f$
    -- dbmemory.tool.render.split_lines
    SELECT CASE WHEN p_text = '' THEN '{{}}'::text[]
                WHEN right(p_text, 1) = chr(10) THEN (string_to_array(p_text, chr(10)))[1 : length(p_text) - length(replace(p_text, chr(10), ''))]
                ELSE string_to_array(p_text, chr(10)) END
$f$;

CREATE OR REPLACE FUNCTION {S}._render_file(p_path text, p_text text, p_range boolean,
                                             p_start numeric, p_end numeric) RETURNS text
LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.tool.render.render_file (OUTPUT_LIMIT_CHARS {OUTPUT_LIMIT_CHARS}); an error text for a bad view_range
DECLARE
    v_header text := {msg(m.view_file_header, P)};
    v_lines text[] := {S}._split_lines(p_text);
    v_count integer := coalesce(array_length(v_lines, 1), 0);
    v_first integer;
    v_last integer;
    v_clamped boolean := false;
    v_shown text[];
    v_out text;
    v_note text;
    v_budget integer;
    v_used integer;
    v_kept integer := 0;
    v_room integer;
BEGIN
    IF NOT p_range THEN
        IF v_count = 0 THEN
            RETURN v_header || chr(10) || {msg(m.empty_file_note, P)};
        END IF;
        v_first := 1;
        v_last := v_count;
    ELSE
        IF v_count = 0 THEN
            RETURN {E} || {msg(m.view_range_on_empty_file, P, Int("p_start"), Int("p_end"))};
        END IF;
        IF p_start < 1 OR p_start > v_count OR (p_end <> -1 AND p_end < p_start) THEN
            RETURN {E} || CASE WHEN v_count = 1
                THEN {msg(m.view_range_out_of_range, P, Int("p_start"), Int("p_end"), 1)}
                ELSE {msg(m.view_range_out_of_range, P, Int("p_start"), Int("p_end"), Int("v_count"))} END;
        END IF;
        v_first := p_start;
        v_last := CASE WHEN p_end = -1 OR p_end > v_count THEN v_count ELSE p_end END;
        v_clamped := p_end > v_count;
    END IF;
    v_shown := {S}._numbered(v_lines[v_first : v_last], v_first);
    v_out := v_header || chr(10) || array_to_string(v_shown, chr(10));
    IF v_clamped THEN
        v_out := v_out || chr(10) || {msg(m.view_range_clamped_note, Int("p_end"), Int("v_first"), Int("v_last"))};
    END IF;
    IF length(v_out) <= {OUTPUT_LIMIT_CHARS} THEN
        RETURN v_out;
    END IF;
    -- dbmemory.tool.render._clip_numbered
    v_note := {msg(m.file_output_clipped, OUTPUT_LIMIT_CHARS, Int("v_count"), Int("v_count"), Int("v_count"))};
    v_budget := {OUTPUT_LIMIT_CHARS} - length(v_note) - 1;
    v_used := length(v_header);
    WHILE v_kept < coalesce(array_length(v_shown, 1), 0)
          AND v_used + 1 + length(v_shown[v_kept + 1]) <= v_budget LOOP
        v_used := v_used + 1 + length(v_shown[v_kept + 1]);
        v_kept := v_kept + 1;
    END LOOP;
    IF v_kept = 0 THEN
        v_last := greatest(length(v_shown[1]) - {LINE_NUMBER_WIDTH} - 1, 0);
        v_note := CASE WHEN v_first < v_count
            THEN {msg(m.line_clipped, OUTPUT_LIMIT_CHARS, Int("v_first"), Int("v_last"), 10**12)}
            ELSE {msg(m.line_clipped, OUTPUT_LIMIT_CHARS, Int("v_first"), Int("v_last"), 0)} END;
        v_room := greatest({OUTPUT_LIMIT_CHARS} - length(v_header) - length(v_note) - 2, 0);
        RETURN v_header || chr(10) || left(v_shown[1], v_room) || chr(10) || v_note;
    END IF;
    v_last := v_first + v_kept - 1;
    RETURN v_header || chr(10) || array_to_string(v_shown[1 : v_kept], chr(10)) || chr(10)
        || {msg(m.file_output_clipped, OUTPUT_LIMIT_CHARS, Int("v_first"), Int("v_last"), Int("v_count"))};
END
$f$;

CREATE OR REPLACE FUNCTION {S}._render_listing(p_store_id bigint, p_path text) RETURNS text
LANGUAGE plpgsql STABLE AS $f$
-- dbmemory.tool.render.listing_of_rows: two levels, hidden names ('.*', node_modules) left out
-- with everything below them but counted in the totals, sizes by format_size, clipped at
-- {OUTPUT_LIMIT_CHARS} characters after a whole entry, saying how many files no shown line accounts for
DECLARE
    v_prefix text := p_path || '/';
    v_total bigint;
    v_lines text[];
    v_counts integer[];
    v_head text[];
    v_entries integer;
    v_files integer;
    v_listed integer := 0;
    v_note text;
    v_budget integer;
    v_text text;
    v_cut integer;
    v_at integer;
BEGIN
    WITH f AS (
        SELECT substr(x.file_path, length(v_prefix) + 1) AS rel, x.char_count::bigint AS chars
          FROM {T}.dbm_files x
         WHERE x.store_id = p_store_id
           AND (p_path = '{ROOT}' OR substr(x.file_path, 1, length(v_prefix)) = v_prefix)
    ), one AS (
        SELECT split_part(rel, '/', 1) AS name, strpos(rel, '/') > 0 AS is_dir, rel, chars FROM f
    ), top AS (
        SELECT name, is_dir, sum(chars)::bigint AS chars, count(*)::integer AS n FROM one
         WHERE left(name, 1) <> '.' AND name <> 'node_modules'
         GROUP BY name, is_dir
    ), two AS (
        SELECT o.name AS parent, split_part(substr(o.rel, length(o.name) + 2), '/', 1) AS name,
               strpos(substr(o.rel, length(o.name) + 2), '/') > 0 AS is_dir, o.chars
          FROM one o WHERE o.is_dir AND left(o.name, 1) <> '.' AND o.name <> 'node_modules'
    ), sub AS (
        SELECT parent, name, is_dir, sum(chars)::bigint AS chars, count(*)::integer AS n FROM two
         WHERE left(name, 1) <> '.' AND name <> 'node_modules'
         GROUP BY parent, name, is_dir
    ), lines AS (
        SELECT t.name AS k1, '' AS k2, {S}._format_size(t.chars) || chr(9) || v_prefix || t.name
                   || CASE WHEN t.is_dir THEN '/' ELSE '' END AS line,
               CASE WHEN t.is_dir THEN 0 ELSE t.n END AS n
          FROM top t
        UNION ALL
        SELECT s.parent, s.name, {S}._format_size(s.chars) || chr(9) || v_prefix || s.parent || '/' || s.name
                   || CASE WHEN s.is_dir THEN '/' ELSE '' END, s.n
          FROM sub s
    )
    SELECT (SELECT coalesce(sum(chars), 0) FROM f), (SELECT count(*)::integer FROM f),
           (SELECT array_agg(line ORDER BY k1 COLLATE "C", k2 COLLATE "C") FROM lines),
           (SELECT array_agg(n ORDER BY k1 COLLATE "C", k2 COLLATE "C") FROM lines)
      INTO v_total, v_files, v_lines, v_counts;
    v_head := ARRAY[{msg(m.view_directory_header, P)}, {S}._format_size(v_total) || chr(9) || p_path];
    v_entries := coalesce(array_length(v_lines, 1), 0);
    v_text := array_to_string(v_head || coalesce(v_lines, '{{}}'), chr(10));
    IF length(v_text) <= {OUTPUT_LIMIT_CHARS} THEN
        RETURN v_text;
    END IF;
    v_entries := least(2 * v_files, {OUTPUT_LIMIT_CHARS});
    v_note := {msg(m.listing_clipped, OUTPUT_LIMIT_CHARS, Int("v_entries"), Int("v_files"), Int("v_files"))};
    v_budget := {OUTPUT_LIMIT_CHARS} - length(v_note) - 1;
    v_cut := length(v_head[1]) + 1 + length(v_head[2]);
    v_at := v_cut;
    v_budget := greatest(v_budget, 0);
    v_entries := 0;
    FOR i IN 1 .. coalesce(array_length(v_lines, 1), 0) LOOP
        v_at := v_at + 1 + length(v_lines[i]);
        EXIT WHEN v_at > v_budget;
        v_cut := v_at;
        v_entries := i;
        v_listed := v_listed + v_counts[i];
    END LOOP;
    v_budget := v_files - v_listed;
    RETURN array_to_string(v_head || coalesce(v_lines[1 : v_entries], '{{}}'), chr(10)) || chr(10)
        || {msg(m.listing_clipped, OUTPUT_LIMIT_CHARS, Int("v_entries"), Int("v_budget"), Int("v_files"))};
END
$f$;

CREATE OR REPLACE FUNCTION {S}._snippet(p_path text, p_text text, p_first integer, p_last integer)
RETURNS text LANGUAGE plpgsql IMMUTABLE AS $f$
-- dbmemory.tool.edits._snippet ({SNIPPET_CONTEXT_LINES} lines of context, at most {MAX_SNIPPET_LINES} lines)
DECLARE
    v_lines text[] := {S}._split_lines(p_text);
    v_count integer := coalesce(array_length(v_lines, 1), 0);
    v_first integer;
    v_last integer;
    v_start integer;
    v_stop integer;
    v_end integer;
    v_out text;
BEGIN
    IF v_count = 0 THEN
        RETURN {msg(m.file_edited_now_empty, P)};
    END IF;
    v_first := least(p_first, v_count - 1);
    v_last := least(greatest(p_last, v_first), v_count - 1);
    v_start := greatest(0, v_first - {SNIPPET_CONTEXT_LINES});
    v_stop := least(v_count, v_last + {SNIPPET_CONTEXT_LINES} + 1);
    IF v_stop - v_start > {MAX_SNIPPET_LINES} THEN
        v_stop := v_start + {MAX_SNIPPET_LINES};
        v_end := least(v_count, v_last + {SNIPPET_CONTEXT_LINES} + 1);
        v_stop := v_stop + 1;
    END IF;
    v_out := {msg(m.file_edited, P)} || chr(10)
        || array_to_string({S}._numbered(v_lines[v_start + 1 : least(v_stop, v_start + {MAX_SNIPPET_LINES})], v_start + 1), chr(10));
    IF v_end IS NOT NULL THEN
        v_out := v_out || chr(10) || {msg(m.snippet_clipped, P, Int("v_stop"), Int("v_end"))};
    END IF;
    RETURN v_out;
END
$f$"""
"""Rendering: numbered lines, file views, listings, edit snippets."""
