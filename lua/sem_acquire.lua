-- SPDX-License-Identifier: BSD-3-Clause
-- Take permits of an expiring semaphore (Redisson RPermitExpirableSemaphore
-- layout, with the node's clock instead of the client's).
--
-- KEYS[1]  semaphore name: a string, the permits still available
-- KEYS[2]  this request's cancel mark, redlock_latch:{NAME}:<request id>
-- KEYS[3]  the permits taken, {NAME}:timeout: a sorted set of permit ids
--          scored by when their lease ends (ms of the node's clock)
-- KEYS[4]  channel, redisson_sc:{NAME}
-- ARGV[1]  lease in ms
-- ARGV[2]  holder field <client-id>:<owner-id> (one per permit handle)
-- ARGV[3]  this request's id (as acquire.lua's)
-- ARGV[4]  unused (the plain lock's "fresh" flag: a permit is never
--          re-entered)
-- ARGV[5]  permits to take, P >= 1
-- ARGV[6]  the semaphore's size K, used only when KEYS[1] does not exist
--          yet (then K minus the permits still taken); an existing count
--          wins, as Redisson's trySetPermits
--
-- A grant adds the ids <field>:<request id>:1 .. :P: a replay of the same
-- request finds them and answers as before, and sem_abort.lua removes
-- exactly them. Permits whose lease ended go back
-- to the count first (and wake waiters), as Redisson's acquire does.
--
-- Returns {0, request id} granted; when too few permits are free, the ms
-- until the first taken permit's lease ends (-1 none); -3 cancelled.
if redis.call('exists', KEYS[2]) == 1 then return -3 end
local p = tonumber(ARGV[5])
local base = ARGV[2] .. ':' .. ARGV[3] .. ':'
if redis.call('zscore', KEYS[3], base .. '1') then return {0, ARGV[3]} end
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local value = redis.call('get', KEYS[1])
local expired = redis.call('zrangebyscore', KEYS[3], 0, now, 'limit', 0, 1000)
if #expired > 0 then
    redis.call('zrem', KEYS[3], unpack(expired))
    if value then
        value = redis.call('incrby', KEYS[1], #expired)
        redis.call('publish', KEYS[4], value)
    end
end
if not value then
    value = tonumber(ARGV[6]) - redis.call('zcard', KEYS[3])
    redis.call('set', KEYS[1], value)
end
if tonumber(value) >= p then
    redis.call('decrby', KEYS[1], p)
    local ends = now + tonumber(ARGV[1])
    for i = 1, p do redis.call('zadd', KEYS[3], ends, base .. i) end
    return {0, ARGV[3]}
end
local first = redis.call('zrange', KEYS[3], 0, 0, 'withscores')
if first[2] then return math.max(tonumber(first[2]) - now, 0) end
return -1
