"""The disk store's schema and every SQL statement it runs, in one place.

The table is diskcache's ``Cache`` (:data:`COLUMNS`, checked against the installed diskcache by
``tests/test_disk.py``) with one column of fncache's, :data:`META_COLUMN` (the entry's metadata as
JSON), and one table of fncache's beside it, ``fncache_summary``: per (function, Python version,
damaged or not, entry or other row) the number of rows, their bytes, newest and oldest creation
time, last use and number of uses. It is kept up to date in the transaction of every insert,
update and delete, whoever runs it (fncache, diskcache's own eviction, a plain ``diskcache.Cache``
on the directory), so ``fncache info`` and ``ls`` answer without reading every row: by triggers on
``Cache``, except for fncache's own inserts of entries, which add themselves from bound values
(:data:`ADD_OWN`; the insert trigger's JSON parse was a fifth of the cost of storing a small
result).

Why triggers, not a Python update beside each write: diskcache deletes rows by itself (expiry,
eviction under a size limit), which fncache's code never sees. Why one table of sums, not an index
that SQLite aggregates: a ``GROUP BY`` over a million rows still reads a million rows.

Deletes cannot lower a maximum: a deleted row that held its group's newest, oldest or last-use time
marks the group ``stale``, and the reader recomputes those times from the group's rows (through the
tag index, which holds the function's name). The summary is a cache of the rows, never trusted over
them: its row count is compared with the table's on every read, and a table that disagrees (or is
missing) is rebuilt from the rows. Nothing deletes on the word of the summary: ``prune`` and
``clear`` choose entries from the rows.

The group of a row is computed in SQL by :func:`_group` from the same rules that
:func:`fncache.stores._diskrows.entry` applies in Python (damaged metadata, sizes, creation times);
the contract tests check that both agree for entries fncache writes. Planted metadata that Python's
and SQLite's JSON readers parse differently can only change what ``info`` and ``ls`` display.
"""

from __future__ import annotations

__all__ = [
    "COLUMNS", "META_COLUMN", "MODE_BINARY", "MODE_RAW", "SUMMARY_SCHEMA", "SUMMARY_TABLE",
]

#: fncache's metadata column in diskcache's ``Cache`` table.
META_COLUMN = "fncache_meta"
#: diskcache's storage modes (diskcache.core.MODE_RAW / MODE_BINARY): inline blob, or a file.
MODE_RAW, MODE_BINARY = 1, 2
#: Columns of diskcache's Cache table that the statements below use (checked by the tests).
COLUMNS = ("rowid", "key", "raw", "store_time", "expire_time", "access_time", "access_count", "tag",
           "size", "mode", "filename", "value")
#: Metadata longer than this is damage, never parsed.
META_MAX = 64 * 1024

_LIVE = "(expire_time IS NULL OR expire_time > ?)"

# -- one entry ------------------------------------------------------------------------------------
SELECT_VALUE = f"SELECT rowid, mode, filename, value FROM Cache WHERE key = ? AND raw = 1 AND {_LIVE}"
# A hit's read where a read records nothing: the value if the row holds raw bytes inline, as
# fncache writes a small entry (the checks DiskStore._read makes of a SELECT_VALUE row, made here:
# an integer mode, as Python compares it, whatever affinity a planted schema gives the column),
# else NULL, and then SELECT_VALUE reads the row. Two columns fewer to make into Python objects.
# Its second column, the rowid, lets the next hit of the key find the row as SELECT_INLINE_AT.
_INLINE = (f"SELECT CASE WHEN filename IS NULL AND typeof(mode) = 'integer'"
           f" AND mode IN ({MODE_RAW}, {MODE_BINARY}) AND typeof(value) = 'blob' THEN value END")
