-- SPDX-License-Identifier: BSD-3-Clause
-- Delete a lock whoever holds it, and wake its waiters: Redisson's
-- forceUnlock (RedissonLock's, or RedissonFairLock's for a fair lock).
--
-- KEYS[1]  lock name
-- KEYS[2]  release channel: redisson_lock__channel:{NAME} for a plain or
--          fair lock (a fair waiter's own channel is this plus
--          ':<field>'), another kind's own channel else
-- KEYS[3..6]  (plain and fair locks) the fair queue, its timeouts, our
--          waiters' tickets and their lapses, as fair_release.lua's
--          KEYS[4..7]
-- ARGV[1]  release message ("0")
--
-- Returns 1 if the lock was deleted and the release published, 0 if it was
-- not locked. With the queue's keys, the first fair waiter whose place has
-- not lapsed (lapsed ones leave first) is also woken on its own channel,
-- as a fair release does: fair waiters listen nowhere else, and whoever
-- forces the lock (`redlock unlock --force` uses a plain handle) may not
-- know its kind.
if redis.call('del', KEYS[1]) == 0 then return 0 end
redis.call('publish', KEYS[2], ARGV[1])
if #KEYS < 6 then return 1 end
--@include lib/fair_queue.lua
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local next = first_waiter(KEYS[3], KEYS[4], KEYS[5], KEYS[6], now)
if next then redis.call('publish', KEYS[2] .. ':' .. next, ARGV[1]) end
return 1
