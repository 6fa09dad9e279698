"""MySQL/MariaDB API, the MEMORY tool's writes for ``run_command`` (:mod:`dbmemory.sqlgen.mysql.tool`):
``create``, ``str_replace`` / ``insert``, ``delete`` and ``rename`` under the store lock, with the
tool's checks and texts in Python's order (:mod:`dbmemory.tool.memory_tool`,
:mod:`dbmemory.tool.edits`), the store row's counters and one audit event per file."""

from __future__ import annotations

from dbmemory.core.paths import MAX_PATH_CHARS, ROOT
from dbmemory.sqlgen.api_common import MAX_ACTOR_CHARS
from dbmemory.sqlgen.mysql.rules import P, audit, q
from dbmemory.sqlgen.mysql.tool_text import ch, eq, msg
from dbmemory.sqlgen.tool_text import Int, Joined, Text, Value
from dbmemory.tool import messages as m
from dbmemory.tool.edits import MAX_REPORTED_MATCHES

__all__ = ["E", "HASH", "PT", "V", "NL", "ret", "err", "is_file", "under", "CREATE", "DELETE", "RENAME", "EDIT"]

E = q(m.ERROR_MARKER)
PT = Text("p_path")
V = Value(f"{P}_json_type(v_value)", f"{P}_show(v_value)")
NL = ch(10)
CR = ch(13)
HASH = "SHA2({}, 256)"
_SLASH = "'/'"


def ret(expr: str) -> str:
    return f"SET p_result = {expr};\n            LEAVE main;"


def err(expr: str) -> str:
    return ret(f"CONCAT({E}, {expr})")


def _shown(expr: str) -> str:
    """``old_str`` shown by :func:`dbmemory.tool.messages.show_text` (clipped at 200 characters)."""
    shown = expr.replace("`', v_old_str, '`", f"', {P}_show_text(v_old_str), '")
    assert shown != expr, "the message no longer shows old_str between backticks"
    return shown


def is_file(path: str) -> str:
    return f"EXISTS (SELECT 1 FROM dbm_files f WHERE f.store_id = v_sid AND f.path_hash = {HASH.format(path)})"


def under(path: str) -> str:
    """Files under ``path``/ (it is a directory)."""
    return (f"EXISTS (SELECT 1 FROM dbm_files f WHERE f.store_id = v_sid"
            f" AND {eq(f'SUBSTRING(f.file_path, 1, CHAR_LENGTH({path}) + 1)', f'CONCAT({path}, {_SLASH})')})")


def _first_file_parent(path: str) -> str:
    """The first ancestor directory of ``path`` that is a file, into v_parent (or NULL)."""
    return f"""SET v_parent = NULL;
        SET i = {len(ROOT) + 2};
        parents: WHILE i <= CHAR_LENGTH({path}) DO
            IF SUBSTRING({path}, i, 1) = '/' AND {is_file(f"SUBSTRING({path}, 1, i - 1)")} THEN
                SET v_parent = SUBSTRING({path}, 1, i - 1);
                LEAVE parents;
            END IF;
            SET i = i + 1;
        END WHILE parents;"""


_PLURAL_DIR = f"IF(v_n = 1, {msg(m.directory_exists, PT, 1)}, {msg(m.directory_exists, PT, Int('v_n'))})"
_AUDIT_ACTOR = f"LEFT(COALESCE(NULLIF(v_actor, ''), 'unknown'), {MAX_ACTOR_CHARS})"

CREATE = f"""-- dbmemory.tool.memory_tool create: the tool's checks in Python's order
            IF CHAR_LENGTH(v_text) > v_mfc THEN
                {err(msg(m.file_too_large, PT, Int("CHAR_LENGTH(v_text)"), Int("v_mfc")))}
            END IF;
            IF {is_file("p_path")} THEN
                {err(msg(m.file_exists, PT))}
            END IF;
            {_first_file_parent("p_path")}
            IF v_parent IS NOT NULL THEN
                {err(msg(m.parent_is_file, PT, Text("v_parent")))}
            END IF;
            IF {under("p_path")} THEN
                SELECT COUNT(*) INTO v_n FROM dbm_files f WHERE f.store_id = v_sid
                   AND {eq("SUBSTRING(f.file_path, 1, CHAR_LENGTH(p_path) + 1)", "CONCAT(p_path, '/')")};
                {err(_PLURAL_DIR)}
            END IF;
            IF v_nfiles + 1 > v_mf THEN
                {err(f"IF(v_mf = 1, {msg(m.too_many_files, PT, 1)}, {msg(m.too_many_files, PT, Int('v_mf'))})")}
            END IF;
            IF v_msc IS NOT NULL AND CHAR_LENGTH(v_text) > 0 AND v_nchars + CHAR_LENGTH(v_text) > v_msc THEN
                {err(msg(m.store_too_large, PT, Int("v_nchars + CHAR_LENGTH(v_text)"), Int("v_msc")))}
            END IF;
            CALL {P}_check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, CHAR_LENGTH(v_text), NULL);
            INSERT INTO dbm_files
                (store_id, file_path, path_hash, body, char_count, version_no, expiry_exempt,
                 created_at, updated_at, last_accessed_at)
            VALUES (v_sid, p_path, {HASH.format("p_path")}, NULLIF(v_text, ''), CHAR_LENGTH(v_text), 1, 0,
                    v_now, v_now, v_now);
            CALL {P}_store_row_update(v_sid, 1, CHAR_LENGTH(v_text), v_now);
            {audit("v_sid", "v_key", "p_path", "create", "v_actor", "NULL", "CHAR_LENGTH(v_text)", "NULL", "v_now")};
            {ret(msg(m.file_created, PT))}"""