SELECT_INLINE = f"{_INLINE}, rowid FROM Cache WHERE key = ? AND raw = 1 AND {_LIVE}"
# SELECT_INLINE of the row at a rowid, and only if it still holds the key: one B-tree search
# (the table's) where the key's is two, and no walk through the key index's pages, which a large
# store has too many of to keep in a CPU's cache. The key index is unique, so a row found here is
# the one SELECT_INLINE finds (a planted database without that index could hold two rows of a key,
# both the planter's, and either may answer: no more than it could plant in one); no row
# (deleted, replaced, expired, its rowid reused) sends the read back to SELECT_INLINE.
SELECT_INLINE_AT = f"{_INLINE} FROM Cache WHERE rowid = ? AND key = ? AND raw = 1 AND {_LIVE}"
SELECT_LIVE = f"SELECT 1 FROM Cache WHERE key = ? AND raw = 1 AND {_LIVE}"
SELECT_META = f"SELECT {META_COLUMN}, store_time FROM Cache WHERE key = ? AND raw = 1 AND {_LIVE}"
SELECT_ROW = "SELECT rowid, filename, expire_time FROM Cache WHERE key = ? AND raw = 1"
INSERT_ROW = (
    "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag, size,"
    f" mode, filename, value, {META_COLUMN}) VALUES (?, 1, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)"
)
UPDATE_ROW = (
    "UPDATE Cache SET store_time = ?, expire_time = ?, access_time = ?, access_count = 0, tag = ?,"
    f" size = ?, mode = ?, filename = ?, value = ?, {META_COLUMN} = ? WHERE rowid = ?"
)
SELECT_KEY_FILE = "SELECT rowid, filename FROM Cache WHERE key = ? AND raw = 1"
DELETE_ROWID = "DELETE FROM Cache WHERE rowid = ?"
#: The row a listing names by its rowid (its key is not one a lookup reads, see ``_diskrows``):
#: only a row a listing shows, one with metadata (a plain diskcache row, whose key is a pickle
#: with ``raw = 0``, may have taken the rowid since, or hold it in another tier's database).
SELECT_UNNAMED_AT = f"SELECT key, raw, filename FROM Cache WHERE rowid = ? AND {META_COLUMN} IS NOT NULL"
# Only the row as it was read: a writer may have replaced it (same rowid) meanwhile. A column of
# text that is not UTF-8 was read as its bytes (see _diskopen.text_of): compared by its bytes.
DELETE_AS_READ = ("DELETE FROM Cache WHERE rowid = ?1 AND key = ?2"
                  " AND (mode IS ?3 OR (typeof(mode) = 'text' AND CAST(mode AS BLOB) = ?3))"
                  " AND (filename IS ?4"
                  " OR (typeof(filename) = 'text' AND CAST(filename AS BLOB) = ?4))")
DELETE_LOST_FILE = "DELETE FROM Cache WHERE key = ? AND raw = 1 AND filename = ?"

# -- leases (rows ``l:<key>`` holding a token, no metadata: never listed as entries) --------------
SELECT_LEASE = "SELECT rowid, mode, filename, value, expire_time FROM Cache WHERE key = ? AND raw = 1"
READ_LEASE = "SELECT mode, filename, value FROM Cache WHERE key = ? AND raw = 1"
INSERT_LEASE = (
    "INSERT INTO Cache(key, raw, store_time, expire_time, access_time, access_count, tag, size,"
    " mode, filename, value) VALUES (?, 1, ?, ?, ?, 0, NULL, 0, ?, NULL, ?)"
)
DELETE_LEASE = ("DELETE FROM Cache WHERE key = ? AND raw = 1 AND mode = ? AND filename IS NULL"
                " AND value = ?")

# -- listing and bulk removal ----------------------------------------------------------------------
# Batches of rows from a rowid on (``rowid >= ?``), the first from the smallest rowid SQLite allows:
# a row planted at a rowid of 0 or below is listed and cleared like any other.
FIRST_ROWID, LAST_ROWID = -(2**63), 2**63 - 1
SELECT_ENTRIES = (
    f"SELECT rowid, key, size, value, store_time, access_time, access_count, {META_COLUMN}, raw"
    f" FROM Cache WHERE rowid >= ? AND {META_COLUMN} IS NOT NULL AND {_LIVE} ORDER BY rowid LIMIT ?"
)
COUNT_ENTRIES = f"SELECT COUNT(*) FROM Cache WHERE {META_COLUMN} IS NOT NULL"
SELECT_BATCH = f"SELECT rowid, filename, {META_COLUMN} IS NOT NULL FROM Cache WHERE rowid >= ?" \
    " ORDER BY rowid LIMIT ?"
SELECT_BATCH_TAG = f"SELECT rowid, filename, {META_COLUMN} IS NOT NULL FROM Cache" \
    " WHERE tag = ? AND rowid >= ? ORDER BY tag, rowid LIMIT ?"
