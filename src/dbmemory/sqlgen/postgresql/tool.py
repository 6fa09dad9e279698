"""PostgreSQL API, the MEMORY tool in SQL: ``run_command(store_id, command json, actor)``
answers the six commands with the text :class:`dbmemory.tool.memory_tool.MemoryTool` returns
(texts from :mod:`dbmemory.tool.messages` through :mod:`dbmemory.sqlgen.tool_text`), writing
with the API's own store lock, cap checks and audit rows (for
:mod:`dbmemory.sqlgen.postgresql.api`)."""

from __future__ import annotations

from dbmemory.core.paths import ROOT
from dbmemory.sqlgen.api_common import MAX_ACTOR_CHARS
from dbmemory.sqlgen.postgresql.rules import S, T, q
from dbmemory.sqlgen.postgresql.tool_render import RENDER
from dbmemory.sqlgen.postgresql.tool_text import msg
from dbmemory.sqlgen.tool_text import Int, Joined, Text, Value, root_refused_text
from dbmemory.tool import messages as m
from dbmemory.tool.args import EXPECTED_LINE as _LINE
from dbmemory.tool.args import EXPECTED_PATH as _PATH
from dbmemory.tool.args import EXPECTED_TEXT as _TEXT
from dbmemory.tool.args import WRAPPER_KEYS
from dbmemory.tool.edits import MAX_REPORTED_MATCHES
from dbmemory.tool.messages import COMMANDS

__all__ = ["TOOL"]

E = q(m.ERROR_MARKER)
P = Text("p_path")
V = Value(f"{S}._json_type(v_value)", f"{S}._show(v_value)")




def _param_text(name: str, command: str, expected: str) -> str:
    """The statements that read text parameter ``name`` into ``v_s`` (or return its error)."""
    return f"""v_value := v_data -> '{name}';
    IF v_value IS NULL OR json_typeof(v_value) = 'null' THEN
        RETURN {E} || {msg(m.missing_parameter, name, command, expected)};
    END IF;
    IF json_typeof(v_value) <> 'string' THEN
        RETURN {E} || {msg(m.wrong_type, name, _TEXT, V)};
    END IF;
    v_s := v_value #>> '{{}}';"""


def _param_path(name: str, command: str, into: str) -> str:
    return f"""{_param_text(name, command, _PATH)}
    SELECT t.path, t.error INTO {into}, v_err FROM {S}._tool_path(v_s, '{name}') t;
    IF v_err IS NOT NULL THEN
        RETURN v_err;
    END IF;"""


def _shown(expr: str) -> str:
    """``old_str`` shown by :func:`dbmemory.tool.messages.show_text` (clipped at 200 characters)."""
    return expr.replace("`' || v_old_str || '`", f"' || {S}._show_text(v_old_str) || '")


_PLURAL_DIR = f"""CASE WHEN v_n = 1 THEN {msg(m.directory_exists, P, 1)}
                    ELSE {msg(m.directory_exists, P, Int("v_n"))} END"""


def _caps_new(path_expr: str, chars: str) -> str:
    """The create's cap checks in Python's order with the tool's texts (the locked store row in v_store)."""
    p = Text(path_expr)
    return f"""IF {chars} > v_store.max_file_chars THEN
            RETURN {E} || {msg(m.file_too_large, p, Int(chars), Int("v_store.max_file_chars"))};
        END IF;"""


