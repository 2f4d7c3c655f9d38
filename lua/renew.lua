-- SPDX-License-Identifier: BSD-3-Clause
-- Extend the lease of a lock the owner still holds. Never creates a key:
-- a renewal that arrives after the release must be a no-op. Redisson's
-- renewal, plus the answer that tells "gone" from "someone else's".
--
-- KEYS[1]  lock name (its :gen field, see acquire.lua, lives in it)
-- ARGV[1]  lease in ms
-- ARGV[2]  owner field <client-id>:<owner-id>
--
-- Returns
--    1  renewed
--    0  not held by owner: the key exists but belongs to someone else
--   -2  the key does not exist (expired, deleted, or the node restarted empty)
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('pexpire', KEYS[1], ARGV[1])
    return 1
end
if redis.call('exists', KEYS[1]) == 1 then return 0 end
return -2
