"""The Redis store's Lua scripts, by name: each runs atomically on the server in one round trip.

Their replies are untrusted like everything else the server returns (see
:mod:`fncache.stores._redis_records`); numbers kept in hashes are written as the decimal strings
Python gives (``repr`` of a float), so reading them back gives the very same floats.
"""

from __future__ import annotations

__all__ = ["SCRIPTS"]

# KEYS: value, meta, chunk... ARGV: manifest, meta, ttl in ms (0 = none), mode ("add" or "set").
# One script, so the manifest and its chunks become visible and permanent together.
_PUBLISH = """
local ttl = tonumber(ARGV[3])
local old = false
if ARGV[4] == 'add' then
  if redis.call('EXISTS', KEYS[1]) == 1 then return {0, false} end
else
  old = redis.call('GET', KEYS[1])
end
if ttl > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ttl)
  redis.call('SET', KEYS[2], ARGV[2], 'PX', ttl)
else
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[2], ARGV[2])
end
for i = 3, #KEYS do
  if ttl > 0 then redis.call('PEXPIRE', KEYS[i], ttl) else redis.call('PERSIST', KEYS[i]) end
end
return {1, old}
"""

# KEYS: a key. ARGV: the value it must still hold. Deletes it only then (lock release, damage).
_DELETE_IF = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# ARGV: the value key prefix, then the keys (32 hex digits each) as one string: one argument
# packs and sends far faster than thousands. For each: its stored length * 4 + its kind (0 inline, 1
# chunked, 2 anything else), or -1 if it is gone, -2 if it is not a string (a planted hash, list);
# as one JSON array, which parses far faster than as many integer replies.
_SIZES = """
local out = {}
local keys = ARGV[2]
for i = 1, #keys, 32 do
  local name = ARGV[1] .. string.sub(keys, i, i + 31)
  local n = redis.pcall('STRLEN', name)
  if type(n) == 'table' then
    out[#out + 1] = -2
  elseif n == 0 then
    out[#out + 1] = -1
  else
    local head = string.byte(redis.call('GETRANGE', name, 0, 0))
    local kind = 2
    if head == 0 then kind = 0 elseif head == 1 then kind = 1 end
    out[#out + 1] = n * 4 + kind
  end
end
return cjson.encode(out)
"""

# KEYS: an index. ARGV: an HSCAN cursor. One page of the index, as JSON [cursor, [field, value...]]:
# a JSON string parses in C, a long reply of Redis strings in Python (the bulk of a listing's time).
_INDEX_PAGE = """
return cjson.encode(redis.call('HSCAN', KEYS[1], ARGV[1], 'COUNT', 1000))
"""

# KEYS: an index, its totals. ARGV: key, creation time, size. Indexes the key and counts it in
# the totals, together. The totals are started with the index (a function's first entry) and
# only ever counted up from there: a key indexed already (a replaced entry) drops them, and where
# they are missing (dropped by a delete) they stay missing until `summary` rebuilds them.
_INDEX = """
local fresh = redis.call('EXISTS', KEYS[1]) == 0
local had = redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) == 0
if had then redis.call('DEL', KEYS[2]) return 0 end
if fresh then
  redis.call('DEL', KEYS[2])
  redis.call('HSET', KEYS[2], 'n', 1, 'b', ARGV[3], 'new', ARGV[2], 'old', ARGV[2],
             'used', 0, 'uses', 0)
  return 1
end
if redis.call('EXISTS', KEYS[2]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[2], 'n', 1)
redis.call('HINCRBY', KEYS[2], 'b', ARGV[3])
local t = tonumber(ARGV[2])
if t > (tonumber(redis.call('HGET', KEYS[2], 'new') or '') or t) then
  redis.call('HSET', KEYS[2], 'new', ARGV[2])
end
if t < (tonumber(redis.call('HGET', KEYS[2], 'old') or '') or t) then
  redis.call('HSET', KEYS[2], 'old', ARGV[2])
end
return 1
"""

# KEYS: an index, its totals. ARGV: the value key prefix, then keys whose fields go if their value
# is gone; the totals go with any field removed.
_UNINDEX = """
local n = 0
for i = 2, #ARGV do
  if redis.call('EXISTS', ARGV[1] .. ARGV[i]) == 0 then
    n = n + redis.call('HDEL', KEYS[1], ARGV[i], ARGV[i] .. ':u', ARGV[i] .. ':n')
  end
end
if n > 0 then redis.call('DEL', KEYS[2]) end
return n
"""

# KEYS: an index, its totals. ARGV: (key, last use, uses) triples. Only keys still indexed get a
# record; the last use only moves forward; a planted non-number reads as 0 rather than failing
# the script. The totals (where they exist) take the same last use and count.
_USE = """
local totals = redis.call('EXISTS', KEYS[2]) == 1
for i = 1, #ARGV, 3 do
  local k = ARGV[i]
  if redis.call('HEXISTS', KEYS[1], k) == 1 then
    local last = tonumber(redis.call('HGET', KEYS[1], k .. ':u') or '') or 0
    if tonumber(ARGV[i + 1]) > last then redis.call('HSET', KEYS[1], k .. ':u', ARGV[i + 1]) end
    local n = tonumber(redis.call('HGET', KEYS[1], k .. ':n') or '') or 0
    if n ~= n or n < 0 or n > 2^52 then n = 0 end
    redis.call('HSET', KEYS[1], k .. ':n', string.format('%d', math.floor(n) + tonumber(ARGV[i + 2])))
    if totals then
      local used = tonumber(redis.call('HGET', KEYS[2], 'used') or '') or 0
      if tonumber(ARGV[i + 1]) > used then redis.call('HSET', KEYS[2], 'used', ARGV[i + 1]) end
      redis.call('HINCRBY', KEYS[2], 'uses', ARGV[i + 2])
    end
  end
end
return 0
"""

# ARGV: a SCAN cursor, the store's prefix (escaped for MATCH), the value prefix, the totals prefix.
# One SCAN page, answered as [cursor, values counted, totals names...]: a count crosses the wire,
# never the value names.
_COUNT_PAGE = """
local page = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', 5000)
local out = {page[1], 0}
local nv, ns = #ARGV[3], #ARGV[4]
for _, name in ipairs(page[2]) do
  if string.sub(name, 1, nv) == ARGV[3] then
    out[2] = out[2] + 1
  elseif string.sub(name, 1, ns) == ARGV[4] then
    out[#out + 1] = name
  end
end
return out
"""

#: Every script, by the name the store and its index call it by.
SCRIPTS = {
    "publish": _PUBLISH,
    "delete_if": _DELETE_IF,
    "sizes": _SIZES,
    "index_page": _INDEX_PAGE,
    "index": _INDEX,
    "unindex": _UNINDEX,
    "use": _USE,
    "count_page": _COUNT_PAGE,
}
