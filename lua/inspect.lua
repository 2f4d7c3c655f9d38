-- SPDX-License-Identifier: BSD-3-Clause
-- Read a lock's state on one node in one round trip (for status tools).
--
-- KEYS[1]  lock name
-- KEYS[2]  fencing token key, redisson_lock_token:{NAME}
-- (no ARGV)
--
-- Returns {pttl, token, field1, count1, field2, count2, ...}: pttl is -2 if
-- the key does not exist; token is "0" when none was ever stored. The
-- holders' :gen fields (see acquire.lua) are bookkeeping, not holders, and
-- are left out.
local out = {redis.call('pttl', KEYS[1]), redis.call('get', KEYS[2]) or '0'}
if out[1] == -2 then return out end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    if string.sub(fields[i], -4) ~= ':gen' and fields[i] ~= 'mode' then
        out[#out + 1] = fields[i]
        out[#out + 1] = fields[i + 1]
    end
end
return out
