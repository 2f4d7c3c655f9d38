-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a reentrant lock (Redisson RLock layout).
--
-- KEYS[1]  lock name: a hash whose field <client-id>:<owner-id> counts holds
-- KEYS[2]  latch: unique to this request, remembers its first result
-- KEYS[3]  generations, redlock_gen:{NAME}: per owner field, the request id
--          of the fresh grant that made the owner's current hold
-- KEYS[4]  (optional) fencing token key, redisson_lock_token:{NAME}
-- ARGV[1]  lease in ms (PEXPIRE)
-- ARGV[2]  owner field <client-id>:<owner-id>
-- ARGV[3]  latch lifetime in ms
-- ARGV[4]  this request's id, recorded as the generation of a fresh grant:
--          12 hex digits of a per-client sequence, then 20 random ones
-- ARGV[5]  "1": the client holds nothing through this owner, so this is
--          never a re-entry; "0": a re-entry (or a watchdog restore)
--
-- Returns
--   {token, generation}  acquired or re-entered (count + 1, lease reset).
--                token: with KEYS[4], a fresh grant's candidate
--                max(stored + 1, node time in us); 0 for a re-entry or
--                without KEYS[4]. generation: the hold's generation, ARGV[4]
--                for a fresh grant; a re-entry keeps the hold's own ("" if
--                the hold has none, e.g. one made by Redisson)
--   integer >= 0 or -1   held by another owner: its PTTL
--   -3           this request was cancelled (by abort.lua or release.lua
--                before it ran), or it is a late copy of a fresh acquire
--                that a newer hold of the same owner already replaced
-- A replay of the same request (same latch) returns its first result and
-- changes nothing, so a retry after a lost reply never counts a hold twice.
-- The generation lets a release touch only the hold it was sent for: a late
-- release of an earlier hold of the same owner must not drop a newer one
-- (see release.lua).
local first = redis.call('get', KEYS[2])
if first then
    if first == 'x' then return -3 end
    if string.sub(first, 1, 1) == 'g' then
        local token, gen = string.match(first, '^g(%d+):(.*)$')
        return {tonumber(token), gen}
    end
    return tonumber(first)
end

local fresh = redis.call('exists', KEYS[1]) == 0
local mine = not fresh and redis.call('hexists', KEYS[1], ARGV[2]) == 1
if mine and ARGV[5] == '1' then
    -- The client holds nothing, so our field here is not a hold to re-enter.
    -- An older generation is a leftover of an earlier attempt or hold whose
    -- abort or release has not arrived yet: replace it (new token, count 1),
    -- or the new hold would get no token and could never be released. A
    -- newer one means this request is the late copy: it must not grant.
    local gen = redis.call('hget', KEYS[3], ARGV[2]) or ''
    if #gen == 32 and tonumber(string.sub(gen, 1, 12), 16) >
            tonumber(string.sub(ARGV[4], 1, 12), 16) then
        redis.call('set', KEYS[2], 'x', 'px', ARGV[3])
        return -3
    end
    redis.call('hdel', KEYS[1], ARGV[2])
    fresh = redis.call('exists', KEYS[1]) == 0
    mine = false
end
if fresh or mine then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    if fresh then redis.call('hset', KEYS[3], ARGV[2], ARGV[4]) end
    redis.call('pexpire', KEYS[3], ARGV[1])
    local gen = redis.call('hget', KEYS[3], ARGV[2]) or ''
    local token = 0
    if fresh and #KEYS >= 4 then
        local stored = tonumber(redis.call('get', KEYS[4]) or '0')
        local now = redis.call('time')
        local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
        token = math.max(stored + 1, now_us)
        redis.call('set', KEYS[4], string.format('%.0f', token))
    end
    redis.call('set', KEYS[2], 'g' .. string.format('%.0f', token) .. ':' .. gen,
               'px', ARGV[3])
    return {token, gen}
end

local ttl = redis.call('pttl', KEYS[1])
redis.call('set', KEYS[2], ttl, 'px', ARGV[3])
return ttl