# A range, not an IN list: one statement per batch, whatever its size.
DELETE_RANGE = "DELETE FROM Cache WHERE rowid BETWEEN ? AND ?"
DELETE_RANGE_TAG = "DELETE FROM Cache WHERE tag = ? AND rowid BETWEEN ? AND ?"
SELECT_FILENAMES = "SELECT filename FROM Cache WHERE filename IS NOT NULL"
SELECT_FILENAME = "SELECT 1 FROM Cache WHERE filename = ?"
QUICK_CHECK = "PRAGMA quick_check(1)"
TABLE_INFO = "PRAGMA table_info(Cache)"
SETTINGS = "SELECT key, value FROM Settings"
SETTINGS_ROWS = "SELECT rowid, key, value FROM Settings"
RESET_SETTING = "UPDATE Settings SET value = ? WHERE rowid = ?"
DELETE_SETTING = "DELETE FROM Settings WHERE rowid = ?"
# One read, for the read-only connection that keeps the WAL (fncache.stores._diskopen): a read
# transaction (it opens the WAL and holds its lock) that needs no schema, which a SELECT of a table
# first parses, triggers and all (1.1 ms against 0.2 ms, paid at the exit of a hit-only process).
KEEPER_READ = "PRAGMA schema_version"
ADD_META_COLUMN = f"ALTER TABLE Cache ADD COLUMN {META_COLUMN} BLOB"
# diskcache indexes the expiry of every row (``Cache_expire_time``), NULL for the rows that never
# expire, fncache's usual entry: one more B-tree page written to the WAL by every insert. fncache's
# stores index only the rows that expire: every statement that reads by expiry (diskcache's
# ``_cull`` and ``expire``, :data:`ANY_EXPIRED`) asks for ``expire_time IS NOT NULL`` or compares
# it, which SQLite takes as leave to use this partial index. diskcache creates its own index only
# where none of that name exists.
EXPIRE_INDEX = "CREATE INDEX Cache_expire_time ON Cache (expire_time) WHERE expire_time IS NOT NULL"
SELECT_EXPIRE_INDEX = "SELECT sql FROM sqlite_master WHERE type = 'index' AND name = 'Cache_expire_time'"
DROP_EXPIRE_INDEX = "DROP INDEX IF EXISTS Cache_expire_time"
COUNT_STATISTIC = "UPDATE Settings SET value = value + 1 WHERE key = ?"
UPDATE_READ = "UPDATE Cache SET {update} WHERE rowid = ?"  # diskcache's own policy, as ``get`` does
USE_TIME = "access_time = MAX(access_time, :last)"
USE_COUNT = "access_count = access_count + :count"
UPDATE_USES = "UPDATE Cache SET {sets} WHERE key = :key AND raw = 1"
ANY_EXPIRED = "SELECT 1 FROM Cache WHERE expire_time IS NOT NULL AND expire_time <= ? LIMIT 1"

# -- the summary -------------------------------------------------------------------------------------
SUMMARY_TABLE = "fncache_summary"
_KEY = ("fn", "py", "py_known", "damaged", "entry")


