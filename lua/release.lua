-- SPDX-License-Identifier: BSD-3-Clause
-- Drop one hold; delete and publish when the count reaches zero.
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel, redisson_lock__channel:{NAME}
-- KEYS[3]  latch: unique to this release request, remembers its first result
-- KEYS[4]  generations, redlock_gen:{NAME} (see acquire.lua)
-- ARGV[1]  release message ("0", as Redisson publishes)
-- ARGV[2]  lease in ms, reset while holds remain
-- ARGV[3]  owner field <client-id>:<owner-id>
-- ARGV[4]  latch lifetime in ms
-- ARGV[5]  "1": drop every hold of owner at once, whatever the count
--          (cleanup after a loss, or a member whose count drifted); "0" not
-- ARGV[6]  generations the hold being released may have, comma-separated
--          (request ids of grants that may have made it; see acquire.lua),
--          or "" when the caller does not know them
--
-- When owner's field is absent, every listed generation whose acquire
-- latch (the same prefix as KEYS[3], in the same hash slot) is still
-- absent gets the cancel mark 'x' for ARGV[2] ms: an acquire of that hold
-- still on its way (sent on another connection to a node that was silent)
-- then cannot grant after this release.
--
-- Returns
--   nil  not held by owner, or held by owner under another generation
--        (latched then, like the results below): a
--        release that arrives late (retried in the background) must not
--        drop a newer hold of the same owner, which it would leave short of
--        a quorum. A hold without a recorded generation (made by a client
--        that writes none, e.g. Redisson) is released as before.
--   0    count decremented, still held
--   1    released (deleted) and published
-- A retried release (same latch) returns its first result, so a release
-- whose reply was lost is never reported as "not held" (Redisson #4871).
local first = redis.call('get', KEYS[3])
if first then
    if first == 'n' then return nil end
    return tonumber(first)
end

if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    local prefix = string.sub(KEYS[3], 1, -33)
    for id in string.gmatch(ARGV[6], '[^,]+') do
        redis.call('set', prefix .. id, 'x', 'nx', 'px', ARGV[2])
    end
    return nil
end
local gen = redis.call('hget', KEYS[4], ARGV[3])
if gen and ARGV[6] ~= '' and
        not string.find(',' .. ARGV[6] .. ',', ',' .. gen .. ',', 1, true) then
    redis.call('set', KEYS[3], 'n', 'px', ARGV[4])
    return nil
end
local count = 0
if ARGV[5] == '1' then
    redis.call('hdel', KEYS[1], ARGV[3])
    count = redis.call('hlen', KEYS[1])
else
    count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
end
if count > 0 then
    if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
        redis.call('hdel', KEYS[4], ARGV[3])
    end
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('pexpire', KEYS[4], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call('hdel', KEYS[4], ARGV[3])
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