DELETE = f"""INSERT INTO dbm_audit_events
                (store_id, store_key, file_path, action_name, actor_name,
                 chars_before, chars_after, detail_text, created_at)
            SELECT v_sid, v_key, f.file_path, 'delete', {_AUDIT_ACTOR}, f.char_count, NULL, NULL, v_now
              FROM dbm_files f
             WHERE f.store_id = v_sid
               AND (f.path_hash = {HASH.format("p_path")}
                    OR {eq("SUBSTRING(f.file_path, 1, CHAR_LENGTH(p_path) + 1)", "CONCAT(p_path, '/')")})
             ORDER BY CAST(f.file_path AS BINARY)
             FOR UPDATE;
            SET v_n = ROW_COUNT();
            IF v_n = 0 THEN
                {err(msg(m.path_not_found, PT))}
            END IF;
            SELECT COALESCE(SUM(f.char_count), 0) INTO v_limit FROM dbm_files f
             WHERE f.store_id = v_sid
               AND (f.path_hash = {HASH.format("p_path")}
                    OR {eq("SUBSTRING(f.file_path, 1, CHAR_LENGTH(p_path) + 1)", "CONCAT(p_path, '/')")});
            DELETE FROM dbm_files
             WHERE store_id = v_sid
               AND (path_hash = {HASH.format("p_path")}
                    OR {eq("SUBSTRING(file_path, 1, CHAR_LENGTH(p_path) + 1)", "CONCAT(p_path, '/')")});
            CALL {P}_store_row_update(v_sid, -v_n, -v_limit, v_now);
            {ret(f"IF(v_n > 1, {msg(m.deleted, PT, Int('v_n'))}, {msg(m.deleted, PT)})")}"""

_MOVED = f"""f.store_id = v_sid AND IF(v_exact, f.path_hash = {HASH.format("p_path")},
                 {eq("SUBSTRING(f.file_path, 1, CHAR_LENGTH(p_path) + 1)", "CONCAT(p_path, '/')")})"""

RENAME = f"""SET v_exact = {is_file("p_path")};
            IF NOT v_exact AND NOT {under("p_path")} THEN
                {err(msg(m.path_not_found, PT))}
            END IF;
            SET v_s = NULL;
            SELECT f.file_path, CHAR_LENGTH(v_new) + CHAR_LENGTH(f.file_path) - CHAR_LENGTH(p_path)
              INTO v_s, v_n
              FROM dbm_files f WHERE {_MOVED}
               AND CHAR_LENGTH(v_new) + CHAR_LENGTH(f.file_path) - CHAR_LENGTH(p_path) > {MAX_PATH_CHARS}
             ORDER BY CAST(f.file_path AS BINARY) LIMIT 1;
            IF v_s IS NOT NULL THEN
                {err(f"CONCAT('moving ', v_s, ' would make a path of ', v_n, ' characters; the limit is {MAX_PATH_CHARS:,}: choose a shorter destination')")}
            END IF;
            IF {is_file("v_new")} OR {under("v_new")} THEN
                {err(msg(m.rename_destination_exists, Text("v_new")))}
            END IF;
            {_first_file_parent("v_new")}
            IF v_parent IS NOT NULL THEN
                {err(msg(m.parent_is_file, Text("v_new"), Text("v_parent")))}
            END IF;
            INSERT INTO dbm_audit_events
                (store_id, store_key, file_path, action_name, actor_name,
                 chars_before, chars_after, detail_text, created_at)
            SELECT v_sid, v_key, f.file_path, 'rename', {_AUDIT_ACTOR}, f.char_count, f.char_count,
                   CONCAT(v_new, SUBSTRING(f.file_path, CHAR_LENGTH(p_path) + 1)), v_now
              FROM dbm_files f WHERE {_MOVED}
             ORDER BY CAST(f.file_path AS BINARY)
             FOR UPDATE;
            SET v_n = ROW_COUNT();
            UPDATE dbm_files f
               SET f.path_hash = {HASH.format("CONCAT(v_new, SUBSTRING(f.file_path, CHAR_LENGTH(p_path) + 1))")},
                   f.file_path = CONCAT(v_new, SUBSTRING(f.file_path, CHAR_LENGTH(p_path) + 1)),
                   f.version_no = f.version_no + 1, f.updated_at = v_now, f.last_accessed_at = v_now
             WHERE {_MOVED};
            CALL {P}_store_row_update(v_sid, 0, 0, v_now);
            {ret(f"IF(v_n > 1, {msg(m.renamed, PT, Text('v_new'), Int('v_n'))}, {msg(m.renamed, PT, Text('v_new'))})")}"""

