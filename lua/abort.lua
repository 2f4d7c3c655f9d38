-- SPDX-License-Identifier: BSD-3-Clause
-- Undo one acquire request whose outcome the client does not know (its
-- reply timed out or the attempt failed to reach a quorum).
--
-- KEYS[1]  lock name (see acquire.lua for its :gen field)
-- KEYS[2]  release channel, redisson_lock__channel:{NAME}
-- KEYS[3]  the acquire request's cancel mark, redlock_latch:{NAME}:<its id>
-- ARGV[1]  release message ("0")
-- ARGV[2]  lease in ms: how long the mark stays, and the lease kept while
--          holds remain
-- ARGV[3]  owner field <client-id>:<owner-id>
--
-- Returns
--   0  nothing to undo: the request did not grant, or never ran and is now
--      cancelled (if it arrives later it changes nothing and returns -3),
--      or this abort already ran (a replay)
--   1  the grant was undone (count decremented; deleted and published at 0)
-- A fresh grant whose hold was since replaced (a later fresh acquire of
-- the same owner took over the leftover, see acquire.lua) is not undone:
-- the hold now there is another generation.
if not redis.call('set', KEYS[3], 'x', 'nx', 'px', ARGV[2]) then return 0 end
local genf = ARGV[3] .. ':gen'
local h = redis.call('hmget', KEYS[1], ARGV[3], genf)
if not h[1] then return 0 end
local id = string.sub(KEYS[3], -32)
local v = h[2] or ''
--@include lib/gens.lua
local gen = gen_of(v)
if gen ~= id and not gen_applied(v, string.sub(id, 1, 12)) then
    return 0
end
local count = tonumber(h[1])
if count > 1 then
    redis.call('hset', KEYS[1], ARGV[3], count - 1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 1
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
return 1