def _group(r: str, where: str | None = None) -> str:
    """A query giving row ``r`` (``NEW`` or ``OLD`` in a trigger; with ``where``, each row of
    ``Cache`` that matches) its group and its share: (fn, py, py_known, damaged, entry, size,
    created, used, access, uses), as :func:`~fncache.stores._diskrows.entry` reads the row.

    The metadata is parsed three times per row (``json_valid``, ``json_type``, ``json_each``):
    its fields come from one pass of ``json_each`` (aggregated with ``max``), not from a
    ``json_extract`` per field and per use, which made a write with the summary's triggers three
    times slower than one without.
    """
    meta = f"{r}.{META_COLUMN}"
    m = f"CAST({meta} AS TEXT)"
    # CASE, not AND: SQLite does not promise to stop at the first false operand, and the JSON
    # functions raise on text that is not JSON.
    readable = (f"CASE WHEN {meta} IS NULL OR typeof({meta}) NOT IN ('blob', 'text')"
                f" OR length({meta}) > {META_MAX} THEN 0 ELSE json_valid({m}) END")
    obj = f"CASE WHEN {readable} THEN json_type({m}) = 'object' ELSE 0 END"

    def field(name: str, what: str) -> str:
        return f"max(CASE WHEN j.key = '{name}' THEN j.{what} END)"

    inner = ", ".join([
        # A key no lookup reads (as ``_diskrows.readable``: text stored with ``raw`` 1) is damage.
        f"typeof({r}.key) = 'text' AND typeof({r}.raw) = 'integer' AND {r}.raw = 1 AS key_ok",
        f"{meta} IS NOT NULL AS entry", f"{obj} AS obj",
        f"CASE WHEN typeof({r}.size) IN ('integer', 'real') AND {r}.size != 0"
        f" THEN CAST({r}.size AS INTEGER)"
        f" WHEN typeof({r}.value) = 'blob' THEN length({r}.value) ELSE 0 END AS stored",
        f"CASE WHEN typeof({r}.store_time) IN ('integer', 'real') THEN {r}.store_time ELSE 0.0 END"
        " AS stime",
        f"CASE WHEN typeof({r}.access_count) = 'integer' AND {r}.access_count > 0"
        f" THEN {r}.access_count ELSE 0 END AS uses",
        f"CASE WHEN typeof({r}.access_time) IN ('integer', 'real') AND {r}.access_time != 0"
        f" THEN {r}.access_time END AS access",
        *(f"{field(name, 'type')} AS {short}t, {field(name, 'atom')} AS {short}v"
          for name, short in (("function", "f"), ("python", "p"), ("size", "s"),
                              ("created", "c"))),
    ])
    each = f"json_each(CASE WHEN {readable} THEN {m} ELSE '{{}}' END) AS j"
    source = each if where is None else f"{r} LEFT JOIN {each}{where} GROUP BY {r}.rowid"
    ok = ("(obj AND key_ok AND coalesce(ct, 'integer') IN ('integer', 'real')"
          " AND coalesce(st, 'integer') = 'integer' AND coalesce(sv, 0) >= 0"
          " AND coalesce(ft, 'text') = 'text')")
    py_known = f"coalesce({ok} AND pt = 'text' AND length(pv) <= 16, 0)"
    return "SELECT " + ", ".join([
        f"CASE WHEN {ok} THEN coalesce(fv, '') ELSE '' END AS fn",
        f"CASE WHEN {py_known} THEN pv ELSE '' END AS py",
        f"{py_known} AS py_known",
        f"NOT {ok} AS damaged",
        "entry",
        f"CASE WHEN {ok} AND coalesce(sv, 0) != 0 THEN sv ELSE stored END AS size",
        f"CASE WHEN {ok} AND coalesce(cv, 0) != 0 THEN cv ELSE stime END AS created",
        "CASE WHEN uses > 0 THEN access END AS used",
        "access",
        "uses",
    ]) + f" FROM (SELECT {inner} FROM {source})"


# A removed row that held one of its group's bounds leaves the group stale (recomputed on read).
_MATCH = " AND ".join(f"{SUMMARY_TABLE}.{k} IS g.{k}" for k in _KEY)
_ADD_INTO = (f"INSERT INTO {SUMMARY_TABLE}(fn, py, py_known, damaged, entry, rows, size, newest,"
             " oldest, used, access, uses, stale)")
_ADD_UPSERT = (
    f" ON CONFLICT({', '.join(_KEY)}) DO UPDATE SET rows = rows + 1, size = size + excluded.size,"
    " newest = max(newest, excluded.newest), oldest = min(oldest, excluded.oldest),"
    " used = max(coalesce(used, excluded.used), coalesce(excluded.used, used)),"
    " access = max(coalesce(access, excluded.access), coalesce(excluded.access, access)),"
    " uses = uses + excluded.uses;"
)
# Adds the row(s) of ``{group}`` (WHERE: SQLite's rule for an upsert's SELECT).
_ADD = (_ADD_INTO + " SELECT fn, py, py_known, damaged, entry, 1, size, created, created, used,"
        " access, uses, 0 FROM ({group}) WHERE true" + _ADD_UPSERT)
T = SUMMARY_TABLE
_SUBTRACT = (
    f"UPDATE {T} SET rows = {T}.rows - 1, size = {T}.size - g.size, uses = {T}.uses - g.uses,"
    # coalesce: a bound planted NULL leaves the comparison unknown, and the group stale (a NULL
    # here failed the column's NOT NULL, and with it every delete and replacement of the group).
    f" stale = coalesce({T}.stale OR g.created >= {T}.newest OR g.created <= {T}.oldest"
    f" OR coalesce(g.used >= {T}.used, 0) OR coalesce(g.access >= {T}.access, 0), 1)"
    f" FROM ({{group}}) AS g WHERE {_MATCH};"
    f" DELETE FROM {T} WHERE rows <= 0;"
)
# A use recorded (``record_use``, an LRU read): the group's uses and last use, nothing else.
# Every column a row's group is made of but its uses (see _group): a value's type and length too
# (its size where the size column says 0), or a planted value moved no group's bytes.
_SAME_ENTRY = ("OLD.key IS NEW.key AND OLD.raw IS NEW.raw AND OLD.store_time IS NEW.store_time"
               " AND OLD.size IS NEW.size AND typeof(OLD.value) IS typeof(NEW.value)"
               " AND length(OLD.value) IS length(NEW.value)"
               f" AND OLD.{META_COLUMN} IS NEW.{META_COLUMN}")
