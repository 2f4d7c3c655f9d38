-- SPDX-License-Identifier: BSD-3-Clause
-- Extend a read or write hold the owner still has (layout in
-- rw_read_acquire.lua). Never creates a key. Unlike Redisson's read-lock
-- renewal, it renews only the caller's own read holds: a reader that died
-- must not be kept alive by the others.
--
-- KEYS[1]  lock name
-- ARGV[1]  lease in ms
-- ARGV[2]  holder field (":write" appended for a write hold)
--
-- Returns 1 renewed, 0 held by others only, -2 the key does not exist (or
-- every read hold of ours in it has lapsed, or a read hold of ours is gone
-- where only other readers hold).
local n = redis.call('hget', KEYS[1], ARGV[2])
if n then
    -- Never shorter than it is: a read hold this writer took under its
    -- write hold may have a longer lease.
    if string.sub(ARGV[2], -6) == ':write' then
        redis.call('pexpire', KEYS[1], math.max(redis.call('pttl', KEYS[1]), tonumber(ARGV[1])))
        return 1
    end
    local tag = KEYS[1]
    if not string.find(tag, '{', 1, true) then tag = '{' .. tag .. '}' end
    local live = 0
    for i = 1, tonumber(n) do
        live = live + redis.call('pexpire', tag .. ':' .. ARGV[2] .. ':rwlock_timeout:' .. i,
                                 ARGV[1])
    end
    -- Every read hold of ours here has lapsed (other readers kept the hash
    -- alive): nothing of ours keeps writers out any more, so this is no
    -- renewal. As if the key were gone: the watchdog restores or loses it.
    if live == 0 then return -2 end
    local left = redis.call('pttl', KEYS[1])
    redis.call('pexpire', KEYS[1], math.max(left, tonumber(ARGV[1])))
    return 1
end
-- Ours is gone here. Beside other readers a read hold can come back, as
-- where the key is gone (the watchdog restores it); beside a writer, or
-- for a write hold, the member is another's.
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'read' and string.sub(ARGV[2], -6) ~= ':write' then return -2 end
if mode or redis.call('exists', KEYS[1]) == 1 then return 0 end
return -2
