-- SPDX-License-Identifier: BSD-3-Clause
-- Read a semaphore's state on one node (for status tools); changes nothing.
--
-- KEYS[1]  semaphore name (the available count)
-- KEYS[2]  the permits taken, {NAME}:timeout
-- (no ARGV)
--
-- Returns {available, holder1, permits1, ms_left1, holder2, ...}: available
-- is -1 when the count does not exist, and counts the permits whose lease
-- ended but that no acquire has put back yet (the next one will); holders
-- are the permit handles with
-- live permits (a permit id <field>:<request id>:<i> belongs to <field>; an
-- id of another shape is its own holder), in the order of their first lease
-- end, from at most 1000 live permits.
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {tonumber(redis.call('get', KEYS[1]) or '-1')}
if out[1] >= 0 then out[1] = out[1] + redis.call('zcount', KEYS[2], 0, now) end
local live = redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf', 'withscores', 'limit', 0, 1000)
local at = {}
for i = 1, #live, 2 do
    local holder = string.match(live[i], '^(.+):[^:]*:[^:]*$') or live[i]
    local k = at[holder]
    if k then
        out[k + 1] = out[k + 1] + 1
    else
        at[holder] = #out + 1
        out[#out + 1] = holder
        out[#out + 1] = 1
        out[#out + 1] = math.floor(tonumber(live[i + 1]) - now)
    end
end
return out