_USE = (
    f"UPDATE {T} SET uses = {T}.uses + g.uses - o.uses,"
    f" used = max(coalesce({T}.used, g.used), coalesce(g.used, {T}.used)),"
    f" access = max(coalesce({T}.access, g.access), coalesce(g.access, {T}.access))"
    f" FROM ({_group('NEW')}) AS g, ({_group('OLD')}) AS o WHERE {_MATCH};"
)

#: Statements that create the summary table and its triggers (idempotent).
SUMMARY_SCHEMA = (
    f"CREATE TABLE IF NOT EXISTS {SUMMARY_TABLE} (fn TEXT NOT NULL, py TEXT NOT NULL,"
    " py_known INTEGER NOT NULL, damaged INTEGER NOT NULL, entry INTEGER NOT NULL,"
    " rows INTEGER NOT NULL, size INTEGER NOT NULL, newest REAL, oldest REAL, used REAL,"
    " access REAL, uses INTEGER NOT NULL, stale INTEGER NOT NULL,"
    f" PRIMARY KEY ({', '.join(_KEY)})) WITHOUT ROWID",
    # Not for fncache's own entries (rows with metadata): :data:`ADD_OWN` adds them in the
    # inserting transaction from bound values, at a fraction of the cost of this JSON parse.
    f"CREATE TRIGGER IF NOT EXISTS fncache_summary_insert AFTER INSERT ON Cache"
    f" WHEN NEW.{META_COLUMN} IS NULL BEGIN " + _ADD.format(group=_group("NEW")) + " END",
    "CREATE TRIGGER IF NOT EXISTS fncache_summary_delete AFTER DELETE ON Cache BEGIN "
    + _SUBTRACT.format(group=_group("OLD")) + " END",
    f"CREATE TRIGGER IF NOT EXISTS fncache_summary_update AFTER UPDATE ON Cache WHEN NOT ({_SAME_ENTRY})"
    " BEGIN " + _SUBTRACT.format(group=_group("OLD")) + " " + _ADD.format(group=_group("NEW"))
    + " END",
    f"CREATE TRIGGER IF NOT EXISTS fncache_summary_use AFTER UPDATE ON Cache WHEN {_SAME_ENTRY}"
    " BEGIN " + _USE + " END",
)
#: The names :data:`SUMMARY_SCHEMA` creates, as ``sqlite_master`` lists them.
SUMMARY_OBJECTS = (SUMMARY_TABLE, "fncache_summary_insert", "fncache_summary_delete",
                   "fncache_summary_update", "fncache_summary_use")
#: Each object's SQL as ``sqlite_master`` keeps it (SQLite drops ``IF NOT EXISTS``): a summary
#: made by another version of these statements is rebuilt, never added to.
SUMMARY_DEFINITIONS = {name: statement.replace(" IF NOT EXISTS", "", 1)
                       for name, statement in zip(SUMMARY_OBJECTS, SUMMARY_SCHEMA, strict=True)}
# SQLite's names ignore ASCII case: a view planted as FNCACHE_SUMMARY takes the table's name.
_NAMED = " FROM sqlite_master WHERE name COLLATE NOCASE IN (" + ", ".join("?" * len(SUMMARY_OBJECTS)) + ")"
SELECT_SCHEMA_OBJECTS = "SELECT name, sql" + _NAMED
#: What each object of those names is (planted: a view or an index where a table belongs).
SELECT_SCHEMA_TYPES = "SELECT type, name" + _NAMED

# fncache's own insert of an entry adds it to the summary itself (the insert trigger skips rows
# with metadata), from bound values: what :func:`_group` gives the row, computed in Python where
# the metadata is JSON that SQLite reads as Python does (see ``_disksummary.add_own``).
#: Add one entry fncache has just inserted, from bound values (see above).
#: Its parameters by number, (fn, py, py_known, size, created, access): binding by name took a
#: fifth of the statement's time.
ADD_OWN = (_ADD_INTO + " VALUES (?1, ?2, ?3, 0, 1, 1, ?4, ?5, ?5, NULL, ?6, 0, 0)" + _ADD_UPSERT)
#: Add the row ``rowid`` as the insert trigger would (fncache's entries it does not bind).
ADD_ROWID = _ADD.format(group=_group("Cache", " WHERE Cache.rowid = ?"))

