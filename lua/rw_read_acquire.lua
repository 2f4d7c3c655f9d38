-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a read hold (Redisson RReadWriteLock layout).
--
-- KEYS[1]  lock name: a hash with the field mode ("read" or "write"), one
--          field per holder counting its holds (readers <client-id>:<owner>,
--          the writer <client-id>:<owner>:write), and beside each of ours
--          the field <holder>:gen (see below)
-- KEYS[2]  this request's cancel mark, redlock_latch:{NAME}:<request id>:
--          only read here; rw_abort.lua and rw_release.lua write it
-- KEYS[3]  the waiting-writer mark, redlock_rwwait:{NAME}: while it exists
--          no new reader is let in (rw_write_acquire.lua sets it)
-- ARGV[1]  lease in ms
-- ARGV[2]  reader field <client-id>:<owner-id>
-- ARGV[3]  this request's id (as acquire.lua's)
-- ARGV[4]  "1": the client holds nothing through this handle (see
--          acquire.lua); "0": a re-entry
--
-- Each read hold n of a reader also has Redisson's timeout key
-- {NAME}:<reader>:rwlock_timeout:<n> (NAME:<reader>:... when NAME already
-- has a hash tag), whose TTL is that hold's lease: Redisson's unlock keeps
-- the hash alive while any of them lives.
--
-- The :gen value is "g<generation>[,<seq>]...", as acquire.lua's :gen but
-- with a letter first: Redisson's read unlock and renewal run tonumber() on
-- every field, and a generation of decimal digits only would read as a
-- hold count of about 10^31.
--
-- Returns as acquire.lua: {0, generation} held; the holder's PTTL (or the
-- waiting writer's) when held elsewhere; -3 cancelled or a late copy.
local genf = ARGV[2] .. ':gen'
if redis.call('exists', KEYS[2]) == 1 then return -3 end
local tag = KEYS[1]
if not string.find(tag, '{', 1, true) then tag = '{' .. tag .. '}' end
local tprefix = tag .. ':' .. ARGV[2] .. ':rwlock_timeout:'
local mode = redis.call('hget', KEYS[1], 'mode')
local function pexpire_at_least(ms)
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, tonumber(ms)))
end
if mode then
    local h = redis.call('hmget', KEYS[1], ARGV[2], genf)
    if h[1] then
--@include lib/gens.lua
        local v = string.sub(h[2] or 'g', 2)
        local gen = gen_of(v)
        if gen == ARGV[3] then return {0, gen} end
        local seq = string.sub(ARGV[3], 1, 12)
        if gen_applied(v, seq) then return {0, gen} end
        local count = tonumber(h[1])
        if ARGV[4] ~= '1' then
            redis.call('hset', KEYS[1], ARGV[2], count + 1, genf, 'g' .. gen_apply(v, gen, seq))
            redis.call('set', tprefix .. (count + 1), 1, 'px', ARGV[1])
            pexpire_at_least(ARGV[1])
            return {0, gen}
        end
        -- A leftover of an earlier attempt or hold (see acquire.lua).
        if gen_newer_than(gen, seq) then
            redis.call('set', KEYS[2], 'x', 'px', ARGV[1])
            return -3
        end
        redis.call('hdel', KEYS[1], ARGV[2], genf)
        for i = 1, count do redis.call('del', tprefix .. i) end
        if redis.call('hlen', KEYS[1]) <= 1 then
            redis.call('del', KEYS[1])
            mode = false
        end
    end
end
if mode == 'write' then
    -- Only the writer itself may read under its write hold.
    if redis.call('hexists', KEYS[1], ARGV[2] .. ':write') == 0 then
        return redis.call('pttl', KEYS[1])
    end
elseif mode == 'read' or not mode then
    if not mode and redis.call('exists', KEYS[1]) == 1 then
        -- A plain lock (RLock) of the same name: it excludes readers too.
        return redis.call('pttl', KEYS[1])
    end
    local waiting = redis.call('pttl', KEYS[3])
    if waiting > 0 then
        if mode then return redis.call('pttl', KEYS[1]) end
        return waiting
    end
else
    return redis.call('pttl', KEYS[1])
end
if not mode then redis.call('hset', KEYS[1], 'mode', 'read') end
redis.call('hset', KEYS[1], ARGV[2], 1, genf, 'g' .. ARGV[3])
redis.call('set', tprefix .. '1', 1, 'px', ARGV[1])
pexpire_at_least(ARGV[1])
return {0, ARGV[3]}
