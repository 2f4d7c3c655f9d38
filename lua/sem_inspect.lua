-- SPDX-License-Identifier: BSD-3-Clause
-- Read a semaphore's state on one node (for status tools); changes nothing.
--
-- KEYS[1]  semaphore name (the available count)
-- KEYS[2]  the permits taken, {NAME}:timeout
-- (no ARGV)
--
-- Returns {available, id1, ms_left1, id2, ms_left2, ...}: available is -1
-- when the count does not exist; only permits whose lease has not ended
-- are listed (at most 1000).
local t = redis.call('time')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {tonumber(redis.call('get', KEYS[1]) or '-1')}
local live = redis.call('zrangebyscore', KEYS[2], '(' .. now, '+inf', 'withscores', 'limit', 0, 1000)
for i = 1, #live, 2 do
    out[#out + 1] = live[i]
    out[#out + 1] = math.floor(tonumber(live[i + 1]) - now)
end
return out