_GROUPED = ("SELECT fn, py, py_known, damaged, entry, COUNT(*), SUM(size), MAX(created), MIN(created),"
            " MAX(used), MAX(access), SUM(uses), 0 FROM ({group})"
            " GROUP BY fn, py, py_known, damaged, entry")
#: Recompute the whole summary from the rows (in a write transaction, after ``DELETE``).
SUMMARY_REBUILD = (f"DELETE FROM {SUMMARY_TABLE}",
                   f"INSERT INTO {SUMMARY_TABLE} " + _GROUPED.format(group=_group("Cache", "")))
#: The bounds of the rows of one tag (the function's rows, through the tag index), per group.
SUMMARY_BOUNDS_TAG = _GROUPED.format(group=_group("Cache", " WHERE Cache.tag = ?"))
#: The bounds of every group, from all rows (for groups whose rows carry no tag: damage, no name).
SUMMARY_BOUNDS_ALL = _GROUPED.format(group=_group("Cache", ""))
SET_BOUNDS = (f"UPDATE {SUMMARY_TABLE} SET newest = ?, oldest = ?, used = ?, access = ?, stale = 0"
              " WHERE " + " AND ".join(f"{k} IS ?" for k in _KEY) + " AND rows = ?")
SELECT_SUMMARY = (f"SELECT fn, py, py_known, damaged, rows, size, newest, oldest, used, access, uses,"
                  f" stale FROM {SUMMARY_TABLE} WHERE entry")
#: Rows counted by the summary against rows in the table: unequal means the summary is damaged.
SUMMARY_CHECK = (f"SELECT (SELECT total(rows) FROM {SUMMARY_TABLE}),"
                 " (SELECT COUNT(*) FROM Cache)")

# Bulk removal: a batch of rows leaves the summary in one statement, not through a trigger per row
# (which made a clear of a million entries several times slower than the deletes themselves). In
# the batch's transaction: the delete trigger is dropped, the batch's groups subtracted (and marked
# stale), the rows deleted, the trigger created again; other connections never see it missing.
# total(), not SUM(): planted sizes or use counts near 2**63 made SUM() fail the whole clear with
# "integer overflow"; total() is a float, made an integer again (SQLite saturates it at 2**63 - 1, and
# the subtraction then turns the summary's column into a real: a summary of the wrong type, rebuilt).
_BATCH_GROUPS = ("SELECT fn, py, py_known, damaged, entry, COUNT(*) AS n,"
                 " CAST(total(size) AS INTEGER) AS size, CAST(total(uses) AS INTEGER) AS uses"
                 " FROM ({group}) GROUP BY fn, py, py_known, damaged, entry")
_SUBTRACT_BATCH = (
    f"UPDATE {T} SET rows = {T}.rows - g.n, size = {T}.size - g.size, uses = {T}.uses - g.uses,"
    f" stale = 1 FROM ({{groups}}) AS g WHERE {_MATCH}"
)
#: (drop the delete trigger, subtract the rows in a rowid range, and, with a tag, of that tag)
SUBTRACT_RANGE = _SUBTRACT_BATCH.format(groups=_BATCH_GROUPS.format(
    group=_group("Cache", " WHERE Cache.rowid BETWEEN ? AND ?")))
SUBTRACT_RANGE_TAG = _SUBTRACT_BATCH.format(groups=_BATCH_GROUPS.format(
    group=_group("Cache", " WHERE Cache.tag = ? AND Cache.rowid BETWEEN ? AND ?")))
# Listed rows (``prune``, a filtered ``clear``), by rowid: their ids as one JSON array, so that a
# batch of any size is one statement that SQLite prepares once.
_ROWIDS = " WHERE Cache.rowid IN (SELECT value FROM json_each(?))"
SUBTRACT_ROWIDS = _SUBTRACT_BATCH.format(groups=_BATCH_GROUPS.format(group=_group("Cache", _ROWIDS)))
DELETE_ROWIDS = "DELETE FROM Cache" + _ROWIDS
DROP_DELETE_TRIGGER = "DROP TRIGGER IF EXISTS fncache_summary_delete"
CREATE_DELETE_TRIGGER = SUMMARY_SCHEMA[2]
DROP_EMPTY_GROUPS = f"DELETE FROM {T} WHERE rows <= 0"
