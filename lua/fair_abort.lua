-- SPDX-License-Identifier: BSD-3-Clause
-- Undo one fair acquire request whose outcome the client does not know
-- (abort.lua's rules); an undone grant wakes the next waiter. The waiter
-- keeps its place in the queue: it goes on waiting.
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel prefix, redisson_lock__channel:{NAME}
-- KEYS[3]  the acquire request's cancel mark, redlock_latch:{NAME}:<its id>
-- KEYS[4]  the queue, redisson_lock_queue:{NAME}
-- ARGV[1]  release message ("0")
-- ARGV[2]  lease in ms: how long the mark stays
-- ARGV[3]  owner field <client-id>:<owner-id>
--
-- Returns 0 nothing to undo (or a replay), 1 the grant was undone.
if not redis.call('set', KEYS[3], 'x', 'nx', 'px', ARGV[2]) then return 0 end
local genf = ARGV[3] .. ':gen'
local h = redis.call('hmget', KEYS[1], ARGV[3], genf)
if not h[1] then return 0 end
local id = string.sub(KEYS[3], -32)
local v = h[2] or ''
local gen = string.match(v, '^[^,]*')
if gen ~= id and not string.find(v .. ',', ',' .. string.sub(id, 1, 12) .. ',', 1, true) then
    return 0
end
local count = tonumber(h[1])
if count > 1 then
    redis.call('hset', KEYS[1], ARGV[3], count - 1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
redis.call('del', KEYS[1])
local first = redis.call('lindex', KEYS[4], 0)
if first and first ~= ARGV[3] then redis.call('publish', KEYS[2] .. ':' .. first, ARGV[1]) end
return 1
