-- Acquire or re-enter a reentrant lock (Redisson RLock layout).
--
-- KEYS[1]  lock name: a hash whose field <client-id>:<owner-id> counts holds
-- KEYS[2]  latch: unique to this request, remembers its first result
-- KEYS[3]  (optional) fencing token key, redisson_lock_token:{NAME}
-- ARGV[1]  lease in ms (PEXPIRE)
-- ARGV[2]  owner field <client-id>:<owner-id>
-- ARGV[3]  latch lifetime in ms
--
-- Returns
--   nil          acquired or re-entered (count + 1, lease reset), no fencing
--   {token}      same, with KEYS[3]: a fresh grant's token candidate
--                max(stored + 1, node time in us); a re-entry returns {0}
--   integer >= 0 or -1   held by another owner: its PTTL
--   -3           this request was cancelled by abort.lua before it ran
-- A replay of the same request (same latch) returns its first result and
-- changes nothing, so a retry after a lost reply never counts a hold twice.
local first = redis.call('get', KEYS[2])
if first then
    if first == 'x' then return -3 end
    if string.sub(first, 1, 1) == 'g' then
        if #KEYS >= 3 then return {tonumber(string.sub(first, 2))} end
        return nil
    end
    return tonumber(first)
end

local fresh = redis.call('exists', KEYS[1]) == 0
if fresh or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    local token = 0
    if fresh and #KEYS >= 3 then
        local stored = tonumber(redis.call('get', KEYS[3]) or '0')
        local now = redis.call('time')
        local now_us = tonumber(now[1]) * 1000000 + tonumber(now[2])
        token = math.max(stored + 1, now_us)
        redis.call('set', KEYS[3], string.format('%.0f', token))
    end
    redis.call('set', KEYS[2], 'g' .. string.format('%.0f', token), 'px', ARGV[3])
    if #KEYS >= 3 then return {token} end
    return nil
end

local ttl = redis.call('pttl', KEYS[1])
redis.call('set', KEYS[2], ttl, 'px', ARGV[3])
return ttl