RUN = f"""CREATE OR REPLACE FUNCTION {S}.run_command(
    p_store_id bigint, p_command json, p_actor text DEFAULT 'memory-tool'
) RETURNS text LANGUAGE plpgsql AS $f$
-- dbmemory.tool.memory_tool.MemoryTool.execute on one store: the same six commands and the same
-- texts; a failure changes nothing. A bad store id (missing, reserved, another user's) raises
-- as every call of the API does.
DECLARE
    v_data json := p_command;
    v_value json;
    v_inner json;
    v_cmd text;
    v_raw text;
    v_s text;
    v_err text;
    v_first_err text;
    v_key text;
    p_path text;
    v_new text;
    v_old_str text;
    v_new_str text;
    v_text text;
    v_result text;
    v_line numeric;
    v_n integer;
    v_store record;
    v_file record;
    v_found integer[];
    v_pos integer;
    v_range boolean := false;
    v_start numeric;
    v_end numeric;
    v_first integer;
    v_last integer;
    v_nl text;
    v_limit bigint;
    v_now timestamptz := clock_timestamp();
    v_known boolean;
    v_parent text;
    r record;
BEGIN
    PERFORM {S}._check_reachable(p_store_id);
    SELECT s.store_key INTO v_key FROM {T}.dbm_stores s WHERE s.store_id = p_store_id;
    IF v_key IS NULL THEN
        PERFORM {S}._fail('not_found', format('store %s does not exist: check the store id', p_store_id));
    END IF;
    -- dbmemory.tool.args._to_mapping and _unwrap
    IF v_data IS NULL THEN
        v_data := 'null'::json;
    END IF;
    IF json_typeof(v_data) = 'string' AND ltrim(v_data #>> '{{}}') LIKE '{{%' THEN
        BEGIN
            v_data := (v_data #>> '{{}}')::json;
        EXCEPTION WHEN others THEN
            NULL;
        END;
    END IF;
    IF json_typeof(v_data) <> 'object' THEN
        v_value := v_data;
        RETURN {E} || {msg(m.arguments_not_an_object, V)};
    END IF;
    IF NOT EXISTS (SELECT 1 FROM json_object_keys(v_data) k WHERE k = 'command') THEN
        v_known := EXISTS (SELECT 1 FROM json_object_keys(v_data) k WHERE k = ANY ({"ARRAY[" + ", ".join(q(k) for k in WRAPPER_KEYS) + "]"}));
        <<unwrap>>
        FOR r IN SELECT e.key, e.value FROM json_each(v_data) e
                  WHERE (v_known AND e.key = ANY ({"ARRAY[" + ", ".join(q(k) for k in WRAPPER_KEYS) + "]"}))
                     OR (NOT v_known AND (SELECT count(*) FROM json_object_keys(v_data)) = 1)
                  ORDER BY array_position({"ARRAY[" + ", ".join(q(k) for k in WRAPPER_KEYS) + "]"}, e.key) LOOP
            v_inner := r.value;
            IF json_typeof(v_inner) = 'string' THEN
                CONTINUE WHEN NOT ltrim(v_inner #>> '{{}}') LIKE '{{%' AND NOT v_known;
                -- a wrapper whose text cannot be read reports that error (the first one), as
                -- dbmemory.tool.args._unwrap does, unless a later one holds the command
                FOR k IN 1 .. 2 LOOP
                    v_s := v_inner #>> '{{}}';
                    IF btrim(v_s, E' \t\n\r\x0b\x0c') = '' THEN
                        v_first_err := coalesce(v_first_err, {E} || {msg(m.invalid_json, "the text is empty")});
                        CONTINUE unwrap;
                    END IF;
                    BEGIN
                        v_inner := v_s::json;
                    EXCEPTION WHEN others THEN
                        v_first_err := coalesce(v_first_err, {E} || {msg(m.invalid_json, Text(f"coalesce({S}._json_error(v_s), 'the text is not JSON PostgreSQL reads')"))});
                        CONTINUE unwrap;
                    END;
                    EXIT WHEN json_typeof(v_inner) <> 'string' OR NOT ltrim(v_inner #>> '{{}}') LIKE '{{%' OR k = 2;
                END LOOP;
                IF json_typeof(v_inner) <> 'object' THEN
                    v_value := v_inner;
                    v_first_err := coalesce(v_first_err, {E} || {msg(m.arguments_not_an_object, V)});
                    CONTINUE unwrap;
                END IF;
            END IF;
            CONTINUE WHEN json_typeof(v_inner) <> 'object';
            IF EXISTS (SELECT 1 FROM json_object_keys(v_inner) k WHERE k = 'command') THEN
                v_data := v_inner;
                v_first_err := NULL;
                EXIT;
            END IF;
        END LOOP;
        IF v_first_err IS NOT NULL THEN
            RETURN v_first_err;
        END IF;
    END IF;
    v_value := v_data -> 'command';
    IF v_value IS NULL OR json_typeof(v_value) = 'null' THEN
        RETURN {E} || {msg(m.missing_command)};
    END IF;
    IF json_typeof(v_value) <> 'string' THEN
        RETURN {E} || {msg(m.wrong_type, "command", "one of " + ", ".join(COMMANDS), V)};
    END IF;
    v_raw := v_value #>> '{{}}';
    v_cmd := lower(btrim(v_raw, E' \\t\\n\\r\\x0b\\x0c'));

    IF v_cmd = 'view' THEN
        {_param_path("path", "view", "p_path")}
        IF p_path <> '{ROOT}' THEN
            SELECT f.file_id, f.body, f.last_accessed_at,
                   (SELECT fr.read_at FROM {T}.dbm_file_reads fr WHERE fr.file_id = f.file_id) AS read_at
              INTO v_file FROM {T}.dbm_files f
             WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(p_path);
            IF v_file.file_id IS NOT NULL THEN
                -- dbmemory.tool.args.coerce_view_range
                v_value := v_data -> 'view_range';
                IF v_value IS NOT NULL AND json_typeof(v_value) = 'string' THEN
                    v_s := btrim(v_value #>> '{{}}', E' \\t\\n\\r\\x0b\\x0c');
                    IF v_s = '' THEN
                        v_value := NULL;
                    ELSIF length(v_s) > 100 THEN
                        RETURN {E} || {msg(m.view_range_malformed, V)};
                    ELSE
                        BEGIN
                            v_inner := (CASE WHEN left(v_s, 1) = '[' THEN v_s ELSE '[' || v_s || ']' END)::json;
                        EXCEPTION WHEN others THEN
                            RETURN {E} || {msg(m.view_range_malformed, V)};
                        END;
                    END IF;
                ELSE
                    v_inner := v_value;
                END IF;
                IF v_value IS NOT NULL AND json_typeof(v_value) <> 'null' THEN
                    IF json_typeof(v_inner) <> 'array' OR json_array_length(v_inner) NOT IN (0, 2) THEN
                        RETURN {E} || {msg(m.view_range_malformed, V)};
                    END IF;
                    IF json_array_length(v_inner) = 2 THEN
                        v_start := {S}._as_int(v_inner -> 0);
                        v_end := {S}._as_int(v_inner -> 1);
                        IF json_typeof(v_inner -> 0) = 'boolean' OR json_typeof(v_inner -> 1) = 'boolean'
                           OR v_start IS NULL OR v_end IS NULL THEN
                            RETURN {E} || {msg(m.view_range_malformed, V)};
                        END IF;
                        v_range := true;
                    END IF;
                END IF;
                -- dbmemory.store.touches: the read recorded (in this transaction) when the
                -- file's last touch is older than the touch interval
                IF greatest(v_file.last_accessed_at, coalesce(v_file.read_at, v_file.last_accessed_at))
                   < v_now - interval '1 hour' THEN
                    INSERT INTO {T}.dbm_file_reads (file_id, read_at) VALUES (v_file.file_id, v_now)
                    ON CONFLICT (file_id) DO UPDATE SET read_at = EXCLUDED.read_at;
                END IF;
                RETURN {S}._render_file(p_path, coalesce(v_file.body, ''), v_range, v_start, v_end);
            END IF;
            IF NOT {S}._has_files_under(p_store_id, p_path) THEN
                RETURN {E} || {msg(m.path_not_found, P)};
            END IF;
        END IF;
        RETURN {S}._render_listing(p_store_id, p_path);
    END IF;

    IF v_cmd = 'create' THEN
        {_param_path("path", "create", "p_path")}
        {_param_text("file_text", "create", "the file's full text as a string ('' for empty)")}
        v_text := v_s;
        IF p_path = '{ROOT}' THEN
            RETURN {E} || {q(root_refused_text("create"))};
        END IF;
        SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
        {_caps_new("p_path", "length(v_text)")}
        IF EXISTS (SELECT 1 FROM {T}.dbm_files f WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(p_path)) THEN
            RETURN {E} || {msg(m.file_exists, P)};
        END IF;
        SELECT a.p INTO v_parent FROM (
            SELECT substr(p_path, 1, i - 1) AS p, i FROM generate_series({len(ROOT) + 2}, length(p_path)) i
             WHERE substr(p_path, i, 1) = '/') a
         WHERE EXISTS (SELECT 1 FROM {T}.dbm_files f WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(a.p))
         ORDER BY a.i LIMIT 1;
        IF v_parent IS NOT NULL THEN
            RETURN {E} || {msg(m.parent_is_file, P, Text("v_parent"))};
        END IF;
        IF {S}._has_files_under(p_store_id, p_path) THEN
            SELECT count(*) INTO v_n FROM {T}.dbm_files f
             WHERE f.store_id = p_store_id AND substr(f.file_path, 1, length(p_path) + 1) = p_path || '/';
            RETURN {E} || {_PLURAL_DIR};
        END IF;
        IF v_store.file_count + 1 > v_store.max_files THEN
            RETURN {E} || CASE WHEN v_store.max_files = 1 THEN {msg(m.too_many_files, P, 1)}
                ELSE {msg(m.too_many_files, P, Int("v_store.max_files"))} END;
        END IF;
        IF v_store.max_store_chars IS NOT NULL AND length(v_text) > 0
           AND v_store.total_chars + length(v_text) > v_store.max_store_chars THEN
            RETURN {E} || {msg(m.store_too_large, P, Int("v_store.total_chars + length(v_text)"), Int("v_store.max_store_chars"))};
        END IF;
        PERFORM {S}._check_caps(p_path, v_store.max_file_chars, v_store.max_files,
            v_store.max_store_chars, v_store.file_count, v_store.total_chars, length(v_text), NULL);
        INSERT INTO {T}.dbm_files
            (store_id, file_path, path_hash, body, char_count, version_no, expiry_exempt,
             created_at, updated_at, last_accessed_at)
        VALUES (p_store_id, p_path, {S}._path_hash(p_path), nullif(v_text, ''), length(v_text), 1, false,
                v_now, v_now, v_now);
        PERFORM {S}._store_row_update(p_store_id, 1, length(v_text), v_now);
        PERFORM {S}._audit(p_store_id, v_store.store_key, p_path, 'create', p_actor,
                           NULL, length(v_text), NULL, v_now);
        RETURN {msg(m.file_created, P)};
    END IF;

    IF v_cmd IN ('str_replace', 'insert') THEN
        IF v_cmd = 'str_replace' THEN
            {_param_path("path", "str_replace", "p_path")}
        ELSE
            {_param_path("path", "insert", "p_path")}
        END IF;
        IF v_cmd = 'str_replace' THEN
            {_param_text("old_str", "str_replace", "the exact text to replace (it must occur once)")}
            v_old_str := v_s;
            v_value := v_data -> 'new_str';
            IF v_value IS NOT NULL AND json_typeof(v_value) NOT IN ('null', 'string') THEN
                RETURN {E} || {msg(m.wrong_type, "new_str", _TEXT + " or null", V)};
            END IF;
            v_new_str := coalesce(v_value #>> '{{}}', '');
        ELSE
            v_value := v_data -> 'insert_line';
            IF v_value IS NULL OR json_typeof(v_value) = 'null' THEN
                RETURN {E} || {msg(m.missing_parameter, "insert_line", "insert", _LINE)};
            END IF;
            v_line := CASE WHEN json_typeof(v_value) <> 'boolean' THEN {S}._as_int(v_value) END;
            IF v_line IS NULL THEN
                RETURN {E} || {msg(m.wrong_type, "insert_line", _LINE, V)};
            END IF;
            IF (v_data -> 'insert_text' IS NULL OR json_typeof(v_data -> 'insert_text') = 'null')
               AND json_typeof(v_data -> 'new_str') = 'string' THEN
                v_s := v_data ->> 'new_str';
            ELSE
                {_param_text("insert_text", "insert", "the text to insert as a string")}
            END IF;
            v_new_str := v_s;
        END IF;
        IF p_path = '{ROOT}' THEN
            RETURN {E} || {q(root_refused_text("edit"))};
        END IF;
        SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
        SELECT f.file_id, f.char_count, f.body INTO v_file FROM {T}.dbm_files f
         WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(p_path) FOR UPDATE;
        IF v_file.file_id IS NULL THEN
            IF {S}._has_files_under(p_store_id, p_path) THEN
                RETURN {E} || CASE v_cmd WHEN 'insert' THEN {msg(m.not_a_file, P, "insert")}
                    ELSE {msg(m.not_a_file, P, "str_replace")} END;
            END IF;
            RETURN {E} || {msg(m.path_not_found, P)};
        END IF;
        v_text := coalesce(v_file.body, '');
        v_limit := greatest(v_store.max_file_chars, length(v_text));
        IF v_cmd = 'str_replace' THEN
            -- dbmemory.tool.edits.apply_str_replace
            IF v_old_str = '' THEN
                RETURN {E} || {msg(m.old_str_empty, P)};
            END IF;
            v_found := '{{}}';
            v_pos := strpos(v_text, v_old_str);
            WHILE v_pos > 0 AND coalesce(array_length(v_found, 1), 0) < {MAX_REPORTED_MATCHES + 1} LOOP
                v_found := v_found || v_pos;
                v_n := strpos(substr(v_text, v_pos + 1), v_old_str);
                v_pos := CASE WHEN v_n = 0 THEN 0 ELSE v_pos + v_n END;
            END LOOP;
            IF coalesce(array_length(v_found, 1), 0) = 0 THEN
                IF strpos(v_old_str, chr(10)) > 0 AND strpos(v_old_str, chr(13) || chr(10)) = 0
                   AND strpos(v_text, replace(v_old_str, chr(10), chr(13) || chr(10))) > 0 THEN
                    RETURN {E} || {_shown(msg(m.old_str_not_found, P, Text("v_old_str"), crlf=True))};
                END IF;
                RETURN {E} || {_shown(msg(m.old_str_not_found, P, Text("v_old_str")))};
            END IF;
            IF array_length(v_found, 1) > 1 THEN
                v_n := least(array_length(v_found, 1), {MAX_REPORTED_MATCHES});
                SELECT string_agg(l::text, ', ' ORDER BY l) INTO v_s FROM (
                    SELECT DISTINCT length(substr(v_text, 1, x - 1)) - length(replace(substr(v_text, 1, x - 1), chr(10), '')) + 1 AS l
                      FROM unnest(v_found[1 : {MAX_REPORTED_MATCHES}]) x) d;
                RETURN {E} || CASE WHEN array_length(v_found, 1) > {MAX_REPORTED_MATCHES}
                    THEN {_shown(msg(m.old_str_not_unique, P, Text("v_old_str"), Int("v_n"), [Joined("v_s")], more=True))}
                    ELSE {_shown(msg(m.old_str_not_unique, P, Text("v_old_str"), Int("v_n"), [Joined("v_s")]))} END;
            END IF;
            v_pos := v_found[1];
            IF length(v_text) - length(v_old_str) + length(v_new_str) > v_limit THEN
                v_n := length(v_text) - length(v_old_str) + length(v_new_str);
                RETURN {E} || {msg(m.file_too_large, P, Int("v_n"), Int("v_limit"))};
            END IF;
            v_new := substr(v_text, 1, v_pos - 1) || v_new_str || substr(v_text, v_pos + length(v_old_str));
            v_first := length(substr(v_text, 1, v_pos - 1)) - length(replace(substr(v_text, 1, v_pos - 1), chr(10), ''));
            v_last := v_first + length(left(v_new_str, greatest(length(v_new_str) - 1, 0)))
                      - length(replace(left(v_new_str, greatest(length(v_new_str) - 1, 0)), chr(10), ''));
        ELSE
            -- dbmemory.tool.edits.apply_insert
            v_n := CASE WHEN v_text = '' THEN 0 ELSE length(v_text) - length(replace(v_text, chr(10), ''))
                        + CASE WHEN right(v_text, 1) = chr(10) THEN 0 ELSE 1 END END;
            IF v_line < 0 OR v_line > v_n THEN
                RETURN {E} || CASE WHEN v_n = 0 THEN {msg(m.insert_line_out_of_range, P, Int("v_line"), 0)}
                    WHEN v_n = 1 THEN {msg(m.insert_line_out_of_range, P, Int("v_line"), 1)}
                    ELSE {msg(m.insert_line_out_of_range, P, Int("v_line"), Int("v_n"))} END;
            END IF;
            v_nl := chr(10);
            IF strpos(v_text, chr(13) || chr(10)) > 0
               AND length(v_text) - length(replace(v_text, chr(13) || chr(10), '')) = 2 * (length(v_text) - length(replace(v_text, chr(10), ''))) THEN
                v_nl := chr(13) || chr(10);
                v_new_str := replace(replace(v_new_str, chr(13) || chr(10), chr(10)), chr(10), chr(13) || chr(10));
            END IF;
            IF v_text = '' THEN
                v_new := v_new_str;
            ELSIF v_line = v_n AND right(v_text, 1) <> chr(10) THEN
                v_new := v_text || v_nl || v_new_str;
            ELSE
                v_pos := 0;
                FOR i IN 1 .. v_line LOOP
                    v_pos := v_pos + strpos(substr(v_text, v_pos + 1), chr(10));
                END LOOP;
                v_new := substr(v_text, 1, v_pos)
                    || CASE WHEN right(v_new_str, 1) = chr(10) THEN v_new_str ELSE v_new_str || v_nl END
                    || substr(v_text, v_pos + 1);
            END IF;
            IF length(v_new) > v_limit THEN
                v_n := length(v_new);
                RETURN {E} || {msg(m.file_too_large, P, Int("v_n"), Int("v_limit"))};
            END IF;
            v_first := v_line;
            v_last := v_line + greatest(CASE WHEN v_new_str = '' THEN 0 ELSE
                length(v_new_str) - length(replace(v_new_str, chr(10), '')) + CASE WHEN right(v_new_str, 1) = chr(10) THEN 0 ELSE 1 END END, 1) - 1;
        END IF;
        v_result := {S}._snippet(p_path, v_new, v_first, v_last);
        IF v_new = v_text THEN
            RETURN v_result;
        END IF;
        IF v_store.max_store_chars IS NOT NULL AND length(v_new) > v_file.char_count
           AND v_store.total_chars + length(v_new) - v_file.char_count > v_store.max_store_chars THEN
            v_n := v_store.total_chars + length(v_new) - v_file.char_count;
            RETURN {E} || {msg(m.store_too_large, P, Int("v_n"), Int("v_store.max_store_chars"))};
        END IF;
        PERFORM {S}._check_caps(p_path, v_store.max_file_chars, v_store.max_files,
            v_store.max_store_chars, v_store.file_count, v_store.total_chars, length(v_new), v_file.char_count);
        UPDATE {T}.dbm_files
           SET body = nullif(v_new, ''), char_count = length(v_new), version_no = version_no + 1,
               updated_at = v_now, last_accessed_at = v_now
         WHERE file_id = v_file.file_id;
        PERFORM {S}._store_row_update(p_store_id, 0, length(v_new) - v_file.char_count, v_now);
        PERFORM {S}._audit(p_store_id, v_store.store_key, p_path, v_cmd, p_actor,
                           v_file.char_count, length(v_new), NULL, v_now);
        RETURN v_result;
    END IF;

    IF v_cmd = 'delete' THEN
        {_param_path("path", "delete", "p_path")}
        IF p_path = '{ROOT}' THEN
            RETURN {E} || {msg(m.cannot_delete_root)};
        END IF;
        SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
        WITH gone AS (
            DELETE FROM {T}.dbm_files f
             WHERE f.store_id = p_store_id
               AND (f.path_hash = {S}._path_hash(p_path)
                    OR substr(f.file_path, 1, length(p_path) + 1) = p_path || '/')
            RETURNING f.file_path, f.char_count
        ), events AS (
            INSERT INTO {T}.dbm_audit_events
                (store_id, store_key, file_path, action_name, actor_name,
                 chars_before, chars_after, detail_text, created_at)
            SELECT p_store_id, v_store.store_key, g.file_path, 'delete',
                   left(coalesce(nullif(p_actor, ''), 'unknown'), {MAX_ACTOR_CHARS}),
                   g.char_count, NULL, NULL, v_now
              FROM gone g ORDER BY g.file_path COLLATE "C"
            RETURNING chars_before
        )
        SELECT count(*), coalesce(sum(chars_before), 0) INTO v_n, v_limit FROM events;
        IF v_n = 0 THEN
            RETURN {E} || {msg(m.path_not_found, P)};
        END IF;
        PERFORM {S}._store_row_update(p_store_id, -v_n, -v_limit, v_now);
        RETURN CASE WHEN v_n > 1 THEN {msg(m.deleted, P, Int("v_n"))} ELSE {msg(m.deleted, P)} END;
    END IF;

    IF v_cmd = 'rename' THEN
        IF (v_data -> 'old_path' IS NOT NULL AND json_typeof(v_data -> 'old_path') <> 'null')
           OR v_data -> 'path' IS NULL OR json_typeof(v_data -> 'path') = 'null' THEN
            {_param_path("old_path", "rename", "p_path")}
        ELSE
            {_param_path("path", "rename", "p_path")}
        END IF;
        {_param_path("new_path", "rename", "v_new")}
        IF p_path = '{ROOT}' OR v_new = '{ROOT}' THEN
            RETURN {E} || {msg(m.cannot_rename_root)};
        END IF;
        IF p_path = v_new THEN
            RETURN {E} || {msg(m.rename_same_path, P)};
        END IF;
        IF left(v_new, length(p_path) + 1) = p_path || '/' THEN
            RETURN {E} || {msg(m.rename_into_itself, P, Text("v_new"))};
        END IF;
        SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
        CREATE TEMP TABLE IF NOT EXISTS pg_temp.dbm_moves (file_id bigint, old_path text, new_path text, chars integer) ON COMMIT DROP;
        DELETE FROM pg_temp.dbm_moves;
        INSERT INTO pg_temp.dbm_moves
        SELECT f.file_id, f.file_path::text, v_new || substr(f.file_path, length(p_path) + 1), f.char_count
          FROM {T}.dbm_files f
         WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(p_path);
        IF NOT FOUND THEN
            INSERT INTO pg_temp.dbm_moves
            SELECT f.file_id, f.file_path::text, v_new || substr(f.file_path, length(p_path) + 1), f.char_count
              FROM {T}.dbm_files f
             WHERE f.store_id = p_store_id AND substr(f.file_path, 1, length(p_path) + 1) = p_path || '/';
            IF NOT FOUND THEN
                RETURN {E} || {msg(m.path_not_found, P)};
            END IF;
        END IF;
        SELECT * INTO r FROM pg_temp.dbm_moves WHERE length(new_path) > 1000 ORDER BY old_path COLLATE "C" LIMIT 1;
        IF r.file_id IS NOT NULL THEN
            RETURN {E} || format('moving %s would make a path of %s characters; the limit is 1,000: choose a shorter destination',
                                  r.old_path, length(r.new_path));
        END IF;
        IF EXISTS (SELECT 1 FROM {T}.dbm_files f WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(v_new))
           OR {S}._has_files_under(p_store_id, v_new) THEN
            RETURN {E} || {msg(m.rename_destination_exists, Text("v_new"))};
        END IF;
        SELECT a.p INTO v_parent FROM (
            SELECT substr(v_new, 1, i - 1) AS p, i FROM generate_series({len(ROOT) + 2}, length(v_new)) i
             WHERE substr(v_new, i, 1) = '/') a
         WHERE EXISTS (SELECT 1 FROM {T}.dbm_files f WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(a.p))
         ORDER BY a.i LIMIT 1;
        IF v_parent IS NOT NULL THEN
            RETURN {E} || {msg(m.parent_is_file, Text("v_new"), Text("v_parent"))};
        END IF;
        UPDATE {T}.dbm_files f
           SET file_path = mv.new_path, path_hash = {S}._path_hash(mv.new_path),
               version_no = f.version_no + 1, updated_at = v_now, last_accessed_at = v_now
          FROM pg_temp.dbm_moves mv WHERE f.file_id = mv.file_id;
        INSERT INTO {T}.dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, detail_text, created_at)
        SELECT p_store_id, v_store.store_key, mv.old_path, 'rename',
               left(coalesce(nullif(p_actor, ''), 'unknown'), {MAX_ACTOR_CHARS}),
               mv.chars, mv.chars, mv.new_path, v_now
          FROM pg_temp.dbm_moves mv ORDER BY mv.old_path COLLATE "C";
        SELECT count(*) INTO v_n FROM pg_temp.dbm_moves;
        PERFORM {S}._store_row_update(p_store_id, 0, 0, v_now);
        RETURN CASE WHEN v_n > 1 THEN {msg(m.renamed, P, Text("v_new"), Int("v_n"))}
            ELSE {msg(m.renamed, P, Text("v_new"))} END;
    END IF;
    RETURN {E} || {msg(m.unknown_command, Value("", f"{S}._quote_value(v_raw)"))};
END
$f$"""

TOOL = [*RENDER.split(";\n\n"), RUN]
"""The statements, in order."""
