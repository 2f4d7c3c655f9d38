-- SPDX-License-Identifier: BSD-3-Clause
-- Undo one permit request whose outcome the client does not know (as
-- abort.lua does for the plain lock; layout in sem_acquire.lua).
--
-- KEYS[1]  semaphore name (the available count)
-- KEYS[2]  channel, redisson_sc:{NAME}
-- KEYS[3]  the acquire request's cancel mark, redlock_latch:{NAME}:<its id>
-- KEYS[4]  the permits taken, {NAME}:timeout
-- ARGV[1]  unused (the new count is published)
-- ARGV[2]  lease in ms: how long the mark stays
-- ARGV[3]  holder field
-- ARGV[4]  permits per grant, P
--
-- The request's entry in redlock_gen:{NAME} (see sem_acquire.lua) goes
-- with its permits, and the whole hash with the last permit.
--
-- Returns 0 nothing to undo (or a replay), 1 the grant was undone.
if not redis.call('set', KEYS[3], 'x', 'nx', 'px', ARGV[2]) then return 0 end
local base = ARGV[3] .. ':' .. string.sub(KEYS[3], -32) .. ':'
local removed = 0
for i = 1, tonumber(ARGV[4]) do
    removed = removed + redis.call('zrem', KEYS[4], base .. i)
end
if removed == 0 then return 0 end
local own = 'redlock_gen:{' .. KEYS[1] .. '}'
if redis.call('exists', KEYS[4]) == 0 then
    redis.call('del', own)
elseif redis.call('hget', own, ARGV[3]) == string.sub(KEYS[3], -32) then
    redis.call('hdel', own, ARGV[3])
end
if redis.call('exists', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], redis.call('incrby', KEYS[1], removed))
end
return 1
