"""PostgreSQL API, the file calls: ``list_files``, ``get_file``, ``put_file``, ``delete_file`` and
``clear_store_files`` (mirroring :mod:`dbmemory.store.reads`, :mod:`dbmemory.store.files` and
:mod:`dbmemory.store.moves`), for :mod:`dbmemory.sqlgen.postgresql.api`."""

from __future__ import annotations

from dbmemory.core.paths import ROOT
from dbmemory.sqlgen.api_common import ADMIN_ACTOR, MAX_ACTOR_CHARS
from dbmemory.sqlgen.postgresql.rules import S, T

__all__ = [
    "LIST",
    "GET",
    "PUT",
    "DELETE",
    "CLEAR",
]


LIST = f"""CREATE OR REPLACE FUNCTION {S}.list_files(p_store_id bigint)
RETURNS TABLE (path text, chars integer, version integer, created_at timestamptz,
               updated_at timestamptz, last_accessed_at timestamptz)
LANGUAGE plpgsql STABLE AS $f$
-- dbmemory.store.reads.list_files: every file without its text, by path in code-point order
BEGIN
    PERFORM {S}._check_reachable(p_store_id);
    PERFORM 1 FROM {T}.dbm_stores s WHERE s.store_id = p_store_id;
    IF NOT FOUND THEN  -- a missing store is not an empty one
        PERFORM {S}._fail('not_found', format('store %s does not exist: check the store id', p_store_id));
    END IF;
    RETURN QUERY
        SELECT f.file_path::text, f.char_count, f.version_no, f.created_at, f.updated_at,
               f.last_accessed_at
          FROM {T}.dbm_files f
         WHERE f.store_id = p_store_id
         ORDER BY f.file_path COLLATE "C";
END
$f$"""


GET = f"""CREATE OR REPLACE FUNCTION {S}.get_file(p_store_id bigint, p_path text) RETURNS text
LANGUAGE plpgsql STABLE AS $f$
-- dbmemory.store.reads.get_file (touch=False): the text, '' for an empty file
DECLARE
    v_body text;
    v_found boolean;
BEGIN
    PERFORM {S}._check_reachable(p_store_id);
    PERFORM {S}._check_path(p_path);
    SELECT true, f.body INTO v_found, v_body FROM {T}.dbm_files f
     WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(p_path);
    IF v_found IS NULL THEN
        -- a missing store is not a missing path (the writers' text: dbmemory.store.reads)
        PERFORM 1 FROM {T}.dbm_stores s WHERE s.store_id = p_store_id;
        IF NOT FOUND THEN
            PERFORM {S}._fail('not_found', format('store %s does not exist: check the store id', p_store_id));
        END IF;
        PERFORM {S}._fail('not_found', format('the path %s does not exist', p_path));
    END IF;
    RETURN coalesce(v_body, '');
END
$f$"""


PUT = f"""CREATE OR REPLACE FUNCTION {S}.put_file(
    p_store_id bigint, p_path text, p_text text, p_actor text DEFAULT '{ADMIN_ACTOR}'
) RETURNS integer LANGUAGE plpgsql AS $f$
-- dbmemory.store.files.put_file (enforce_caps, no expected version, expiry flag kept): create or
-- replace; returns the file's version after the write
DECLARE
    v_store record;
    v_hash text;
    v_file record;
    v_chars bigint;
    v_now timestamptz := clock_timestamp();
    v_anc text[] := '{{}}';
    v_bad bigint;
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    PERFORM {S}._check_path(p_path);
    IF p_path = '{ROOT}' THEN
        PERFORM {S}._fail('invalid_path', 'cannot write the memory root {ROOT}: name a file or directory inside it');
    END IF;
    IF p_text IS NULL THEN
        PERFORM {S}._fail('invalid_argument', 'file text must be text, got NULL: pass '''' for an empty file');
    END IF;
    v_hash := {S}._path_hash(p_path);
    v_chars := length(p_text);
    SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
    SELECT f.file_id, f.char_count, f.version_no, f.body INTO v_file
      FROM {T}.dbm_files f WHERE f.store_id = p_store_id AND f.path_hash = v_hash FOR UPDATE;
    IF v_file.file_id IS NULL THEN
        IF v_chars > v_store.max_file_chars THEN
            PERFORM {S}._check_caps(p_path, v_store.max_file_chars, v_store.max_files,
                v_store.max_store_chars, v_store.file_count, v_store.total_chars, v_chars, NULL);
        END IF;
        -- dbmemory.store.locks.check_new_file_shape
        FOR i IN {len(ROOT) + 2} .. length(p_path) LOOP
            IF substr(p_path, i, 1) = '/' THEN
                v_anc := v_anc || {S}._path_hash(substr(p_path, 1, i - 1));
            END IF;
        END LOOP;
        SELECT count(*) INTO v_bad FROM {T}.dbm_files
         WHERE store_id = p_store_id AND path_hash = ANY (v_anc);
        IF v_bad > 0 THEN
            PERFORM {S}._fail('invalid_path', format(
                'cannot use %s: a file exists where one of its parent directories would be; a path cannot be a file and a directory at once: choose another path',
                p_path));
        END IF;
        IF {S}._has_files_under(p_store_id, p_path) THEN
            PERFORM {S}._fail('invalid_path', format(
                '%s is a directory: choose a file path inside it or another name', p_path));
        END IF;
        PERFORM {S}._check_caps(p_path, v_store.max_file_chars, v_store.max_files,
            v_store.max_store_chars, v_store.file_count, v_store.total_chars, v_chars, NULL);
        INSERT INTO {T}.dbm_files
            (store_id, file_path, path_hash, body, char_count, version_no, expiry_exempt,
             created_at, updated_at, last_accessed_at)
        VALUES (p_store_id, p_path, v_hash, nullif(p_text, ''), v_chars, 1, false,
                v_now, v_now, v_now);
        PERFORM {S}._store_row_update(p_store_id, 1, v_chars, v_now);
        PERFORM {S}._audit(p_store_id, v_store.store_key, p_path, 'put', p_actor,
                           NULL, v_chars, NULL, v_now);
        RETURN 1;
    END IF;
    IF v_file.char_count = v_chars AND coalesce(v_file.body, '') = p_text THEN
        RETURN v_file.version_no;  -- unchanged: nothing written, no audit event
    END IF;
    PERFORM {S}._check_caps(p_path, v_store.max_file_chars, v_store.max_files,
        v_store.max_store_chars, v_store.file_count, v_store.total_chars, v_chars,
        v_file.char_count);
    UPDATE {T}.dbm_files
       SET body = nullif(p_text, ''), char_count = v_chars, version_no = v_file.version_no + 1,
           updated_at = v_now, last_accessed_at = v_now
     WHERE store_id = p_store_id AND file_id = v_file.file_id;
    PERFORM {S}._store_row_update(p_store_id, 0, v_chars - v_file.char_count, v_now);
    PERFORM {S}._audit(p_store_id, v_store.store_key, p_path, 'put', p_actor,
                       v_file.char_count, v_chars, NULL, v_now);
    RETURN v_file.version_no + 1;
END
$f$"""


