-- SPDX-License-Identifier: BSD-3-Clause
-- Acquire or re-enter a write hold (Redisson RReadWriteLock layout; see
-- rw_read_acquire.lua for the hash and its :gen fields).
--
-- KEYS[1]  lock name
-- KEYS[2]  this request's cancel mark, redlock_latch:{NAME}:<request id>
-- KEYS[3]  the waiting-writer mark, redlock_rwwait:{NAME}
-- KEYS[4]  (optional) fencing token key, redisson_lock_token:{NAME}
-- ARGV[1]  lease in ms
-- ARGV[2]  writer field <client-id>:<owner-id>:write
-- ARGV[3]  this request's id (as acquire.lua's)
-- ARGV[4]  "1": the client holds nothing through this handle; "0" a re-entry
-- ARGV[5]  how long this writer goes on waiting if refused (ms): 0 not at
--          all (then it sets no mark), -1 for ever
--
-- A writer that finds the lock held by others and will wait sets the
-- waiting-writer mark, so readers arriving after it queue behind it
-- instead of keeping the lock in read mode for ever. The mark lasts the
-- holder's PTTL plus 3 s (past the writer's next attempt, which comes at
-- the latest when that PTTL ends), never longer than the writer's wait:
-- a writer that gave up or died blocks new readers no longer. Each later
-- attempt of a writer still waiting renews it, and a writer's grant
-- removes it (a writer still waiting sets it again on its next attempt).
--
-- Returns as acquire.lua, and the error "EUPGRADE ..." when the owner holds
-- a read hold here: waiting for the readers to leave would wait for itself.
local genf = ARGV[2] .. ':gen'
if redis.call('exists', KEYS[2]) == 1 then return -3 end
local mode = redis.call('hget', KEYS[1], 'mode')
local reader = string.sub(ARGV[2], 1, -7)
if mode == 'write' then
    local h = redis.call('hmget', KEYS[1], ARGV[2], genf)
    if h[1] then
--@include lib/gens.lua
        local v = string.sub(h[2] or 'g', 2)
        local gen = gen_of(v)
        if gen == ARGV[3] then
            local t = 0
            if #KEYS >= 4 then t = tonumber(redis.call('get', KEYS[4]) or '0') end
            return {t, gen}
        end
        local seq = string.sub(ARGV[3], 1, 12)
        if gen_applied(v, seq) then return {0, gen} end
        if ARGV[4] ~= '1' then
            redis.call('hset', KEYS[1], ARGV[2], tonumber(h[1]) + 1, genf, 'g' .. gen_apply(v, gen, seq))
            -- Never shorter: the writer's own read holds may outlast it.
            redis.call('pexpire', KEYS[1],
                       math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
            return {0, gen}
        end
        if gen_newer_than(gen, seq) then
            redis.call('set', KEYS[2], 'x', 'px', ARGV[1])
            return -3
        end
        -- A leftover write hold (see acquire.lua); the owner's read holds
        -- under it, if any, go with it.
        redis.call('hdel', KEYS[1], ARGV[2], genf)
        if redis.call('hlen', KEYS[1]) <= 1 then
            redis.call('del', KEYS[1])
            mode = false
        else
            redis.call('hset', KEYS[1], 'mode', 'read')
            mode = 'read'
        end
    end
end
if mode == 'read' and redis.call('hexists', KEYS[1], reader) == 1 then
    return redis.error_reply('EUPGRADE the owner holds a read hold on ' .. KEYS[1] ..
                             ': a read hold cannot be upgraded to a write hold')
end
if mode or redis.call('exists', KEYS[1]) == 1 then
    local left = redis.call('pttl', KEYS[1])
    local wait = tonumber(ARGV[5])
    local mark = math.max(left, 0) + 3000
    if wait > 0 and wait < mark then mark = wait end
    if wait ~= 0 then redis.call('set', KEYS[3], ARGV[2], 'px', mark) end
    return left
end
redis.call('del', KEYS[3])
redis.call('hset', KEYS[1], 'mode', 'write', ARGV[2], 1, genf, 'g' .. ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[1])
if #KEYS < 4 then return {0, ARGV[3]} end
local stored = tonumber(redis.call('get', KEYS[4]) or '0')
local now = redis.call('time')
local token = math.max(stored + 1, tonumber(now[1]) * 1000000 + tonumber(now[2]))
redis.call('set', KEYS[4], string.format('%.0f', token))
return {token, ARGV[3]}
