-- SPDX-License-Identifier: BSD-3-Clause
-- Undo one read or write acquire request whose outcome the client does not
-- know (as abort.lua does for the plain lock; layout in rw_read_acquire.lua).
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel, redisson_rwlock:{NAME}
-- KEYS[3]  the acquire request's cancel mark, redlock_latch:{NAME}:<its id>
-- KEYS[4]  the plain lock's channel, redisson_lock__channel:{NAME}
-- ARGV[1]  release message ("0")
-- ARGV[2]  lease in ms: how long the mark stays
-- ARGV[3]  holder field (":write" appended for a write hold)
--
-- Returns 0 nothing to undo (or a replay), 1 the grant was undone. An
-- undone write grant that leaves the same owner's read holds turns the
-- lock to read mode and publishes on KEYS[2], as rw_release.lua does.
if not redis.call('set', KEYS[3], 'x', 'nx', 'px', ARGV[2]) then return 0 end
local field = ARGV[3]
local genf = field .. ':gen'
local writing = string.sub(field, -6) == ':write'
local h = redis.call('hmget', KEYS[1], field, genf, 'mode')
if not h[1] then return 0 end
local id = string.sub(KEYS[3], -32)
local v = string.sub(h[2] or 'g', 2)
--@include lib/gens.lua
local gen = gen_of(v)
if gen ~= id and not gen_applied(v, string.sub(id, 1, 12)) then
    return 0
end
local tag = KEYS[1]
if not string.find(tag, '{', 1, true) then tag = '{' .. tag .. '}' end
local count = tonumber(h[1])
if not writing then redis.call('del', tag .. ':' .. field .. ':rwlock_timeout:' .. count) end
if count > 1 then
    redis.call('hset', KEYS[1], field, count - 1)
    return 1
end
redis.call('hdel', KEYS[1], field, genf)
for _, f in ipairs(redis.call('hkeys', KEYS[1])) do
    if f ~= 'mode' and string.sub(f, -4) ~= ':gen' then
        if h[3] == 'write' and not writing then return 1 end
        if writing then
            -- Readers may enter beside the owner's read holds now; the
            -- waiting ones are told, or they sleep out the write lease.
            redis.call('hset', KEYS[1], 'mode', 'read')
            redis.call('publish', KEYS[2], '1')
        end
        return 1
    end
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], writing and '1' or ARGV[1])
redis.call('publish', KEYS[4], '0')
return 1