DELETE = f"""CREATE OR REPLACE FUNCTION {S}.delete_file(
    p_store_id bigint, p_path text, p_actor text DEFAULT '{ADMIN_ACTOR}'
) RETURNS boolean LANGUAGE plpgsql AS $f$
-- dbmemory.store.moves.delete_file: true when the file existed, false when nothing was there
DECLARE
    v_store record;
    v_file record;
    v_now timestamptz := clock_timestamp();
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    PERFORM {S}._check_path(p_path);
    IF p_path = '{ROOT}' THEN
        PERFORM {S}._fail('invalid_path', 'cannot delete the memory root {ROOT}: name a file or directory inside it');
    END IF;
    SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
    SELECT f.file_id, f.char_count INTO v_file FROM {T}.dbm_files f
     WHERE f.store_id = p_store_id AND f.path_hash = {S}._path_hash(p_path) FOR UPDATE;
    IF v_file.file_id IS NULL THEN
        IF {S}._has_files_under(p_store_id, p_path) THEN
            PERFORM {S}._fail('invalid_path', format(
                '%s is a directory, not a file: delete_file deletes one file', p_path));
        END IF;
        RETURN false;
    END IF;
    DELETE FROM {T}.dbm_files WHERE store_id = p_store_id AND file_id = v_file.file_id;
    PERFORM {S}._store_row_update(p_store_id, -1, -v_file.char_count, v_now);
    PERFORM {S}._audit(p_store_id, v_store.store_key, p_path, 'delete', p_actor,
                       v_file.char_count, NULL, NULL, v_now);
    RETURN true;
END
$f$"""


CLEAR = f"""CREATE OR REPLACE FUNCTION {S}.clear_store_files(
    p_store_id bigint, p_actor text DEFAULT '{ADMIN_ACTOR}'
) RETURNS integer LANGUAGE plpgsql AS $f$
-- dbmemory.store.moves.clear_store_files: every file deleted, one 'clear' event each; the store stays
DECLARE
    v_store record;
    v_now timestamptz := clock_timestamp();
    v_count integer;
    v_chars bigint;
BEGIN
    PERFORM {S}._check_store_id(p_store_id);
    SELECT * INTO v_store FROM {S}._lock_store(p_store_id);
    WITH gone AS (
        DELETE FROM {T}.dbm_files WHERE store_id = p_store_id
        RETURNING file_path, char_count
    ), events AS (
        INSERT INTO {T}.dbm_audit_events
            (store_id, store_key, file_path, action_name, actor_name,
             chars_before, chars_after, detail_text, created_at)
        SELECT p_store_id, v_store.store_key, g.file_path, 'clear',
               left(coalesce(nullif(coalesce(p_actor, '{ADMIN_ACTOR}'), ''), 'unknown'), {MAX_ACTOR_CHARS}),
               g.char_count, NULL, NULL, v_now
          FROM gone g ORDER BY g.file_path COLLATE "C"
        RETURNING chars_before
    )
    SELECT count(*), coalesce(sum(chars_before), 0) INTO v_count, v_chars FROM events;
    IF v_count > 0 THEN
        PERFORM {S}._store_row_update(p_store_id, -v_count, -v_chars, v_now);
    END IF;
    RETURN v_count;
END
$f$"""
