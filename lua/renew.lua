-- SPDX-License-Identifier: BSD-3-Clause
-- Extend the lease of a lock the owner still holds. Never creates a key:
-- a renewal that arrives after the release must be a no-op.
--
-- KEYS[1]  lock name
-- KEYS[2]  generations, redlock_gen:{NAME} (see acquire.lua): kept alive
--          exactly as long as the lock
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field <client-id>:<owner-id>
--
-- Returns
--    1  renewed
--    0  not held by owner: the key exists but belongs to someone else
--   -2  the key does not exist (expired, deleted, or the node restarted empty)
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    redis.call('pexpire', KEYS[2], ARGV[1])
    return 1
end
if redis.call('exists', KEYS[1]) == 1 then return 0 end
return -2
