-- SPDX-License-Identifier: BSD-3-Clause
-- Fencing, phase 2: record the token chosen across the quorum, but only on a
-- node where the owner still holds the lock.
--
-- KEYS[1]  lock name
-- KEYS[2]  fencing token key, redisson_lock_token:{NAME}
-- ARGV[1]  owner field <client-id>:<owner-id>
-- ARGV[2]  token (decimal)
--
-- Returns 1 if stored (stored = max(stored, token)), 0 if not held by owner.
if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then return 0 end
local stored = tonumber(redis.call('get', KEYS[2]) or '0')
local token = tonumber(ARGV[2])
if token > stored then redis.call('set', KEYS[2], ARGV[2]) end
return 1
