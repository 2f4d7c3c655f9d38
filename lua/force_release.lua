-- SPDX-License-Identifier: BSD-3-Clause
-- Delete a lock whoever holds it, and wake its waiters.
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel, redisson_lock__channel:{NAME}
-- KEYS[3]  generations, redlock_gen:{NAME} (see acquire.lua), deleted too
-- ARGV[1]  release message ("0")
--
-- Returns 1 if the lock was deleted and the release published, 0 if it was
-- not locked.
redis.call('del', KEYS[3])
if redis.call('del', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], ARGV[1])
    return 1
end
return 0
