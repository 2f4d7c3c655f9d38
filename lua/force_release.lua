-- SPDX-License-Identifier: BSD-3-Clause
-- Delete a lock whoever holds it, and wake its waiters: Redisson's
-- forceUnlock.
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel, redisson_lock__channel:{NAME}
-- ARGV[1]  release message ("0")
--
-- Returns 1 if the lock was deleted and the release published, 0 if it was
-- not locked.
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
