-- SPDX-License-Identifier: BSD-3-Clause
-- Extend the lease of a permit handle's permits (layout in sem_acquire.lua)
-- on the node's clock. Never brings back a permit whose lease already
-- ended: the next acquire returns it to the count.
--
-- KEYS[1]  the permits taken, {NAME}:timeout
-- KEYS[2]  semaphore name: redlock_gen:{NAME} (sem_acquire.lua) lives at
--          least as long as the permits renewed here
-- ARGV[1]  lease in ms
-- ARGV[2]  holder field
--
-- Returns 1 renewed, -2 none of the field's permits is live here.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ends = now + tonumber(ARGV[1])
local renewed, cursor = 0, '0'
for _ = 1, 1000 do
    local page = redis.call('zscan', KEYS[1], cursor, 'match', ARGV[2] .. ':*', 'count', 1000)
    for i = 1, #page[2], 2 do
        if tonumber(page[2][i + 1]) > now then
            redis.call('zadd', KEYS[1], 'xx', ends, page[2][i])
            renewed = renewed + 1
        end
    end
    cursor = page[1]
    if cursor == '0' then break end
end
if renewed > 0 then
    local own = 'redlock_gen:{' .. KEYS[2] .. '}'
    if redis.call('pttl', own) < tonumber(ARGV[1]) then redis.call('pexpire', own, ARGV[1]) end
    return 1
end
return -2
