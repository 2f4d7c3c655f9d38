-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a reentrant lock (Redisson RLock layout).
--
-- KEYS[1]  lock name: a hash whose field <client-id>:<owner-id> counts
--          holds, as Redisson's; beside it the field <client-id>:<owner-id>:gen
--          (see below)
-- KEYS[2]  this request's cancel mark, redlock_latch:{NAME}:<request id>:
--          only read here; abort.lua and release.lua write it
-- KEYS[3]  (optional) fencing token key, redisson_lock_token:{NAME}
-- ARGV[1]  lease in ms (PEXPIRE)
-- ARGV[2]  owner field <client-id>:<owner-id>
-- ARGV[3]  this request's id: 12 hex digits of a per-client sequence, then
--          20 random ones
-- ARGV[4]  "1": the client holds nothing through this owner, so this is
--          never a re-entry; "0": a re-entry (or a watchdog restore)
-- ARGV[5]  how long the caller goes on waiting if refused (ms): 0 not at
--          all, -1 for ever. Only read when a read-write lock of the same
--          name holds it in read mode: a waiting plain lock is a writer, and
--          sets rw_write_acquire.lua's waiting-writer mark
--          redlock_rwwait:{NAME} (a key of the same hash slot) by the same
--          rule, so a stream of readers cannot starve it either; a grant
--          that finds the mark removes it, as a write grant does.
--
-- The :gen field holds "<generation>[,<seq>]...": the id of the fresh grant
-- that made the hold (so a late release of an earlier hold of the same
-- owner cannot drop this one), then the sequence numbers of the last four
-- re-entries and decrements applied to it, so a replayed request is
-- recognised and changes nothing. Redisson reads only its own fields: its
-- lock, unlock, forceUnlock, isLocked and getHoldCount see a hold of ours
-- as held by another owner.
--
-- Returns
--   generation   acquired or re-entered (count + 1, lease reset) with no
--                token: a re-entry, or a grant without KEYS[3]. A fresh
--                grant's generation is ARGV[3]; a re-entry keeps the hold's
--                own ("" if the hold has none). A bare string, not a table:
--                converting a table reply costs the server more than
--                the rest of a fresh grant's Lua
--   {token, generation}  a fresh grant with KEYS[3] (or its replay): token
--                is the candidate max(stored + 1, node time in us)
--   integer >= 0 or -1   held by another owner: its PTTL
--   -3           this request was cancelled (by abort.lua or release.lua
--                before it ran), or it is a late copy of a fresh acquire
--                that a newer hold of the same owner already replaced
--   error "EUPGRADE ..."  this owner holds a read hold of a read-write
--                lock of the same name (rw_write_acquire.lua's answer)
-- The common path, a fresh grant, runs EXISTS (of the three keys), HSET,
-- PEXPIRE: as many calls as Redisson's.
local genf = ARGV[2] .. ':gen'
local writer_mark = 'redlock_rwwait:{' .. KEYS[1] .. '}'
-- One call for the common case: no lock, no cancel mark, no waiting writer.
if redis.call('exists', KEYS[1], KEYS[2], writer_mark) > 0 then
    if redis.call('exists', KEYS[2]) == 1 then return -3 end
    local h = {false, false, false}
    if redis.call('exists', KEYS[1]) == 1 then
        h = redis.call('hmget', KEYS[1], ARGV[2], genf, 'mode')
    else
        -- Free: only the mark is there. This grant ends the wait it marks.
        redis.call('del', writer_mark)
    end
    -- A read-write lock of this name (rw_read_acquire.lua) excludes us; its
    -- reader field has our field's name and is never ours to replace.
    if h[3] then
        -- Our own read hold: waiting for it would be waiting for ourselves
        -- (and the mark below would keep every other reader out).
        if h[3] == 'read' and h[1] then
            return redis.error_reply('EUPGRADE the owner holds a read hold on ' .. KEYS[1] ..
                                     ': a read hold cannot be upgraded to a plain lock')
        end
        local left = redis.call('pttl', KEYS[1])
        local wait = tonumber(ARGV[5] or '0')
        if h[3] == 'read' and wait ~= 0 then
            local mark = math.max(left, 0) + 3000
            if wait > 0 and wait < mark then mark = wait end
            redis.call('set', writer_mark, ARGV[2], 'px', mark)
        end
        return left
    end
    if h[1] then
--@include lib/gens.lua
        local v = h[2] or ''
        local gen = gen_of(v)
        if gen == ARGV[3] then
            -- A replay of the fresh grant that made this hold.
            if #KEYS < 3 then return gen end
            return {tonumber(redis.call('get', KEYS[3]) or '0'), gen}
        end
        local seq = string.sub(ARGV[3], 1, 12)
        if gen_applied(v, seq) then return gen end
        if ARGV[4] ~= '1' then
            redis.call('hset', KEYS[1], ARGV[2], tonumber(h[1]) + 1, genf, gen_apply(v, gen, seq))
            redis.call('pexpire', KEYS[1], ARGV[1])
            return gen
        end
        -- The client holds nothing, so our field here is not a hold to re-enter.
        -- An older generation is a leftover of an earlier attempt or hold whose
        -- abort or release has not arrived yet: replace it (new token, count 1),
        -- or the new hold would get no token and could never be released. A
        -- newer one means this request is the late copy: it must not grant.
        if gen_newer_than(gen, seq) then
            redis.call('set', KEYS[2], 'x', 'px', ARGV[1])
            return -3
        end
        redis.call('hdel', KEYS[1], ARGV[2], genf)
        if redis.call('exists', KEYS[1]) == 1 then return redis.call('pttl', KEYS[1]) end
    elseif redis.call('exists', KEYS[1]) == 1 then
        return redis.call('pttl', KEYS[1])
    end
end
redis.call('hset', KEYS[1], ARGV[2], 1, genf, ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[1])
if #KEYS < 3 then return ARGV[3] end
local stored = tonumber(redis.call('get', KEYS[3]) or '0')
local now = redis.call('time')
local token = math.max(stored + 1, tonumber(now[1]) * 1000000 + tonumber(now[2]))
redis.call('set', KEYS[3], string.format('%.0f', token))
return {token, ARGV[3]}
