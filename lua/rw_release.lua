-- SPDX-License-Identifier: BSD-3-Clause
-- Drop one read or write hold (see rw_read_acquire.lua for the layout).
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel, redisson_rwlock:{NAME}
-- KEYS[3]  redlock_latch:{NAME}:<this release's id> (as release.lua's)
-- KEYS[4]  the plain lock's channel, redisson_lock__channel:{NAME}: plain
--          locks of the same name wait on it, and a read-write lock
--          excludes them too
-- ARGV[1]  release message for a read hold ("0", as Redisson's read unlock;
--          a write hold publishes "1", as Redisson's write unlock)
-- ARGV[2]  lease in ms, reset on a write hold whose holds remain
-- ARGV[3]  holder field: <client-id>:<owner-id> for a read hold, with
--          ":write" appended for a write hold
-- ARGV[4]  "1": drop every hold of the field at once; "0" not
-- ARGV[5]  generations the hold may have, comma-separated, or ""
--
-- Returns as release.lua: nil not held (cancel marks set for ARGV[5], as
-- release.lua does), 0 decremented and still held (or a replay of that),
-- 1 the field's last hold dropped. The key is deleted and both channels
-- published only when no holder is left: a reader leaving live readers
-- behind leaves the hash (and its TTL) to them. A write hold leaving read
-- holds behind turns the lock to read mode and publishes on KEYS[2] only
-- (plain locks stay excluded).
local field = ARGV[3]
local genf = field .. ':gen'
local writing = string.sub(field, -6) == ':write'
local tag = KEYS[1]
if not string.find(tag, '{', 1, true) then tag = '{' .. tag .. '}' end
local h = redis.call('hmget', KEYS[1], field, genf, 'mode')
if not h[1] then
    local prefix = string.sub(KEYS[3], 1, -33)
    for id in string.gmatch(ARGV[5], '[^,]+') do
        redis.call('set', prefix .. id, 'x', 'nx', 'px', ARGV[2])
    end
    return nil
end
--@include lib/gens.lua
local v = string.sub(h[2] or 'g', 2)
local gen = gen_of(v)
if gen ~= '' and ARGV[5] ~= '' and
        not string.find(',' .. ARGV[5] .. ',', ',' .. gen .. ',', 1, true) then
    return nil
end
local seq = string.sub(KEYS[3], -32, -21)
if gen_applied(v, seq) then return 0 end
local count = tonumber(h[1])
local function timeout_key(reader, n)
    return tag .. ':' .. reader .. ':rwlock_timeout:' .. n
end
if ARGV[4] ~= '1' and count > 1 then
    redis.call('hset', KEYS[1], field, count - 1, genf, 'g' .. gen_apply(v, gen, seq))
    if writing then
        -- Never shorter: the writer's own read holds may outlast it.
        redis.call('pexpire', KEYS[1],
                   math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[2])))
    else
        redis.call('del', timeout_key(field, count))
    end
    return 0
end
if not writing then
    for i = 1, count do redis.call('del', timeout_key(field, i)) end
end
redis.call('hdel', KEYS[1], field, genf)
-- Who is left: a writer keeps the lock; readers keep it while one of their
-- holds lives. The first live read hold found is enough: every read grant
-- and renewal already extends the hash to at least its lease, so unlike
-- Redisson's unlock this never walks every reader's holds.
local rest = redis.call('hgetall', KEYS[1])
for i = 1, #rest, 2 do
    local f = rest[i]
    if f ~= 'mode' and string.sub(f, -4) ~= ':gen' then
        if string.sub(f, -6) == ':write' then return 1 end
        for k = tonumber(rest[i + 1]) or 0, 1, -1 do
            if redis.call('pttl', timeout_key(f, k)) > 0 then
                if h[3] == 'write' then
                    -- The writer's own read holds are left: readers may
                    -- enter now, and waiting ones are told (Redisson's
                    -- write unlock tells nobody, and they sleep out the
                    -- write lease).
                    redis.call('hset', KEYS[1], 'mode', 'read')
                    redis.call('publish', KEYS[2], '1')
                end
                return 1
            end
        end
    end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], writing and '1' or ARGV[1])
redis.call('publish', KEYS[4], '0')
return 1
