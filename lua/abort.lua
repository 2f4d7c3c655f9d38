-- SPDX-License-Identifier: BSD-3-Clause
-- Undo one acquire request whose outcome the client does not know (its
-- reply timed out or the attempt failed to reach a quorum).
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel, redisson_lock__channel:{NAME}
-- KEYS[3]  the acquire request's latch
-- KEYS[4]  generations, redlock_gen:{NAME} (see acquire.lua)
-- ARGV[1]  release message ("0")
-- ARGV[2]  lease in ms, reset while holds remain
-- ARGV[3]  owner field <client-id>:<owner-id>
-- ARGV[4]  latch lifetime in ms
--
-- Returns
--   0  nothing to undo: the request did not grant, or never ran and is now
--      cancelled (if it arrives later it changes nothing and returns -3)
--   1  the grant was undone (count decremented; deleted and published at 0,
--      with the owner's generation)
-- A grant whose hold was since replaced (a later fresh acquire of the
-- same owner took over the leftover, see acquire.lua) is not undone: the
-- hold now there is another generation.
-- Idempotent: the latch is turned into the cancel mark 'x' either way.
local first = redis.call('get', KEYS[3])
redis.call('set', KEYS[3], 'x', 'px', ARGV[4])
if not first or string.sub(first, 1, 1) ~= 'g' then return 0 end

if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return 0 end
local granted_gen = string.match(first, '^g%d+:(.*)$') or ''
local gen = redis.call('hget', KEYS[4], ARGV[3])
if granted_gen ~= '' and gen and gen ~= granted_gen then return 0 end
local count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('pexpire', KEYS[4], ARGV[2])
    return 1
end
redis.call('del', KEYS[1])
redis.call('hdel', KEYS[4], ARGV[3])
redis.call('publish', KEYS[2], ARGV[1])
return 1
