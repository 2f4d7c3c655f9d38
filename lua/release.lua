-- Drop one hold; delete and publish when the count reaches zero.
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel, redisson_lock__channel:{NAME}
-- KEYS[3]  latch: unique to this release request, remembers its first result
-- ARGV[1]  release message ("0", as Redisson publishes)
-- ARGV[2]  lease in ms, reset while holds remain
-- ARGV[3]  owner field <client-id>:<owner-id>
-- ARGV[4]  latch lifetime in ms
-- ARGV[5]  (optional) "1": drop every hold of owner at once, whatever the
--          count (cleanup after a loss, or a member whose count drifted)
--
-- Returns
--   nil  not held by owner
--   0    count decremented, still held
--   1    released (deleted) and published
-- A retried release (same latch) returns its first result, so a release
-- whose reply was lost is never reported as "not held" (Redisson #4871).
local first = redis.call('get', KEYS[3])
if first then return tonumber(first) end

if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then return nil end
local count = 0
if ARGV[5] == '1' then
    redis.call('hdel', KEYS[1], ARGV[3])
    count = redis.call('hlen', KEYS[1])
else
    count = redis.call('hincrby', KEYS[1], ARGV[3], -1)
end
if count > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    redis.call('set', KEYS[3], 0, 'px', ARGV[4])
    return 0
end
redis.call('del', KEYS[1])
redis.call('publish', KEYS[2], ARGV[1])
redis.call('set', KEYS[3], 1, 'px', ARGV[4])
return 1
