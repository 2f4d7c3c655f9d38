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
-- ARGV[6]  the semaphore's size K: it must be the one the permits taken
--          here were taken with (below); and when KEYS[1] does not exist
--          yet, the count is written as K minus the permits still taken.
--          An existing count wins, as Redisson's trySetPermits
--
-- A grant adds the ids <field>:<request id>:1 .. :P: a replay of the same
-- request finds them and answers as before, and sem_abort.lua removes
-- exactly them. Permits whose lease ended go back
-- to the count first (and wake waiters), as Redisson's acquire does.
--
-- What Redisson's layout has no room for is in the hash
-- redlock_gen:{NAME} (a reserved name, derived from KEYS[1] as acquire.lua
-- derives its writer mark), which lives as long as the permits: whoever
-- removes the last one (here, sem_release.lua, sem_abort.lua) deletes it,
-- and its TTL is the longest lease granted or renewed (sem_renew.lua), so
-- it does not outlive permits removed by others (Redisson's delete) or
-- left to expire.
--   "limit"  the K of the permits taken. Each client counts with its own
--            K, so clients of different sizes would each enforce theirs.
--            While the count exists it is checked instead: the count plus
--            the permits taken is the K it was written for (every grant,
--            release and sweep moves one as much as the other), and it
--            outlives the permits and this hash. Without a count (a force
--            unlock deletes it) this field is what stops a larger K from
--            writing it again and letting more out than the smaller
--            allows. (Redisson's addPermits changes that sum: our clients
--            then refuse the name.)
--   <field>  the request id of that handle's permits here, so that a late
--            copy of an earlier request of the handle (its first acquire,
--            overtaken by the watchdog's re-grant) finds them without a
--            scan of the sorted set and takes no second permit.
-- A stale entry (its permits gone) is ignored and overwritten.
--
-- Returns {0, request id} granted; when too few permits are free, the ms
-- until the first taken permit's lease ends (-1 none); -3 cancelled, or a
-- late copy of an earlier request of a handle that holds permits of
-- another request here; error "ELIMIT ..." when the permits here were
-- taken with another K (the client refuses for good with REDLOCK_ECONFIG,
-- as for a name that is not a semaphore).
if redis.call('exists', KEYS[2]) == 1 then return -3 end
local p = tonumber(ARGV[5])
local base = ARGV[2] .. ':' .. ARGV[3] .. ':'
if redis.call('zscore', KEYS[3], base .. '1') then return {0, ARGV[3]} end
local own = 'redlock_gen:{' .. KEYS[1] .. '}'
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
    if redis.call('exists', KEYS[3]) == 0 then
        redis.call('del', own)
    else
        for _, id in ipairs(expired) do
            local field, gen = string.match(id, '^(.+):([^:]*):1$')
            if field and redis.call('hget', own, field) == gen then
                redis.call('hdel', own, field)
            end
        end
    end
end
local kept = redis.call('hmget', own, 'limit', ARGV[2])
if value then
    local size = tonumber(value) + redis.call('zcard', KEYS[3])
    if size ~= tonumber(ARGV[6]) then
        return redis.error_reply('ELIMIT the count here is for limit ' .. size ..
                                 ', this client\'s limit is ' .. ARGV[6] ..
                                 ': all clients of a semaphore need the same')
    end
elseif kept[1] and tonumber(kept[1]) ~= tonumber(ARGV[6]) and
        redis.call('exists', KEYS[3]) == 1 then
    return redis.error_reply('ELIMIT the permits taken here have limit ' .. kept[1] ..
                             ', this client\'s limit is ' .. ARGV[6] ..
                             ': all clients of a semaphore need the same')
end
if kept[2] and kept[2] ~= ARGV[3] then
    local ends = redis.call('zscore', KEYS[3], ARGV[2] .. ':' .. kept[2] .. ':1')
    if ends and tonumber(ends) > now then return -3 end
end
if not value then
    value = tonumber(ARGV[6]) - redis.call('zcard', KEYS[3])
    redis.call('set', KEYS[1], value)
end
if tonumber(value) >= p then
    redis.call('decrby', KEYS[1], p)
    local ends = now + tonumber(ARGV[1])
    for i = 1, p do redis.call('zadd', KEYS[3], ends, base .. i) end
    redis.call('hset', own, 'limit', ARGV[6], ARGV[2], ARGV[3])
    -- A hash that was not there (every entry writes "limit") has no TTL to
    -- compare with: the common case, a free semaphore, pays one call.
    if not kept[1] or redis.call('pttl', own) < tonumber(ARGV[1]) then
        redis.call('pexpire', own, ARGV[1])
    end
    return {0, ARGV[3]}
end
local first = redis.call('zrange', KEYS[3], 0, 0, 'withscores')
if first[2] then return math.max(tonumber(first[2]) - now, 0) end
return -1
