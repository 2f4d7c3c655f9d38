-- SPDX-License-Identifier: BSD-3-Clause
-- Give back the permits of one permit handle (layout in sem_acquire.lua).
--
-- KEYS[1]  semaphore name (the available count)
-- KEYS[2]  channel, redisson_sc:{NAME}
-- KEYS[3]  redlock_latch:{NAME}:<this release's id> (as release.lua's)
-- KEYS[4]  the permits taken, {NAME}:timeout
-- ARGV[1]  unused (the plain lock's release message: like Redisson, the
--          new count is published)
-- ARGV[2]  lease in ms: how long cancel marks stay
-- ARGV[3]  holder field
-- ARGV[4]  unused (every permit of the handle goes at once)
-- ARGV[5]  generations (request ids) that may have granted them,
--          comma-separated; "" unknown: then every id of the field goes
-- ARGV[6]  permits per grant, P
--
-- Returns 1 permits returned (count raised, waiters woken), nil none of
-- the field's were there. Every listed generation with no permit here gets
-- its cancel mark, so an acquire still on its way cannot grant after this
-- release (as release.lua does): also when another generation of the same
-- handle was found, as after a watchdog re-grant. The handle's entry in
-- redlock_gen:{NAME} (see sem_acquire.lua) goes too, and the whole hash
-- with the last permit.
local p = tonumber(ARGV[6])
local removed = 0
local prefix = string.sub(KEYS[3], 1, -33)
if ARGV[5] ~= '' then
    for id in string.gmatch(ARGV[5], '[^,]+') do
        local found = 0
        for i = 1, p do
            found = found + redis.call('zrem', KEYS[4], ARGV[3] .. ':' .. id .. ':' .. i)
        end
        if found == 0 then redis.call('set', prefix .. id, 'x', 'nx', 'px', ARGV[2]) end
        removed = removed + found
    end
else
    local cursor = '0'
    for _ = 1, 1000 do
        local page = redis.call('zscan', KEYS[4], cursor, 'match', ARGV[3] .. ':*', 'count', 1000)
        for i = 1, #page[2], 2 do
            removed = removed + redis.call('zrem', KEYS[4], page[2][i])
        end
        cursor = page[1]
        if cursor == '0' then break end
    end
end
local own = 'redlock_gen:{' .. KEYS[1] .. '}'
if redis.call('exists', KEYS[4]) == 0 then
    redis.call('del', own)
else
    redis.call('hdel', own, ARGV[3])
end
if removed == 0 then return nil end
if redis.call('exists', KEYS[1]) == 1 then
    redis.call('publish', KEYS[2], redis.call('incrby', KEYS[1], removed))
end
return 1