EDIT = f"""SELECT f.file_id, f.char_count, f.body INTO v_fid, v_old, v_body FROM dbm_files f
             WHERE f.store_id = v_sid AND f.path_hash = {HASH.format("p_path")} FOR UPDATE;
            IF v_fid IS NULL THEN
                IF {under("p_path")} THEN
                    {err(f"IF({eq('v_cmd', chr(39) + 'insert' + chr(39))}, {msg(m.not_a_file, PT, 'insert')}, {msg(m.not_a_file, PT, 'str_replace')})")}
                END IF;
                {err(msg(m.path_not_found, PT))}
            END IF;
            SET v_text = COALESCE(v_body, '');
            SET v_limit = GREATEST(v_mfc, CHAR_LENGTH(v_text));
            IF {eq("v_cmd", "'str_replace'")} THEN
                -- dbmemory.tool.edits.apply_str_replace
                IF CHAR_LENGTH(v_old_str) = 0 THEN
                    {err(msg(m.old_str_empty, PT))}
                END IF;
                SET v_hits = 0;
                SET v_found = '';
                SET v_prev = 0;
                SET v_first = NULL;
                SET v_pos = LOCATE(v_old_str, v_text);
                WHILE v_pos > 0 AND v_hits < {MAX_REPORTED_MATCHES + 1} DO
                    SET v_hits = v_hits + 1;
                    IF v_hits = 1 THEN
                        SET v_first = v_pos;
                    END IF;
                    IF v_hits <= {MAX_REPORTED_MATCHES} THEN
                        SET v_n = CHAR_LENGTH(LEFT(v_text, v_pos - 1)) - CHAR_LENGTH(REPLACE(LEFT(v_text, v_pos - 1), {NL}, '')) + 1;
                        IF v_n <> v_prev THEN
                            SET v_found = CONCAT(v_found, IF(v_prev = 0, '', ', '), v_n);
                            SET v_prev = v_n;
                        END IF;
                    END IF;
                    SET v_pos = LOCATE(v_old_str, v_text, v_pos + 1);
                END WHILE;
                IF v_hits = 0 THEN
                    IF LOCATE({NL}, v_old_str) > 0 AND LOCATE(CONCAT({CR}, {NL}), v_old_str) = 0
                       AND LOCATE(REPLACE(v_old_str, {NL}, CONCAT({CR}, {NL})), v_text) > 0 THEN
                        {err(_shown(msg(m.old_str_not_found, PT, Text("v_old_str"), crlf=True)))}
                    END IF;
                    {err(_shown(msg(m.old_str_not_found, PT, Text("v_old_str"))))}
                END IF;
                IF v_hits > 1 THEN
                    SET v_n = LEAST(v_hits, {MAX_REPORTED_MATCHES});
                    {err(f"IF(v_hits > {MAX_REPORTED_MATCHES}, {_shown(msg(m.old_str_not_unique, PT, Text('v_old_str'), Int('v_n'), [Joined('v_found')], more=True))}, {_shown(msg(m.old_str_not_unique, PT, Text('v_old_str'), Int('v_n'), [Joined('v_found')]))})")}
                END IF;
                SET v_pos = v_first;
                IF CHAR_LENGTH(v_text) - CHAR_LENGTH(v_old_str) + CHAR_LENGTH(v_new_str) > v_limit THEN
                    SET v_n = CHAR_LENGTH(v_text) - CHAR_LENGTH(v_old_str) + CHAR_LENGTH(v_new_str);
                    {err(msg(m.file_too_large, PT, Int("v_n"), Int("v_limit")))}
                END IF;
                SET v_new = CONCAT(LEFT(v_text, v_pos - 1), v_new_str, SUBSTRING(v_text, v_pos + CHAR_LENGTH(v_old_str)));
                SET v_first = CHAR_LENGTH(LEFT(v_text, v_pos - 1)) - CHAR_LENGTH(REPLACE(LEFT(v_text, v_pos - 1), {NL}, ''));
                SET v_s = LEFT(v_new_str, GREATEST(CHAR_LENGTH(v_new_str) - 1, 0));
                SET v_last = v_first + CHAR_LENGTH(v_s) - CHAR_LENGTH(REPLACE(v_s, {NL}, ''));
            ELSE
                -- dbmemory.tool.edits.apply_insert
                SET v_n = {P}_line_count(v_text);
                IF v_line < 0 OR v_line > v_n THEN
                    {err(f"CASE WHEN v_n = 0 THEN {msg(m.insert_line_out_of_range, PT, Int('v_line'), 0)} WHEN v_n = 1 THEN {msg(m.insert_line_out_of_range, PT, Int('v_line'), 1)} ELSE {msg(m.insert_line_out_of_range, PT, Int('v_line'), Int('v_n'))} END")}
                END IF;
                SET v_nl = {NL};
                IF LOCATE(CONCAT({CR}, {NL}), v_text) > 0
                   AND CHAR_LENGTH(v_text) - CHAR_LENGTH(REPLACE(v_text, CONCAT({CR}, {NL}), ''))
                       = 2 * (CHAR_LENGTH(v_text) - CHAR_LENGTH(REPLACE(v_text, {NL}, ''))) THEN
                    SET v_nl = CONCAT({CR}, {NL});
                    SET v_new_str = REPLACE(REPLACE(v_new_str, CONCAT({CR}, {NL}), {NL}), {NL}, CONCAT({CR}, {NL}));
                END IF;
                IF CHAR_LENGTH(v_text) = 0 THEN
                    SET v_new = v_new_str;
                ELSEIF v_line = v_n AND RIGHT(v_text, 1) <> {NL} THEN
                    SET v_new = CONCAT(v_text, v_nl, v_new_str);
                ELSE
                    SET v_pos = 0;
                    SET i = 1;
                    WHILE i <= v_line DO
                        SET v_pos = LOCATE({NL}, v_text, v_pos + 1);
                        SET i = i + 1;
                    END WHILE;
                    SET v_new = CONCAT(LEFT(v_text, v_pos),
                        IF(RIGHT(v_new_str, 1) = {NL}, v_new_str, CONCAT(v_new_str, v_nl)),
                        SUBSTRING(v_text, v_pos + 1));
                END IF;
                IF CHAR_LENGTH(v_new) > v_limit THEN
                    SET v_n = CHAR_LENGTH(v_new);
                    {err(msg(m.file_too_large, PT, Int("v_n"), Int("v_limit")))}
                END IF;
                SET v_first = v_line;
                SET v_last = v_line + GREATEST({P}_line_count(v_new_str), 1) - 1;
            END IF;
            SET p_result = {P}_snippet(p_path, v_new, v_first, v_last);
            IF {eq("v_new", "v_text")} THEN
                LEAVE main;
            END IF;
            IF v_msc IS NOT NULL AND CHAR_LENGTH(v_new) > v_old AND v_nchars + CHAR_LENGTH(v_new) - v_old > v_msc THEN
                SET v_n = v_nchars + CHAR_LENGTH(v_new) - v_old;
                {err(msg(m.store_too_large, PT, Int("v_n"), Int("v_msc")))}
            END IF;
            CALL {P}_check_caps(p_path, v_mfc, v_mf, v_msc, v_nfiles, v_nchars, CHAR_LENGTH(v_new), v_old);
            UPDATE dbm_files
               SET body = NULLIF(v_new, ''), char_count = CHAR_LENGTH(v_new), version_no = version_no + 1,
                   updated_at = v_now, last_accessed_at = v_now
             WHERE store_id = v_sid AND file_id = v_fid;
            CALL {P}_store_row_update(v_sid, 0, CHAR_LENGTH(v_new) - v_old, v_now);
            IF {eq("v_cmd", "'insert'")} THEN
                {audit("v_sid", "v_key", "p_path", "insert", "v_actor", "v_old", "CHAR_LENGTH(v_new)", "NULL", "v_now")};
            ELSE
                {audit("v_sid", "v_key", "p_path", "str_replace", "v_actor", "v_old", "CHAR_LENGTH(v_new)", "NULL", "v_now")};
            END IF;
            LEAVE main;"""

